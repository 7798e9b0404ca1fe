package binance

import (
	"fmt"
	"net/http"
)

// APIError is a refusal in the exchange's shape: the body {"code":-1022,"msg":"..."} with an HTTP
// status. The codes and sentences are the exchange's (its USDⓈ-M Futures error code list); they
// are written here once and named by the constructors below.
type APIError struct {
	Status     int    `json:"-"`
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
	RetryAfter int    `json:"-"` // seconds; sent as Retry-After when positive
}

func (e *APIError) Error() string { return fmt.Sprintf("binance sim: %d %s", e.Code, e.Msg) }

func refuse(status, code int, format string, args ...any) *APIError {
	return &APIError{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// The exchange's error codes the simulator answers with.
const (
	codeDisconnected       = -1001
	codeTooManyRequests    = -1003
	codeTooManyOrders      = -1015
	codeInvalidTimestamp   = -1021
	codeInvalidSignature   = -1022
	codeNotFound           = -1099
	codeIllegalChars       = -1100
	codeMandatoryParam     = -1102
	codeParamNotRequired   = -1106
	codeBadPrecision       = -1111
	codeInvalidTIF         = -1115
	codeInvalidOrderType   = -1116
	codeInvalidSide        = -1117
	codeBadInterval        = -1120
	codeBadSymbol          = -1121
	codeInvalidListenKey   = -1125
	codeInvalidParameter   = -1130
	codeCancelRejected     = -2011
	codeNoSuchOrder        = -2013
	codeBadAPIKeyFormat    = -2014
	codeRejectedAPIKey     = -2015
	codeMarginInsufficient = -2019
	codeWouldTrigger       = -2021
	codeReduceOnlyReject   = -2022
	codePriceLessThanZero  = -4001
	codeQtyLessThanZero    = -4003
	codeQtyLessThanMin     = -4004
	codeQtyGreaterThanMax  = -4005
	codePriceNotTick       = -4014
	codeInvalidClOrdID     = -4015
	codeAlgoOnly           = -4120
	codeQtyNotStep         = -4023
	codeInvalidLeverage    = -4028
	codeNoNeedPositionSide = -4059
	codePositionSideMatch  = -4061
	codeOpenOrdersExist    = -4067
	codePositionExists     = -4068
	codeDuplicateClOrdID   = -4116
	codeMinNotional        = -4164
	codeMultiAssetsSame    = -4171
	codeFOKRejected        = -5021
	codeGTXRejected        = -5022
)

func errMandatory(name string) *APIError {
	return refuse(http.StatusBadRequest, codeMandatoryParam,
		"Mandatory parameter '%s' was not sent, was empty/null, or malformed.", name)
}

func errNotRequired(name string) *APIError {
	return refuse(http.StatusBadRequest, codeParamNotRequired, "Parameter '%s' sent when not required.", name)
}

func errIllegal(name string) *APIError {
	return refuse(http.StatusBadRequest, codeIllegalChars, "Illegal characters found in parameter '%s'.", name)
}

func errInvalidValue(name string) *APIError {
	return refuse(http.StatusBadRequest, codeInvalidParameter, "Invalid data sent for a parameter: '%s'.", name)
}

var (
	errBadKeyFormat  = refuse(http.StatusUnauthorized, codeBadAPIKeyFormat, "API-key format invalid.")
	errRejectedKey   = refuse(http.StatusUnauthorized, codeRejectedAPIKey, "Invalid API-key, IP, or permissions for action.")
	errSignature     = refuse(http.StatusBadRequest, codeInvalidSignature, "Signature for this request is not valid.")
	errTimestampOld  = refuse(http.StatusBadRequest, codeInvalidTimestamp, "Timestamp for this request is outside of the recvWindow.")
	errTimestampNew  = refuse(http.StatusBadRequest, codeInvalidTimestamp, "Timestamp for this request was 1000ms ahead of the server's time.")
	errBadSymbol     = refuse(http.StatusBadRequest, codeBadSymbol, "Invalid symbol.")
	errPrecision     = refuse(http.StatusBadRequest, codeBadPrecision, "Precision is over the maximum defined for this asset.")
	errUnknownCancel = refuse(http.StatusBadRequest, codeCancelRejected, "Unknown order sent.")
	errNoSuchOrder   = refuse(http.StatusBadRequest, codeNoSuchOrder, "Order does not exist.")
	errMargin        = refuse(http.StatusBadRequest, codeMarginInsufficient, "Margin is insufficient.")
	errWouldTrigger  = refuse(http.StatusBadRequest, codeWouldTrigger, "Order would immediately trigger.")
	errReduceOnly    = refuse(http.StatusBadRequest, codeReduceOnlyReject, "ReduceOnly Order is rejected.")
	errPosSide       = refuse(http.StatusBadRequest, codePositionSideMatch, "Order's position side does not match user's setting.")
	errClOrdID       = refuse(http.StatusBadRequest, codeInvalidClOrdID, "Client order id is not valid.")
	errDupClOrdID    = refuse(http.StatusBadRequest, codeDuplicateClOrdID, "ClientOrderId is duplicated.")
	errAlgoOnly      = refuse(http.StatusBadRequest, codeAlgoOnly, "Order type not supported for this endpoint. Please use the Algo Order API endpoints instead.")
	errListenKey     = refuse(http.StatusBadRequest, codeInvalidListenKey, "This listenKey does not exist.")
	errGTX           = refuse(http.StatusBadRequest, codeGTXRejected, "Due to the order could not be executed as maker, the Post Only order will be rejected. The order will not be recorded in the order history")
	errFOK           = refuse(http.StatusBadRequest, codeFOKRejected, "Due to the order could not be filled immediately, the FOK order has been rejected. The order will not be recorded in the order history")
	errNotFoundRoute = refuse(http.StatusNotFound, codeNotFound, "Not found, unauthenticated, or unauthorized.")
)

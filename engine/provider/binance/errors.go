package binance

import (
	"context"
	"errors"

	"github.com/adshao/go-binance/v2/common"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// op is the kind of call, which decides what a lost answer means.
type op = adapterkit.Op

const (
	opRead    = adapterkit.OpRead
	opPlace   = adapterkit.OpPlace
	opCancel  = adapterkit.OpCancel
	opReplace = adapterkit.OpReplace
)

// The exchange's error codes the adapter tells apart (its USDⓈ-M Futures
// error code list). Every other code of a refused write is *provider.Rejected.
const (
	codeUnknown          = -1000 // an unknown error occurred while processing the request
	codeDisconnected     = -1001 // internal error; unable to process your request
	codeUnauthorized     = -1002 // you are not authorized to execute this request
	codeTooManyRequests  = -1003
	codeUnexpectedResp   = -1006 // unexpected response from the message bus; execution status unknown
	codeTimeout          = -1007 // timeout waiting for response from backend; send status unknown
	codeServerBusy       = -1008 // server is currently overloaded; try again
	codeTooManyOrders    = -1015
	codeInvalidTimestamp = -1021
	codeInvalidSignature = -1022
	codeCancelRejected   = -2011 // unknown order sent (to cancel)
	codeNoSuchOrder      = -2013
	codeBadAPIKeyFormat  = -2014
	codeRejectedAPIKey   = -2015
)

// classification is where an error code leads, before the call's kind is
// taken into account.
type classification int

const (
	classRejected classification = iota
	classUnauthorized
	classNotFound
	classRateLimited
	classUnknown     // may have been carried out
	classUnavailable // certainly not carried out; retry is safe
)

// codeClass maps the exchange's codes that are not plain rejections.
var codeClass = map[int64]classification{
	codeUnknown:          classUnknown,
	codeDisconnected:     classUnknown,
	codeUnexpectedResp:   classUnknown,
	codeTimeout:          classUnknown,
	codeUnauthorized:     classUnauthorized,
	codeInvalidSignature: classUnauthorized,
	codeBadAPIKeyFormat:  classUnauthorized,
	codeRejectedAPIKey:   classUnauthorized,
	codeCancelRejected:   classNotFound,
	codeNoSuchOrder:      classNotFound,
	codeTooManyRequests:  classRateLimited,
	codeTooManyOrders:    classRateLimited,
	codeServerBusy:       classUnavailable,
	codeInvalidTimestamp: classUnavailable,
}

// mapError turns what the library returned into the provider's typed
// errors. It keeps codes and statuses, never the exchange's messages.
func mapError(o op, err error) error {
	if err == nil {
		return nil
	}
	// Typed already: the budget refused before sending.
	var (
		rl *provider.RateLimited
		bn *provider.Banned
	)
	if errors.As(err, &rl) || errors.As(err, &bn) {
		if rl != nil {
			return rl
		}
		return bn
	}
	var se *adapterkit.SendError
	if errors.As(err, &se) {
		return se.Mapped(o)
	}
	var sv *serverError
	if errors.As(err, &sv) {
		// -1008 (overloaded) says the exchange did not take the request.
		if sv.code == codeServerBusy {
			return provider.NewUnavailable(sv.status, sv.code, nil)
		}
		return o.Lost(sv.status, sv.code, nil)
	}
	var api *common.APIError
	if errors.As(err, &api) {
		return mapCode(o, api.Code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The budget's queue or the caller gave up before the transport
		// could say; a write may have gone out.
		return o.Lost(0, 0, adapterkit.CleanCause(err))
	}
	// An answer that could not be decoded: the exchange answered 2xx.
	return o.Lost(0, 0, nil)
}

// mapCode classifies one of the exchange's error codes for a call of kind o.
func mapCode(o op, code int64) error {
	c, ok := codeClass[code]
	if !ok {
		c = classRejected
	}
	switch c {
	case classUnauthorized:
		return &provider.Unauthorized{Code: code}
	case classNotFound:
		if o == opPlace {
			return &provider.Rejected{Code: code}
		}
		return &provider.NotFound{Code: code}
	case classRateLimited:
		return &provider.RateLimited{}
	case classUnknown:
		return o.Lost(0, code, nil)
	case classUnavailable:
		return provider.NewUnavailable(0, code, nil)
	}
	if !o.Write() {
		return provider.NewUnavailable(0, code, nil)
	}
	return &provider.Rejected{Code: code}
}

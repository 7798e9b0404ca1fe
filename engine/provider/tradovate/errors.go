package tradovate

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// op is the kind of call, which decides what a lost answer means.
type op = adapterkit.Op

const (
	opRead    = adapterkit.OpRead
	opLogin   = adapterkit.Op("login") // the token request: a read
	opPlace   = adapterkit.OpPlace
	opCancel  = adapterkit.OpCancel
	opReplace = adapterkit.OpReplace
)

// The API's failure reasons (failureReason of PlaceOrderResult and
// CommandResult, rejectReason of reports) as stable numbers: a
// *provider.Rejected carries the number, never the API's text. 0 is a
// reason the table does not know.
var reasonCodes = map[string]int64{
	"AccountClosed":                           1,
	"AdvancedTrailingStopUnsupported":         2,
	"AnotherCommandPending":                   3,
	"BackMonthProhibited":                     4,
	"ExecutionProviderNotConfigured":          5,
	"ExecutionProviderUnavailable":            6,
	"InvalidContract":                         7,
	"InvalidPrice":                            8,
	"KeyInformationDocumentRequired":          9,
	"LiquidationOnly":                         10,
	"LiquidationOnlyBeforeExpiration":         11,
	"MaxOrderQtyIsNotSpecified":               12,
	"MaxOrderQtyLimitReached":                 13,
	"MaxPosLimitMisconfigured":                14,
	"MaxPosLimitReached":                      15,
	"MaxTotalPosLimitReached":                 16,
	"MultipleAccountPlanRequired":             17,
	"NoQuote":                                 18,
	"NotEnoughLiquidity":                      19,
	"OtherExecutionRelated":                   20,
	"ParentRejected":                          21,
	"RiskCheckTimeout":                        22,
	"SSFRiskDisclosureAcknowledgmentRequired": 23,
	"SessionClosed":                           24,
	"TooLate":                                 26,
	"TradingLocked":                           27,
	"TrailingStopNonOrderQtyModify":           28,
	"Unauthorized":                            29,
	"UnknownReason":                           30,
	"Unsupported":                             31,
}

// Codes of the adapter's own refusals, beside the reasons'.
const (
	codeErrorText      = 100 // an answer with errorText and no failure reason
	codeWouldNotReduce = 101 // a reduce-only order that would not reduce the position
)

// mapFailure maps a write's failure reason: "" and Success are nil. A
// reason that leaves the outcome open (UnknownReason, RiskCheckTimeout) is
// *provider.Unknown, settled by lookup; one that says the request never
// went to the market and may be sent again (ExecutionProviderUnavailable,
// AnotherCommandPending) is *provider.Unavailable; Unauthorized is
// *provider.Unauthorized; every other reason is the provider's own
// refusal, *provider.Rejected.
func mapFailure(o op, reason string) error {
	if reason == "" || reason == "Success" {
		return nil
	}
	code := reasonCodes[reason]
	switch reason {
	case "UnknownReason", "RiskCheckTimeout":
		return o.Lost(http.StatusOK, code, nil)
	case "ExecutionProviderUnavailable", "AnotherCommandPending":
		return provider.NewUnavailable(http.StatusOK, code, nil)
	case "Unauthorized":
		return &provider.Unauthorized{Code: code}
	}
	return &provider.Rejected{Code: code}
}

// statusError is an HTTP status the adapter does not read further: a 5xx,
// a 400 or a 404. It holds no body.
type statusError struct{ status int }

func (e *statusError) Error() string { return "tradovate: HTTP " + strconv.Itoa(e.status) }

// errExpired is a 401: the access token was not taken (expired or revoked).
var errExpired = errors.New("tradovate: access token not taken")

// mapError turns a call's failure into the provider's typed errors. It
// keeps statuses and codes, never the API's text or the request's address.
func mapError(o op, err error) error {
	if err == nil {
		return nil
	}
	var (
		rl  *provider.RateLimited
		bn  *provider.Banned
		rej *provider.Rejected
		unk *provider.Unknown
		una *provider.Unavailable
		au  *provider.Unauthorized
		nf  *provider.NotFound
		ne  *provider.NotEntitled
		un  *provider.Unsupported
		kr  *provider.KeyRefused
	)
	switch {
	case errors.As(err, &rl):
		return rl
	case errors.As(err, &bn):
		return bn
	case errors.As(err, &rej):
		return rej
	case errors.As(err, &unk):
		return unk
	case errors.As(err, &una):
		return una
	case errors.As(err, &au):
		return au
	case errors.As(err, &nf):
		return nf
	case errors.As(err, &ne):
		return ne
	case errors.As(err, &un):
		return un
	case errors.As(err, &kr):
		return kr
	case errors.Is(err, errExpired):
		return &provider.Unauthorized{Code: http.StatusUnauthorized}
	}
	var se *adapterkit.SendError
	if errors.As(err, &se) {
		return se.Mapped(o)
	}
	var st *statusError
	if errors.As(err, &st) {
		switch {
		case st.status >= 500:
			return o.Lost(st.status, 0, nil)
		case st.status == http.StatusNotFound && (o == opCancel || o == opReplace || o == opRead):
			return &provider.NotFound{Code: http.StatusNotFound}
		case st.status == http.StatusForbidden:
			return &provider.Unauthorized{Code: http.StatusForbidden}
		case o.Write():
			return &provider.Rejected{Code: int64(st.status)}
		}
		return provider.NewUnavailable(st.status, 0, nil)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return o.Lost(0, 0, adapterkit.CleanCause(err))
	}
	// An answer that could not be read: the API answered 2xx.
	return o.Lost(http.StatusOK, 0, nil)
}

package tradovate

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/svc/engine/engine/provider"
)

// op is the kind of call, which decides what a lost answer means.
type op string

const (
	opRead    op = "read"
	opLogin   op = "login"
	opPlace   op = "place"
	opCancel  op = "cancel"
	opReplace op = "replace"
)

// write reports whether the call changes state at the provider, so a lost
// answer is an unknown outcome rather than a failed read.
func (o op) write() bool { return o == opPlace || o == opCancel || o == opReplace }

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
		if o.write() {
			return provider.NewUnknown(string(o), http.StatusOK, code, nil)
		}
		return provider.NewUnavailable(http.StatusOK, code, nil)
	case "ExecutionProviderUnavailable", "AnotherCommandPending":
		return provider.NewUnavailable(http.StatusOK, code, nil)
	case "Unauthorized":
		return &provider.Unauthorized{Code: code}
	}
	return &provider.Rejected{Code: code}
}

// sendError is a transport failure; sent says the request was written to
// the connection, so the provider may have acted on it.
type sendError struct {
	sent bool
	err  error
}

func (e *sendError) Error() string {
	if e.sent {
		return "tradovate: answer lost after sending"
	}
	return "tradovate: not sent"
}
func (e *sendError) Unwrap() error { return e.err }

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
	var se *sendError
	if errors.As(err, &se) {
		if se.sent && o.write() {
			return provider.NewUnknown(string(o), 0, 0, cleanCause(se.err))
		}
		return provider.NewUnavailable(0, 0, cleanCause(se.err))
	}
	var st *statusError
	if errors.As(err, &st) {
		switch {
		case st.status >= 500:
			if o.write() {
				return provider.NewUnknown(string(o), st.status, 0, nil)
			}
			return provider.NewUnavailable(st.status, 0, nil)
		case st.status == http.StatusNotFound && (o == opCancel || o == opReplace || o == opRead):
			return &provider.NotFound{Code: http.StatusNotFound}
		case st.status == http.StatusForbidden:
			return &provider.Unauthorized{Code: http.StatusForbidden}
		case o.write():
			return &provider.Rejected{Code: int64(st.status)}
		}
		return provider.NewUnavailable(st.status, 0, nil)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if o.write() {
			return provider.NewUnknown(string(o), 0, 0, cleanCause(err))
		}
		return provider.NewUnavailable(0, 0, cleanCause(err))
	}
	// An answer that could not be read: the API answered 2xx.
	if o.write() {
		return provider.NewUnknown(string(o), http.StatusOK, 0, nil)
	}
	return provider.NewUnavailable(http.StatusOK, 0, nil)
}

// cleanCause drops what a transport error may carry about the request
// (the url.Error's address), keeping the inner error.
func cleanCause(err error) error {
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return err
}

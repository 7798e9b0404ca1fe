package binance

import (
	"context"
	"errors"
	"net/url"

	"github.com/adshao/go-binance/v2/common"

	"github.com/svc/engine/engine/provider"
)

// op is the kind of call, which decides what a lost answer means.
type op string

const (
	opRead    op = "read"
	opPlace   op = "place"
	opCancel  op = "cancel"
	opReplace op = "replace"
)

// write reports whether the call changes state at the exchange, so a lost
// answer is an unknown outcome rather than a failed read.
func (o op) write() bool { return o == opPlace || o == opCancel || o == opReplace }

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

// sendError is a transport failure; sent says the request was written to
// the connection, so the exchange may have acted on it.
type sendError struct {
	sent bool
	err  error
}

func (e *sendError) Error() string {
	if e.sent {
		return "binance: answer lost after sending"
	}
	return "binance: not sent"
}
func (e *sendError) Unwrap() error { return e.err }

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
	var se *sendError
	if errors.As(err, &se) {
		if se.sent && o.write() {
			return provider.NewUnknown(string(o), 0, 0, cleanCause(se.err))
		}
		return provider.NewUnavailable(0, 0, cleanCause(se.err))
	}
	var sv *serverError
	if errors.As(err, &sv) {
		// -1008 (overloaded) says the exchange did not take the request.
		if o.write() && sv.code != codeServerBusy {
			return provider.NewUnknown(string(o), sv.status, sv.code, nil)
		}
		return provider.NewUnavailable(sv.status, sv.code, nil)
	}
	var api *common.APIError
	if errors.As(err, &api) {
		return mapCode(o, api.Code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The budget's queue or the caller gave up before the transport
		// could say; a write may have gone out.
		if o.write() {
			return provider.NewUnknown(string(o), 0, 0, cleanCause(err))
		}
		return provider.NewUnavailable(0, 0, cleanCause(err))
	}
	// An answer that could not be decoded: the exchange answered 2xx.
	if o.write() {
		return provider.NewUnknown(string(o), 0, 0, nil)
	}
	return provider.NewUnavailable(0, 0, nil)
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
		if o.write() {
			return provider.NewUnknown(string(o), 0, code, nil)
		}
		return provider.NewUnavailable(0, code, nil)
	case classUnavailable:
		return provider.NewUnavailable(0, code, nil)
	}
	if !o.write() {
		return provider.NewUnavailable(0, code, nil)
	}
	return &provider.Rejected{Code: code}
}

// cleanCause drops what a transport error may carry about the request (the
// url.Error's URL holds the signed query), keeping the inner error.
func cleanCause(err error) error {
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return err
}

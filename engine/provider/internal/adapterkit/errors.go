package adapterkit

import (
	"errors"
	"net/url"

	"github.com/svc/engine/engine/provider"
)

// Op is the kind of a call, which decides what a lost answer means.
type Op string

// The kinds of call every adapter makes; an adapter may name more (a
// login), which are reads.
const (
	OpRead    Op = "read"
	OpPlace   Op = "place"
	OpCancel  Op = "cancel"
	OpReplace Op = "replace"
)

// Write reports whether the call changes state at the provider, so a lost
// answer is an unknown outcome rather than a failed read.
func (o Op) Write() bool { return o == OpPlace || o == OpCancel || o == OpReplace }

// Lost is the error of a call of kind o whose answer was lost or could not
// be read: for a write *provider.Unknown (it may have been carried out), for
// a read *provider.Unavailable. Status, code and cause are the provider's
// errors' own.
func (o Op) Lost(status int, code int64, cause error) error {
	if o.Write() {
		return provider.NewUnknown(string(o), status, code, cause)
	}
	return provider.NewUnavailable(status, code, cause)
}

// SendError is a transport failure of a call to Provider ("binance"); Sent
// says the request was written to the connection, so the provider may have
// acted on it.
type SendError struct {
	Provider string
	Sent     bool
	Err      error
}

func (e *SendError) Error() string {
	if e.Sent {
		return e.Provider + ": answer lost after sending"
	}
	return e.Provider + ": not sent"
}
func (e *SendError) Unwrap() error { return e.Err }

// Mapped is the provider's error of the failure for a call of kind o: a
// write that was sent is *provider.Unknown, anything else
// *provider.Unavailable, with the cleaned cause.
func (e *SendError) Mapped(o Op) error {
	if e.Sent {
		return o.Lost(0, 0, CleanCause(e.Err))
	}
	return provider.NewUnavailable(0, 0, CleanCause(e.Err))
}

// CleanCause drops what a transport error may carry about the request (a
// url.Error's address, which may hold a signed query), keeping the inner
// error.
func CleanCause(err error) error {
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return err
}

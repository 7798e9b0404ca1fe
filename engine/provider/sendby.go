package provider

import (
	"context"
	"errors"
	"time"
)

// ErrSendByPassed: a request that changes state at the provider was about
// to leave after the latest moment its intent allowed (WithSendBy), so it
// was not sent. It comes wrapped in *Unavailable: nothing was done.
var ErrSendByPassed = errors.New("provider: the moment to send passed; not sent")

// sendByKey carries a write's latest moment to leave in its context.
type sendByKey struct{}

// WithSendBy returns ctx carrying t: the latest moment a request that
// changes state at the provider (a place, a cancel, a replace) made under
// it may leave this process. An adapter checks it (SendByPassed) as the
// last thing before the request goes to the connection, after the request
// is signed: a request with an exchange's receive window (Binance's
// timestamp and recvWindow) then cannot be carried out later than t plus
// that window, however long this process or the network holds it after the
// check; that is what lets a lookup that finds nothing past that time
// conclude the order was never placed.
func WithSendBy(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, sendByKey{}, t)
}

// SendBy is the latest moment a write under ctx may leave; false when ctx
// names none.
func SendBy(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(sendByKey{}).(time.Time)
	return t, ok
}

// SendByPassed is nil while a write under ctx may still leave at now, and
// an *Unavailable wrapping ErrSendByPassed once its moment passed.
func SendByPassed(ctx context.Context, now time.Time) error {
	if t, ok := SendBy(ctx); ok && now.After(t) {
		return NewUnavailable(0, 0, ErrSendByPassed)
	}
	return nil
}

// Windowed is a provider that bounds how long after a request leaves this
// process the provider may still carry it out. Past the intent's moment to
// be sent and that window, an order the provider does not know was never
// placed, and a lookup that finds nothing may say so.
type Windowed interface {
	ReceiveWindow() time.Duration
}

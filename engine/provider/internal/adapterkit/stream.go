package adapterkit

import (
	"context"
	"sync"
	"time"
)

// maxBackoff is the longest wait between two dials of a stream.
const maxBackoff = 30 * time.Second

// Backoff doubles a reconnect wait, up to 30 s.
func Backoff(d time.Duration) time.Duration { return min(2*d, maxBackoff) }

// Sleep waits d, or until ctx ends or closed (nil: never) closes; false
// when one of them did.
func Sleep(ctx context.Context, closed <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-closed:
		return false
	case <-t.C:
		return true
	}
}

// Redial dials a stream again after a cut: it waits first (the first wait
// doubling after each failure, up to 30 s), then calls dial, until dial
// succeeds (true). It gives up (false) when ctx ends, closed (nil: never)
// closes, or final (nil: never) says dial's error ends the stream.
func Redial(ctx context.Context, closed <-chan struct{}, first time.Duration, dial func() error, final func(error) bool) bool {
	for wait := first; ; wait = Backoff(wait) {
		if ctx.Err() != nil || !Sleep(ctx, closed, wait) {
			return false
		}
		err := dial()
		if err == nil {
			return true
		}
		if final != nil && final(err) {
			return false
		}
	}
}

// Go runs a stream's goroutine f, counted by wg, with a context that ends
// when ctx ends or when closed (the session's end) closes.
func Go(wg *sync.WaitGroup, ctx context.Context, closed <-chan struct{}, f func(ctx context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		f(ctx)
	}()
}

// Send sends v on out unless ctx ends first; false when it did.
func Send[T any](ctx context.Context, out chan<- T, v T) bool {
	select {
	case out <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

package eventlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A direct get that meets no responders (a stream whose replicas have not
// subscribed yet) is asked again until it answers; any other answer, an
// error included, comes back at once; and the wait is bounded.
func TestRetryNoRespondersAsksAgainUntilAnAnswer(t *testing.T) {
	ctx := context.Background()
	calls := 0
	got, err := retryNoResponders(ctx, 5*time.Second, func() (int, error) {
		calls++
		if calls < 3 {
			return 0, nats.ErrNoResponders
		}
		return 42, nil
	})
	if got != 42 || err != nil || calls != 3 {
		t.Fatalf("got %d, %v after %d calls; want 42 after 3", got, err, calls)
	}

	calls = 0
	other := errors.New("not found")
	if _, err := retryNoResponders(ctx, 5*time.Second, func() (int, error) { calls++; return 0, other }); err != other || calls != 1 {
		t.Fatalf("another error: %v after %d calls; want it after 1", err, calls)
	}

	start := time.Now()
	_, err = retryNoResponders(ctx, 200*time.Millisecond, func() (int, error) { return 0, nats.ErrNoResponders })
	if !errors.Is(err, nats.ErrNoResponders) || time.Since(start) > 2*time.Second {
		t.Fatalf("never answered: %v after %s; want no responders within the wait", err, time.Since(start))
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := retryNoResponders(cctx, time.Hour, func() (int, error) { return 0, nats.ErrNoResponders }); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("ended context: %v", err)
	}
}

package eventlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// An append that meets no stream (its leader moving, here the stream gone
// for a moment) is sent again, as jetstream's PublishMsg does: a stream back
// within the retries takes it; one that stays away leaves its outcome
// unknown, never a refusal that says nothing was stored.
func TestAnAppendRetriesAStreamThatDoesNotAnswer(t *testing.T) {
	l := soleWriter(t)
	ctx := context.Background()
	cfg := l.stream.CachedInfo().Config
	if err := l.js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	back := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, err := l.js.CreateStream(ctx, cfg)
		back <- err
	}()
	seq, err := l.Append(ctx, l.Subject("account.r"), 0, ulid.Make().String(), []byte("x"))
	if cerr := <-back; cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || seq != 1 {
		t.Fatalf("append across the stream's absence: %d, %v", seq, err)
	}
	if err := l.js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = l.Append(ctx, l.Subject("account.r"), 0, ulid.Make().String(), []byte("y"))
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("append with no stream: %v", err)
	}
	if took := time.Since(start); took < 2*jetstream.DefaultPubRetryWait {
		t.Fatalf("no stream answered in %v: not retried", took)
	}
}

// An append whose context has no deadline still ends when no ack comes
// (jetstream's default timeout, as PublishMsg), as an outcome unknown:
// here the stream is gone and something else answers nothing on its
// subject.
func TestAnAppendWithoutADeadlineEndsWhenNoAckComes(t *testing.T) {
	l := soleWriter(t)
	ctx := context.Background()
	defer func(d time.Duration) { appendTimeout = d }(appendTimeout)
	appendTimeout = 300 * time.Millisecond
	if err := l.js.DeleteStream(ctx, l.stream.CachedInfo().Config.Name); err != nil {
		t.Fatal(err)
	}
	subj := l.Subject("account.silent")
	sub, err := l.nc.SubscribeSync(l.phys(subj)) // takes the request, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, subj, 0, ulid.Make().String(), []byte("x"))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("append with no ack: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an append without a deadline waited for an ack without end")
	}
}

package eventlog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/eventlog"
)

// RetryTimeouts asks again while the cluster is not whole and stops at once
// on any other answer.
func TestRetryTimeoutsAsksAgainOnlyWhileTheClusterIsNotWhole(t *testing.T) {
	apiErr := func(code int, desc string) error {
		return &jetstream.APIError{Code: 400, ErrorCode: jetstream.ErrorCode(code), Description: desc}
	}
	for _, c := range []struct {
		name  string
		first error // answered twice before a success
		calls int   // calls made
		fails bool
	}{
		{"timeout", context.DeadlineExceeded, 3, false},
		{"nats timeout", nats.ErrTimeout, 3, false},
		{"no responders", nats.ErrNoResponders, 3, false},
		{"no meta leader", apiErr(10008, "JetStream system temporarily unavailable"), 3, false},
		{"not the leader", apiErr(10009, "JetStream cluster can not handle request"), 3, false},
		{"incomplete", apiErr(10004, "incomplete results"), 3, false},
		{"peer not yet heard from", apiErr(10005, "no suitable peers for placement, peer offline"), 3, false},
		{"no room on any peer", apiErr(10005, "no suitable peers for placement, insufficient storage"), 1, true},
		{"a config the server refuses", apiErr(10058, "stream name already in use with a different configuration"), 1, true},
		{"bad request", apiErr(10003, "bad request"), 1, true},
		{"closed connection", nats.ErrConnectionClosed, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			err := eventlog.RetryTimeouts(context.Background(), func(ctx context.Context) error {
				if _, ok := ctx.Deadline(); !ok {
					t.Error("an attempt without a deadline")
				}
				if calls++; calls <= 2 {
					return c.first
				}
				return nil
			})
			if calls != c.calls || (err != nil) != c.fails {
				t.Fatalf("%d calls, %v; want %d calls, failed %v", calls, err, c.calls, c.fails)
			}
			if c.fails && !errors.Is(err, c.first) {
				t.Fatalf("%v is not the answer %v", err, c.first)
			}
		})
	}
}

// A cluster that stays without its quorum fails the call after
// PlacementWait, with the server's words and how long it was asked.
func TestRetryTimeoutsGivesUpAfterPlacementWait(t *testing.T) {
	prev := eventlog.PlacementWait
	eventlog.PlacementWait = 300 * time.Millisecond
	t.Cleanup(func() { eventlog.PlacementWait = prev })
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	calls := 0
	began := time.Now()
	err := eventlog.RetryTimeouts(context.Background(), func(context.Context) error { calls++; return unavailable })
	if !errors.Is(err, unavailable) || !strings.Contains(err.Error(), "not whole") || calls < 2 {
		t.Fatalf("%d calls, %v", calls, err)
	}
	if took := time.Since(began); took < eventlog.PlacementWait {
		t.Fatalf("gave up after %v, before PlacementWait", took)
	}
}

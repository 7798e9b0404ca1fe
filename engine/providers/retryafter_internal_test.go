package providers

import (
	"errors"
	"testing"
	"time"

	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/provider"
)

// A throttled settlement's wait is whole seconds, at least one, and never
// more than a settlement takes (a ban far ahead would otherwise fail the
// settle and leave the intent open).
func TestRetryAfterIsWholeSecondsWithinTheSettlesBound(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"a limit of 1.2 s", &provider.RateLimited{RetryAfter: 1200 * time.Millisecond}, 2},
		{"a limit already over", &provider.RateLimited{}, 1},
		{"a ban of 90 s", &provider.Banned{Until: now.Add(90 * time.Second)}, 90},
		{"a ban of a month", &provider.Banned{Until: now.Add(30 * 24 * time.Hour)}, providercmd.MaxRetryAfter},
		{"not a limit", errors.New("connection refused"), 0},
	} {
		got := retryAfter(tc.err, now)
		if got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
		s := providercmd.Settle{Key: "place:x", Outcome: "not_sent", RetryAfter: got}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: the settlement is refused: %v", tc.name, err)
		}
	}
	if err := (&providercmd.Settle{Key: "place:x", Outcome: "not_sent", RetryAfter: providercmd.MaxRetryAfter + 1}).Validate(); err == nil {
		t.Error("a settlement past the bound is taken")
	}
	if err := (&providercmd.Settle{Key: "place:x", Outcome: "not_sent", RetryAfter: -1}).Validate(); err == nil {
		t.Error("a negative wait is taken")
	}
}

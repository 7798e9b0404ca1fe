package adapterkit

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 123456789, time.UTC)

func TestWindowBurstThenWait(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		span  time.Duration
	}{
		{"Tradovate's hour", 5000, time.Hour},
		{"Binance's ten seconds", 300, 10 * time.Second},
		{"one a second", 1, time.Second},
		{"a span not divisible by the slots", 7, 1001 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWindow(tc.limit, tc.span)
			for i := range tc.limit {
				if wait, ok := Take(t0, Need{w, 1}); !ok {
					t.Fatalf("unit %d of %d in a burst waits %s", i+1, tc.limit, wait)
				}
			}
			// The N+1th waits until the burst's slot leaves: a span.
			wait, ok := Take(t0.Add(time.Millisecond), Need{w, 1})
			if ok || wait != tc.span-time.Millisecond {
				t.Fatalf("unit %d = %s %v, want a wait of %s", tc.limit+1, wait, ok, tc.span-time.Millisecond)
			}
			if _, ok := Take(t0.Add(tc.span-time.Nanosecond), Need{w, 1}); ok {
				t.Fatal("admitted a nanosecond before the burst left the span")
			}
			for i := range tc.limit {
				if wait, ok := Take(t0.Add(tc.span), Need{w, 1}); !ok {
					t.Fatalf("after the span, unit %d waits %s", i+1, wait)
				}
			}
			if _, ok := Take(t0.Add(tc.span), Need{w, 1}); ok {
				t.Fatal("a second burst went past the limit")
			}
		})
	}
}

// The oldest slots leave first: the wait is for as many of them as the
// amount needs, and the amount is counted whole.
func TestWindowWaitsForTheSlotsItNeeds(t *testing.T) {
	w := NewWindow(10, 20*time.Second) // a slot a second
	for i := range 5 {
		if _, ok := Take(t0.Add(time.Duration(i)*time.Second), Need{w, 2}); !ok {
			t.Fatalf("take %d refused", i)
		}
	}
	now := t0.Add(5 * time.Second)
	for _, tc := range []struct {
		m    int
		want time.Duration
	}{
		{1, 15 * time.Second}, // t0's two leave at t0+20s
		{2, 15 * time.Second},
		{3, 16 * time.Second},
		{10, 19 * time.Second}, // every slot
		{11, 19 * time.Second}, // clamped to the limit
	} {
		if got := w.Wait(now, tc.m); got != tc.want {
			t.Errorf("Wait(%d) = %s, want %s", tc.m, got, tc.want)
		}
	}
	if _, ok := Take(now.Add(15*time.Second), Need{w, 3}); ok {
		t.Error("3 admitted when only 2 had left")
	}
	if _, ok := Take(now.Add(16*time.Second), Need{w, 3}); !ok {
		t.Error("3 refused once 4 had left")
	}
}

// An amount over the limit is clamped: it waits for an empty window and
// then fills it.
func TestWindowClampsAnAmountOverTheLimit(t *testing.T) {
	w := NewWindow(4, time.Minute)
	if _, ok := Take(t0, Need{w, 40}); !ok {
		t.Fatal("an empty window refused an amount over its limit")
	}
	if wait, ok := Take(t0, Need{w, 1}); ok || wait != time.Minute {
		t.Fatalf("after the clamped amount: %s %v, want a minute", wait, ok)
	}
	if w.Empty(t0.Add(time.Minute-1)) || !w.Empty(t0.Add(time.Minute)) {
		t.Fatal("the clamped amount did not leave with its slot")
	}
}

// Several windows are taken together or not at all.
func TestTakeIsAllOrNothing(t *testing.T) {
	second, minute := NewWindow(3, time.Second), NewWindow(5, time.Minute)
	for i := range 3 {
		if _, ok := Take(t0, Need{second, 1}, Need{minute, 1}); !ok {
			t.Fatalf("take %d refused", i)
		}
	}
	// The second is full: the minute must not count the refused call.
	wait, ok := Take(t0, Need{second, 1}, Need{minute, 1})
	if ok || wait != time.Second {
		t.Fatalf("full second = %s %v", wait, ok)
	}
	if got := minute.Wait(t0, 2); got != 0 {
		t.Fatalf("the minute counted a refused call: 2 more wait %s", got)
	}
	now := t0.Add(time.Second)
	for i := range 2 {
		if _, ok := Take(now, Need{second, 1}, Need{minute, 1}); !ok {
			t.Fatalf("after a second, take %d refused", i)
		}
	}
	// Now the minute is full and the second is not: the longest wait wins
	// (t0 and t0+1s share a 3 s slot here: its units leave together).
	if wait, ok := Take(now, Need{second, 1}, Need{minute, 1}); ok || wait != time.Minute {
		t.Fatalf("full minute = %s %v", wait, ok)
	}
	if got := second.Wait(now, 1); got != 0 {
		t.Fatalf("the second counted a refused call: %s", got)
	}
}

// A clock that goes back never admits more than the limit.
func TestWindowClockGoingBack(t *testing.T) {
	w := NewWindow(2, time.Second)
	Take(t0, Need{w, 1})
	Take(t0.Add(900*time.Millisecond), Need{w, 1})
	if _, ok := Take(t0.Add(-time.Hour), Need{w, 1}); ok {
		t.Fatal("an hour back, a full window admitted")
	}
	// Read at the latest time seen: t0's unit leaves at t0+1s.
	if got := w.Wait(t0.Add(-time.Hour), 1); got != 100*time.Millisecond {
		t.Fatalf("wait an hour back = %s", got)
	}
	if _, ok := Take(t0.Add(time.Second), Need{w, 1}); !ok {
		t.Fatal("refused once the first unit left")
	}
	if _, ok := Take(t0.Add(time.Second), Need{w, 1}); ok {
		t.Fatal("the unit taken at the latest time was lost")
	}
}

// Over a long random sequence, no span ever holds more than the limit
// (checked against a log of every admitted unit), and the wait a refusal
// gives is enough: taking again after it succeeds.
func TestWindowNeverExceedsTheLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		limit int
		span  time.Duration
	}{{5, time.Second}, {37, 10 * time.Second}, {300, 10 * time.Second}, {3, 7 * time.Millisecond}} {
		w := NewWindow(tc.limit, tc.span)
		type unit struct {
			at time.Time
			n  int
		}
		var log []unit
		inSpan := func(end time.Time) int { // units in (end-span, end]
			s := 0
			for _, u := range log {
				if u.at.After(end.Add(-tc.span)) && !u.at.After(end) {
					s += u.n
				}
			}
			return s
		}
		now, admitted, paused := t0, 0, time.Duration(0)
		for range 20000 {
			if rng.IntN(3) > 0 { // else a burst at the same instant
				now = now.Add(time.Duration(rng.Int64N(int64(tc.span) / int64(tc.limit) * 4)))
			}
			if rng.IntN(50) == 0 { // now and then a pause of up to a span and a bit
				d := time.Duration(rng.Int64N(int64(tc.span) * 6 / 5))
				now, paused = now.Add(d), paused+d
			}
			m := 1 + rng.IntN(3)
			wait, ok := Take(now, Need{w, m})
			if !ok {
				if wait <= 0 || wait > tc.span {
					t.Fatalf("limit %d/%s: refusal with wait %s", tc.limit, tc.span, wait)
				}
				if rng.IntN(4) > 0 {
					continue
				}
				now = now.Add(wait)
				if _, ok := Take(now, Need{w, m}); !ok {
					t.Fatalf("limit %d/%s: refused again after its wait %s", tc.limit, tc.span, wait)
				}
			}
			log = append(log, unit{now, m})
			admitted += m
			if got := inSpan(now); got > tc.limit {
				t.Fatalf("limit %d/%s: %d units in the span ending %s", tc.limit, tc.span, got, now.Sub(t0))
			}
			if len(log) > 4*tc.limit {
				log = log[len(log)-2*tc.limit:]
			}
		}
		// Conservative, not starved: at least half the limit's rate
		// outside the pauses.
		if elapsed := now.Sub(t0) - paused; 2*int64(admitted)*int64(tc.span) < int64(tc.limit)*int64(elapsed) {
			t.Errorf("limit %d/%s: only %d admitted in %s", tc.limit, tc.span, admitted, elapsed)
		}
	}
}

// Hold refuses at once, with the wait, what may not wait so long, and
// sleeps the rest.
func TestHold(t *testing.T) {
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		d, left time.Duration
		refused bool
	}{
		{"a write within its bound", ctx, 30 * time.Millisecond, 250 * time.Millisecond, false},
		{"a write past its bound", ctx, 10 * time.Second, 250 * time.Millisecond, true},
		{"a read within its context", short, 20 * time.Millisecond, -1, false},
		{"a read past its context's deadline", short, 10 * time.Second, -1, true},
	} {
		start := time.Now()
		err := Hold(tc.ctx, tc.d, tc.left)
		took := time.Since(start)
		var rl *provider.RateLimited
		switch {
		case tc.refused && (!errors.As(err, &rl) || rl.RetryAfter != tc.d || took > 20*time.Millisecond):
			t.Errorf("%s: %v after %s, want RateLimited %s at once", tc.name, err, took, tc.d)
		case !tc.refused && (err != nil || took < tc.d):
			t.Errorf("%s: %v after %s, want a wait of %s", tc.name, err, took, tc.d)
		}
	}
}

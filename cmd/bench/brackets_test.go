package main

import (
	"testing"
	"time"
)

// quotes makes a history of bids, one every 5 ms from t0.
func quotes(t0 time.Time, bids ...int64) []bkQuote {
	out := make([]bkQuote, len(bids))
	for i, b := range bids {
		out[i] = bkQuote{at: t0.Add(time.Duration(i) * 5 * time.Millisecond), bid: b}
	}
	return out
}

func TestTriggerAt(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	hist := quotes(t0, 100, 101, 99, 97, 98, 95)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	cases := []struct {
		name  string
		stop  int64
		setAt time.Time
		want  time.Time
		ok    bool
	}{
		{"the first later quote at or under the stop", 97, ms(1), ms(15), true},
		{"a quote at the stop crosses it", 98, ms(1), ms(15), true},
		{"set when the market was through it already", 99, ms(12), ms(12), true},
		{"never earlier than the setting", 99, ms(17), ms(17), true},
		{"never crossed", 90, ms(1), time.Time{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := triggerAt(hist, c.stop, c.setAt)
			if ok != c.ok || !got.Equal(c.want) {
				t.Fatalf("triggerAt(%d, %s) = %s %v, want %s %v", c.stop, c.setAt.Sub(t0), got.Sub(t0), ok, c.want.Sub(t0), c.ok)
			}
		})
	}
}

func TestRuleTriggers(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	// The bid rises from 100 to 110, then falls; a long entered at 100
	// trails 5 ticks from an activation 3 ticks above its entry, first stop 90.
	hist := quotes(t0, 100, 104, 110, 108, 105, 101, 95)
	accts := []bkAccount{{dist: 5, act: 3, entry: 100, stop0: 90}, {dist: 50, act: 3, entry: 100, stop0: 90},
		{dist: 3, act: 3, entry: 100, stop0: 90}}
	changes := []bkChange{
		// the rule's level 107 from 10 ms; the bid of 105 at 20 ms gapped
		// through it: the rule triggers it there, where the log did
		{acct: 2, kind: bkFilled, stop: 105, at: t0.Add(22 * time.Millisecond)},
		// the rule's level reached 105 at 10 ms, crossed by the bid of 105 at
		// 20 ms; the log had the stop at 101 and filled it at 50 ms
		{acct: 0, kind: bkFilled, stop: 101, at: t0.Add(50 * time.Millisecond)},
		// the rule never raised the first stop: nothing crossed it
		{acct: 1, kind: bkFilled, stop: 90, at: t0.Add(40 * time.Millisecond)},
		{acct: 0, kind: bkMoved, stop: 103, at: t0.Add(30 * time.Millisecond)},
	}
	lats, under, none := ruleTriggers(accts, hist, changes, t0)
	if len(lats) != 2 || lats[0] != 2*time.Millisecond || lats[1] != 30*time.Millisecond || len(under) != 2 || under[0] != 0 || under[1] != 4 || none != 1 {
		t.Fatalf("lats %v, under %v, none %d", lats, under, none)
	}
	if got := underRule([]int64{0, 0, 4}); got != "1 of 3 / 0 / 4 / 4" {
		t.Fatalf("underRule: %q", got)
	}
}

func TestWakeLags(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	hist := quotes(t0, 100, 101, 102, 101, 102)
	changes := []bkChange{
		// woken by the quote at 10 ms (bid 102), seen at 25 ms: 15 ms, first third
		{kind: bkMoved, best: 102, woke: t0.Add(11 * time.Millisecond), at: t0.Add(25 * time.Millisecond)},
		// woken by the quote at 20 ms (the newest 102 by then), seen at 95 ms: 75 ms, last third
		{kind: bkMoved, best: 102, woke: t0.Add(21 * time.Millisecond), at: t0.Add(95 * time.Millisecond)},
		// no quote with that bid: left out
		{kind: bkMoved, best: 105, woke: t0.Add(21 * time.Millisecond), at: t0.Add(50 * time.Millisecond)},
		{kind: bkFilled, stop: 90, at: t0.Add(60 * time.Millisecond)},
	}
	got := wakeLags(hist, changes, t0, 90*time.Millisecond)
	if len(got[0]) != 1 || got[0][0] != 15*time.Millisecond || len(got[1]) != 0 || len(got[2]) != 1 || got[2][0] != 75*time.Millisecond {
		t.Fatalf("lags %v", got)
	}
}

func TestBehindAt(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	hist := quotes(t0, 100, 104, 110, 103)
	accts := []bkAccount{
		{dist: 10, act: 0, entry: 102, stop0: 92, live: true},  // the rule: 110 - 10 = 100
		{dist: 10, act: 20, entry: 102, stop0: 92, live: true}, // activation at 122: not reached, stays at 92
		{dist: 5, act: 0, entry: 102, stop0: 97, live: true},   // filled at 12 ms
	}
	changes := []bkChange{
		{acct: 0, kind: bkMoved, stop: 94, at: t0.Add(6 * time.Millisecond)},
		{acct: 2, kind: bkFilled, at: t0.Add(12 * time.Millisecond)},
		{acct: 0, kind: bkMoved, stop: 99, at: t0.Add(14 * time.Millisecond)},
	}
	got := behindAt(accts, changes, hist, []time.Time{t0.Add(7 * time.Millisecond), t0.Add(20 * time.Millisecond)}, nil)
	// At 7 ms the high is 104: account 0 wants 94 and has it, account 2 wants 99 and has 97.
	if b := got[0]; b.Live != 3 || b.Behind != 1 || b.Max != 2 {
		t.Fatalf("at 7 ms: %+v", b)
	}
	// At 20 ms the high is 110: account 0 wants 100 and has 99; account 2 is gone.
	if b := got[1]; b.Live != 2 || b.Behind != 1 || b.Max != 1 || b.Mean != 0.5 {
		t.Fatalf("at 20 ms: %+v", b)
	}
}

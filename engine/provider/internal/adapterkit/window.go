package adapterkit

import (
	"context"
	"time"

	"github.com/svc/engine/engine/provider"
)

// windowSlots is how many slots one Window keeps per span (one more is kept
// for the slot the span's start falls in): memory is small and constant
// whatever the rate, so a budget per linked login stays cheap.
const windowSlots = 20

// Window is a rolling request limit: at most Limit units in ANY interval
// Span long, as a provider publishes "N requests per minute". It never
// admits more than that: units are kept in windowSlots slots per span, and
// a slot's units all count until the latest of them is Span old, so a unit
// counts at most a slot (Span/20) longer than it must, never shorter. A
// rolling window is never looser than the provider's own, rolling or fixed
// to the clock: every fixed window is one of the intervals it bounds.
//
// A Window is not safe for concurrent use: its budget holds a mutex around
// it. A clock that goes backwards is read as the latest time seen, so it
// can delay but never admit more.
type Window struct {
	limit int
	span  time.Duration
	slot  time.Duration // span / windowSlots
	ring  [windowSlots + 1]slot
	head  int64     // the newest slot's number (time / slot)
	total int       // the units of every slot in the ring
	late  time.Time // the latest time read
}

// slot is the units admitted within one slot's time and when the latest of
// them was admitted (Unix nanoseconds).
type slot struct {
	n    int
	last int64
}

// NewWindow is a window of at most limit units in any span (both positive;
// a span shorter than windowSlots nanoseconds is taken as that).
func NewWindow(limit int, span time.Duration) *Window {
	limit, span = max(limit, 1), max(span, windowSlots)
	return &Window{limit: limit, span: span, slot: span / windowSlots}
}

// Limit is the most units the window admits in any span.
func (w *Window) Limit() int { return w.limit }

// Wait is how long from now until m more units fit: zero when they fit now,
// else the time until enough of the oldest slots have left the span. An
// amount over Limit is clamped to Limit: a call heavier than the whole
// window waits for an empty window and then fills it, rather than never
// being admitted.
func (w *Window) Wait(now time.Time, m int) time.Duration {
	now = w.advance(now)
	need := w.total + min(m, w.limit) - w.limit
	if need <= 0 {
		return 0
	}
	t := now.UnixNano()
	for i := w.head - windowSlots; i <= w.head; i++ {
		s := &w.ring[w.index(i)]
		if s.n == 0 {
			continue
		}
		if need -= s.n; need <= 0 {
			return time.Duration(s.last + int64(w.span) - t)
		}
	}
	return w.span // unreachable: the ring holds total units
}

// add counts m units (clamped to Limit) at now, without checking.
func (w *Window) add(now time.Time, m int) {
	now = w.advance(now)
	m = min(max(m, 0), w.limit)
	s := &w.ring[w.index(w.head)]
	s.n += m
	s.last = now.UnixNano()
	w.total += m
}

// Empty reports whether no unit counts at now any more.
func (w *Window) Empty(now time.Time) bool {
	w.advance(now)
	return w.total == 0
}

// advance moves the ring to now (never back) and drops the slots whose
// units have all left the span. It returns the time the window reads.
func (w *Window) advance(now time.Time) time.Time {
	if now.Before(w.late) {
		now = w.late
	}
	w.late = now
	t := now.UnixNano()
	k := t / int64(w.slot)
	if k-w.head > windowSlots {
		w.ring, w.total = [windowSlots + 1]slot{}, 0
	} else {
		for i := w.head + 1; i <= k; i++ {
			w.drop(i)
		}
	}
	w.head = max(w.head, k)
	for i := w.head - windowSlots; i <= w.head; i++ {
		if s := w.ring[w.index(i)]; s.n > 0 && s.last+int64(w.span) <= t {
			w.drop(i)
		}
	}
	return now
}

// drop empties slot number i.
func (w *Window) drop(i int64) {
	s := &w.ring[w.index(i)]
	w.total -= s.n
	*s = slot{}
}

func (w *Window) index(i int64) int {
	n := int64(len(w.ring))
	return int(((i % n) + n) % n)
}

// Need is m units of one window, for Take.
type Need struct {
	W *Window
	N int
}

// Take admits every need at now, or none of them: it counts the units in
// every window and returns (0, true) when each window admits its need, and
// otherwise counts nothing and returns the longest of their waits.
func Take(now time.Time, needs ...Need) (time.Duration, bool) {
	var wait time.Duration
	for _, n := range needs {
		wait = max(wait, n.W.Wait(now, n.N))
	}
	if wait > 0 {
		return wait, false
	}
	for _, n := range needs {
		n.W.add(now, n.N)
	}
	return 0, true
}

// Admit calls take until it admits a call (a zero wait) or refuses it (an
// error), holding each wait take gives before it asks again (Hold): a write
// (maxWait 0 or more) waits at most maxWait in all, a read (maxWait below 0)
// as long as ctx allows. The waits are slept on the real clock, whatever
// clock take reads.
func Admit(ctx context.Context, maxWait time.Duration, take func() (time.Duration, error)) error {
	start := time.Now()
	for {
		wait, err := take()
		if err != nil || wait == 0 {
			return err
		}
		left := time.Duration(-1)
		if maxWait >= 0 {
			left = max(maxWait-time.Since(start), 0)
		}
		if err := Hold(ctx, wait, left); err != nil {
			return err
		}
	}
}

// Hold waits d, the wait a budget gave a call, before the call tries the
// budget again. It refuses the call at once instead, sending nothing, with
// *provider.RateLimited{RetryAfter: d}, when d is more than left (what a
// write may still wait; negative: no bound) or ctx's deadline comes first;
// and with what was left of d when ctx ends during the wait.
func Hold(ctx context.Context, d, left time.Duration) error {
	if left >= 0 && d > left {
		return &provider.RateLimited{RetryAfter: d}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return &provider.RateLimited{RetryAfter: d}
	}
	start := time.Now()
	if !Sleep(ctx, nil, d) {
		return &provider.RateLimited{RetryAfter: max(d-time.Since(start), 0)}
	}
	return nil
}

package paper

import (
	"github.com/google/btree"

	"github.com/svc/engine/events"
)

// Trail is a bracket's trailing rule as the reactor indexes it while the
// account waits in the queue of move wakes: where the rules would have put
// the stop by now, so a quote through that level moves the wake to the fills
// (the wake's walk of its quotes then triggers the stop at the level of the
// moment) instead of waiting behind every other account's move.
type Trail struct {
	Stop       string          // the stop leg's order id
	Long       bool            // a long's stop trails the highest bid, a short's the lowest ask
	Distance   events.Decimal  // how far behind the best touch the stop trails
	Activation *events.Decimal // the touch from which it trails; nil: it trails already
	Tick       events.Decimal  // the levels' grid (> 0): a level is within a tick of best less Distance
	// LevelAt is where the bracket's rules put the stop at best touch best
	// (breakeven and trailing, from the stop's level when the account
	// was tracked); false when they would not move it.
	LevelAt func(best events.Decimal) (events.Decimal, bool)
}

// trailEntry is one queued stop in a group's trees: by distance once it
// trails, by activation (negated for a short) until then.
type trailEntry struct {
	by      events.Decimal
	account string
	t       *Trail
}

func lessTrail(a, b trailEntry) bool {
	if c := a.by.Cmp(b.by); c != 0 {
		return c < 0
	}
	if a.account != b.account {
		return a.account < b.account
	}
	return a.t.Stop < b.t.Stop
}

// trailGroup holds the queued stops whose best touch since their wake was
// queued is the same. That best is the one of a quote no later quote has
// bettered (an entry of the book's bids or asks stack), so groups that come
// to share it share it for good, and a quote that betters several merges
// them. Within a group a long's stop is through when bid <= best - distance
// (to the tick): the smallest distances first, so a quote visits only the
// stops it may trigger.
type trailGroup struct {
	best    events.Decimal
	tick    events.Decimal            // the largest tick of its stops
	ready   *btree.BTreeG[trailEntry] // trailing: by distance
	pending *btree.BTreeG[trailEntry] // waiting for their activation: by the touch that activates them
	into    *trailGroup               // merged into that group
	long    bool
	size    int
}

func newTrailGroup(best events.Decimal, long bool) *trailGroup {
	return &trailGroup{best: best, long: long, ready: btree.NewG(8, lessTrail), pending: btree.NewG(8, lessTrail)}
}

// find is the group that holds what g held.
func (g *trailGroup) find() *trailGroup {
	for g.into != nil {
		g = g.into
	}
	return g
}

// merge folds a and b into one group (the smaller into the larger); either
// may be nil.
func merge(a, b *trailGroup) *trailGroup {
	switch {
	case a == nil:
		return b
	case b == nil, a == b:
		return a
	}
	if a.size < b.size {
		a, b = b, a
	}
	b.ready.Ascend(func(e trailEntry) bool { a.ready.ReplaceOrInsert(e); return true })
	b.pending.Ascend(func(e trailEntry) bool { a.pending.ReplaceOrInsert(e); return true })
	if b.tick.Cmp(a.tick) > 0 {
		a.tick = b.tick
	}
	a.size += b.size
	b.into, b.ready, b.pending, b.size = a, nil, nil, 0
	return a
}

// activation is the key a stop waits by until it trails: its activation
// touch, negated for a short so both sides pop the smallest first.
func (t *Trail) activation() events.Decimal {
	if t.Long {
		return *t.Activation
	}
	return t.Activation.Neg()
}

// edge is the group's best in the same orientation (negated for a short).
func (g *trailGroup) edge() events.Decimal {
	if g.long {
		return g.best
	}
	return g.best.Neg()
}

// add puts a queued stop in, trailing or waiting for its activation.
func (g *trailGroup) add(acct string, t *Trail) {
	g.size++
	if t.Tick.Cmp(g.tick) > 0 {
		g.tick = t.Tick
	}
	if t.Activation != nil && t.activation().Cmp(g.edge()) > 0 {
		g.pending.ReplaceOrInsert(trailEntry{by: t.activation(), account: acct, t: t})
		return
	}
	g.ready.ReplaceOrInsert(trailEntry{by: t.Distance, account: acct, t: t})
}

// remove takes a queued stop out.
func (g *trailGroup) remove(acct string, t *Trail) {
	if _, ok := g.ready.Delete(trailEntry{by: t.Distance, account: acct, t: t}); ok {
		g.size--
		return
	}
	if t.Activation != nil {
		if _, ok := g.pending.Delete(trailEntry{by: t.activation(), account: acct, t: t}); ok {
			g.size--
		}
	}
}

// activate moves the stops whose activation the group's best has reached
// to the trailing tree.
func (g *trailGroup) activate() {
	edge := g.edge()
	for {
		e, ok := g.pending.Min()
		if !ok || e.by.Cmp(edge) > 0 {
			return
		}
		g.pending.DeleteMin()
		g.ready.ReplaceOrInsert(trailEntry{by: e.t.Distance, account: e.account, t: e.t})
	}
}

// through lists the accounts of the group whose stop a quote's touch
// (the bid for longs, the ask for shorts) reaches at the level the rules
// put it at the group's best.
func (g *trailGroup) through(touch events.Decimal, due []string) []string {
	gap := g.best.Sub(touch) // how far the touch is behind the best
	if !g.long {
		gap = touch.Sub(g.best)
	}
	if gap.Sign() <= 0 {
		return due
	}
	// Levels round to the nearest tick, so one within a tick of
	// best - distance: distances up to gap + tick may be through.
	bound := gap.Add(g.tick)
	g.ready.Ascend(func(e trailEntry) bool {
		if e.by.Cmp(bound) > 0 {
			return false
		}
		if lv, moved := e.t.LevelAt(g.best); moved {
			if (g.long && touch.Cmp(lv) <= 0) || (!g.long && touch.Cmp(lv) >= 0) {
				due = append(due, e.account)
			}
		}
		return true
	})
	return due
}

// trailRef is where a queued wake's stop sits, to take it out again.
type trailRef struct {
	g *trailGroup
	t *Trail
}

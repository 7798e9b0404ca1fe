package account

import (
	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

// Favours reports whether price a is better than c for the bracket's
// position (higher for a long).
func (b *Bracket) Favours(a, c events.Decimal) bool {
	if b.Side == "long" {
		return a.Cmp(c) > 0
	}
	return a.Cmp(c) < 0
}

// Toward is p moved n in the position's favour.
func (b *Bracket) Toward(p, n events.Decimal) events.Decimal {
	if b.Side == "long" {
		return p.Add(n)
	}
	return p.Sub(n)
}

// StopLeg is the bracket's working stop leg, if any.
func (b *Bracket) StopLeg() *BracketLeg {
	for i := range b.Legs {
		if b.Legs[i].Kind == LegStop && b.Legs[i].State == LegWorking {
			return &b.Legs[i]
		}
	}
	return nil
}

// Grid is the tick a bracket's levels sit on (a tiny one when it has none).
func (b *Bracket) Grid() events.Decimal {
	if b.Tick.Sign() <= 0 {
		return events.MustDecimal("0.00000001")
	}
	return b.Tick
}

// MoveStop is where breakeven and trailing would move the bracket's working
// stop at touch: the level, the best touch the trailing rule records, and
// which rule moved it; neither when no rule moves the stop a tick or more.
// The rules depend only on the best touch (levels sit on the tick grid), so
// one move at a path's best touch leaves the stop where a move at every
// touch of the path would.
func (b *Bracket) MoveStop(touch events.Decimal) (level, best events.Decimal, be, trail bool) {
	st := b.StopLeg()
	if st == nil || st.Price == nil {
		return level, best, false, false
	}
	level = *st.Price
	tick := b.Tick
	if tick.Sign() <= 0 {
		tick = events.Int(0)
	}
	if r := b.Breakeven; r != nil && !r.Done && !b.Favours(r.Trigger, touch) && b.Favours(r.StopPrice, level) {
		level, be = r.StopPrice, true
	}
	if r := b.Trailing; r != nil && (r.Activation == nil || !b.Favours(*r.Activation, touch)) {
		cand := b.Toward(touch, r.Distance.Neg()).Steps(b.Grid(), apd.RoundHalfUp)
		if !b.Favours(b.Toward(level, tick), cand) { // at least a tick better than the level so far
			level, best, trail = cand, touch, true
		}
	}
	if (be || trail) && !b.Favours(level, *st.Price) {
		return *st.Price, best, false, false
	}
	return level, best, be, trail
}

// Moved is b with its stop moved to where MoveStop puts it at touch, the
// rules' state with it (breakeven done, trailing active at its best); b
// itself when nothing moves. b is not changed.
func (b Bracket) Moved(touch events.Decimal) (Bracket, bool) {
	level, best, be, trail := b.MoveStop(touch)
	if !be && !trail {
		return b, false
	}
	c := b
	c.Legs = append([]BracketLeg(nil), b.Legs...)
	if be {
		r := *b.Breakeven
		r.Done = true
		c.Breakeven = &r
	}
	if trail {
		r := *b.Trailing
		r.Active, r.Best = true, &best
		c.Trailing = &r
	}
	c.StopLeg().Price = &level
	return c, true
}

// MarksBest is the best touch of the marks of s after the bracket's
// anchor, on its side; false when s is not the stack its anchor counts in
// (another node's, or an instrument's other than the bracket's) or none
// came after.
func (b *Bracket) MarksBest(s *mark.Stack) (events.Decimal, bool) {
	if s == nil || !b.Marked || s.Node != b.MarkNode || s.Instrument != b.Instrument {
		return events.Decimal{}, false
	}
	return s.BestSince(b.Side == "long", b.Anchor)
}

// Derive is b as the marks of s after its anchor have moved it: its stop
// where the rules put it at their best touch. What a trader reads and what
// the engine triggers at; b itself when no mark moves it.
func Derive(b Bracket, s *mark.Stack) Bracket {
	if best, ok := b.MarksBest(s); ok {
		b, _ = b.Moved(best)
	}
	return b
}

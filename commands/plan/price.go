package plan

import (
	"fmt"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// Leg is one priced leg of a plan's ladder.
type Leg struct {
	Kind     string          `json:"kind"` // stop, target or runner
	Price    *events.Decimal `json:"price"`
	Quantity events.Decimal  `json:"quantity"`
	Share    *events.Decimal `json:"share,omitempty"`
}

// Warning is a note on a preview or a placement.
type Warning struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Params  map[string]any `json:"params,omitempty"`
}

// Ladder is a plan priced for one entry: its legs and the breakeven and
// trailing rules the account's aggregate manages.
type Ladder struct {
	Legs      []Leg
	Warnings  []Warning
	Breakeven *evacct.Breakeven
	Trailing  *evacct.Trailing
}

// offset is d as a price distance in whole ticks: the ticks, or the offset at the tick (at least one).
func offset(d evplan.Distance, tick events.Decimal) events.Decimal {
	if d.Offset == nil {
		return tick.Mul(events.Int(d.Ticks))
	}
	o := Steps(*d.Offset, tick)
	if o.Sign() <= 0 {
		return tick
	}
	return o
}

// at is the price d away from entry: in the position's favour when profit
// (above a long entry), against it otherwise; mirrored for a short. side is the entry's.
func at(entry, tick events.Decimal, side string, d evplan.Distance, profit bool) events.Decimal {
	off := tick.Mul(events.Int(d.Ticks))
	if d.Offset != nil {
		off = *d.Offset
	}
	if (side == "buy") == profit {
		return Steps(entry.Add(off), tick)
	}
	return Steps(entry.Sub(off), tick)
}

// Price prices a plan's ladder for an entry of qty at entry on side: a stop
// for the whole quantity (a trailing-only plan's stop starts its trailing
// distance away), each target for its share rounded down to the lot step,
// and a runner for what the targets leave. A share that rounds to nothing is
// left unplaced with the warning exit_plan_remainder_unplaced. The
// breakeven level is capped one tick short of its trigger.
func Price(s evplan.Spec, tick, lot events.Decimal, side string, entry, qty events.Decimal) Ladder {
	l := Ladder{Legs: []Leg{}, Warnings: []Warning{}}
	switch {
	case s.Stop != nil:
		px := at(entry, tick, side, *s.Stop, false)
		l.Legs = append(l.Legs, Leg{Kind: evacct.LegStop, Price: &px, Quantity: qty})
	case s.Trailing != nil:
		px := at(entry, tick, side, s.Trailing.Distance, false)
		l.Legs = append(l.Legs, Leg{Kind: evacct.LegStop, Price: &px, Quantity: qty})
	}
	placed := events.Int(0)
	for i, t := range s.Targets {
		q := Floor(qty.Mul(t.Share), lot)
		if q.Sign() <= 0 {
			l.Warnings = append(l.Warnings, Warning{Code: "exit_plan_remainder_unplaced",
				Message: fmt.Sprintf("target %d's share of %s rounds to nothing at the lot step %s: it is left without a target", i+1, qty, lot),
				Params:  map[string]any{"target": i, "lotStep": lot.String()}})
			continue
		}
		px := at(entry, tick, side, t.Distance, true)
		share := t.Share
		l.Legs = append(l.Legs, Leg{Kind: evacct.LegTarget, Price: &px, Quantity: q, Share: &share})
		placed = placed.Add(q)
	}
	if rest := qty.Sub(placed); len(s.Targets) > 0 && rest.Sign() > 0 {
		if s.Runner {
			l.Legs = append(l.Legs, Leg{Kind: evacct.LegRunner, Quantity: rest})
		} else {
			l.Warnings = append(l.Warnings, Warning{Code: "exit_plan_remainder_unplaced",
				Message: fmt.Sprintf("%s of the quantity rounds to no target at the lot step %s: only the stop protects it", rest, lot),
				Params:  map[string]any{"quantity": rest.String(), "lotStep": lot.String()}})
		}
	}
	if s.Breakeven != nil && s.Stop != nil {
		trig := at(entry, tick, side, s.Breakeven.Trigger, true)
		stop := at(entry, tick, side, evplan.Distance{Ticks: s.Breakeven.PlusTicks}, true)
		if s.Breakeven.PlusTicks == 0 {
			stop = Steps(entry, tick)
		}
		short := at(trig, tick, side, evplan.Distance{Ticks: 1}, false) // one tick short of the trigger
		if (side == "buy" && stop.Cmp(short) > 0) || (side == "sell" && stop.Cmp(short) < 0) {
			stop = short
		}
		l.Breakeven = &evacct.Breakeven{Trigger: trig, StopPrice: stop}
	}
	if s.Trailing != nil {
		t := &evacct.Trailing{Distance: offset(s.Trailing.Distance, tick)}
		if s.Trailing.Activation.Ticks != 0 || s.Trailing.Activation.Offset != nil {
			a := at(entry, tick, side, s.Trailing.Activation, true)
			t.Activation = &a
		}
		l.Trailing = t
	}
	return l
}

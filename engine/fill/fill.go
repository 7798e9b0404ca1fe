// Package fill is the paper book's fill rules, the one place that says when
// a working order fills or triggers at a quote and at what price. The
// account's book (engine/account) decides its fills by them and the paper
// reactor (engine/paper) wakes accounts by them, so the two cannot disagree.
// The rules are pure: a quote, an order, and what the reactor saw between
// quotes (a stop traded through, a limit touched) in; a decision out.
//
// The rules, by order type (events/order says what each type needs):
//   - a market order fills at the touch: the ask for a buy, the bid for a sell;
//   - a limit order (and a stop-limit once triggered) fills at the touch when
//     the touch is at or better than its limit (a buy's ask at or below it,
//     a sell's bid at or above it), or at its limit when a quote since it
//     rested touched it (Touched) though this one no longer does;
//   - a stop or stop-limit waiting for its trigger triggers when the touch is
//     at or through its stop (a buy's ask at or above it, a sell's bid at or
//     below it), at the touch, or at its stop when a quote since it rested
//     traded through it (Through, a gap the newest quote came back from); a
//     triggered stop then fills at the touch, a triggered stop-limit rests at
//     its limit as above.
package fill

import (
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
)

// Touch is the price an order of side trades at on a quote: the ask for a
// buy, the bid for a sell.
func Touch(side order.Side, bid, ask events.Decimal) events.Decimal {
	return order.Touch(side, bid, ask)
}

// StopCrossed reports whether touch is at or through stop for an order of
// side: a buy's at or above it, a sell's at or below it. Given the highest
// ask (or lowest bid) since a quote, it says whether a quote since traded
// through the stop.
func StopCrossed(side order.Side, touch, stop events.Decimal) bool {
	if side == order.Buy {
		return touch.Cmp(stop) >= 0
	}
	return touch.Cmp(stop) <= 0
}

// LimitReached reports whether touch is at or better than limit for an
// order of side: a buy's at or below it, a sell's at or above it. Given the
// lowest ask (or highest bid) since a quote, it says whether a quote since
// touched the limit.
func LimitReached(side order.Side, touch, limit events.Decimal) bool {
	if side == order.Buy {
		return touch.Cmp(limit) <= 0
	}
	return touch.Cmp(limit) >= 0
}

// Order is the part of a working order the rules read. Limit and Stop are
// set as its type needs them.
type Order struct {
	Side      order.Side
	Type      order.Type
	Limit     *events.Decimal
	Stop      *events.Decimal
	Triggered bool // a stop that triggered
}

// Of reads the rules' part of an order as the log spells it.
func Of(side, typ string, limit, stop *events.Decimal, triggered bool) Order {
	return Order{Side: order.Side(side), Type: order.Type(typ), Limit: limit, Stop: stop, Triggered: triggered}
}

// WaitingStop reports whether o waits for its stop to trigger: a stop or a
// stop-limit not triggered yet.
func (o Order) WaitingStop() bool {
	return o.Type.Spec().StopPrice && !o.Triggered
}

// RestingLimit reports whether o rests at its limit price: a limit, or a
// stop-limit its stop triggered.
func (o Order) RestingLimit() bool {
	sp := o.Type.Spec()
	return sp.LimitPrice && (!sp.StopPrice || o.Triggered)
}

// AtOnce reports whether o fills at any touch: a market order.
func (o Order) AtOnce() bool {
	sp := o.Type.Spec()
	return sp.Type != "" && !sp.Rests()
}

// Crosses reports whether a quote reaches o's level, the test the reactor
// wakes an account by: a market order at any quote, a resting limit when
// the touch reaches its limit, a stop when the touch is at or through its
// stop. A stop that triggered but could not fill (a reduce-only stop with
// no position left to reduce, cancelled at the account's next decision)
// still waits at its stop here, though At would fill it at the touch.
func (o Order) Crosses(bid, ask events.Decimal) bool {
	touch := Touch(o.Side, bid, ask)
	switch {
	case o.AtOnce():
		return true
	case o.RestingLimit():
		return LimitReached(o.Side, touch, *o.Limit)
	case o.Type.Spec().StopPrice:
		return StopCrossed(o.Side, touch, *o.Stop)
	}
	return false
}

// Seen is what the reactor saw of an order between quotes: a quote since
// it began resting where it is traded through its stop (Through) or touched
// its limit (Touched), though the quote decided on may no longer.
type Seen struct{ Through, Touched bool }

// Decision is what a quote does to a working order: a stop that triggers
// (at TriggerAt), and a fill (at Price). A stop-limit may trigger and not
// fill.
type Decision struct {
	Trigger   bool
	TriggerAt events.Decimal
	Fill      bool
	Price     events.Decimal
}

// At decides o at the quote bid/ask, given what the reactor saw since it
// rested. An order of a type this build does not know does nothing.
func At(o Order, bid, ask events.Decimal, seen Seen) Decision {
	var d Decision
	if o.Type.Spec().Type == "" {
		return d
	}
	touch := Touch(o.Side, bid, ask)
	limit := o.RestingLimit()
	if o.WaitingStop() {
		at, crossed := touch, StopCrossed(o.Side, touch, *o.Stop)
		if !crossed && seen.Through {
			at, crossed = *o.Stop, true // an earlier quote traded through it
		}
		if !crossed {
			return d
		}
		d.Trigger, d.TriggerAt = true, at
		limit = o.Type.Spec().LimitPrice
	}
	if limit && !LimitReached(o.Side, touch, *o.Limit) {
		if !seen.Touched {
			return d
		}
		touch = *o.Limit // an earlier quote touched it: it fills at its limit, as it would have then
	}
	d.Fill, d.Price = true, touch
	return d
}

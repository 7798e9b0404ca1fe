package paper

import (
	"time"

	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/fill"
	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

// Trigger is the part of a working order the reactor needs to tell whether a quote crosses it.
type Trigger struct {
	Side        order.Side
	OrderType   order.Type
	LimitPrice  *events.Decimal
	StopPrice   *events.Decimal
	Triggered   bool
	TimeInForce order.TIF
	CreatedAt   time.Time
	Move        bool   // a bracket's breakeven or trailing level: a wake of lower priority
	ID          string // the order's id; empty for a move
	Trail       *Trail // a move's trailing rule, to index it by while its wake is queued; may be nil
	// LevelAt is, for a move, where the bracket's rules put its stop at a
	// best touch, and whether they move it (account.LevelAt); may be nil.
	LevelAt func(best events.Decimal) (events.Decimal, bool)
	// A move's anchor: the number of the newest mark its recorded level took
	// in (events/mark), as MarkNode numbered them; Marked false: none.
	Anchor   uint64
	MarkNode string
	Marked   bool
	// Since is when the order was last set where it rests (placed,
	// replaced, triggered: account.Working.UpdatedAt): Take counts no quote
	// before it.
	Since time.Time
}

// order is the part of t the fill rules read (engine/fill).
func (t Trigger) order() fill.Order {
	return fill.Order{Side: t.Side, Type: t.OrderType, Limit: t.LimitPrice, Stop: t.StopPrice, Triggered: t.Triggered}
}

// untriggeredStop reports whether t is a stop or stop-limit order waiting for its trigger.
func (t Trigger) untriggeredStop() bool {
	return t.ID != "" && !t.Move && t.StopPrice != nil && t.order().WaitingStop()
}

// restingLimit reports whether t is an order resting at its limit price: a
// limit, or a stop-limit its stop triggered.
func (t Trigger) restingLimit() bool {
	return t.ID != "" && !t.Move && t.LimitPrice != nil && t.order().RestingLimit()
}

// restsAt is the price t rests at, where its rest is dated (Reactor.rested):
// an untriggered stop's stop price, a resting limit's limit price.
func (t Trigger) restsAt() (events.Decimal, bool) {
	switch {
	case t.untriggeredStop():
		return *t.StopPrice, true
	case t.restingLimit():
		return *t.LimitPrice, true
	}
	return events.Decimal{}, false
}

// Crosses reports whether the touch (ask for a buy, bid for a sell) would
// fill or trigger t, by the paper book's fill rules (fill.Order.Crosses).
func (t Trigger) Crosses(bid, ask events.Decimal) bool { return t.order().Crosses(bid, ask) }

// fills are the triggers of ts that fill an order (not a bracket's move).
func fills(ts []Trigger) []Trigger {
	out := make([]Trigger, 0, len(ts))
	for _, t := range ts {
		if !t.Move {
			out = append(out, t)
		}
	}
	return out
}

// Touch is what a wake decides on: the instrument's newest quote, and the
// best touches since the quote the account's brackets were last decided on
// (the highest bid and the lowest ask), so a trailing stop follows a high
// that came and went while its wake waited.
type Touch struct {
	Bid, Ask        events.Decimal
	HighBid, LowAsk events.Decimal
	// TradedThrough names the account's stops that a quote since they began
	// resting traded through while the account was queued or in flight (the
	// quote it decides on may have come back above a sell stop).
	TradedThrough []string
	// Path is the quotes the wake decides on, from the first its HighBid and
	// LowAsk count to the newest (trading.Quote.Path).
	Path []trading.Touch
	// PathFrom is, by stop, where in Path it began resting where it is
	// (trading.Quote.PathFrom).
	PathFrom map[string]int
	// PathBest is, by stop, the best touch of the quotes before Path that it
	// rested through, where Path no longer holds it (trading.Quote.PathBest).
	PathBest map[string]events.Decimal
	// Marks is the instrument's marks on this node, up to the newest quote
	// the wake decides on (RecordMarks); nil without marks.
	Marks *mark.Stack
	// Touched names the account's resting limits that a quote since they
	// began resting touched (a buy's limit at or above the ask, a sell's at
	// or below the bid), though the quote the wake decides on may no longer
	// (trading.FillWorking.Touched).
	Touched []string
}

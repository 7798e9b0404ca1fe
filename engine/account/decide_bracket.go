package account

import (
	"fmt"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

func noBracket() error {
	return commands.Refuse(commands.CodeNotFound, "no active bracket with that id on this account", nil)
}

// rerest is a resting entry replaced by itself: the same order under a new
// id, for what it has left, carrying bracketID (empty: no bracket).
func rerest(env commands.Envelope, w *Working, bracketID string) (string, []events.Event) {
	id := env.DerivedID("e", 0)
	o := w.Order
	o.BrokerOrderID, o.Quantity, o.BracketID = id, w.Quantity.Sub(w.Filled), bracketID
	return id, []events.Event{
		evacct.OrderCanceled{BrokerOrderID: w.BrokerOrderID, Reason: "replaced", At: env.At},
		evacct.OrderPlaced{Order: o},
	}
}

// decideProtect opens a bracket from a saved plan on a position (armed at
// once, priced from the position's average price) or on a resting entry
// (pre_armed, priced from its limit or stop price; the entry rests again as a
// new order carrying it). A hold refuses both: they place orders.
func decideProtect(s *State, env commands.Envelope, c *trading.Protect) ([]events.Event, error) {
	if err := idempotent(s, c.ClientOrderID); err != nil {
		return nil, err
	}
	if c.Plan == nil {
		return nil, fmt.Errorf("account: protect without a loaded plan")
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs)
	}
	if c.Instrument != "" {
		return protectPosition(s, env, c)
	}
	w, sp, basis, err := protectedEntry(s, c, func(w *Working) bool { return w.BracketID != "" })
	if err != nil {
		return nil, err
	}
	entryID := env.DerivedID("e", 0)
	set, err := openBracket(env, c.ClientOrderID, w.Instrument, w.Side, w.Quantity.Sub(w.Filled), basis, sp, c.Plan, entryID)
	if err != nil {
		return nil, err
	}
	_, rest := rerest(env, w, set.Bracket.ID)
	return append([]events.Event{set}, rest...), nil
}

// decideWithdraw cancels every order a bracket rests and ends it; the
// position stays. A resting entry it waits on rests again without it (a hold
// refuses that replacement, and so the withdrawal).
func decideWithdraw(s *State, env commands.Envelope, c *trading.WithdrawBracket) ([]events.Event, error) {
	bk, ok := s.Brackets[c.BracketID]
	if !ok {
		return nil, noBracket()
	}
	evs := []events.Event{evacct.BracketEnd{BracketID: bk.ID, Reason: "withdrawn", At: env.At}}
	if w, ok := s.Working[bk.EntryOrderID]; ok {
		if hs := Holds(s, env.At); len(hs) > 0 {
			return nil, lockedRefusal(hs)
		}
		_, rest := rerest(env, w, "")
		evs = append(evs, rest...)
	}
	return evs, nil
}

// decideChange moves the levels of a bracket's legs: a leg that rests is
// replaced at its new price, a pre_armed leg is repriced in the record. A
// resting entry the bracket waits on rests again as a new order carrying it.
// Refused under a hold: the change replaces orders.
func decideChange(s *State, env commands.Envelope, c *trading.ChangeBracket) ([]events.Event, error) {
	cur, ok := s.Brackets[c.BracketID]
	if !ok {
		return nil, noBracket()
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs)
	}
	bk := cloneBracket(cur)
	sp := c.Market.Specs[bk.Instrument]
	var evs []events.Event
	for i, lp := range c.Legs {
		lg, err := moveLeg(bk, sp, i, lp)
		if err != nil {
			return nil, err
		}
		if lg.State == evacct.LegWorking {
			r := evacct.OrderReplaced{BrokerOrderID: lg.ID, Quantity: lg.Quantity.Sub(lg.Filled), At: env.At}
			if lg.Kind == evacct.LegStop {
				r.StopPrice = lg.Price
			} else {
				r.LimitPrice = lg.Price
			}
			evs = append(evs, r)
		}
	}
	if w, ok := s.Working[bk.EntryOrderID]; ok {
		id, rest := rerest(env, w, bk.ID)
		bk.EntryOrderID = id
		for i := range bk.Legs {
			if bk.Legs[i].State == evacct.LegPreArmed {
				bk.Legs[i].ParentOrderID = id
			}
		}
		evs = append(rest, evs...)
	}
	return append([]events.Event{evacct.BracketSet{Bracket: *bk}}, evs...), nil
}

// bracketEntry is the exit plan of an order: its bracket, priced at the
// market entry's touch (refused past the drift bound from the preview) or
// at the limit price, pre_armed on the entry o.
func bracketEntry(env commands.Envelope, c *trading.PlaceOrder, sp trading.Spec, q trading.Quote, o *evacct.Order) (events.Event, error) {
	basis := trading.EntryBasis(order.Type(c.OrderType), order.Side(c.Side), c.LimitPrice, trading.Touch{Bid: q.Bid, Ask: q.Ask})
	return entryBracket(env, c, sp, basis, o)
}

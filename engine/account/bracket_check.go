package account

import (
	"fmt"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// The checks and openings that the paper book's bracket decisions and a
// provider account's share: what differs between them is what happens to
// the orders, never which bracket is accepted.

// entryBracket opens the exit plan of order o at basis, pre_armed on o,
// and marks o as its entry. A market entry is refused past the drift bound
// from the previewed entry.
func entryBracket(env commands.Envelope, c *trading.PlaceOrder, sp trading.Spec, basis events.Decimal, o *evacct.Order) (events.Event, error) {
	if !order.Type(c.OrderType).Spec().Rests() {
		if err := drift(sp, c.Bracket.Entry, basis); err != nil {
			return nil, err
		}
	}
	set, err := openBracket(env, "", c.Instrument, c.Side, c.Quantity, basis, sp, c.Bracket, o.BrokerOrderID)
	if err != nil {
		return nil, err
	}
	o.BracketID = set.Bracket.ID
	return set, nil
}

// protectPosition opens a bracket from c.Plan on the position in
// c.Instrument, for all of it and priced from its average price; it waits
// on no entry. Refused when there is no such position.
func protectPosition(s *State, env commands.Envelope, c *trading.Protect) ([]events.Event, error) {
	p, ok := s.Positions[c.Instrument]
	if !ok {
		return nil, commands.Refuse(commands.CodePositionNotClosable,
			"there is no position in the instrument to protect", map[string]any{"instrument": c.Instrument})
	}
	sp, err := spec(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	side := order.Buy
	if p.Quantity.Sign() < 0 {
		side = order.Sell
	}
	set, err := openBracket(env, c.ClientOrderID, c.Instrument, string(side), p.Quantity.Abs(), p.AvgPrice, sp, c.Plan, "")
	if err != nil {
		return nil, err
	}
	return []events.Event{set}, nil
}

// protectedEntry is the resting entry c.EntryOrderID names, its
// instrument's spec and the price a bracket on it is set from (its limit,
// else its stop). Refused when there is no such order, when bracketed
// reports it waits on a bracket already, or when it is reduce-only or a
// market order.
func protectedEntry(s *State, c *trading.Protect, bracketed func(*Working) bool) (*Working, trading.Spec, events.Decimal, error) {
	w, ok := s.Working[c.EntryOrderID]
	if !ok {
		return nil, trading.Spec{}, events.Decimal{}, commands.Refuse(commands.CodeNotFound, "no working order with that entryOrderId", nil)
	}
	var err error
	switch {
	case bracketed(w):
		err = commands.InvalidField("entryOrderId", nil, "the order is part of a bracket already: change or withdraw that bracket")
	case w.ReduceOnly:
		err = commands.InvalidField("entryOrderId", nil, "a reduce-only order is not an entry")
	case !order.Type(w.OrderType).Spec().Rests():
		err = commands.InvalidField("entryOrderId", nil, "a market order does not rest")
	}
	if err != nil {
		return nil, trading.Spec{}, events.Decimal{}, err
	}
	sp, err := spec(c.Market, w.Instrument)
	if err != nil {
		return nil, trading.Spec{}, events.Decimal{}, err
	}
	return w, sp, *level(w.Order), nil
}

// moveLeg gives the leg of bk that lp names (the i-th of a change) its new
// level and returns it. Refused for a leg not of bk, a runner, a leg that
// ended, or a price off sp's tick.
func moveLeg(bk *evacct.Bracket, sp trading.Spec, i int, lp trading.LegPrice) (*evacct.BracketLeg, error) {
	f := fmt.Sprintf("legs[%d]", i)
	j := legIndex(bk, lp.ID)
	if j < 0 {
		return nil, commands.InvalidField(f+".id", nil, "%s is not a leg of this bracket", lp.ID)
	}
	lg := &bk.Legs[j]
	if lg.Kind == evacct.LegRunner || (lg.State != evacct.LegPreArmed && lg.State != evacct.LegWorking) {
		return nil, commands.InvalidField(f+".id", nil, "leg %s has no level to move (a runner, or a leg that ended)", lp.ID)
	}
	px := lp.Price
	if err := sp.CheckOrder(nil, &px, nil); err != nil {
		return nil, commands.InvalidField(f+".price", nil, "%s.price is off the instrument's tick %s", f, sp.TickSize)
	}
	lg.Price = &px
	return lg, nil
}

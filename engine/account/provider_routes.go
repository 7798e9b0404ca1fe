package account

import (
	"fmt"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// The routes of a provider account beyond the order, cancel and close:
// replace, flatten and reverse. Each records intents only (the provider
// reactor sends each once, by its client order id); their outcomes come
// back as settlements and observations, like an order's.

// linkedRefusal refuses a new order on an account no longer linked.
func linkedRefusal(p *Provider) error {
	if p.Linked {
		return nil
	}
	return commands.Refuse(commands.CodeNotFound, "the account is no longer linked to its provider", nil)
}

// placeIntent is the intent to place o under the engine's clientOrderId.
func placeIntent(s *State, env commands.Envelope, o evacct.Order) evacct.OrderIntended {
	return evacct.OrderIntended{Op: evacct.IntentPlace, ProviderClientOrderID: provider.ClientOrderID(s.ID, o.ClientOrderID), Order: o, At: env.At}
}

// decideProviderReplace changes a resting limit order in place at the
// provider (the one kind it modifies natively): the intent is the order as
// changed; the book changes when the provider's answer is recorded.
func decideProviderReplace(s *State, env commands.Envelope, c *trading.ReplaceOrder) ([]events.Event, error) {
	p := s.Provider
	w, ok := s.Working[c.BrokerOrderID]
	if !ok {
		return nil, commands.Refuse(commands.CodeNotFound, "no working order with that brokerOrderId", nil)
	}
	if err := linkedRefusal(p); err != nil {
		return nil, err
	}
	if _, active := s.Brackets[w.BracketID]; active && legOrder(w.Order) {
		return nil, commands.InvalidField("brokerOrderId", nil, "the order is a leg of bracket %s: move its level with PATCH /api/trading/exits/%s", w.BracketID, w.BracketID)
	}
	if b := activeEntry(s, w.BrokerOrderID); b != nil {
		return nil, commands.InvalidField("brokerOrderId", nil, "the order is the entry of bracket %s: withdraw the bracket first, or cancel and place it again", b.ID)
	}
	if w.OrderType != string(order.Limit) || w.LimitPrice == nil {
		return nil, commands.InvalidField("brokerOrderId", nil,
			"the provider changes only limit orders in place; cancel this %s order and place it again", w.OrderType)
	}
	if c.StopPrice != nil {
		return nil, commands.Invalid("stopPrice cannot be set on a %s order", w.OrderType)
	}
	if sp, ok := c.Market.Specs[w.Instrument]; ok {
		if err := sp.CheckOrder(c.Quantity, c.LimitPrice, nil); err != nil {
			return nil, err
		}
	}
	pcoid := providerID(s, w.BrokerOrderID)
	for _, op := range []string{evacct.IntentReplace, evacct.IntentCancel} {
		if _, open := p.Intents[providercmd.IntentKey(op, pcoid)]; open {
			return nil, OutcomeUnknown()
		}
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs) // replace refuses every order while held, as on paper
	}
	nw := w.Order
	if c.Quantity != nil {
		if c.Quantity.Cmp(w.Filled) <= 0 {
			return nil, commands.Invalid("quantity must be above the %s already filled", w.Filled)
		}
		nw.Quantity = *c.Quantity
	}
	if c.LimitPrice != nil {
		lp := *c.LimitPrice
		nw.LimitPrice = &lp
	}
	if nw.Quantity.Cmp(w.Quantity) == 0 && nw.LimitPrice.Cmp(*w.LimitPrice) == 0 {
		return nil, nil // nothing changes: the answer is the order as it rests (the provider refuses an empty change)
	}
	return []events.Event{evacct.OrderIntended{Op: evacct.IntentReplace, ProviderClientOrderID: pcoid, Order: nw, At: env.At}}, nil
}

// decideProviderFlatten cancels every working order and closes every
// position: a cancel intent for each order without one open, a reduce-only
// market close for each position, its clientOrderId derived from the
// command id (the first carries the command's clientOrderId when set), so
// each goes out once; a close still open (a flatten or close before it)
// counts against its position, so a quick second flatten closes nothing twice. A provider account closes at the provider's price:
// no position stays unclosed for lack of a quote. Every bracket ends (the
// exit pass records each end once its orders are canceled).
func decideProviderFlatten(s *State, env commands.Envelope, c *trading.Flatten) ([]events.Event, error) {
	p := s.Provider
	if c.ClientOrderID != "" {
		if err := placedAgain(s, c.ClientOrderID); err != nil {
			return nil, err
		}
	}
	reason := c.Reason
	if reason == "" {
		reason = "flatten"
	}
	var out []events.Event
	for _, id := range sortedKeys(s.Brackets) { // ended by the exit pass once their orders are canceled
		out = append(out, evacct.BracketEnd{BracketID: id, Reason: "flatten", At: env.At})
	}
	for _, id := range sortedKeys(s.Working) {
		pcoid := providerID(s, id)
		if _, open := p.Intents[providercmd.IntentKey(evacct.IntentCancel, pcoid)]; open || pcoid == "" {
			continue
		}
		out = append(out, evacct.OrderIntended{Op: evacct.IntentCancel, ProviderClientOrderID: pcoid, Order: s.Working[id].Order, At: env.At})
	}
	if len(s.Positions) > 0 {
		if err := linkedRefusal(p); err != nil {
			return nil, err
		}
	}
	closing := map[string]events.Decimal{} // by instrument: what open reduce-only intents close already
	for _, in := range p.Intents {
		if in.Op == evacct.IntentPlace && in.Order.ReduceOnly {
			closing[in.Order.Instrument] = closing[in.Order.Instrument].Add(in.Order.Quantity)
		}
	}
	key := c.ClientOrderID
	for i, inst := range sortedKeys(s.Positions) {
		pos := s.Positions[inst]
		qty := pos.Quantity.Abs().Sub(closing[inst])
		if qty.Sign() <= 0 {
			continue // a close under way covers it: not sent twice
		}
		coid := fmt.Sprintf("%s-%s", reason, env.DerivedID("c", i))
		if key != "" {
			coid, key = key, ""
		}
		o := evacct.Order{BrokerOrderID: env.DerivedID("c", i), ClientOrderID: coid, Instrument: inst, Side: sideToClose(pos),
			OrderType: string(order.Market), Quantity: qty, TimeInForce: "gtc", ReduceOnly: true, CreatedAt: env.At}
		out = append(out, placeIntent(s, env, o))
	}
	return out, nil
}

// decideProviderReverse turns a position around as on paper: one market
// order for twice its size, the other way, under the request's
// clientOrderId. On a one-way (net) account the provider closes the
// position and opens the opposite one with that single order, so the
// turn is one intent that succeeds or fails whole.
func decideProviderReverse(s *State, env commands.Envelope, c *trading.Reverse) ([]events.Event, error) {
	p := s.Provider
	if err := placedAgain(s, c.ClientOrderID); err != nil {
		return nil, err
	}
	if err := linkedRefusal(p); err != nil {
		return nil, err
	}
	if err := modeRefusal(p, c.Instrument); err != nil {
		return nil, err
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs) // reverse refuses every order while held
	}
	pos, ok := s.Positions[c.Instrument]
	if !ok {
		return nil, notClosable(c.Instrument)
	}
	qty := pos.Quantity.Abs()
	o := evacct.Order{BrokerOrderID: env.ID.String(), ClientOrderID: c.ClientOrderID, Instrument: c.Instrument, Side: sideToClose(pos),
		OrderType: string(order.Market), Quantity: qty.Add(qty), TimeInForce: "gtc", CreatedAt: env.At}
	return []events.Event{placeIntent(s, env, o)}, nil
}

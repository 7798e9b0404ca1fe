package account

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/svc/engine/commands"
	tcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	ev "github.com/svc/engine/events/account"
)

// Decide runs one command against the state and returns the events to commit,
// or a *commands.Refusal. It is pure: time, ids, quotes and specs come in env.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	if _, opening := env.Cmd.(*tcmd.OpenAccount); !opening && !s.Open {
		return nil, commands.Refuse(http.StatusNotFound, "not_found", "account not found", nil)
	}
	switch c := env.Cmd.(type) {
	case *tcmd.OpenAccount:
		if s.Open {
			return nil, nil // opening twice changes nothing
		}
		return []events.Event{ev.Opened{
			AccountID: s.ID, TenantID: c.TenantID, Broker: c.Broker, AccountNumber: c.AccountNumber,
			Label: c.Label, Currency: c.Currency, StartingBalance: c.StartingBalance, Kind: c.Kind,
			Email: c.Email, ReferenceID: c.ReferenceID, At: env.At,
		}}, nil
	case *trading.PlaceOrder:
		return decidePlace(s, env, c)
	case *trading.CancelOrder:
		w, ok := s.Working[c.BrokerOrderID]
		if !ok {
			return nil, commands.Refuse(http.StatusNotFound, "not_found", "no working order with that brokerOrderId", nil)
		}
		return []events.Event{ev.OrderCanceled{BrokerOrderID: w.BrokerOrderID, Reason: "requested", At: env.At}}, nil
	case *trading.ReplaceOrder:
		return decideReplace(s, env, c)
	case *trading.ClosePosition:
		return decideClose(s, env, c)
	case *trading.Flatten:
		return decideFlatten(s, env, c)
	case *trading.Reverse:
		return decideReverse(s, env, c)
	case *trading.FillWorking:
		return decideWorking(s, env, c.Quote), nil
	case *trading.ExpireDayOrders:
		var evs []events.Event
		start := DayStart(env.At)
		for _, id := range sortedKeys(s.Working) {
			if w := s.Working[id]; w.TimeInForce == "day" && w.CreatedAt.Before(start) {
				evs = append(evs, ev.OrderCanceled{BrokerOrderID: id, Reason: "expired", At: env.At})
			}
		}
		return evs, nil
	}
	if evs, ok, err := decideRisk(s, env); ok {
		return evs, err
	}
	if evs, ok, err := decideFirm(s, env); ok {
		return evs, err
	}
	return nil, fmt.Errorf("account: no decision for %T", env.Cmd)
}

// idempotent refuses a clientOrderId the account accepted before, forever.
func idempotent(s *State, clientOrderID string) error {
	if id, used := s.ClientOrderIDs[clientOrderID]; used {
		return commands.Refuse(http.StatusConflict, "idempotency_conflict",
			"clientOrderId was already used on this account; the earlier order stands",
			map[string]any{"clientOrderId": clientOrderID, "brokerOrderId": id})
	}
	return nil
}

func spec(m trading.Market, instrument string) (trading.Spec, error) {
	sp, ok := m.Specs[instrument]
	if !ok {
		return sp, commands.Refuse(http.StatusUnprocessableEntity, "instrument_not_permitted",
			"instrument is not tradable on this account", map[string]any{"instrument": instrument})
	}
	return sp, nil
}

func quote(m trading.Market, instrument string) (trading.Quote, error) {
	q, ok := m.Quotes[instrument]
	if !ok {
		return q, commands.Refuse(http.StatusUnprocessableEntity, "market_data_unavailable",
			"no price has arrived for the instrument yet", map[string]any{"cause": "mark_missing", "instrument": instrument})
	}
	return q, nil
}

func signed(side string, qty events.Decimal) events.Decimal {
	if side == "sell" {
		return qty.Neg()
	}
	return qty
}

func opposite(side string) string {
	if side == "buy" {
		return "sell"
	}
	return "buy"
}

// reduces reports whether an order of side and qty only reduces position p.
func reduces(p ev.Position, side string, qty events.Decimal) bool {
	sq := signed(side, qty)
	return !p.Quantity.IsZero() && p.Quantity.Sign() != sq.Sign() && qty.Cmp(p.Quantity.Abs()) <= 0
}

func decidePlace(s *State, env commands.Envelope, c *trading.PlaceOrder) ([]events.Event, error) {
	if err := idempotent(s, c.ClientOrderID); err != nil {
		return nil, err
	}
	sp, err := spec(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	if err := gate(s, env.At, c.Instrument, c.Side, c.OrderType, c.Quantity, c.ReduceOnly); err != nil {
		return nil, err
	}
	if sp.MaxQuantity.Sign() > 0 && c.Quantity.Cmp(sp.MaxQuantity) > 0 {
		return nil, commands.Refuse(http.StatusUnprocessableEntity, "order_quantity_above_limit",
			"quantity is above the instrument's per-order limit",
			map[string]any{"instrument": c.Instrument, "limit": sp.MaxQuantity.String()})
	}
	if c.ReduceOnly {
		p := s.Positions[c.Instrument]
		if p.Quantity.IsZero() || p.Quantity.Sign() == signed(c.Side, c.Quantity).Sign() {
			return nil, commands.Refuse(http.StatusUnprocessableEntity, "position_not_closable",
				"a reduce-only order needs an opposite position to reduce", map[string]any{"instrument": c.Instrument})
		}
		if c.Quantity.Cmp(p.Quantity.Abs()) > 0 {
			return nil, commands.Invalid("a reduce-only order may not exceed the position's size")
		}
	}
	q, err := quote(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	o := ev.Order{
		BrokerOrderID: env.ID.String(), ClientOrderID: c.ClientOrderID, Instrument: c.Instrument,
		Side: c.Side, OrderType: c.OrderType, Quantity: c.Quantity, LimitPrice: c.LimitPrice,
		StopPrice: c.StopPrice, TimeInForce: c.TimeInForce, ReduceOnly: c.ReduceOnly, CreatedAt: env.At,
	}
	b := newBook(s, env, c.Market)
	b.add(ev.OrderPlaced{Order: o})
	w := &Working{Order: o}
	if !b.match(w, q) && (o.TimeInForce == "ioc" || o.TimeInForce == "fok") {
		b.add(ev.OrderCanceled{BrokerOrderID: o.BrokerOrderID, Reason: o.TimeInForce, At: env.At})
	}
	return b.out, nil
}

func decideReplace(s *State, env commands.Envelope, c *trading.ReplaceOrder) ([]events.Event, error) {
	w, ok := s.Working[c.BrokerOrderID]
	if !ok {
		return nil, commands.Refuse(http.StatusNotFound, "not_found", "no working order with that brokerOrderId", nil)
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs) // replace refuses every order while held
	}
	r := ev.OrderReplaced{BrokerOrderID: w.BrokerOrderID, Quantity: w.Quantity, At: env.At}
	if c.Quantity != nil {
		if c.Quantity.Cmp(w.Filled) <= 0 {
			return nil, commands.Invalid("quantity must be above the %s already filled", w.Filled)
		}
		r.Quantity = *c.Quantity
	}
	if c.LimitPrice != nil {
		if w.LimitPrice == nil {
			return nil, commands.Invalid("limitPrice cannot be set on a %s order", w.OrderType)
		}
		r.LimitPrice = c.LimitPrice
	}
	if c.StopPrice != nil {
		if w.StopPrice == nil || w.Triggered {
			return nil, commands.Invalid("stopPrice cannot be set on this order")
		}
		r.StopPrice = c.StopPrice
	}
	b := newBook(s, env, c.Market)
	b.add(r)
	nw := *w
	nw.Quantity = r.Quantity
	if r.LimitPrice != nil {
		nw.LimitPrice = r.LimitPrice
	}
	if r.StopPrice != nil {
		nw.StopPrice = r.StopPrice
	}
	if q, ok := c.Market.Quotes[w.Instrument]; ok {
		b.match(&nw, q)
	}
	return b.out, nil
}

func notClosable(instrument string) error {
	return commands.Refuse(http.StatusUnprocessableEntity, "position_not_closable",
		"there is no position in the instrument to close", map[string]any{"instrument": instrument})
}

func decideClose(s *State, env commands.Envelope, c *trading.ClosePosition) ([]events.Event, error) {
	p, ok := s.Positions[c.Instrument]
	if !ok {
		return nil, notClosable(c.Instrument)
	}
	qty := p.Quantity.Abs()
	if c.Quantity != nil {
		if c.Quantity.Cmp(qty) > 0 {
			return nil, commands.Invalid("quantity %s is above the position's size %s", c.Quantity, qty)
		}
		qty = *c.Quantity
	}
	q, err := quote(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	b := newBook(s, env, c.Market)
	b.market(env.DerivedID("c", 0), "close-"+env.ID.String(), c.Instrument, sideToClose(p), qty, true, q)
	return b.out, nil
}

func sideToClose(p ev.Position) string {
	if p.Quantity.Sign() > 0 {
		return "sell"
	}
	return "buy"
}

func decideFlatten(s *State, env commands.Envelope, c *trading.Flatten) ([]events.Event, error) {
	reason := c.Reason
	if reason == "" {
		reason = "flatten"
	}
	b := newBook(s, env, c.Market)
	b.flatten(reason, c.Market.Quotes)
	return b.out, nil
}

// flatten cancels every working order and closes every position that has a
// quote at the touch; it returns how many positions stay open for lack of a price.
func (b *book) flatten(reason string, quotes map[string]trading.Quote) (unclosed int) {
	s, env := b.s, b.env
	for _, id := range sortedKeys(s.Working) {
		b.add(ev.OrderCanceled{BrokerOrderID: id, Reason: reason, At: env.At})
	}
	for i, inst := range sortedKeys(s.Positions) {
		p := s.Positions[inst]
		q, ok := quotes[inst]
		if !ok {
			unclosed++
			continue // no price: the position stays; the answer lists it as unclosed
		}
		b.market(env.DerivedID("c", i), fmt.Sprintf("%s-%s", reason, env.DerivedID("c", i)), inst, sideToClose(p), p.Quantity.Abs(), true, q)
	}
	return unclosed
}

func decideReverse(s *State, env commands.Envelope, c *trading.Reverse) ([]events.Event, error) {
	if err := idempotent(s, c.ClientOrderID); err != nil {
		return nil, err
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs) // reverse refuses every order while held
	}
	p, ok := s.Positions[c.Instrument]
	if !ok {
		return nil, notClosable(c.Instrument)
	}
	if _, err := spec(c.Market, c.Instrument); err != nil {
		return nil, err
	}
	q, err := quote(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	b := newBook(s, env, c.Market)
	b.market(env.ID.String(), c.ClientOrderID, c.Instrument, sideToClose(p), p.Quantity.Abs().Add(p.Quantity.Abs()), false, q)
	return b.out, nil
}

func decideWorking(s *State, env commands.Envelope, q trading.Quote) []events.Event {
	b := newBook(s, env, trading.Market{})
	for _, id := range sortedKeys(s.Working) {
		w := *s.Working[id]
		if w.Instrument != q.Instrument {
			continue
		}
		if w.ReduceOnly {
			p := b.position(w.Instrument)
			if p.Quantity.IsZero() || p.Quantity.Sign() == signed(w.Side, w.Quantity).Sign() {
				b.add(ev.OrderCanceled{BrokerOrderID: w.BrokerOrderID, Reason: "reduce_only", At: env.At})
				continue
			}
		}
		b.match(&w, q)
	}
	return b.out
}

// DayStart is the start of the paper book's trading day holding t: 00:00 UTC.
// `day` orders placed before it have expired.
func DayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

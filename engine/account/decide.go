package account

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Decide runs one command against the state and returns the events to commit,
// or a *commands.Refusal. It is pure: time, ids, quotes and specs come in env.
// Every decision ends with the bracket pass (bracket.go).
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	if c, ok := env.Cmd.(*challengecmd.OpenEvaluation); ok {
		return decideOpenEvaluation(s, env, c)
	}
	if evs, ok, err := decideProvider(s, env); ok { // provider.go
		return evs, err
	}
	evs, err := decide(s, env)
	if err != nil {
		return nil, err
	}
	var q *trading.Quote
	if c, ok := env.Cmd.(*trading.FillWorking); ok {
		q = &c.Quote
	}
	evs = append(evs, bindPolicy(s, env)...)
	if _, rebase := env.Cmd.(*trading.Rebase); len(evs) == 0 && q == nil && !rebase {
		return append(evs, evaluate(s, env, evs)...), nil
	}
	evs = settleBrackets(s, env, evs, q)
	return append(evs, evaluate(s, env, evs)...), nil // the evaluation's verdicts (eval.go)
}

func decide(s *State, env commands.Envelope) ([]events.Event, error) {
	if _, opening := env.Cmd.(*tenantcmd.OpenAccount); !opening && !s.Open {
		return nil, commands.Refuse(commands.CodeNotFound, "account not found", nil)
	}
	switch c := env.Cmd.(type) {
	case *tenantcmd.OpenAccount:
		open := evacct.Opened{
			AccountID: s.ID, TenantID: c.TenantID, Broker: c.Broker, AccountNumber: c.AccountNumber,
			Label: c.Label, Currency: c.Currency, StartingBalance: c.StartingBalance, Kind: c.Kind,
			Email: c.Email, ReferenceID: c.ReferenceID, VenueID: c.VenueID, GroupID: c.GroupID, StageVersion: c.StageVersion,
			AppID: c.AppID, Trader: c.Trader, At: env.At,
		}
		if c.VenueID != "" && env.Digest != "" {
			// Issued through the venue door: keyed like every venue write, the answer recorded.
			return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
				if s.Open {
					return nil, 0, nil, commands.Refuse(commands.CodeIdempotencyConflict, "this account exists already", nil)
				}
				z := events.Int(0)
				evs := []events.Event{open}
				if c.PolicyID != "" {
					evs = append(evs, evacct.RiskPolicyBound{PolicyID: c.PolicyID, Version: c.PolicyVersion,
						DailyLossLimit: c.DailyLossLimit, WeeklyLossLimit: c.WeeklyLossLimit, At: env.At})
				}
				return evs, commands.Created, map[string]any{"account": venuecmd.AccountView(s.ID, c.AccountNumber, c.Label,
					c.GroupID, c.Currency, c.StartingBalance, c.StartingBalance, z, env.At)}, nil
			})
		}
		if s.Open {
			return nil, reopen(s, c) // opening twice with the same request changes nothing
		}
		return []events.Event{open}, nil
	case *trading.PlaceOrder:
		return decidePlace(s, env, c)
	case *trading.CancelOrder:
		w, ok := s.Working[c.BrokerOrderID]
		if !ok {
			return nil, commands.Refuse(commands.CodeNotFound, "no working order with that brokerOrderId", nil)
		}
		return []events.Event{evacct.OrderCanceled{BrokerOrderID: w.BrokerOrderID, Reason: "requested", At: env.At}}, nil
	case *trading.ReplaceOrder:
		return decideReplace(s, env, c)
	case *trading.ClosePosition:
		return decideClose(s, env, c)
	case *trading.Flatten:
		return decideFlatten(s, env, c)
	case *trading.Reverse:
		return decideReverse(s, env, c)
	case *trading.FillWorking:
		return decideWorking(s, env, c.Quote, c.Terms, c.TradedThrough, c.Touched), nil
	case *trading.Rebase:
		return nil, nil // the bracket pass anchors them (bracket.go)
	case *trading.Protect:
		return decideProtect(s, env, c)
	case *trading.WithdrawBracket:
		return decideWithdraw(s, env, c)
	case *trading.ChangeBracket:
		return decideChange(s, env, c)
	case *trading.ExpireDayOrders:
		var evs []events.Event
		start := DayStart(env.At)
		for _, id := range sortedKeys(s.Working) {
			if w := s.Working[id]; order.TIF(w.TimeInForce) == order.Day && w.CreatedAt.Before(start) {
				evs = append(evs, evacct.OrderCanceled{BrokerOrderID: id, Reason: "expired", At: env.At})
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
	if evs, ok, err := decideChallenge(s, env); ok {
		return evs, err
	}
	return nil, fmt.Errorf("account: no decision for %T", env.Cmd)
}

// idempotent refuses a clientOrderId the account accepted before, forever.
func idempotent(s *State, clientOrderID string) error {
	id, used, err := s.OrderFor(clientOrderID)
	if err != nil {
		return err
	}
	if used {
		return commands.Refuse(commands.CodeIdempotencyConflict,
			"clientOrderId was already used on this account; the earlier order stands",
			map[string]any{"clientOrderId": clientOrderID, "brokerOrderId": id})
	}
	return nil
}

func spec(m trading.Market, instrument string) (trading.Spec, error) {
	sp, ok := m.Specs[instrument]
	if !ok {
		return sp, commands.Refuse(commands.CodeInstrumentNotPermitted,
			"instrument is not tradable on this account", map[string]any{"instrument": instrument})
	}
	return sp, nil
}

func quote(m trading.Market, instrument string) (trading.Quote, error) {
	q, ok := m.Quotes[instrument]
	if !ok {
		return q, commands.Refuse(commands.CodeMarketDataUnavailable,
			"no price has arrived for the instrument yet", map[string]any{"cause": "mark_missing", "instrument": instrument})
	}
	return q, nil
}

func signed(side string, qty events.Decimal) events.Decimal {
	if order.Side(side) == order.Sell {
		return qty.Neg()
	}
	return qty
}

func opposite(side string) string { return string(order.Side(side).Opposite()) }

// reduces reports whether an order of side and qty only reduces position p.
func reduces(p evacct.Position, side string, qty events.Decimal) bool {
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
	if err := sp.CheckOrder(&c.Quantity, c.LimitPrice, c.StopPrice); err != nil {
		return nil, err
	}
	if err := gate(s, env.At, c.Instrument, c.Side, c.OrderType, c.Quantity, c.ReduceOnly); err != nil {
		return nil, err
	}
	terms, err := venueTerms(s, c.Market, c.Instrument, c.Side, c.OrderType, c.Quantity, c.ReduceOnly)
	if err != nil {
		return nil, err
	}
	if sp.MaxQuantity.Sign() > 0 && c.Quantity.Cmp(sp.MaxQuantity) > 0 {
		return nil, commands.Refuse(commands.CodeOrderQuantityAboveLimit,
			"quantity is above the instrument's per-order limit",
			map[string]any{"instrument": c.Instrument, "limit": sp.MaxQuantity.String()})
	}
	if c.ReduceOnly {
		p := s.Positions[c.Instrument]
		if p.Quantity.IsZero() || p.Quantity.Sign() == signed(c.Side, c.Quantity).Sign() {
			return nil, commands.Refuse(commands.CodePositionNotClosable,
				"a reduce-only order needs an opposite position to reduce", map[string]any{"instrument": c.Instrument})
		}
		if c.Quantity.Cmp(p.Quantity.Abs()) > 0 {
			return nil, commands.InvalidField("quantity", nil, "a reduce-only order may not exceed the position's size")
		}
	}
	q, err := quote(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	o := evacct.Order{
		BrokerOrderID: env.ID.String(), ClientOrderID: c.ClientOrderID, Instrument: c.Instrument,
		Side: c.Side, OrderType: c.OrderType, Quantity: c.Quantity, LimitPrice: c.LimitPrice,
		StopPrice: c.StopPrice, TimeInForce: c.TimeInForce, ReduceOnly: c.ReduceOnly, CreatedAt: env.At,
		LeaderOrderID: c.LeaderOrderID,
	}
	if terms != nil {
		o.TermsRevision = terms.Revision
	}
	b := newBook(s, env, c.Market)
	if c.Bracket != nil {
		set, err := bracketEntry(env, c, sp, q, &o)
		if err != nil {
			return nil, err
		}
		b.add(set)
	}
	b.add(evacct.OrderPlaced{Order: o})
	w := &Working{Order: o}
	if !b.match(w, q) && order.TIF(o.TimeInForce).Immediate() {
		b.add(evacct.OrderCanceled{BrokerOrderID: o.BrokerOrderID, Reason: o.TimeInForce, At: env.At})
	}
	return b.out, nil
}

func decideReplace(s *State, env commands.Envelope, c *trading.ReplaceOrder) ([]events.Event, error) {
	w, ok := s.Working[c.BrokerOrderID]
	if !ok {
		return nil, commands.Refuse(commands.CodeNotFound, "no working order with that brokerOrderId", nil)
	}
	if w.BracketID != "" {
		if w.ReduceOnly {
			return nil, commands.InvalidField("brokerOrderId", nil, "the order is a leg of bracket %s: move its level with PATCH /api/trading/exits/%s", w.BracketID, w.BracketID)
		}
		return nil, commands.InvalidField("brokerOrderId", nil, "the order is the entry of bracket %s: withdraw the bracket first, or cancel and place it again", w.BracketID)
	}
	if sp, ok := c.Market.Specs[w.Instrument]; ok {
		if err := sp.CheckOrder(c.Quantity, c.LimitPrice, c.StopPrice); err != nil {
			return nil, err
		}
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs) // replace refuses every order while held
	}
	r := evacct.OrderReplaced{BrokerOrderID: w.BrokerOrderID, Quantity: w.Quantity, At: env.At}
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
	return commands.Refuse(commands.CodePositionNotClosable,
		"there is no position in the instrument to close", map[string]any{"instrument": instrument})
}

// decideClose closes all or part of a position with a reduce-only market
// order. A clientOrderId, when sent, is used once (409 after); a partial
// close fits the instrument's lot step and minimum, a whole close always does.
func decideClose(s *State, env commands.Envelope, c *trading.ClosePosition) ([]events.Event, error) {
	coid := "close-" + env.ID.String()
	if c.ClientOrderID != "" {
		if err := idempotent(s, c.ClientOrderID); err != nil {
			return nil, err
		}
		coid = c.ClientOrderID
	}
	p, ok := s.Positions[c.Instrument]
	if !ok {
		return nil, notClosable(c.Instrument)
	}
	qty := p.Quantity.Abs()
	if c.Quantity != nil {
		if c.Quantity.Cmp(qty) > 0 {
			return nil, commands.InvalidField("quantity", nil, "quantity %s is above the position's size %s", c.Quantity, qty)
		}
		if sp, ok := c.Market.Specs[c.Instrument]; ok && c.Quantity.Cmp(qty) < 0 {
			if err := sp.CheckOrder(c.Quantity, nil, nil); err != nil {
				return nil, err
			}
		}
		qty = *c.Quantity
	}
	q, err := quote(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	b := newBook(s, env, c.Market)
	b.market(env.DerivedID("c", 0), coid, c.Instrument, sideToClose(p), qty, true, q)
	return b.out, nil
}

func sideToClose(p evacct.Position) string {
	if p.Quantity.Sign() > 0 {
		return string(order.Sell)
	}
	return string(order.Buy)
}

// decideFlatten cancels and closes everything; a clientOrderId, when sent, is
// used once (409 after) and names the first closing order.
func decideFlatten(s *State, env commands.Envelope, c *trading.Flatten) ([]events.Event, error) {
	if c.ClientOrderID != "" {
		if err := idempotent(s, c.ClientOrderID); err != nil {
			return nil, err
		}
	}
	reason := c.Reason
	if reason == "" {
		reason = "flatten"
	}
	b := newBook(s, env, c.Market)
	b.flatten(reason, c.ClientOrderID, c.Market.Quotes)
	return b.out, nil
}

// flatten cancels every working order and closes every position that has a
// quote at the touch; it returns how many positions stay open for lack of a
// price. The first closing order carries key as its clientOrderId when key is
// set; the others carry ids derived from the command id.
func (b *book) flatten(reason, key string, quotes map[string]trading.Quote) (unclosed int) {
	s, env := b.s, b.env
	for _, id := range sortedKeys(s.Brackets) {
		b.add(evacct.BracketEnd{BracketID: id, Reason: "flatten", At: env.At})
	}
	for _, id := range sortedKeys(s.Working) {
		b.add(evacct.OrderCanceled{BrokerOrderID: id, Reason: reason, At: env.At})
	}
	for i, inst := range sortedKeys(s.Positions) {
		p := s.Positions[inst]
		q, ok := quotes[inst]
		if !ok {
			unclosed++
			continue // no price: the position stays; the answer lists it as unclosed
		}
		coid := fmt.Sprintf("%s-%s", reason, env.DerivedID("c", i))
		if key != "" {
			coid, key = key, ""
		}
		b.market(env.DerivedID("c", i), coid, inst, sideToClose(p), p.Quantity.Abs(), true, q)
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
	if _, err := venueTerms(s, c.Market, c.Instrument, sideToClose(p), string(order.Market), p.Quantity.Abs().Add(p.Quantity.Abs()), false); err != nil {
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

func decideWorking(s *State, env commands.Envelope, q trading.Quote, terms map[string]*trading.Terms, through, touched []string) []events.Event {
	b := newBook(s, env, trading.Market{Terms: terms})
	b.through, b.touched = through, touched
	for _, id := range sortedKeys(s.Working) {
		w := *s.Working[id]
		if w.Instrument != q.Instrument {
			continue
		}
		if w.ReduceOnly {
			p := b.position(w.Instrument)
			if p.Quantity.IsZero() || p.Quantity.Sign() == signed(w.Side, w.Quantity).Sign() {
				b.add(evacct.OrderCanceled{BrokerOrderID: w.BrokerOrderID, Reason: "reduce_only", At: env.At})
				continue
			}
		}
		if id := w.BracketID; id != "" && len(q.Path) > 0 && !w.Triggered && w.StopPrice != nil {
			// A stop its rules moved up the path and a later quote of it
			// traded through: recorded at that level, then triggered there.
			var lg *evacct.BracketLeg
			if br := s.Brackets[id]; br != nil {
				lg = br.StopLeg()
			}
			if lg != nil && lg.ID == w.BrokerOrderID {
				path := q.Path
				var seed *events.Decimal                      // the best of the quotes before the path, since it rested
				if i, ok := q.PathFrom[w.BrokerOrderID]; ok { // quotes before it rested where it is do not count
					path = path[min(max(i, 0), len(path)):]
				} else if p, ok := q.PathBest[w.BrokerOrderID]; ok {
					seed = &p
				}
				if mb, ok := s.Brackets[id].MarksBest(q.Marks); ok && (seed == nil || s.Brackets[id].Favours(mb, *seed)) {
					seed = &mb // the marks since its anchor moved it before the path (a start since)
				}
				if level, ok := pathTrigger(s.Brackets[id], seed, path); ok {
					if level.Cmp(*w.StopPrice) != 0 { // recorded with its quantity as the bracket pass replaces it
						b.add(evacct.OrderReplaced{BrokerOrderID: w.BrokerOrderID, Quantity: lg.Quantity.Sub(lg.Filled), StopPrice: &level, At: env.At})
						w.StopPrice = &level
					}
					b.through = append(slices.Clip(b.through), w.BrokerOrderID)
				}
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

// reopen answers an OpenAccount for an account that is open already: nothing
// when the request is the one that opened it, 409 idempotency_conflict when
// its key (the account id, derived from the caller's reference) was used with
// a different request; the original account stands.
func reopen(s *State, c *tenantcmd.OpenAccount) error {
	if s.Email == c.Email && s.Currency == c.Currency && s.Label == c.Label &&
		s.StartingBalance.Cmp(c.StartingBalance) == 0 && s.TenantID == c.TenantID {
		return nil
	}
	return commands.Refuse(commands.CodeIdempotencyConflict,
		"referenceId was already used with a different request; the original account stands", nil)
}

package account

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// Exit plans and brackets on a provider account.
//
// A bracket is recorded as on the paper book (BracketSet, BracketEnd, the
// same legs and states): its legs are what the engine wants to rest. Their
// orders are the provider's own reduce-only orders, a stop leg a stop
// (Binance: STOP_MARKET) and a target a take-profit trigger
// (TAKE_PROFIT_MARKET), both on the mark price; the book shows a target as
// a reduce-only limit at its level, as on paper. Each placement is an
// intent (IntentExit) under a client order id derived from the order's own
// id, so every leg order goes out exactly once; a lost answer is settled
// by lookup like every intent. The provider keeps no OCO (NativeOco false):
// the engine does, from what it observes.
//
// After every decision on a provider account the exit pass reads the
// decision's events, as the paper book's bracket pass does, and then makes
// the provider's book meet the brackets:
//   - an entry's fills arm the legs for what filled (a market entry's legs
//     move with its first fill's price, on the tick); a position's bracket
//     arms at once;
//   - a target's fill shrinks the stop, the stop's fill ends the bracket, a
//     position closed or turned by anything ends it; an ended bracket's
//     orders are canceled (the sibling of a filled leg: the OCO);
//   - a leg whose terms changed (a resize, a trader's change) is placed
//     again as a new order, and the order it replaces is canceled only once
//     the new one rests, so the position is never left without it;
//   - a leg the provider refuses (or that could not be sent) is refused: a
//     changed leg stays as its order rests (a refused change leaves the
//     bracket as it was); a new one that did not reach the provider for a
//     passing reason (unreachable, throttled, never placed) stays working
//     and is placed again at its RetryAt (RetryExits), one the provider
//     refused is canceled (that part of the position shows unprotected;
//     the other legs rest);
//   - a cancel the provider would not carry out leaves its order resting
//     (Provider.Stuck): the bracket keeps it, is not ended while it rests,
//     and the pass does not cancel it again by itself (a withdrawal does);
//   - a leg's order the provider reports at other terms (moved there) gives
//     the leg those terms; one placement of a leg is under way at a time.
//
// A bracket ends (BracketEnd) only once none of its orders rests or is
// being placed. Breakeven and trailing stops are not served: the engine
// moves stops only on its own book.

// IntentExit is the op of an intent to place one of a bracket's legs at
// the provider. It is a placement (the reactor sends it as one, and a lost
// answer is looked up), but its outcome is the bracket's to judge: a leg
// the provider refuses makes the bracket refused, never the command that
// armed it.
const IntentExit = "exit"

// legOrder reports whether o is the order of a bracket's leg: reduce-only
// and carrying its bracket (an entry is never reduce-only).
func legOrder(o evacct.Order) bool { return o.BracketID != "" && o.ReduceOnly }

// providerCOID is the provider's client order id of an order of the
// account: derived from the engine's clientOrderId, or for a leg's order
// from its own id (a leg keeps its id, the leg's, as clientOrderId across
// the orders it rests as).
func providerCOID(accountID string, o evacct.Order) string {
	if legOrder(o) {
		return provider.ClientOrderID(accountID, o.BrokerOrderID)
	}
	return provider.ClientOrderID(accountID, o.ClientOrderID)
}

// exitServed refuses a plan that needs what the engine does not serve at a
// provider: breakeven and trailing stops, which move a resting stop.
func exitServed(field string, p *trading.BracketPlan) error {
	for _, r := range evplan.Requires(p.Spec) {
		if r == evplan.CapBreakeven || r == evplan.TrailingStop {
			return commands.InvalidField(field, nil,
				"a provider account serves exit plans with a stop loss, targets and a runner; %s is served on the paper book only", r)
		}
	}
	return nil
}

// level is the price an order rests at: its limit, else its stop.
func level(o evacct.Order) *events.Decimal {
	if o.LimitPrice != nil {
		return o.LimitPrice
	}
	return o.StopPrice
}

// providerEntry is the exit plan of an order on a provider account: its
// bracket, priced at the limit price, or for a market entry at the touch
// when the engine has one (refused past the drift bound from the preview)
// or else at the previewed entry; pre_armed on the entry o.
func providerEntry(env commands.Envelope, c *trading.PlaceOrder, o *evacct.Order) (events.Event, error) {
	if c.ReduceOnly {
		return nil, commands.InvalidField("reduceOnly", nil, "a reduce-only order is not an entry: it cannot carry an exit plan")
	}
	if err := exitServed("exitPlan", c.Bracket); err != nil {
		return nil, err
	}
	sp, err := spec(c.Market, c.Instrument)
	if err != nil {
		return nil, err
	}
	typ := order.Type(c.OrderType)
	basis := c.Bracket.Entry
	if q, ok := c.Market.Quotes[c.Instrument]; ok || typ.Spec().LimitPrice {
		basis = trading.EntryBasis(typ, order.Side(c.Side), c.LimitPrice, trading.Touch{Bid: q.Bid, Ask: q.Ask})
	}
	return entryBracket(env, c, sp, basis, o)
}

// activeEntry is the active bracket waiting on the entry id, if any.
func activeEntry(s *State, id string) *evacct.Bracket {
	for _, bid := range sortedKeys(s.Brackets) {
		if b := s.Brackets[bid]; b.EntryOrderID == id {
			return b
		}
	}
	return nil
}

// decideProviderProtect opens a bracket from a saved plan on a position
// (armed at once: the exit pass places its legs in the same commit) or on
// a resting entry (pre_armed; the entry rests on unchanged at the
// provider, the bracket waits on it). A hold refuses both.
func decideProviderProtect(s *State, env commands.Envelope, c *trading.Protect) ([]events.Event, error) {
	if err := idempotent(s, c.ClientOrderID); err != nil {
		return nil, err
	}
	if c.Plan == nil {
		return nil, fmt.Errorf("account: protect without a loaded plan")
	}
	if err := linkedRefusal(s.Provider); err != nil {
		return nil, err
	}
	if err := exitServed("planId", c.Plan); err != nil {
		return nil, err
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs)
	}
	if c.Instrument != "" {
		return protectPosition(s, env, c)
	}
	w, sp, basis, err := protectedEntry(s, c, func(w *Working) bool { return activeEntry(s, w.BrokerOrderID) != nil })
	if err != nil {
		return nil, err
	}
	set, err := openBracket(env, c.ClientOrderID, w.Instrument, w.Side, w.Quantity.Sub(w.Filled), basis, sp, c.Plan, w.BrokerOrderID)
	if err != nil {
		return nil, err
	}
	return []events.Event{set}, nil
}

// decideProviderWithdraw ends a bracket: the exit pass cancels every order
// it rests and records its end once none rests. An order whose cancel did
// not go through before (stuck) is asked to cancel again. A resting entry
// it waits on rests on at the provider, without it; a hold does not refuse
// the withdrawal (nothing new is placed).
func decideProviderWithdraw(s *State, env commands.Envelope, c *trading.WithdrawBracket) ([]events.Event, error) {
	b, ok := s.Brackets[c.BracketID]
	if !ok {
		return nil, noBracket()
	}
	out := []events.Event{evacct.BracketEnd{BracketID: b.ID, Reason: "withdrawn", At: env.At}}
	for _, id := range sortedKeys(s.Working) {
		w := s.Working[id]
		if !legOrder(w.Order) || w.BracketID != b.ID || !s.Provider.Stuck[id] {
			continue
		}
		pc := providerCOID(s.ID, w.Order)
		if _, open := s.Provider.Intents[providercmd.IntentKey(evacct.IntentCancel, pc)]; !open {
			out = append(out, evacct.OrderIntended{Op: evacct.IntentCancel, ProviderClientOrderID: pc, Order: w.Order, At: env.At})
		}
	}
	return out, nil
}

// decideProviderChange moves the levels of a bracket's legs: a pre_armed
// leg is repriced, a working one is placed again at its new level by the
// exit pass, and the order it rests as now is canceled once the new one
// rests (a refused placement leaves the leg where it rests). Refused under
// a hold: it places orders.
func decideProviderChange(s *State, env commands.Envelope, c *trading.ChangeBracket) ([]events.Event, error) {
	cur, ok := s.Brackets[c.BracketID]
	if !ok {
		return nil, noBracket()
	}
	if err := linkedRefusal(s.Provider); err != nil {
		return nil, err
	}
	if hs := Holds(s, env.At); len(hs) > 0 {
		return nil, lockedRefusal(hs)
	}
	bk := cloneBracket(cur)
	sp := c.Market.Specs[bk.Instrument]
	for i, lp := range c.Legs {
		if _, err := moveLeg(bk, sp, i, lp); err != nil {
			return nil, err
		}
	}
	return []events.Event{evacct.BracketSet{Bracket: *bk}}, nil
}

// live is one order of a leg: resting in the book, or being placed (an
// open IntentExit).
type live struct {
	o       evacct.Order
	resting bool
	rest    events.Decimal // what it has left to fill
}

// exits is the exit pass of one provider decision.
type exits struct {
	s      *State // the state the decision was made on
	v      *State // a view of s with the decision's events folded so far
	env    commands.Envelope
	out    []events.Event
	bs     map[string]*evacct.Bracket // brackets the pass changes, copied on first change, by id
	set    map[string]bool            // brackets the decision itself recorded (they are recorded again, whole, at the end)
	opened map[string]bool            // brackets the decision opened
	ending map[string]string          // reason, by bracket id: ends once none of its orders rests
	n      int                        // orders the pass placed again under new ids
	// retryNow places every leg waiting to be placed again, whatever its
	// RetryAt (RetryExits.Now).
	retryNow bool
}

// providerExits runs the exit pass over the events of a provider decision
// and returns them with the pass's own: bracket records, leg placements
// and cancels, ends.
func providerExits(s *State, env commands.Envelope, evs []events.Event) []events.Event {
	if len(evs) == 0 || !s.Provider.Linked || (len(s.Brackets) == 0 && !opensBracket(evs)) {
		return evs
	}
	x := newExits(s, env)
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.BracketSet: // recorded once, whole, at the end
			b := cloneBracket(&e.Bracket)
			x.bs[b.ID], x.set[b.ID] = b, true
			if _, exists := s.Brackets[b.ID]; !exists {
				x.opened[b.ID] = true
				if b.EntryOrderID == "" {
					x.arm(b, b.Planned, nil) // protecting a position: armed at once
				}
			}
			continue
		case evacct.BracketEnd: // ends once its orders are gone
			if b := x.get(e.BracketID); b != nil {
				x.end(b, e.Reason)
			}
			continue
		}
		x.before(e)
		x.out = append(x.out, e)
		foldView(x.v, e)
	}
	x.closed()
	x.reconcile()
	return x.out
}

func newExits(s *State, env commands.Envelope) *exits {
	return &exits{s: s, v: view(s), env: env, bs: map[string]*evacct.Bracket{}, set: map[string]bool{}, opened: map[string]bool{},
		ending: map[string]string{}}
}

// retryExits is the exit pass alone (RetryExits): it places the legs whose
// retry time has come (every one waiting, now), and nothing when none has.
func retryExits(s *State, env commands.Envelope, now bool) []events.Event {
	if !s.Provider.Linked || len(s.Brackets) == 0 {
		return nil
	}
	x := newExits(s, env)
	x.retryNow = now
	x.reconcile()
	return x.out
}

// RetryDue is the earliest retry time of the account's working bracket
// legs that wait to be placed again (zero when none waits): when the
// reactor sends RetryExits.
func RetryDue(s *State) time.Time {
	var due time.Time
	for _, b := range s.Brackets {
		for _, lg := range b.Legs {
			if lg.State == evacct.LegWorking && lg.RetryAt != nil && (due.IsZero() || lg.RetryAt.Before(due)) {
				due = *lg.RetryAt
			}
		}
	}
	return due
}

// get is bracket id as the pass changes it (a copy), nil when it is not active.
func (x *exits) get(id string) *evacct.Bracket {
	if b, ok := x.bs[id]; ok {
		return b
	}
	b, ok := x.s.Brackets[id]
	if !ok {
		return nil
	}
	c := cloneBracket(b)
	x.bs[id] = c
	return c
}

// ids are the active brackets and those the decision opened, sorted.
func (x *exits) ids() []string {
	ids := sortedKeys(x.s.Brackets)
	for id := range x.bs {
		if _, ok := x.s.Brackets[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// bracket is bracket id as it stands in the pass (read only).
func (x *exits) bracket(id string) *evacct.Bracket {
	if b, ok := x.bs[id]; ok {
		return b
	}
	return x.s.Brackets[id]
}

// entryOf is the bracket waiting on entry id, if any.
func (x *exits) entryOf(id string) *evacct.Bracket {
	for _, bid := range x.ids() {
		if b := x.bracket(bid); b.EntryOrderID == id && x.ending[bid] == "" {
			return x.get(bid)
		}
	}
	return nil
}

// before reads what an event of the decision does to the brackets, on the
// view as it stands before the event folds.
func (x *exits) before(e events.Event) {
	switch e := e.(type) {
	case evacct.OrderFilled:
		w, ok := x.v.Working[e.BrokerOrderID]
		if !ok {
			return
		}
		if b := x.entryOf(e.BrokerOrderID); b != nil {
			var px *events.Decimal
			if order.Type(w.OrderType) == order.Market && b.Armed.Sign() == 0 {
				p := e.Price
				px = &p
			}
			x.arm(b, e.Quantity, px)
			if e.Done {
				x.entryDone(b)
			}
			return
		}
		if !legOrder(w.Order) || x.ending[w.BracketID] != "" {
			return
		}
		if b := x.get(w.BracketID); b != nil {
			if i := legIndex(b, w.ClientOrderID); i >= 0 {
				x.legFilled(b, i, e.Quantity)
			}
		}
	case evacct.OrderCanceled:
		w, ok := x.v.Working[e.BrokerOrderID]
		if !ok {
			return
		}
		if b := x.entryOf(e.BrokerOrderID); b != nil {
			x.entryDone(b)
			return
		}
		if !legOrder(w.Order) || x.ending[w.BracketID] != "" || x.bracket(w.BracketID) == nil {
			return
		}
		b := x.bracket(w.BracketID)
		i := legIndex(b, w.ClientOrderID)
		if i < 0 || b.Legs[i].State != evacct.LegWorking || !x.current(b.Legs[i], live{o: w.Order, resting: true, rest: w.Quantity.Sub(w.Filled)}) {
			return // an order the leg no longer rests as (its cancel was the pass's)
		}
		b = x.get(w.BracketID)
		b.Legs[i].State = evacct.LegCanceled
		if !resting(b) {
			x.end(b, "legs_canceled")
		}
	case evacct.OrderReplaced:
		// The provider reports the order a leg rests as at other terms (a
		// change made at the provider): the leg takes them, so the pass
		// does not place it again over the trader's change.
		w, ok := x.v.Working[e.BrokerOrderID]
		if !ok || !legOrder(w.Order) || x.ending[w.BracketID] != "" || x.bracket(w.BracketID) == nil {
			return
		}
		b := x.bracket(w.BracketID)
		i := legIndex(b, w.ClientOrderID)
		if i < 0 || b.Legs[i].State != evacct.LegWorking || !x.current(b.Legs[i], live{o: w.Order, resting: true, rest: w.Quantity.Sub(w.Filled)}) {
			return
		}
		b = x.get(w.BracketID)
		lg := &b.Legs[i]
		lg.Quantity = e.Quantity.Sub(w.Filled).Add(lg.Filled)
		if lv := e.LimitPrice; lv != nil {
			lg.Price = lv
		} else if e.StopPrice != nil {
			lg.Price = e.StopPrice
		}
	case evacct.IntentSettled:
		if e.Outcome == evacct.OutcomeAccepted {
			if in, ok := x.v.Provider.Intents[providercmd.IntentKey(IntentExit, e.ProviderClientOrderID)]; ok {
				x.reached(in.Order)
			}
			return
		}
		if in, ok := x.v.Provider.Intents[providercmd.IntentKey(IntentExit, e.ProviderClientOrderID)]; ok {
			x.refused(in.Order, e)
		} else if in, ok := x.v.Provider.Intents[providercmd.IntentKey(evacct.IntentPlace, e.ProviderClientOrderID)]; ok && in.Order.BracketID != "" {
			if b := x.entryOf(in.Order.BrokerOrderID); b != nil {
				x.entryDone(b) // the entry was never placed: nothing armed, the bracket ends
			}
		}
	}
}

// arm adds qty of filled entry to what the bracket protects and sizes its
// legs as the paper book does (targets their share at the lot step, the
// runner what they leave, the stop all no target closed). fill, on a
// market entry's first fill, moves the pre_armed levels with the fill's
// distance from the price they were set at, on the tick.
func (x *exits) arm(b *evacct.Bracket, qty events.Decimal, fill *events.Decimal) {
	if fill != nil && fill.Cmp(b.EntryPrice) != 0 {
		d := fill.Sub(b.EntryPrice)
		if b.Tick.Sign() > 0 {
			d = d.Steps(b.Tick, apd.RoundHalfUp)
		}
		for i := range b.Legs {
			if lg := &b.Legs[i]; lg.Price != nil && lg.State == evacct.LegPreArmed {
				p := lg.Price.Add(d)
				lg.Price = &p
			}
		}
		b.EntryPrice = b.EntryPrice.Add(d)
	}
	b.Armed = b.Armed.Add(qty)
	targets, closed := events.Int(0), events.Int(0)
	for i := range b.Legs {
		lg := &b.Legs[i]
		if lg.Kind != evacct.LegTarget {
			continue
		}
		q := events.Int(0)
		if lg.Share != nil {
			q = floorTo(b.Armed.Mul(*lg.Share), b.Lot)
		}
		if lg.State == evacct.LegFilled || lg.State == evacct.LegCanceled {
			q = lg.Quantity
		}
		targets, closed = targets.Add(q), closed.Add(lg.Filled)
		size(lg, q)
	}
	for i := range b.Legs {
		switch lg := &b.Legs[i]; lg.Kind {
		case evacct.LegRunner:
			lg.Quantity, lg.ParentOrderID, lg.State = b.Armed.Sub(targets), "", evacct.LegWorking
		case evacct.LegStop:
			size(lg, b.Armed.Sub(closed))
		}
	}
}

// floorTo is d down to a multiple of step.
func floorTo(d, step events.Decimal) events.Decimal {
	if step.Sign() <= 0 {
		return d
	}
	return d.Steps(step, apd.RoundFloor)
}

// size gives a leg the quantity q: a pre_armed leg with something to close
// is to rest; a working one whose quantity is all filled is done.
func size(lg *evacct.BracketLeg, q events.Decimal) {
	switch lg.State {
	case evacct.LegPreArmed:
		lg.Quantity = q
		if q.Sign() > 0 {
			lg.State, lg.ParentOrderID = evacct.LegWorking, ""
		}
	case evacct.LegWorking:
		lg.Quantity = q
		if q.Sub(lg.Filled).Sign() <= 0 {
			lg.State = evacct.LegFilled
		}
	}
}

// entryDone is the end of a bracket's entry (filled, canceled, never
// placed): with nothing armed the bracket ends; armed in part, it protects
// what filled.
func (x *exits) entryDone(b *evacct.Bracket) {
	b.EntryOrderID = ""
	if b.Armed.Sign() == 0 {
		x.end(b, "entry_canceled")
		return
	}
	b.Planned = b.Armed
	for i := range b.Legs {
		b.Legs[i].ParentOrderID = ""
		if b.Legs[i].State == evacct.LegPreArmed { // a target whose share still rounds to nothing
			b.Legs[i].State = evacct.LegCanceled
		}
	}
}

// legFilled is one-cancels-other: a target's fill shrinks the stop, the
// stop's fill ends the bracket (its targets are canceled).
func (x *exits) legFilled(b *evacct.Bracket, i int, qty events.Decimal) {
	lg := &b.Legs[i]
	lg.Filled = lg.Filled.Add(qty)
	if lg.State == evacct.LegWorking && lg.Filled.Cmp(lg.Quantity) >= 0 {
		lg.State = evacct.LegFilled
	}
	if lg.Kind == evacct.LegStop {
		x.end(b, "stop_filled")
		return
	}
	for j := range b.Legs {
		if st := &b.Legs[j]; st.Kind == evacct.LegStop && st.State == evacct.LegWorking {
			size(st, st.Quantity.Sub(qty))
		}
	}
	if !resting(b) {
		x.end(b, "targets_filled")
	}
}

// passing reports whether a leg's placement that settled so may be placed
// again: it never reached the provider for a reason that passes (the
// provider unreachable or throttled, or the request lost and never
// placed), not the provider's own refusal or a refused credential.
func passing(e evacct.IntentSettled) bool {
	return e.Outcome == evacct.OutcomeNeverPlaced ||
		(e.Outcome == evacct.OutcomeNotSent && (e.Reason == evacct.ReasonUnavailable || e.Reason == evacct.ReasonThrottled))
}

// retryWait is how long a leg waits before it is placed again after its
// retries-th placement in a row did not reach the provider: 1 s doubling
// up to MaxLegRetryWait, and at least what the provider's limit holds.
func retryWait(retries int, e evacct.IntentSettled) time.Duration {
	d := evacct.MaxLegRetryWait
	if retries <= 6 {
		d = min(time.Second<<(retries-1), evacct.MaxLegRetryWait)
	}
	return max(d, time.Duration(e.RetryAfter)*time.Second)
}

// reached is a leg's placement the provider accepted: the leg's count of
// placements that did not reach it starts again.
func (x *exits) reached(o evacct.Order) {
	b := x.bracket(o.BracketID)
	if b == nil {
		return
	}
	if i := legIndex(b, o.ClientOrderID); i >= 0 && (b.Legs[i].Retries != 0 || b.Legs[i].RetryAt != nil) {
		lg := &x.get(o.BracketID).Legs[i]
		lg.Retries, lg.RetryAt = 0, nil
	}
}

// refused is a leg's placement the provider refused or that was never
// placed (settled e): the leg stays as an order of it rests (a change
// refused); with none, a placement that did not reach the provider for a
// passing reason is placed again after a wait (RetryAt), and any other
// leaves the leg canceled, the bracket ending when nothing else rests.
func (x *exits) refused(o evacct.Order, e evacct.IntentSettled) {
	if x.bracket(o.BracketID) == nil || x.ending[o.BracketID] != "" {
		return
	}
	b := x.get(o.BracketID)
	i := legIndex(b, o.ClientOrderID)
	if i < 0 || b.Legs[i].State != evacct.LegWorking {
		return
	}
	lg := &b.Legs[i]
	var keep *Working
	for _, id := range sortedKeys(x.v.Working) {
		w := x.v.Working[id]
		if legOrder(w.Order) && w.BracketID == b.ID && w.ClientOrderID == lg.ID && (keep == nil || !w.CreatedAt.Before(keep.CreatedAt)) {
			keep = w
		}
	}
	if keep != nil {
		lg.Price, lg.Quantity = level(keep.Order), keep.Quantity.Sub(keep.Filled).Add(lg.Filled)
		return
	}
	if passing(e) {
		lg.Retries++
		at := x.env.At.Add(retryWait(lg.Retries, e))
		lg.RetryAt = &at
		return
	}
	lg.State = evacct.LegCanceled
	if !resting(b) {
		x.end(b, "legs_canceled")
	}
}

// end is a bracket's end: its legs are canceled (a filled one stays
// filled) and it waits on no entry; its orders are canceled and it is
// recorded ended once none rests.
func (x *exits) end(b *evacct.Bracket, reason string) {
	if x.ending[b.ID] != "" {
		return
	}
	x.ending[b.ID] = reason
	b.EntryOrderID = ""
	for i := range b.Legs {
		if lg := &b.Legs[i]; lg.State != evacct.LegFilled {
			lg.State, lg.ParentOrderID = evacct.LegCanceled, ""
		}
	}
}

// resting reports whether a bracket still has a leg that rests or waits to arm.
func resting(b *evacct.Bracket) bool {
	for _, lg := range b.Legs {
		if lg.Kind == evacct.LegRunner {
			continue // not an order: the stop protects it
		}
		if lg.State == evacct.LegWorking || (lg.State == evacct.LegPreArmed && b.EntryOrderID != "") {
			return true
		}
	}
	return false
}

// closed ends every armed bracket that still protects a position that is
// gone or turned.
func (x *exits) closed() {
	for _, id := range x.ids() {
		b := x.bracket(id)
		if x.ending[id] != "" || b.Armed.Sign() == 0 || !resting(b) {
			continue
		}
		p := x.v.Positions[b.Instrument].Quantity
		if p.IsZero() || (p.Sign() > 0) != (b.Side == "long") {
			x.end(x.get(id), "position_closed")
		}
	}
}

// wants reports whether leg lg of b is to rest, and for how much.
func (x *exits) wants(b *evacct.Bracket, lg evacct.BracketLeg) (events.Decimal, bool) {
	rest := lg.Quantity.Sub(lg.Filled)
	return rest, x.ending[b.ID] == "" && lg.State == evacct.LegWorking && lg.Kind != evacct.LegRunner && lg.Price != nil && rest.Sign() > 0
}

// current reports whether order l rests at what leg lg wants.
func (x *exits) current(lg evacct.BracketLeg, l live) bool {
	p := level(l.o)
	return lg.Price != nil && p != nil && p.Cmp(*lg.Price) == 0 && l.rest.Cmp(lg.Quantity.Sub(lg.Filled)) == 0
}

// lives are the orders of the account's brackets (resting, or being
// placed), by bracket id and leg id.
func (x *exits) lives() map[string]map[string][]live {
	out := map[string]map[string][]live{}
	add := func(l live) {
		if out[l.o.BracketID] == nil {
			out[l.o.BracketID] = map[string][]live{}
		}
		out[l.o.BracketID][l.o.ClientOrderID] = append(out[l.o.BracketID][l.o.ClientOrderID], l)
	}
	for _, id := range sortedKeys(x.v.Working) {
		if w := x.v.Working[id]; legOrder(w.Order) {
			add(live{o: w.Order, resting: true, rest: w.Quantity.Sub(w.Filled)})
		}
	}
	for _, k := range sortedKeys(x.v.Provider.Intents) {
		if in := x.v.Provider.Intents[k]; in.Op == IntentExit {
			add(live{o: in.Order, rest: in.Order.Quantity})
		}
	}
	return out
}

// reconcile makes the provider's book meet the brackets: a leg to rest
// without an order at its terms is placed; an order no leg wants any more
// is canceled, one the leg rests as again once its new order rests; a
// bracket that ended is recorded ended once none of its orders is left.
func (x *exits) reconcile() {
	lives := x.lives()
	canceling := map[string]bool{}
	for _, in := range x.v.Provider.Intents {
		if in.Op == evacct.IntentCancel {
			canceling[in.ProviderClientOrderID] = true
		}
	}
	cancel := func(l live) {
		pc := providerCOID(x.s.ID, l.o)
		if !l.resting || canceling[pc] || x.v.Provider.Stuck[l.o.BrokerOrderID] {
			return
		}
		canceling[pc] = true
		x.add(evacct.OrderIntended{Op: evacct.IntentCancel, ProviderClientOrderID: pc, Order: l.o, At: x.env.At})
	}
	for _, id := range x.ids() {
		b := x.bracket(id)
		if x.ending[id] == "" && !resting(b) && b.EntryOrderID == "" {
			x.end(x.get(id), x.endReason(b)) // it ended in an earlier decision: its last orders may be gone now
			b = x.bracket(id)
		}
		left := 0
		for _, leg := range slices.Sorted(maps.Keys(lives[id])) {
			if legIndex(b, leg) < 0 {
				for _, l := range lives[id][leg] { // an order of no leg of it: not wanted
					cancel(l)
					left++
				}
			}
		}
		for i := range b.Legs {
			lg := b.Legs[i]
			ls := lives[id][lg.ID]
			left += len(ls)
			rest, wanted := x.wants(b, lg)
			if !wanted {
				for _, l := range ls {
					cancel(l)
				}
				continue
			}
			match := -1
			for j, l := range ls {
				if x.current(lg, l) && (match < 0 || l.resting) {
					match = j
				}
			}
			if match < 0 {
				if slices.ContainsFunc(ls, func(l live) bool { return !l.resting }) {
					continue // one placement of a leg at a time: the one under way settles first
				}
				if lg.RetryAt != nil {
					if !x.retryNow && x.env.At.Before(*lg.RetryAt) {
						continue // its last placement did not reach the provider: placed again at RetryAt
					}
					x.get(id).Legs[i].RetryAt = nil
					b = x.bracket(id)
				}
				l := x.place(b, lg, rest)
				ls = append(ls, l)
				match, left = len(ls)-1, left+1
			}
			if ls[match].resting {
				for j, l := range ls {
					if j != match {
						cancel(l)
					}
				}
			}
		}
		x.record(id, left)
	}
}

// place records the intent to place leg lg of b for rest at its level: a
// leg's first order, placed when it arms, carries the leg's id; every later
// one a new id of this decision, so no client order id is sent twice.
func (x *exits) place(b *evacct.Bracket, lg evacct.BracketLeg, rest events.Decimal) live {
	id := lg.ID
	if !x.arming(b.ID, lg.ID) {
		id = x.env.DerivedID("x", x.n)
		x.n++
	}
	o := evacct.Order{BrokerOrderID: id, ClientOrderID: lg.ID, Instrument: b.Instrument, Side: exitSide(b), Quantity: rest,
		TimeInForce: string(order.GTC), ReduceOnly: true, BracketID: b.ID, CreatedAt: x.env.At}
	p := *lg.Price
	if lg.Kind == evacct.LegStop {
		o.OrderType, o.StopPrice = string(order.Stop), &p
	} else {
		o.OrderType, o.LimitPrice = string(order.Limit), &p
	}
	x.add(evacct.OrderIntended{Op: IntentExit, ProviderClientOrderID: providerCOID(x.s.ID, o), Order: o, At: x.env.At})
	return live{o: o, rest: rest}
}

// arming reports whether leg legID of bracket id arms in this decision:
// pre_armed (or not recorded) before it.
func (x *exits) arming(id, legID string) bool {
	b, ok := x.s.Brackets[id]
	if !ok {
		return true
	}
	i := legIndex(b, legID)
	return i < 0 || b.Legs[i].State == evacct.LegPreArmed
}

// endReason names the end of a bracket that ended in an earlier decision
// and is recorded ended once its last order is gone.
func (x *exits) endReason(b *evacct.Bracket) string {
	targets, filled := 0, 0
	for _, lg := range b.Legs {
		switch {
		case lg.Kind == evacct.LegStop && lg.Filled.Sign() > 0:
			return "stop_filled"
		case lg.Kind == evacct.LegTarget:
			targets++
			if lg.State == evacct.LegFilled {
				filled++
			}
		}
	}
	switch {
	case b.Armed.Sign() == 0:
		return "entry_canceled"
	case targets > 0 && filled == targets:
		return "targets_filled"
	}
	if p := x.v.Positions[b.Instrument].Quantity; p.IsZero() || (p.Sign() > 0) != (b.Side == "long") {
		return "position_closed"
	}
	return "withdrawn"
}

// add appends an event of the pass and folds it on the view.
func (x *exits) add(e events.Event) {
	x.out = append(x.out, e)
	foldView(x.v, e)
}

// record records bracket id as the pass leaves it: ended once it ends with
// none of its orders left, else whole when the decision or the pass
// changed it.
func (x *exits) record(id string, left int) {
	b, changed := x.bs[id]
	if !changed {
		return
	}
	if x.ending[id] != "" && left == 0 {
		if !x.opened[id] {
			x.out = append(x.out, evacct.BracketEnd{BracketID: id, Reason: x.ending[id], At: x.env.At})
		}
		return
	}
	if cur, ok := x.s.Brackets[id]; ok && !x.set[id] && reflect.DeepEqual(cur, b) {
		return
	}
	b.UpdatedAt = x.env.At
	x.out = append(x.out, evacct.BracketSet{Bracket: *b})
}

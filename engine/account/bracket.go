package account

import (
	"maps"
	"slices"
	"sort"

	"github.com/svc/engine/commands"
	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/events/mark"
)

// Brackets on the paper book.
//
// A bracket protects one entry's or one position's quantity with a stop,
// targets and a runner. Its legs are recorded pre_armed while its entry
// rests; each fill of the entry arms them for the quantity filled so far, in
// the same commit (targets at their share rounded down to the lot step, the
// stop for the whole armed quantity), as reduce-only orders carrying the
// bracket's id. The legs are one-cancels-other: a target's fill shrinks the
// stop in the same commit, the stop's fill cancels the targets in the same
// commit, and a bracket whose position is closed or turned by anything ends
// with its orders canceled, so a bracket never takes a position through zero.
// Breakeven and trailing moves are decided here from the quotes the paper
// book's reactor sends, recorded when they move the stop by a tick or more.
//
// Every decision that touches orders ends with settleBrackets, which reads
// the decision's own events and records each changed bracket once, whole
// (BracketSet), or its end (BracketEnd).

// bracketOf is the active bracket of an order (its entry or one of its legs).
func bracketOf(s *State, orderID string) string {
	if w, ok := s.Working[orderID]; ok {
		return w.BracketID
	}
	return ""
}

func cloneBracket(b *evacct.Bracket) *evacct.Bracket {
	c := *b
	c.Legs = append([]evacct.BracketLeg(nil), b.Legs...)
	if b.Breakeven != nil {
		be := *b.Breakeven
		c.Breakeven = &be
	}
	if b.Trailing != nil {
		t := *b.Trailing
		c.Trailing = &t
	}
	return &c
}

// legs is the bracket pass of one decision.
type legs struct {
	s       *State
	env     commands.Envelope
	out     []events.Event
	touched map[string]*evacct.Bracket // brackets changed in this decision, by id
	opened  map[string]bool            // brackets opened in this decision
	ended   map[string]string          // reason, by bracket id
	owner   map[string]string          // order id -> bracket id, of orders placed in this decision
	pos     map[string]evacct.Position // positions this decision left
	gone    map[string]bool            // orders the decision itself cancels
	resized map[string]int             // the pass's own OrderReplaced of an order, by its index in out
	set     map[string]bool            // brackets the decision itself sets (opens or changes): anchored, not moved
	marks   func(instrument string) *mark.Stack
	foreign map[string]*mark.Stack // other nodes' marks, by node (Rebase)
}

// replace records new terms of a leg's order, once per order and decision:
// a stop resized by a target's fill and moved by a rule is one replacement.
func (l *legs) replace(id string, qty events.Decimal, stop *events.Decimal) {
	if i, ok := l.resized[id]; ok {
		r := l.out[i].(evacct.OrderReplaced)
		r.Quantity = qty
		if stop != nil {
			r.StopPrice = stop
		}
		l.out[i] = r
		return
	}
	l.resized[id] = len(l.out)
	l.out = append(l.out, evacct.OrderReplaced{BrokerOrderID: id, Quantity: qty, StopPrice: stop, At: l.env.At})
}

func (l *legs) get(id string) *evacct.Bracket {
	if b, ok := l.touched[id]; ok {
		return b
	}
	b, ok := l.s.Brackets[id]
	if !ok {
		return nil
	}
	c := cloneBracket(b)
	l.touched[id] = c
	return c
}

func (l *legs) position(instrument string) evacct.Position {
	if p, ok := l.pos[instrument]; ok {
		return p
	}
	return l.s.Positions[instrument]
}

func (l *legs) end(b *evacct.Bracket, reason string) {
	if _, done := l.ended[b.ID]; done {
		return
	}
	l.ended[b.ID] = reason
	for i := range b.Legs {
		lg := &b.Legs[i]
		switch {
		case lg.Kind == evacct.LegRunner:
			lg.State = evacct.LegCanceled
		case lg.State == evacct.LegWorking:
			if !l.gone[lg.ID] {
				l.out = append(l.out, evacct.OrderCanceled{BrokerOrderID: lg.ID, Reason: "bracket_" + reason, At: l.env.At})
				l.gone[lg.ID] = true
			}
			lg.State = evacct.LegCanceled
		case lg.State == evacct.LegPreArmed:
			lg.State = evacct.LegCanceled
		}
	}
}

// settleBrackets runs the bracket pass over a decision's events: arming on
// entry fills, one-cancels-other on leg fills, ends on cancels and on closed
// positions, then (with a quote) breakeven and trailing moves.
func settleBrackets(s *State, env commands.Envelope, evs []events.Event, q *trading.Quote) []events.Event {
	if len(s.Brackets) == 0 && !opensBracket(evs) {
		return evs
	}
	l := &legs{s: s, env: env, touched: map[string]*evacct.Bracket{}, opened: map[string]bool{},
		ended: map[string]string{}, owner: map[string]string{}, pos: map[string]evacct.Position{}, gone: map[string]bool{}, resized: map[string]int{},
		set: map[string]bool{}, marks: marksIn(env)}
	for _, e := range evs {
		if c, ok := e.(evacct.OrderCanceled); ok {
			l.gone[c.BrokerOrderID] = true
		}
	}
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.BracketSet: // opened or changed by the decision: recorded once, whole, at the end
			b := cloneBracket(&e.Bracket)
			l.touched[b.ID] = b
			l.set[b.ID] = true
			if _, exists := s.Brackets[b.ID]; !exists {
				l.opened[b.ID] = true
			}
			if b.EntryOrderID != "" {
				l.owner[b.EntryOrderID] = b.ID
			} else if b.Armed.Sign() == 0 {
				l.arm(b, b.Planned) // protecting a position: armed at once
			}
			continue
		case evacct.BracketEnd:
			if b := l.get(e.BracketID); b != nil {
				l.end(b, e.Reason)
			}
			continue
		case evacct.OrderPlaced:
			if e.Order.BracketID != "" {
				l.owner[e.Order.BrokerOrderID] = e.Order.BracketID
			}
		}
		l.out = append(l.out, e)
		l.on(e)
	}
	l.closed()
	if q != nil {
		l.moves(*q)
	}
	if c, ok := env.Cmd.(*trading.Rebase); ok {
		l.rebase(c)
	}
	l.anchor()
	ids := make([]string, 0, len(l.touched))
	for id := range l.touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		b := l.touched[id]
		b.UpdatedAt = env.At
		reason, ended := l.ended[id]
		switch {
		case ended && l.opened[id]: // opened and ended in one step: never recorded
		case ended:
			l.out = append(l.out, evacct.BracketEnd{BracketID: id, Reason: reason, At: env.At})
		default:
			l.out = append(l.out, evacct.BracketSet{Bracket: *b})
		}
	}
	return l.out
}

// rebase takes in the brackets on c's instrument whose rules follow the
// marks and that are not anchored in this node's: anchor moves them where
// their own node's marks (c.Foreign) put them and anchors them here.
func (l *legs) rebase(c *trading.Rebase) {
	if c.Marks == nil {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(l.s.Brackets)) {
		b := l.s.Brackets[id]
		if b.Instrument != c.Instrument || b.State != evacct.BracketActive || (b.Breakeven == nil && b.Trailing == nil) ||
			(b.Marked && b.MarkNode == c.Marks.Node) {
			continue
		}
		l.get(id)
	}
	l.foreign = c.Foreign
}

// anchor takes the marks into every bracket the decision records: one it
// sets (opens, or a trader's change) is anchored at the instrument's newest
// mark, so no earlier mark moves it; any other first moves where the marks
// since its anchor put it, its stop replaced there. A bracket's recorded
// level then holds every mark up to its anchor.
func (l *legs) anchor() {
	for _, id := range slices.Sorted(maps.Keys(l.touched)) {
		b := l.touched[id]
		if _, ended := l.ended[id]; ended {
			continue
		}
		s := l.marks(b.Instrument)
		if s == nil {
			continue
		}
		best, ok := b.MarksBest(s)
		if f := l.foreign[b.MarkNode]; !ok && f != nil {
			best, ok = b.MarksBest(f)
		}
		if ok && !l.set[id] {
			l.move(id, b, best)
		}
		b.Anchor, b.MarkNode, b.Marked = s.N, s.Node, true
	}
}

// marksIn is where a decision finds an instrument's marks: a wake's quote
// carries its instrument's, a trader's command its market's.
func marksIn(env commands.Envelope) func(string) *mark.Stack {
	one := func(instrument string, s *mark.Stack) func(string) *mark.Stack {
		return func(inst string) *mark.Stack {
			if inst == instrument {
				return s
			}
			return nil
		}
	}
	var m *trading.Market
	switch c := env.Cmd.(type) {
	case *trading.FillWorking:
		return one(c.Quote.Instrument, c.Quote.Marks)
	case *trading.Rebase:
		return one(c.Instrument, c.Marks)
	case trading.Priced:
		m = c.MarketOf()
	}
	return func(inst string) *mark.Stack {
		if m == nil {
			return nil
		}
		return m.Quotes[inst].Marks
	}
}

func opensBracket(evs []events.Event) bool {
	for _, e := range evs {
		if _, ok := e.(evacct.BracketSet); ok {
			return true
		}
	}
	return false
}

func (l *legs) bracketOf(orderID string) *evacct.Bracket {
	id, ok := l.owner[orderID]
	if !ok {
		id = bracketOf(l.s, orderID)
	}
	if id == "" {
		return nil
	}
	if _, ended := l.ended[id]; ended {
		return nil
	}
	return l.get(id)
}

func legIndex(b *evacct.Bracket, orderID string) int {
	for i := range b.Legs {
		if b.Legs[i].ID == orderID {
			return i
		}
	}
	return -1
}

func (l *legs) on(e events.Event) {
	switch e := e.(type) {
	case evacct.OrderFilled:
		l.pos[e.Instrument] = e.Position
		b := l.bracketOf(e.BrokerOrderID)
		if b == nil {
			return
		}
		if b.EntryOrderID == e.BrokerOrderID {
			l.arm(b, e.Quantity)
			if e.Done {
				l.entryDone(b)
			}
			return
		}
		if i := legIndex(b, e.BrokerOrderID); i >= 0 {
			l.legFilled(b, i, e.Quantity, e.Done)
		}
	case evacct.OrderCanceled:
		b := l.bracketOf(e.BrokerOrderID)
		if b == nil {
			return
		}
		if b.EntryOrderID == e.BrokerOrderID {
			l.entryDone(b)
			return
		}
		if i := legIndex(b, e.BrokerOrderID); i >= 0 && b.Legs[i].State == evacct.LegWorking {
			b.Legs[i].State = evacct.LegCanceled
			if !l.resting(b) {
				l.end(b, "legs_canceled")
			}
		}
	case evacct.OrderReplaced:
		b := l.bracketOf(e.BrokerOrderID)
		if b == nil {
			return
		}
		if i := legIndex(b, e.BrokerOrderID); i >= 0 {
			lg := &b.Legs[i]
			lg.Quantity = e.Quantity.Add(lg.Filled)
			if e.StopPrice != nil && lg.Kind == evacct.LegStop {
				lg.Price = e.StopPrice
			}
			if e.LimitPrice != nil && lg.Kind == evacct.LegTarget {
				lg.Price = e.LimitPrice
			}
		}
	}
}

// resting reports whether a bracket still has a leg working or waiting to arm.
func (l *legs) resting(b *evacct.Bracket) bool {
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

// entryDone is the end of a bracket's entry (filled, canceled or replaced):
// a bracket with nothing armed ends with it; one armed in part protects what
// was filled, its legs re-parented to the position.
func (l *legs) entryDone(b *evacct.Bracket) {
	b.EntryOrderID = ""
	if b.Armed.Sign() == 0 {
		l.end(b, "entry_canceled")
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

// arm adds qty of filled entry to what the bracket protects and sizes its
// legs for it: each target its share of the armed quantity at the lot step,
// the runner what they leave, the stop all the armed quantity no target has
// closed. Legs with a quantity rest as reduce-only orders.
func (l *legs) arm(b *evacct.Bracket, qty events.Decimal) {
	b.Armed = b.Armed.Add(qty)
	targets, closed := events.Int(0), events.Int(0)
	for i := range b.Legs {
		lg := &b.Legs[i]
		if lg.Kind == evacct.LegTarget {
			q := plancmd.Floor(b.Armed.Mul(*lg.Share), b.Lot)
			if lg.State == evacct.LegFilled || lg.State == evacct.LegCanceled {
				q = lg.Quantity
			}
			targets = targets.Add(q)
			closed = closed.Add(lg.Filled)
			l.size(b, lg, q)
		}
	}
	for i := range b.Legs {
		lg := &b.Legs[i]
		switch lg.Kind {
		case evacct.LegRunner:
			lg.Quantity, lg.ParentOrderID, lg.State = b.Armed.Sub(targets), "", evacct.LegWorking
		case evacct.LegStop:
			l.size(b, lg, b.Armed.Sub(closed))
		}
	}
}

// size gives a leg the quantity q: places its order on first arming, or
// resizes the order that rests.
func (l *legs) size(b *evacct.Bracket, lg *evacct.BracketLeg, q events.Decimal) {
	switch lg.State {
	case evacct.LegPreArmed:
		lg.Quantity = q
		if q.Sign() <= 0 {
			return
		}
		o := evacct.Order{BrokerOrderID: lg.ID, ClientOrderID: lg.ID, Instrument: b.Instrument, Side: exitSide(b),
			Quantity: q, TimeInForce: string(order.GTC), ReduceOnly: true, BracketID: b.ID, CreatedAt: l.env.At}
		if lg.Kind == evacct.LegStop {
			o.OrderType, o.StopPrice = string(order.Stop), lg.Price
		} else {
			o.OrderType, o.LimitPrice = string(order.Limit), lg.Price
		}
		l.out = append(l.out, evacct.OrderPlaced{Order: o})
		l.owner[lg.ID] = b.ID
		lg.State, lg.ParentOrderID = evacct.LegWorking, ""
	case evacct.LegWorking:
		if q.Cmp(lg.Quantity) == 0 {
			return
		}
		lg.Quantity = q
		if rest := q.Sub(lg.Filled); rest.Sign() > 0 {
			l.replace(lg.ID, rest, nil)
			return
		}
		l.out = append(l.out, evacct.OrderCanceled{BrokerOrderID: lg.ID, Reason: "bracket_oco", At: l.env.At})
		lg.State = evacct.LegFilled
	}
}

// legFilled is one-cancels-other: a target's fill shrinks the stop, the
// stop's fill ends the bracket and cancels its targets.
func (l *legs) legFilled(b *evacct.Bracket, i int, qty events.Decimal, done bool) {
	lg := &b.Legs[i]
	lg.Filled = lg.Filled.Add(qty)
	if done {
		lg.State = evacct.LegFilled
	}
	if lg.Kind == evacct.LegStop {
		l.end(b, "stop_filled")
		return
	}
	for j := range b.Legs {
		if st := &b.Legs[j]; st.Kind == evacct.LegStop && st.State == evacct.LegWorking {
			l.size(b, st, st.Quantity.Sub(qty))
		}
	}
	if !l.resting(b) {
		l.end(b, "targets_filled")
	}
}

// closed ends every armed bracket whose position is gone or turned.
func (l *legs) closed() {
	ids := make([]string, 0, len(l.s.Brackets)+len(l.opened))
	for id := range l.s.Brackets {
		ids = append(ids, id)
	}
	for id := range l.opened {
		if _, ok := l.s.Brackets[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ended := l.ended[id]; ended {
			continue
		}
		b, ok := l.touched[id]
		if !ok {
			b = l.s.Brackets[id]
		}
		if b.Armed.Sign() == 0 {
			continue
		}
		p := l.position(b.Instrument).Quantity
		if p.IsZero() || (p.Sign() > 0) != (b.Side == "long") {
			l.end(l.get(id), "position_closed")
		}
	}
}

func exitSide(b *evacct.Bracket) string {
	if b.Side == "long" {
		return string(order.Sell)
	}
	return string(order.Buy)
}

// touchFor is the best price a bracket's exit could have traded at since
// the last decision on its rules: the highest bid for a long's sell, the
// lowest ask for a short's buy (the quote's own touch when the quote
// carries no best).
func touchFor(b *evacct.Bracket, q trading.Quote) events.Decimal {
	if b.Side == "long" {
		if q.HighBid != nil && q.HighBid.Cmp(q.Bid) > 0 {
			return *q.HighBid
		}
		return q.Bid
	}
	if q.LowAsk != nil && q.LowAsk.Cmp(q.Ask) < 0 {
		return *q.LowAsk
	}
	return q.Ask
}

// moves applies breakeven and trailing to the armed brackets on the quote's
// instrument: the stop moves to the best level either asks for when that is
// at least one tick better than where it rests.
func (l *legs) moves(q trading.Quote) {
	ids := make([]string, 0, len(l.s.Brackets))
	for id, b := range l.s.Brackets {
		if b.Instrument == q.Instrument && (b.Breakeven != nil || b.Trailing != nil) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ended := l.ended[id]; ended {
			continue
		}
		b := l.s.Brackets[id]
		if t, ok := l.touched[id]; ok {
			b = t
		}
		st := b.StopLeg()
		if st == nil || st.Price == nil {
			continue
		}
		touch := touchFor(b, q)
		if mb, ok := b.MarksBest(q.Marks); ok && b.Favours(mb, touch) {
			touch = mb // a mark since its anchor that this wake's quotes no longer hold (a restart)
		}
		l.move(id, b, touch)
	}
}

// move puts bracket id's working stop where its rules put it at touch (b is
// the bracket as this decision has it so far): the bracket, its rules' state
// and the stop's order are recorded there; nothing when no rule moves it.
func (l *legs) move(id string, b *evacct.Bracket, touch events.Decimal) {
	moved, ok := b.Moved(touch)
	if !ok {
		return
	}
	c := l.get(id)
	*c = *cloneBracket(&moved) // its own rules: later passes change them in place
	st := c.StopLeg()
	l.replace(st.ID, st.Quantity.Sub(st.Filled), st.Price)
}

// pathTrigger walks a quote path for bracket b's working stop: its rules
// move it at each new best touch of the path, as they would have quote by
// quote, and the first quote whose touch reaches the stop's level of that
// moment triggers it there. seed, when set, is the best touch of the quotes
// before the path since the stop rested (their high triggers nothing: the
// rules keep a stop behind the best touch), which moves it first. It returns that level, false when no quote of
// the path did. The stop's level at the end of the path is the one a move at
// the path's best touch gives (TestPropertyStopLevelDependsOnlyOnTheBestTouch),
// so walking changes nothing but the trigger a lagging move would miss.
func pathTrigger(b *evacct.Bracket, seed *events.Decimal, path []trading.Touch) (events.Decimal, bool) {
	st := b.StopLeg()
	if st == nil || st.Price == nil || (b.Breakeven == nil && b.Trailing == nil) {
		return events.Decimal{}, false
	}
	c := cloneBracket(b)
	st = c.StopLeg()
	level := *st.Price
	moveTo := func(best events.Decimal) {
		if lv, _, be, trail := MoveTo(c, best); be || trail {
			level = lv
			st.Price = &level // the clone's stop is where the walk has it: MoveTo moves on from there
			if be {
				c.Breakeven.Done = true
			}
		}
	}
	var best events.Decimal
	if seed != nil {
		moveTo(*seed)
	}
	for i, t := range path {
		touch := t.Bid
		if b.Side != "long" {
			touch = t.Ask
		}
		if i == 0 || c.Favours(touch, best) {
			best = touch
			moveTo(best)
		}
		if !c.Favours(touch, level) { // at or through the stop
			return level, true
		}
	}
	return events.Decimal{}, false
}

// MoveTo is where breakeven and trailing would move a bracket's working
// stop at touch (evacct.Bracket.MoveStop).
func MoveTo(b *evacct.Bracket, touch events.Decimal) (level, best events.Decimal, be, trail bool) {
	return b.MoveStop(touch)
}

// LevelAt is MoveTo on b as it is now: where its rules put its working stop
// at a best touch, and whether they move it. The paper book's reactor asks
// it, while the account waits in the queue of move wakes, whether a quote
// has gone through where the stop would be by now. b is a bracket of an
// account's State, which Apply replaces whole and never changes in place,
// so the reactor may hold it while the account moves on without a copy.
func LevelAt(b *evacct.Bracket) func(best events.Decimal) (events.Decimal, bool) {
	return func(best events.Decimal) (events.Decimal, bool) {
		lv, _, be, trail := MoveTo(b, best)
		return lv, be || trail
	}
}

// TrailOf is what the reactor indexes an active bracket's trailing stop by:
// the stop's id, the trailing distance, the touch that activates it (nil
// once it trails) and the tick its levels sit on; false without a trailing
// rule or a working stop with a price.
func TrailOf(b *evacct.Bracket) (stop string, distance events.Decimal, activation *events.Decimal, tick events.Decimal, ok bool) {
	st := b.StopLeg()
	r := b.Trailing
	if st == nil || st.Price == nil || r == nil || b.State != evacct.BracketActive {
		return "", distance, nil, tick, false
	}
	if !r.Active {
		activation = r.Activation
	}
	return st.ID, r.Distance, activation, b.Grid(), true
}

// WakeLevel is the touch at which a quote could move a bracket's stop:
// for a long, a bid at or above it; for a short, an ask at or below it.
func WakeLevel(b *evacct.Bracket) (events.Decimal, bool) {
	st := b.StopLeg()
	if st == nil || st.Price == nil || b.State != evacct.BracketActive {
		return events.Decimal{}, false
	}
	var level events.Decimal
	found := false
	pick := func(p events.Decimal) {
		if !found || b.Favours(level, p) {
			level, found = p, true
		}
	}
	if r := b.Breakeven; r != nil && !r.Done && b.Favours(r.StopPrice, *st.Price) {
		pick(r.Trigger)
	}
	if r := b.Trailing; r != nil {
		p := b.Toward(b.Toward(*st.Price, r.Distance), b.Grid())
		if r.Activation != nil && b.Favours(*r.Activation, p) {
			p = *r.Activation
		}
		pick(p)
	}
	return level, found
}

// openBracket is the bracket an order's exit plan opens: legs priced at
// basis, pre_armed on the entry entryID. Its BracketSet goes first in the
// decision's events; settleBrackets arms it on the entry's fills.
func openBracket(env commands.Envelope, key, instrument, side string, qty, basis events.Decimal, sp trading.Spec, p *trading.BracketPlan, entryID string) (evacct.BracketSet, error) {
	ladder := p.Ladder(sp, side, basis, qty)
	if len(ladder.Legs) == 0 {
		return evacct.BracketSet{}, commands.InvalidField("quantity", map[string]any{"lotStep": sp.LotStep.String()},
			"the plan places no leg for a quantity of %s: every target's share rounds to nothing at the lot step %s and it has no stop", qty, sp.LotStep)
	}
	b := evacct.Bracket{ID: env.DerivedID("b", 0), State: evacct.BracketActive, Instrument: instrument, Side: "long",
		EntryOrderID: entryID, EntryPrice: basis, Planned: qty, Armed: events.Int(0), Tick: sp.TickSize, Lot: sp.LotStep,
		PlanID: p.PlanID, PlanRevision: p.PlanRevision, ClientOrderID: key, Breakeven: ladder.Breakeven, Trailing: ladder.Trailing,
		CreatedAt: env.At, UpdatedAt: env.At}
	if order.Side(side) == order.Sell {
		b.Side = "short"
	}
	for i, lg := range ladder.Legs {
		b.Legs = append(b.Legs, evacct.BracketLeg{ID: env.DerivedID("l", i), Kind: lg.Kind, State: evacct.LegPreArmed,
			Price: lg.Price, Quantity: lg.Quantity, Share: lg.Share, Filled: events.Int(0), ParentOrderID: entryID})
	}
	return evacct.BracketSet{Bracket: b}, nil
}

// drift refuses a market entry whose touch moved more than DriftTicks from the previewed entry.
func drift(sp trading.Spec, previewed, touch events.Decimal) error {
	if sp.TickSize.Sign() <= 0 {
		return nil
	}
	bound := sp.TickSize.Mul(events.Int(trading.DriftTicks))
	if touch.Sub(previewed).Abs().Cmp(bound) > 0 {
		return commands.Refuse(commands.CodeExitPlanConflict,
			"the price moved more than the exit plan's drift bound since the preview: preview again",
			map[string]any{"reason": "drift", "previewedEntry": previewed.String(), "entry": touch.String(), "maxTicks": trading.DriftTicks})
	}
	return nil
}

package account_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
	evplan "github.com/svc/engine/events/plan"
)

// pmkt is the provider's market: BTCUSDT on a tick of 0.1 and a lot step
// of 0.001, quoted at 60000 when quoted is set.
func pmkt(quoted bool) trading.Market {
	m := trading.Market{Specs: map[string]trading.Spec{"BTCUSDT": {Symbol: "BTCUSDT", Multiplier: dec("1"), TickSize: dec("0.1"),
		LotStep: dec("0.001"), MinQuantity: dec("0.001")}}, Quotes: map[string]trading.Quote{}}
	if quoted {
		m.Quotes["BTCUSDT"] = trading.Quote{Instrument: "BTCUSDT", Bid: dec("60000"), Ask: dec("60000"), At: t0}
	}
	return m
}

// oneTarget: a stop 100 ticks (10) away and one target 200 ticks (20) away, all of it.
func oneTarget() evplan.Spec {
	return evplan.Spec{Name: "one", Stop: &evplan.Distance{Ticks: 100},
		Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 200}, Share: dec("1")}}}
}

// twoTargets: a stop 100 ticks away, half at 100 ticks, half at 200.
func twoTargets() evplan.Spec {
	return evplan.Spec{Name: "two", Stop: &evplan.Distance{Ticks: 100},
		Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 100}, Share: dec("0.5")}, {Distance: evplan.Distance{Ticks: 200}, Share: dec("0.5")}}}
}

// pacct is a linked provider account driven command by command through
// Decide and Apply, as its mailbox would.
type pacct struct {
	t   *testing.T
	s   *account.State
	n   int
	evs []events.Event // the last decision's
	at  time.Duration  // the decisions' time, after t0
}

func linked(t *testing.T) *pacct {
	p := &pacct{t: t, s: account.New("a1")}
	p.do(link(evacct.ProviderSettings{}))
	return p
}

func (p *pacct) decide(cmd commands.Command) ([]events.Event, error) {
	p.t.Helper()
	p.n++
	e := env(p.n, cmd)
	e.At = e.At.Add(p.at)
	evs, err := account.Decide(p.s, e)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		p.s = account.Apply(p.s, e)
	}
	p.evs = evs
	return evs, nil
}

func (p *pacct) do(cmd commands.Command) []events.Event {
	p.t.Helper()
	evs, err := p.decide(cmd)
	if err != nil {
		p.t.Fatalf("%T: %v", cmd, err)
	}
	return evs
}

// intents are the decision's intents of op.
func intents(evs []events.Event, op string) []evacct.OrderIntended {
	var out []evacct.OrderIntended
	for _, e := range evs {
		if in, ok := e.(evacct.OrderIntended); ok && in.Op == op {
			out = append(out, in)
		}
	}
	return out
}

// atProvider is an intent's order as the provider reports it: a target as
// its take-profit trigger.
func atProvider(in evacct.OrderIntended, status, filled string) *providercmd.Order {
	o := in.Order
	po := &providercmd.Order{ProviderClientOrderID: in.ProviderClientOrderID, ProviderOrderID: "p-" + o.BrokerOrderID, Instrument: o.Instrument,
		Side: o.Side, OrderType: o.OrderType, Status: status, Quantity: o.Quantity, Filled: dec(filled), LimitPrice: o.LimitPrice,
		StopPrice: o.StopPrice, ReduceOnly: o.ReduceOnly, TimeInForce: o.TimeInForce}
	if o.OrderType == "limit" && o.ReduceOnly {
		po.OrderType, po.StopPrice, po.LimitPrice = "take_profit", o.LimitPrice, nil
	}
	if po.Filled.Sign() > 0 {
		avg := o.StopPrice
		if o.LimitPrice != nil {
			avg = o.LimitPrice
		}
		po.AvgPrice = avg
	}
	return po
}

// settleAll settles the intents as the provider answered each (accepted
// and working, unless outcome says otherwise).
func (p *pacct) settleAll(ins []evacct.OrderIntended, outcome string) {
	p.t.Helper()
	for _, in := range ins {
		c := &providercmd.Settle{Key: providercmd.IntentKey(in.Op, in.ProviderClientOrderID), Outcome: outcome}
		if outcome == evacct.OutcomeAccepted && in.Op != evacct.IntentCancel {
			c.Order = atProvider(in, "working", "0")
		}
		p.do(c)
	}
}

// bracket is the account's only active bracket.
func (p *pacct) bracket() *evacct.Bracket {
	p.t.Helper()
	if len(p.s.Brackets) != 1 {
		p.t.Fatalf("want one active bracket, have %d", len(p.s.Brackets))
	}
	for _, b := range p.s.Brackets {
		return b
	}
	return nil
}

// legOf is the leg of kind (the nth of it) of bracket b.
func legOf(b *evacct.Bracket, kind string, nth int) evacct.BracketLeg {
	for _, l := range b.Legs {
		if l.Kind == kind {
			if nth == 0 {
				return l
			}
			nth--
		}
	}
	return evacct.BracketLeg{}
}

// resting lists the book's working reduce-only orders as "type@level qty".
func (p *pacct) resting() []string {
	var out []string
	for _, id := range sortedIDs(p.s.Working) {
		w := p.s.Working[id]
		if !w.ReduceOnly {
			continue
		}
		lv := w.LimitPrice
		if lv == nil {
			lv = w.StopPrice
		}
		out = append(out, w.OrderType+"@"+lv.String()+" "+w.Quantity.Sub(w.Filled).String())
	}
	slices.Sort(out)
	return out
}

func sortedIDs[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// entered places a market buy of qty with plan at a quote of 60000 and
// has it fill at fill: the legs' intents are the fill's decision's.
func entered(t *testing.T, spec evplan.Spec, qty, fill string) (*pacct, []evacct.OrderIntended) {
	t.Helper()
	p := linked(t)
	c := &trading.PlaceOrder{ClientOrderID: "e1", Instrument: "BTCUSDT", Side: "buy", OrderType: "market", Quantity: dec(qty), TimeInForce: "gtc",
		Bracket: planned(spec, "60000"), Market: pmkt(true)}
	p.do(c)
	f := dec(fill)
	evs := p.do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, pcoid("e1")), Outcome: evacct.OutcomeAccepted,
		Order: &providercmd.Order{ProviderClientOrderID: pcoid("e1"), ProviderOrderID: "9", Instrument: "BTCUSDT", Side: "buy", OrderType: "market",
			Status: "filled", Quantity: dec(qty), Filled: dec(qty), AvgPrice: &f}})
	return p, intents(evs, account.IntentExit)
}

// Exit plans on a provider account: the legs are the provider's own
// reduce-only orders, placed once the entry fills, each an intent under
// its own derived client order id; the OCO is the engine's.
func TestProviderExits(t *testing.T) {
	t.Run("an entry with an exit plan is one intent with its bracket; nothing of the bracket goes out before the fill", func(t *testing.T) {
		p := linked(t)
		evs := p.do(&trading.PlaceOrder{ClientOrderID: "e1", Instrument: "BTCUSDT", Side: "buy", OrderType: "limit", LimitPrice: ptr("59000"),
			Quantity: dec("0.01"), TimeInForce: "gtc", Bracket: planned(oneTarget(), "59000"), Market: pmkt(false)})
		set, in := only[evacct.BracketSet](t, evs), only[evacct.OrderIntended](t, evs)
		if in.Op != evacct.IntentPlace || in.Order.BracketID != set.Bracket.ID || set.Bracket.EntryOrderID != in.Order.BrokerOrderID {
			t.Fatalf("intent %+v bracket %+v", in, set.Bracket)
		}
		if st, tg := legOf(&set.Bracket, evacct.LegStop, 0), legOf(&set.Bracket, evacct.LegTarget, 0); st.State != evacct.LegPreArmed ||
			!is(st.Price, "58990") || !is(tg.Price, "59020") {
			t.Fatalf("legs %+v", set.Bracket.Legs)
		}
		evs = p.do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, pcoid("e1")), Outcome: evacct.OutcomeAccepted,
			Order: &providercmd.Order{ProviderClientOrderID: pcoid("e1"), Instrument: "BTCUSDT", Side: "buy", OrderType: "limit", Status: "working",
				Quantity: dec("0.01"), Filled: dec("0"), LimitPrice: ptr("59000")}})
		if len(intents(evs, account.IntentExit)) != 0 || count[evacct.BracketSet](evs) != 0 {
			t.Fatalf("a resting entry armed something: %v", evs)
		}
	})

	t.Run("the fill of a market entry moves the levels to its price and places both legs, reduce-only, on the derived ids", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60005")
		b := p.bracket()
		st, tg := legOf(b, evacct.LegStop, 0), legOf(b, evacct.LegTarget, 0)
		if b.EntryOrderID != "" || b.Armed.String() != "0.01" || st.State != evacct.LegWorking || !is(st.Price, "59995") ||
			!is(tg.Price, "60025") || st.ParentOrderID != "" {
			t.Fatalf("bracket %+v", b)
		}
		if len(legs) != 2 {
			t.Fatalf("leg intents %+v", legs)
		}
		for _, in := range legs {
			o := in.Order
			if !o.ReduceOnly || o.Side != "sell" || o.Quantity.String() != "0.01" || o.BracketID != b.ID ||
				in.ProviderClientOrderID != pcoid(o.BrokerOrderID) || o.ClientOrderID != o.BrokerOrderID {
				t.Fatalf("leg intent %+v", in)
			}
		}
		if len(p.resting()) != 0 {
			t.Fatalf("the book holds %v before the provider took the legs", p.resting())
		}
		p.settleAll(legs, evacct.OutcomeAccepted)
		if got := p.resting(); !slices.Equal(got, []string{"limit@60025 0.01", "stop@59995 0.01"}) {
			t.Fatalf("resting %v", got)
		}
		// The provider's own reading of the legs (a target as a take profit) changes nothing.
		var obs []providercmd.Order
		for _, in := range legs {
			obs = append(obs, *atProvider(in, "working", "0"))
		}
		if evs := p.do(&providercmd.Observe{Cause: "stream", Orders: obs}); len(evs) != 0 {
			t.Fatalf("the legs as the provider reports them recorded %v", evs)
		}
	})

	t.Run("a target's fill cancels the stop at the provider; the bracket ends once the stop is gone", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		var target evacct.OrderIntended
		for _, in := range legs {
			if in.Order.LimitPrice != nil {
				target = in
			}
		}
		evs := p.do(&providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{*atProvider(target, "filled", "0.01")}})
		cancels := intents(evs, evacct.IntentCancel)
		if len(cancels) != 1 || cancels[0].Order.OrderType != "stop" || count[evacct.BracketEnd](evs) != 0 {
			t.Fatalf("the fill's decision %v", evs)
		}
		if b := p.bracket(); legOf(b, evacct.LegTarget, 0).State != evacct.LegFilled || legOf(b, evacct.LegStop, 0).State == evacct.LegWorking {
			t.Fatalf("bracket %+v", b.Legs)
		}
		if again := p.do(&providercmd.Observe{Cause: "stream", Balances: []evacct.BalanceObserved{{Asset: "USDT", Wallet: dec("1000.2"), Available: dec("1000.2")}}}); len(intents(again, evacct.IntentCancel)) != 0 {
			t.Fatalf("the cancel was recorded twice: %v", again)
		}
		evs = p.do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentCancel, cancels[0].ProviderClientOrderID), Outcome: evacct.OutcomeAccepted})
		if e := only[evacct.BracketEnd](t, evs); e.Reason != "targets_filled" || len(p.s.Brackets) != 0 || len(p.resting()) != 0 {
			t.Fatalf("after the stop's cancel: %v, brackets %d, resting %v", evs, len(p.s.Brackets), p.resting())
		}
	})

	t.Run("the stop's fill cancels every target", func(t *testing.T) {
		p, legs := entered(t, twoTargets(), "0.02", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		var stop evacct.OrderIntended
		for _, in := range legs {
			if in.Order.StopPrice != nil {
				stop = in
			}
		}
		evs := p.do(&providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{*atProvider(stop, "filled", "0.02")}})
		if c := intents(evs, evacct.IntentCancel); len(c) != 2 || c[0].Order.OrderType != "limit" || c[1].Order.OrderType != "limit" {
			t.Fatalf("cancels %+v", c)
		}
		p.settleAll(intents(evs, evacct.IntentCancel), evacct.OutcomeAccepted)
		if len(p.s.Brackets) != 0 || only[evacct.BracketEnd](t, p.evs).Reason != "stop_filled" {
			t.Fatalf("brackets %d, last %v", len(p.s.Brackets), p.evs)
		}
	})

	t.Run("a target's fill of two resizes the stop: a new stop rests first, then the old one is canceled", func(t *testing.T) {
		p, legs := entered(t, twoTargets(), "0.02", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		var near evacct.OrderIntended
		for _, in := range legs {
			if in.Order.LimitPrice != nil && is(in.Order.LimitPrice, "60010") {
				near = in
			}
		}
		evs := p.do(&providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{*atProvider(near, "filled", "0.01")}})
		placed := intents(evs, account.IntentExit)
		if len(placed) != 1 || placed[0].Order.OrderType != "stop" || placed[0].Order.Quantity.String() != "0.01" ||
			placed[0].Order.BrokerOrderID == legOf(p.bracket(), evacct.LegStop, 0).ID || len(intents(evs, evacct.IntentCancel)) != 0 {
			t.Fatalf("the target's fill: %v", evs)
		}
		if st := legOf(p.bracket(), evacct.LegStop, 0); st.Quantity.String() != "0.01" || st.State != evacct.LegWorking {
			t.Fatalf("stop leg %+v", st)
		}
		p.settleAll(placed, evacct.OutcomeAccepted)
		cancels := intents(p.evs, evacct.IntentCancel)
		if len(cancels) != 1 || cancels[0].Order.Quantity.String() != "0.02" {
			t.Fatalf("the new stop rests: %v", p.evs)
		}
		p.settleAll(cancels, evacct.OutcomeAccepted)
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.01", "stop@59990 0.01"}) || len(p.s.Brackets) != 1 {
			t.Fatalf("resting %v", got)
		}
	})

	t.Run("a leg the provider refuses is canceled; the other rests and the bracket protects with it", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		for _, in := range legs {
			outcome := evacct.OutcomeAccepted
			if in.Order.StopPrice != nil {
				outcome = evacct.OutcomeRejected
			}
			p.settleAll([]evacct.OrderIntended{in}, outcome)
		}
		b := p.bracket()
		if legOf(b, evacct.LegStop, 0).State != evacct.LegCanceled || legOf(b, evacct.LegTarget, 0).State != evacct.LegWorking {
			t.Fatalf("legs %+v", b.Legs)
		}
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.01"}) {
			t.Fatalf("resting %v", got)
		}
	})

	t.Run("every leg refused: the bracket ends", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs[:1], evacct.OutcomeRejected)
		p.settleAll(legs[1:], evacct.OutcomeNotSent)
		if len(p.s.Brackets) != 0 || only[evacct.BracketEnd](t, p.evs).Reason != "legs_canceled" {
			t.Fatalf("brackets %d, last %v", len(p.s.Brackets), p.evs)
		}
	})

	t.Run("an entry the provider rejects ends its bracket", func(t *testing.T) {
		p := linked(t)
		p.do(&trading.PlaceOrder{ClientOrderID: "e1", Instrument: "BTCUSDT", Side: "buy", OrderType: "market", Quantity: dec("0.01"), TimeInForce: "gtc",
			Bracket: planned(oneTarget(), "60000"), Market: pmkt(true)})
		evs := p.do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, pcoid("e1")), Outcome: evacct.OutcomeRejected})
		if only[evacct.BracketEnd](t, evs).Reason != "entry_canceled" || len(p.s.Brackets) != 0 {
			t.Fatalf("%v", evs)
		}
	})

	t.Run("a limit entry's fills arm the legs for what filled and place them again at the whole size", func(t *testing.T) {
		p := linked(t)
		p.do(&trading.PlaceOrder{ClientOrderID: "e1", Instrument: "BTCUSDT", Side: "buy", OrderType: "limit", LimitPrice: ptr("60000"),
			Quantity: dec("0.02"), TimeInForce: "gtc", Bracket: planned(oneTarget(), "60000"), Market: pmkt(false)})
		entry := func(status, filled string) *providercmd.Order {
			avg := dec("60000")
			return &providercmd.Order{ProviderClientOrderID: pcoid("e1"), Instrument: "BTCUSDT", Side: "buy", OrderType: "limit", Status: status,
				Quantity: dec("0.02"), Filled: dec(filled), AvgPrice: &avg, LimitPrice: ptr("60000")}
		}
		p.do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, pcoid("e1")), Outcome: evacct.OutcomeAccepted, Order: entry("working", "0")})
		first := intents(p.do(&providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{*entry("partially_filled", "0.01")}}), account.IntentExit)
		if len(first) != 2 || first[0].Order.Quantity.String() != "0.01" || p.bracket().EntryOrderID == "" {
			t.Fatalf("the first fill's legs %+v", first)
		}
		p.settleAll(first, evacct.OutcomeAccepted)
		second := intents(p.do(&providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{*entry("filled", "0.02")}}), account.IntentExit)
		if len(second) != 2 || second[0].Order.Quantity.String() != "0.02" || len(intents(p.evs, evacct.IntentCancel)) != 0 || p.bracket().EntryOrderID != "" {
			t.Fatalf("the second fill's legs %+v, events %v", second, p.evs)
		}
		p.settleAll(second, evacct.OutcomeAccepted)
		if got := p.resting(); len(got) != 4 {
			t.Fatalf("before the old legs' cancels settle: %v", got)
		}
		var cancels []evacct.OrderIntended
		for _, in := range p.s.OpenIntents() {
			if in.Op == evacct.IntentCancel {
				cancels = append(cancels, in)
			}
		}
		p.settleAll(cancels, evacct.OutcomeAccepted)
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.02", "stop@59990 0.02"}) {
			t.Fatalf("resting %v", got)
		}
	})

	t.Run("a change places the leg again at its level; refused, the leg stays where its order rests", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		b := p.bracket()
		stop := legOf(b, evacct.LegStop, 0)
		evs := p.do(&trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: stop.ID, Price: dec("59950")}}, Market: pmkt(true)})
		moved := intents(evs, account.IntentExit)
		if len(moved) != 1 || !is(moved[0].Order.StopPrice, "59950") || moved[0].Order.ClientOrderID != stop.ID || len(intents(evs, evacct.IntentCancel)) != 0 {
			t.Fatalf("the change: %v", evs)
		}
		p.settleAll(moved, evacct.OutcomeRejected)
		if st := legOf(p.bracket(), evacct.LegStop, 0); !is(st.Price, "59990") || st.State != evacct.LegWorking {
			t.Fatalf("after the refusal the stop leg is %+v", st)
		}
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.01", "stop@59990 0.01"}) {
			t.Fatalf("resting %v", got)
		}
		evs = p.do(&trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: stop.ID, Price: dec("59960")}}, Market: pmkt(true)})
		p.settleAll(intents(evs, account.IntentExit), evacct.OutcomeAccepted)
		p.settleAll(intents(p.evs, evacct.IntentCancel), evacct.OutcomeAccepted)
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.01", "stop@59960 0.01"}) {
			t.Fatalf("resting %v", got)
		}
	})

	t.Run("a change while the last one is being placed waits for it, then places the newest level and cancels the rest", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		b := p.bracket()
		stop := legOf(b, evacct.LegStop, 0)
		first := intents(p.do(&trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: stop.ID, Price: dec("59950")}}, Market: pmkt(true)}), account.IntentExit)
		if evs := p.do(&trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: stop.ID, Price: dec("59960")}}, Market: pmkt(true)}); len(intents(evs, account.IntentExit)) != 0 {
			t.Fatalf("a second placement while the first is under way: %v", evs)
		}
		p.settleAll(first, evacct.OutcomeAccepted)
		second := intents(p.evs, account.IntentExit)
		if len(second) != 1 || !is(second[0].Order.StopPrice, "59960") || len(intents(p.evs, evacct.IntentCancel)) != 0 {
			t.Fatalf("after the first settled: %v", p.evs)
		}
		p.settleAll(second, evacct.OutcomeAccepted)
		cancels := intents(p.evs, evacct.IntentCancel)
		if len(cancels) != 2 {
			t.Fatalf("the newest rests: %v", p.evs)
		}
		p.settleAll(cancels, evacct.OutcomeAccepted)
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.01", "stop@59960 0.01"}) {
			t.Fatalf("resting %v", got)
		}
	})

	t.Run("a leg the trader moved at the provider takes the new level; nothing is placed over it", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		var stop evacct.OrderIntended
		for _, in := range legs {
			if in.Order.StopPrice != nil {
				stop = in
			}
		}
		moved := atProvider(stop, "working", "0")
		moved.StopPrice = ptr("59900")
		evs := p.do(&providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{*moved}})
		if len(intents(evs, account.IntentExit)) != 0 || len(intents(evs, evacct.IntentCancel)) != 0 || !is(legOf(p.bracket(), evacct.LegStop, 0).Price, "59900") {
			t.Fatalf("%v", evs)
		}
	})

	t.Run("a withdrawal cancels the legs; a cancel that does not go through leaves the bracket live with its order", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		b := p.bracket()
		evs := p.do(&trading.WithdrawBracket{BracketID: b.ID})
		cancels := intents(evs, evacct.IntentCancel)
		if len(cancels) != 2 || count[evacct.BracketEnd](evs) != 0 {
			t.Fatalf("the withdrawal %v", evs)
		}
		p.settleAll(cancels[:1], evacct.OutcomeAccepted)
		p.settleAll(cancels[1:], evacct.OutcomeNotSent)
		if len(p.s.Brackets) != 1 || len(p.resting()) != 1 {
			t.Fatalf("a stuck cancel: brackets %d, resting %v", len(p.s.Brackets), p.resting())
		}
		if evs := p.do(&providercmd.Observe{Cause: "periodic", Complete: false}); len(evs) != 0 {
			t.Fatalf("a stuck order is cancelled again by itself: %v", evs)
		}
		evs = p.do(&trading.WithdrawBracket{BracketID: b.ID})
		again := intents(evs, evacct.IntentCancel)
		if len(again) != 1 || again[0].ProviderClientOrderID != cancels[1].ProviderClientOrderID {
			t.Fatalf("the withdrawal again: %v", evs)
		}
		p.settleAll(again, evacct.OutcomeAccepted)
		if len(p.s.Brackets) != 0 || only[evacct.BracketEnd](t, p.evs).Reason != "withdrawn" || len(p.resting()) != 0 {
			t.Fatalf("brackets %d, resting %v", len(p.s.Brackets), p.resting())
		}
	})

	t.Run("a position's bracket is armed at once: its legs are in the protection's commit", func(t *testing.T) {
		p, _ := entered(t, oneTarget(), "0.01", "60000")
		for _, id := range sortedIDs(p.s.Brackets) {
			p.do(&trading.WithdrawBracket{BracketID: id})
			p.settleAll(intents(p.evs, evacct.IntentCancel), evacct.OutcomeAccepted)
		}
		for _, in := range p.s.OpenIntents() { // the first legs, never settled: the provider never took them
			p.settleAll([]evacct.OrderIntended{in}, evacct.OutcomeNeverPlaced)
		}
		if len(p.s.Brackets) != 0 {
			t.Fatalf("brackets %d", len(p.s.Brackets))
		}
		evs := p.do(&trading.Protect{ClientOrderID: "pr1", Instrument: "BTCUSDT", PlanID: "xp_1", PlanRevision: "rev_1",
			Plan: planned(twoTargets(), "0"), Market: pmkt(false)})
		set := only[evacct.BracketSet](t, evs)
		if set.Bracket.ClientOrderID != "pr1" || set.Bracket.Armed.String() != "0.01" || len(intents(evs, account.IntentExit)) != 3 {
			t.Fatalf("the protection %v", evs) // the stop, and 0.01 in halves at the lot step: 0.005 each
		}
		if _, err := p.decide(&trading.Protect{ClientOrderID: "pr1", Instrument: "BTCUSDT", PlanID: "xp_1", PlanRevision: "rev_1",
			Plan: planned(twoTargets(), "0"), Market: pmkt(false)}); !isCode(err, commands.CodeIdempotencyConflict) {
			t.Fatalf("the protection again: %v", err)
		}
	})

	t.Run("a resting entry protected: the bracket waits on it, the entry rests on unchanged", func(t *testing.T) {
		p := linked(t)
		p.do(pbuy("l1", "limit"))
		p.do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, pcoid("l1")), Outcome: evacct.OutcomeAccepted,
			Order: &providercmd.Order{ProviderClientOrderID: pcoid("l1"), Instrument: "BTCUSDT", Side: "buy", OrderType: "limit", Status: "working",
				Quantity: dec("0.01"), Filled: dec("0"), LimitPrice: ptr("50000")}})
		id := p.s.OrderID("l1")
		evs := p.do(&trading.Protect{ClientOrderID: "pr1", EntryOrderID: id, PlanID: "xp_1", PlanRevision: "rev_1", Plan: planned(oneTarget(), "0"),
			Market: pmkt(false)})
		if b := only[evacct.BracketSet](t, evs).Bracket; b.EntryOrderID != id || len(evs) != 1 || p.s.Working[id] == nil {
			t.Fatalf("%v", evs)
		}
		if _, err := p.decide(&trading.ReplaceOrder{BrokerOrderID: id, LimitPrice: ptr("50100")}); !isCode(err, commands.CodeInvalidRequest) {
			t.Fatalf("a replace of a bracket's entry: %v", err)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		trail := oneTarget()
		trail.Trailing = &evplan.Trailing{Distance: evplan.Distance{Ticks: 10}}
		for _, tc := range []struct {
			name string
			cmd  commands.Command
			code commands.Code
		}{
			{"a trailing stop is served on the paper book only", &trading.PlaceOrder{ClientOrderID: "t1", Instrument: "BTCUSDT", Side: "buy",
				OrderType: "market", Quantity: dec("0.01"), TimeInForce: "gtc", Bracket: planned(trail, "60000"), Market: pmkt(true)}, commands.CodeInvalidRequest},
			{"a reduce-only entry", &trading.PlaceOrder{ClientOrderID: "t2", Instrument: "BTCUSDT", Side: "sell", ReduceOnly: true,
				OrderType: "market", Quantity: dec("0.01"), TimeInForce: "gtc", Bracket: planned(oneTarget(), "60000"), Market: pmkt(true)}, commands.CodeInvalidRequest},
			{"past the drift bound from the preview", &trading.PlaceOrder{ClientOrderID: "t3", Instrument: "BTCUSDT", Side: "buy",
				OrderType: "market", Quantity: dec("0.01"), TimeInForce: "gtc", Bracket: planned(oneTarget(), "59000"), Market: pmkt(true)}, commands.CodeExitPlanConflict},
			{"a replace of a leg: move it with PATCH", &trading.ReplaceOrder{BrokerOrderID: legs[0].Order.BrokerOrderID, LimitPrice: ptr("60030")}, commands.CodeInvalidRequest},
			{"a change of no bracket", &trading.ChangeBracket{BracketID: "nope", Legs: []trading.LegPrice{{ID: "x", Price: dec("1")}}}, commands.CodeNotFound},
			{"a protection under a trailing plan", &trading.Protect{ClientOrderID: "pr2", Instrument: "BTCUSDT", PlanID: "xp_1", PlanRevision: "rev_1",
				Plan: planned(trail, "0"), Market: pmkt(false)}, commands.CodeInvalidRequest},
		} {
			if _, err := p.decide(tc.cmd); !isCode(err, tc.code) {
				t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
			}
		}
	})

	t.Run("a position closed elsewhere ends the bracket: its orders are canceled", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		evs := p.do(&providercmd.Observe{Cause: "stream", Positions: []evacct.Position{{Instrument: "BTCUSDT", Quantity: dec("0")}}})
		p.settleAll(intents(evs, evacct.IntentCancel), evacct.OutcomeAccepted)
		if len(intents(evs, evacct.IntentCancel)) != 2 || len(p.s.Brackets) != 0 || only[evacct.BracketEnd](t, p.evs).Reason != "position_closed" {
			t.Fatalf("%v / %v", evs, p.evs)
		}
	})

	t.Run("flatten ends every bracket once its orders are canceled", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		p.settleAll(legs, evacct.OutcomeAccepted)
		evs := p.do(&trading.Flatten{})
		if len(intents(evs, evacct.IntentCancel)) != 2 || len(intents(evs, evacct.IntentPlace)) != 1 || len(intents(evs, account.IntentExit)) != 0 {
			t.Fatalf("flatten %v", evs)
		}
		p.settleAll(intents(evs, evacct.IntentCancel), evacct.OutcomeAccepted)
		if len(p.s.Brackets) != 0 {
			t.Fatalf("brackets %d", len(p.s.Brackets))
		}
	})
}

// is reports whether d is the number s, however many zeros it carries.
func is(d *events.Decimal, s string) bool { return d != nil && d.Cmp(dec(s)) == 0 }

func isCode(err error, code commands.Code) bool {
	var r *commands.Refusal
	return errors.As(err, &r) && r.Code == code
}

// A provider account's brackets replay to the live state.
func TestProviderExitsReplay(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New:      func() *account.State { return account.New("a1") },
		Decide:   account.Decide,
		Apply:    account.Apply,
		Registry: events.Merge(account.Registry(), evidem.Registry()),
	})
	n := 0
	do := func(cmd commands.Command) []events.Event {
		t.Helper()
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		return r.Do(commands.Envelope{ID: id, At: t0.Add(time.Duration(n) * time.Second), Cmd: cmd})
	}
	settle := func(ins []evacct.OrderIntended, outcome string) {
		for _, in := range ins {
			c := &providercmd.Settle{Key: providercmd.IntentKey(in.Op, in.ProviderClientOrderID), Outcome: outcome}
			if outcome == evacct.OutcomeAccepted && in.Op != evacct.IntentCancel {
				c.Order = atProvider(in, "working", "0")
			}
			do(c)
		}
	}
	do(link(evacct.ProviderSettings{}))
	do(&trading.PlaceOrder{ClientOrderID: "e1", Instrument: "BTCUSDT", Side: "buy", OrderType: "market", Quantity: dec("0.02"), TimeInForce: "gtc",
		Bracket: planned(twoTargets(), "60000"), Market: pmkt(true)})
	f := dec("60000")
	legs := intents(do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, pcoid("e1")), Outcome: evacct.OutcomeAccepted,
		Order: &providercmd.Order{ProviderClientOrderID: pcoid("e1"), Instrument: "BTCUSDT", Side: "buy", OrderType: "market", Status: "filled",
			Quantity: dec("0.02"), Filled: dec("0.02"), AvgPrice: &f}}), account.IntentExit)
	settle(legs[:2], evacct.OutcomeAccepted)
	settle(legs[2:], evacct.OutcomeRejected)
	var b *evacct.Bracket
	for _, x := range r.Live().Brackets {
		b = x
	}
	evs := do(&trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: legOf(b, evacct.LegStop, 0).ID, Price: dec("59950")}}, Market: pmkt(true)})
	settle(intents(evs, account.IntentExit), evacct.OutcomeAccepted)
	for _, in := range r.Live().OpenIntents() {
		settle([]evacct.OrderIntended{in}, evacct.OutcomeAccepted)
	}
	evs = do(&trading.WithdrawBracket{BracketID: b.ID})
	settle(intents(evs, evacct.IntentCancel), evacct.OutcomeNotSent)
	evs = do(&trading.WithdrawBracket{BracketID: b.ID})
	settle(intents(evs, evacct.IntentCancel), evacct.OutcomeAccepted)
	if len(r.Live().Brackets) != 0 {
		t.Fatalf("brackets %d", len(r.Live().Brackets))
	}
	r.Check()
}

func TestALegThatDidNotReachTheProviderIsPlacedAgain(t *testing.T) {
	stopOf := func(t *testing.T, ins []evacct.OrderIntended) (stop evacct.OrderIntended, others []evacct.OrderIntended) {
		t.Helper()
		for _, in := range ins {
			if in.Order.StopPrice != nil {
				stop = in
			} else {
				others = append(others, in)
			}
		}
		if stop.ProviderClientOrderID == "" {
			t.Fatalf("no stop among %+v", ins)
		}
		return stop, others
	}
	settle := func(p *pacct, in evacct.OrderIntended, outcome, reason string, retryAfter int) []events.Event {
		p.t.Helper()
		return p.do(&providercmd.Settle{Key: providercmd.IntentKey(in.Op, in.ProviderClientOrderID), Outcome: outcome, Reason: reason, RetryAfter: retryAfter})
	}
	// waiting checks the stop leg is working, rests nowhere and is placed
	// again at t0+at after retries placements that did not reach the provider.
	waiting := func(p *pacct, at time.Duration, retries int) {
		p.t.Helper()
		lg := legOf(p.bracket(), evacct.LegStop, 0)
		if lg.State != evacct.LegWorking || lg.RetryAt == nil || !lg.RetryAt.Equal(t0.Add(at)) || lg.Retries != retries {
			p.t.Fatalf("stop leg %+v, want working, retry at t0+%v after %d", lg, at, retries)
		}
		if got := account.RetryDue(p.s); !got.Equal(t0.Add(at)) {
			p.t.Fatalf("RetryDue %v, want t0+%v", got, at)
		}
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.01"}) {
			p.t.Fatalf("resting %v", got)
		}
	}
	// retry decides RetryExits at t0+at and returns its leg intents.
	retry := func(p *pacct, at time.Duration) []evacct.OrderIntended {
		p.t.Helper()
		p.at = at
		return intents(p.do(&providercmd.RetryExits{}), account.IntentExit)
	}

	t.Run("unreachable: placed again after 1 s, then 2 s, under new ids; accepted, the count starts again", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		stop, target := stopOf(t, legs)
		p.settleAll(target, evacct.OutcomeAccepted)
		if evs := settle(p, stop, evacct.OutcomeNotSent, evacct.ReasonUnavailable, 0); len(intents(evs, account.IntentExit)) != 0 {
			t.Fatalf("placed again at once: %v", evs)
		}
		waiting(p, time.Second, 1)
		if got := retry(p, 999*time.Millisecond); len(got) != 0 || len(p.evs) != 0 {
			t.Fatalf("before its time: %v", p.evs)
		}
		again := retry(p, time.Second)
		if len(again) != 1 || again[0].ProviderClientOrderID == stop.ProviderClientOrderID || again[0].Order.StopPrice.String() != "59990" ||
			again[0].Order.Quantity.String() != "0.01" || !again[0].Order.ReduceOnly {
			t.Fatalf("placed again %+v (first %s)", again, stop.ProviderClientOrderID)
		}
		if lg := legOf(p.bracket(), evacct.LegStop, 0); lg.RetryAt != nil || lg.Retries != 1 || !account.RetryDue(p.s).IsZero() {
			t.Fatalf("leg while its placement is out %+v", lg)
		}
		settle(p, again[0], evacct.OutcomeNotSent, evacct.ReasonUnavailable, 0)
		waiting(p, 3*time.Second, 2)
		third := retry(p, 3*time.Second)
		p.settleAll(third, evacct.OutcomeAccepted)
		lg := legOf(p.bracket(), evacct.LegStop, 0)
		if lg.State != evacct.LegWorking || lg.RetryAt != nil || lg.Retries != 0 {
			t.Fatalf("leg once it rests %+v", lg)
		}
		if got := p.resting(); !slices.Equal(got, []string{"limit@60020 0.01", "stop@59990 0.01"}) {
			t.Fatalf("resting %v", got)
		}
		if got := retry(p, time.Hour); len(p.evs) != 0 {
			t.Fatalf("nothing due, yet %v %v", got, p.evs)
		}
	})

	t.Run("now: the provider answers again, every waiting leg is placed before its time", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		stop, target := stopOf(t, legs)
		p.settleAll(target, evacct.OutcomeAccepted)
		settle(p, stop, evacct.OutcomeNotSent, evacct.ReasonThrottled, 30)
		waiting(p, 30*time.Second, 1)
		p.at = time.Second
		again := intents(p.do(&providercmd.RetryExits{Now: true}), account.IntentExit)
		if len(again) != 1 || again[0].Order.StopPrice.String() != "59990" || !account.RetryDue(p.s).IsZero() {
			t.Fatalf("placed now %+v, due %v", again, account.RetryDue(p.s))
		}
	})

	t.Run("the wait doubles up to a minute", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		stop, target := stopOf(t, legs)
		p.settleAll(target, evacct.OutcomeAccepted)
		at := time.Duration(0)
		for n, want := range []time.Duration{1, 2, 4, 8, 16, 32, 60, 60} {
			settle(p, stop, evacct.OutcomeNotSent, evacct.ReasonUnavailable, 0)
			at += want * time.Second
			waiting(p, at, n+1)
			again := retry(p, at)
			if len(again) != 1 {
				t.Fatalf("try %d: %v", n+2, p.evs)
			}
			stop = again[0]
		}
	})

	t.Run("throttled: it waits at least what the provider's limit holds", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		stop, target := stopOf(t, legs)
		p.settleAll(target, evacct.OutcomeAccepted)
		settle(p, stop, evacct.OutcomeNotSent, evacct.ReasonThrottled, 5)
		waiting(p, 5*time.Second, 1)
	})

	t.Run("a request lost and never placed is placed again", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		stop, target := stopOf(t, legs)
		p.settleAll(target, evacct.OutcomeAccepted)
		settle(p, stop, evacct.OutcomeNeverPlaced, "", 0)
		waiting(p, time.Second, 1)
	})

	for _, tc := range []struct{ outcome, reason string }{
		{evacct.OutcomeRejected, ""},
		{evacct.OutcomeNotSent, evacct.ReasonRefused},
	} {
		t.Run("refused ("+tc.outcome+" "+tc.reason+"): the leg is canceled, never placed again", func(t *testing.T) {
			p, legs := entered(t, oneTarget(), "0.01", "60000")
			stop, target := stopOf(t, legs)
			p.settleAll(target, evacct.OutcomeAccepted)
			settle(p, stop, tc.outcome, tc.reason, 0)
			if lg := legOf(p.bracket(), evacct.LegStop, 0); lg.State != evacct.LegCanceled || lg.RetryAt != nil || !account.RetryDue(p.s).IsZero() {
				t.Fatalf("stop leg %+v", lg)
			}
			if got := retry(p, time.Hour); len(got) != 0 {
				t.Fatalf("placed again: %v", got)
			}
		})
	}

	t.Run("the position closed while it waits: the bracket ends and nothing is placed", func(t *testing.T) {
		p, legs := entered(t, oneTarget(), "0.01", "60000")
		stop, target := stopOf(t, legs)
		p.settleAll(target, evacct.OutcomeAccepted)
		settle(p, stop, evacct.OutcomeNotSent, evacct.ReasonUnavailable, 0)
		evs := p.do(&providercmd.Observe{Cause: "stream", Positions: []evacct.Position{{Instrument: "BTCUSDT", Quantity: dec("0")}}})
		p.settleAll(intents(evs, evacct.IntentCancel), evacct.OutcomeAccepted)
		if len(p.s.Brackets) != 0 || !account.RetryDue(p.s).IsZero() {
			t.Fatalf("brackets %d, due %v", len(p.s.Brackets), account.RetryDue(p.s))
		}
		if got := retry(p, time.Hour); len(got) != 0 {
			t.Fatalf("placed again: %v", got)
		}
	})
}

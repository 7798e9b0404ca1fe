package account

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// The paper book fills an entry whole; a provider fills in parts. Each part
// arms the legs for the quantity filled so far, in the fill's own commit:
// the first part places them, later parts resize them, the last re-parents.
func TestPartialEntryFillsArmProportionally(t *testing.T) {
	at := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	n := 0
	env := func(cmd commands.Command) commands.Envelope {
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		return commands.Envelope{ID: id, At: at, Cmd: cmd}
	}
	d := events.MustDecimal
	s := New("a1")
	do := func(evs []events.Event) {
		for _, e := range evs {
			s = Apply(s, e)
		}
	}
	evs, err := Decide(s, env(&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "P1", Currency: "USD", StartingBalance: d("1000")}))
	if err != nil {
		t.Fatal(err)
	}
	do(evs)
	sp := trading.Spec{Symbol: "X", Multiplier: d("1"), TickSize: d("0.5"), LotStep: d("0.1")}
	m := trading.Market{Specs: map[string]trading.Spec{"X": sp}, Quotes: map[string]trading.Quote{"X": {Instrument: "X", Bid: d("100"), Ask: d("100.5")}}}
	lp := d("95")
	plan := &trading.BracketPlan{PlanID: "p", PlanRevision: "r", Spec: evplan.Spec{Name: "p", Stop: &evplan.Distance{Ticks: 10}, Runner: true,
		Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 10}, Share: d("0.5")}}}}
	evs, err = Decide(s, env(&trading.PlaceOrder{ClientOrderID: "e", Instrument: "X", Side: "buy", OrderType: "limit", Quantity: d("2"),
		LimitPrice: &lp, TimeInForce: "gtc", Bracket: plan, Market: m}))
	if err != nil {
		t.Fatal(err)
	}
	do(evs)
	entry := s.OrderID("e")
	part := func(qty, filled string, done bool) []events.Event {
		f := evacct.OrderFilled{BrokerOrderID: entry, FillID: "f" + filled, Instrument: "X", Side: "buy", Quantity: d(qty), Price: d("95"),
			Realized: d("0"), Position: evacct.Position{Instrument: "X", Quantity: d(filled), AvgPrice: d("95"), Multiplier: d("1")},
			Balance: d("1000"), OrderFilled: d(filled), OrderAvgPrice: d("95"), Done: done, At: at}
		return settleBrackets(s, env(&trading.FillWorking{}), []events.Event{f}, nil)
	}
	legs := func(evs []events.Event) evacct.Bracket {
		for _, e := range evs {
			if b, ok := e.(evacct.BracketSet); ok {
				return b.Bracket
			}
		}
		t.Fatalf("no bracket in %+v", evs)
		return evacct.Bracket{}
	}

	evs = part("0.7", "0.7", false)
	b := legs(evs)
	placed := 0
	for _, e := range evs {
		if p, ok := e.(evacct.OrderPlaced); ok && p.Order.ReduceOnly && p.Order.BracketID == b.ID {
			placed++
		}
	}
	// 0.7 filled: the stop for 0.7, the target for half at the lot step (0.3), the runner the rest (0.4).
	if placed != 2 || b.Armed.Cmp(d("0.7")) != 0 || b.EntryOrderID != entry || b.Legs[0].Quantity.Cmp(d("0.7")) != 0 ||
		b.Legs[1].Quantity.Cmp(d("0.3")) != 0 || b.Legs[2].Quantity.Cmp(d("0.4")) != 0 || b.Legs[0].ParentOrderID != "" {
		t.Fatalf("first part: %d placed, bracket %+v", placed, b)
	}
	do(evs)

	evs = part("1.3", "2", true)
	b = legs(evs)
	resized := map[string]string{}
	for _, e := range evs {
		if r, ok := e.(evacct.OrderReplaced); ok {
			resized[r.BrokerOrderID] = r.Quantity.String()
		}
	}
	if b.Armed.Cmp(d("2")) != 0 || b.EntryOrderID != "" || resized[b.Legs[0].ID] != "2" || resized[b.Legs[1].ID] != "1" || b.Legs[2].Quantity.Cmp(d("1")) != 0 {
		t.Fatalf("last part: resized %v, bracket %+v", resized, b)
	}
}

// TrailOf names what the paper book's reactor indexes a queued trailing stop
// by, and LevelAt answers where the rules put it at a best touch, from the
// bracket as it was when asked (a later change of the bracket leaves it).
func TestTrailOfAndLevelAtAnswerForTheReactor(t *testing.T) {
	d := events.MustDecimal
	mk := func(active bool, state string) *evacct.Bracket {
		stop, act := d("90"), d("105")
		return &evacct.Bracket{ID: "b", State: state, Instrument: "X", Side: "long", Tick: d("0.5"),
			Legs:     []evacct.BracketLeg{{ID: "s1", Kind: evacct.LegStop, State: evacct.LegWorking, Price: &stop, Quantity: d("1")}},
			Trailing: &evacct.Trailing{Activation: &act, Distance: d("10"), Active: active}}
	}
	b := mk(false, evacct.BracketActive)
	stop, dist, act, tick, ok := TrailOf(b)
	if !ok || stop != "s1" || dist.Cmp(d("10")) != 0 || act == nil || act.Cmp(d("105")) != 0 || tick.Cmp(d("0.5")) != 0 {
		t.Fatalf("TrailOf = %s %s %v %s %v", stop, dist, act, tick, ok)
	}
	if _, _, act, _, _ := TrailOf(mk(true, evacct.BracketActive)); act != nil {
		t.Errorf("a stop that trails already waits for activation %s", act)
	}
	if _, _, _, _, ok := TrailOf(mk(false, evacct.BracketEnded)); ok {
		t.Error("an ended bracket is indexed")
	}
	// The reactor holds the state's bracket itself: the account's next
	// commit replaces it in the state and leaves the held one as it was.
	s := Apply(New("a"), evacct.BracketSet{Bracket: *b})
	at := LevelAt(s.Brackets["b"])
	next := cloneBracket(b)
	moved := d("103")
	next.Legs[0].Price = &moved
	s = Apply(s, evacct.BracketSet{Bracket: *next})
	if got := *s.Brackets["b"].Legs[0].Price; got.Cmp(moved) != 0 {
		t.Fatalf("the state's stop after the second BracketSet is %s", got)
	}
	for _, c := range []struct {
		best, level string
		moves       bool
	}{{"104", "90", false}, {"112", "102", true}, {"112.3", "102.5", true}, {"99.6", "90", false}} {
		lv, ok := at(d(c.best))
		if ok != c.moves || (ok && lv.Cmp(d(c.level)) != 0) {
			t.Errorf("LevelAt(%s) = %s %v, want %s %v", c.best, lv, ok, c.level, c.moves)
		}
	}
}

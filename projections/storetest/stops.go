package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/events/mark"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
)

// StopsScenario is a long BTC-PERP position of each of two accounts with a
// bracket whose trailing stop (5 behind the best bid, tick 0.5) rests at 95
// as recorded, anchored at mark 3 of node n1: a1's stop order names its
// bracket as the engine places it; a2's was placed before the read model
// kept an order's bracket, and its bracket was recorded first without
// marks, then again with its anchor. Then the stack of n1 at mark 5, whose
// best bid since mark 3 is 103 (the 104 of mark 2 came before the anchor).
// The zero value is ready: Commits numbers its commits from 1, and Marked
// numbers a commit after them.
type StopsScenario struct {
	seq uint64
	at  time.Time
}

func (sc *StopsScenario) commit(subject string, es ...events.Event) events.Committed {
	sc.seq++
	return events.Committed{Subject: subject, Seq: sc.seq,
		Commit: events.Commit{CommandID: fmt.Sprintf("c%d", sc.seq), At: sc.at, Events: es}}
}

// bracket is the bracket of account id as recorded, marked or not.
func (sc *StopsScenario) bracket(id string, marked bool) evacct.Bracket {
	b := evacct.Bracket{ID: id + "-b1", State: evacct.BracketActive, Instrument: "BTC-PERP", Side: "long",
		EntryPrice: dec("100"), Planned: dec("1"), Armed: dec("1"), Tick: dec("0.5"), Lot: dec("0.001"),
		Legs: []evacct.BracketLeg{
			{ID: id + "-s1", Kind: evacct.LegStop, State: evacct.LegWorking, Price: decp("95"), Quantity: dec("1"), Filled: dec("0")},
			{ID: id + "-t1", Kind: evacct.LegTarget, State: evacct.LegWorking, Price: decp("110"), Quantity: dec("0.5"), Share: decp("0.5"), Filled: dec("0")},
		},
		Trailing:  &evacct.Trailing{Distance: dec("5")},
		CreatedAt: sc.at, UpdatedAt: sc.at}
	if marked {
		b.Anchor, b.MarkNode, b.Marked = 3, "n1", true
	}
	return b
}

// Bid is mark n with a bid at price.
func Bid(n uint64, price string) mark.Entry { return mark.Entry{N: n, Price: dec(price)} }

// Stack is node n1's BTC-PERP stack after mark n, its bids pushed in order.
func Stack(n uint64, bids ...mark.Entry) mark.Stack {
	s := &mark.Stack{Instrument: "BTC-PERP", Node: "n1"}
	for _, b := range bids {
		s = s.Push(b.N, &b.Price, nil)
	}
	s.N = n
	return *s
}

// Marked is the commit of stack s.
func (sc *StopsScenario) Marked(s mark.Stack) events.Committed {
	return sc.commit(mark.Subject(s.Instrument, s.Node), mark.Marked{Stack: s, At: sc.at})
}

// Commits are the scenario's commits up to and with the stack at mark 5.
func (sc *StopsScenario) Commits() []events.Committed {
	sc.at = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	var out []events.Committed
	for _, id := range []string{"a1", "a2"} {
		legacy := id == "a2"
		out = append(out, sc.commit(evacct.Subject(id), evacct.Opened{AccountID: id, TenantID: "t1", Broker: "paper",
			AccountNumber: "PA-" + id, Currency: "USD", StartingBalance: dec("1000"), Kind: "demo", At: sc.at}))
		b := sc.bracket(id, !legacy)
		order := func(oid, typ, side string, limit, stop *events.Decimal, reduce bool) evacct.OrderPlaced {
			o := evacct.Order{BrokerOrderID: oid, ClientOrderID: "c-" + oid, Instrument: "BTC-PERP", Side: side, OrderType: typ,
				Quantity: dec("1"), LimitPrice: limit, StopPrice: stop, TimeInForce: "gtc", ReduceOnly: reduce, BracketID: b.ID, CreatedAt: sc.at}
			if legacy {
				o.BracketID = ""
			}
			return evacct.OrderPlaced{Order: o}
		}
		out = append(out, sc.commit(evacct.Subject(id),
			order(id+"-e1", "market", "buy", nil, nil, false),
			evacct.OrderFilled{BrokerOrderID: id + "-e1", FillID: id + "-f1", Instrument: "BTC-PERP", Side: "buy", Quantity: dec("1"),
				Price: dec("100"), Realized: dec("0"), Position: evacct.Position{Instrument: "BTC-PERP", Quantity: dec("1"), AvgPrice: dec("100"),
					Multiplier: dec("1")}, Balance: dec("1000"), OrderFilled: dec("1"), OrderAvgPrice: dec("100"), Done: true, At: sc.at},
			evacct.BracketSet{Bracket: b},
			order(id+"-s1", "stop", "sell", nil, decp("95"), true),
			order(id+"-t1", "limit", "sell", decp("110"), nil, true)))
		if legacy {
			out = append(out, sc.commit(evacct.Subject(id), evacct.BracketSet{Bracket: sc.bracket(id, true)}))
		}
	}
	return append(out, sc.Marked(Stack(5, Bid(2, "104"), Bid(4, "103"), Bid(5, "101"))))
}

type noPrices struct{}

func (noPrices) Mark(string) (events.Decimal, bool) { return events.Decimal{}, false }

// testDerivedStops folds brackets and the marks that move their stops, and
// reads every view of them: each shows the derived level, which the
// documents of the bracket and its stop order do not hold.
func testDerivedStops(t *testing.T, s projections.Store) {
	p := projections.NewProjector(s, nil, projections.Core)
	var sc StopsScenario
	if err := p.ApplyBatch(ctx, sc.Commits()); err != nil {
		t.Fatal(err)
	}
	// want checks every view of both accounts and answers a1's frame's
	// revision: the account's, or a later mark's commit that its stop shows.
	want := func(stop, best string) (rev uint64) {
		t.Helper()
		for _, id := range []string{"a1", "a2"} {
			bs, ms, brev, err := frames.Brackets(ctx, s, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(bs) != 1 || len(bs[0].Legs) != 2 || bs[0].Legs[0].Price == nil || bs[0].Legs[0].Price.Cmp(dec(stop)) != 0 {
				t.Fatalf("%s: brackets %+v, want the stop leg at %s", id, bs, stop)
			}
			if bs[0].Legs[1].Price.Cmp(dec("110")) != 0 {
				t.Fatalf("%s: target at %s, want 110", id, bs[0].Legs[1].Price)
			}
			if len(ms) != 1 || ms[0].State != "trailing" || ms[0].StopPrice.Cmp(dec(stop)) != 0 || ms[0].BestPrice == nil || ms[0].BestPrice.Cmp(dec(best)) != 0 {
				t.Fatalf("%s: managed exits %+v, want trailing at %s from %s", id, ms, stop, best)
			}
			check := func(from string, os []projections.Order, n int) {
				t.Helper()
				if len(os) != n {
					t.Fatalf("%s: %s read %d orders, want %d", id, from, len(os), n)
				}
				for _, o := range os {
					switch o.BrokerOrderID {
					case id + "-s1":
						if o.StopPrice == nil || o.StopPrice.Cmp(dec(stop)) != 0 {
							t.Fatalf("%s: %s shows the stop order at %v, want %s", id, from, o.StopPrice, stop)
						}
					case id + "-t1":
						if o.StopPrice != nil || o.LimitPrice.Cmp(dec("110")) != 0 {
							t.Fatalf("%s: %s shows the target %+v", id, from, o)
						}
					}
				}
			}
			all, err := projections.Orders(ctx, s, id, "all", 0)
			if err != nil {
				t.Fatal(err)
			}
			check("Orders(all)", all, 3)
			open, err := projections.Orders(ctx, s, id, "open", 0)
			if err != nil {
				t.Fatal(err)
			}
			check("Orders(open)", open, 2)
			working, err := projections.WorkingOrders(ctx, s, id)
			if err != nil {
				t.Fatal(err)
			}
			check("WorkingOrders", working, 2)
			o, err := projections.GetOrder(ctx, s, id, id+"-s1")
			if err != nil {
				t.Fatal(err)
			}
			check("GetOrder", []projections.Order{o}, 1)
			f, err := frames.Build(ctx, s, id, noPrices{})
			if err != nil {
				t.Fatal(err)
			}
			check("the frame", f.Orders, 2)
			if len(f.ManagedExits) != 1 || f.ManagedExits[0].StopPrice.Cmp(dec(stop)) != 0 || f.Brackets[0].Legs[0].Price.Cmp(dec(stop)) != 0 {
				t.Fatalf("%s: the frame's brackets %+v and exits %+v, want the stop at %s", id, f.Brackets, f.ManagedExits, stop)
			}
			if k := projections.MarkKey("BTC-PERP", "n1"); !slices.Equal(f.Follows, []string{k}) {
				t.Fatalf("%s: the frame follows %v, want [%s]", id, f.Follows, k)
			}
			doc, _ := get[projections.MarkDoc](t, s, projections.CollMark, projections.MarkKey("BTC-PERP", "n1"))
			if f.Revision < doc.Seq || brev != doc.Seq {
				t.Fatalf("%s: the frame names revision %d and the brackets' read %d; the stack they show was committed at %d", id, f.Revision, brev, doc.Seq)
			}
			if id == "a1" {
				rev = f.Revision
			}
		}
		return rev
	}
	r1 := want("98", "103") // 103 - 5: the best bid after the anchor, not the 104 before it

	// The documents keep the recorded level: only reads derive.
	if b, _ := get[evacct.Bracket](t, s, projections.CollBracket, "a1/a1-b1"); b.Legs[0].Price.Cmp(dec("95")) != 0 || b.Trailing.Active {
		t.Fatalf("the bracket's document was rewritten: %+v", b)
	}
	if o, _ := get[projections.Order](t, s, projections.CollOrder, "a2/a2-s1"); o.StopPrice.Cmp(dec("95")) != 0 || o.BracketID != "a2-b1" {
		t.Fatalf("a2's stop order document: stop %v bracket %q, want 95 and a2-b1", o.StopPrice, o.BracketID)
	}

	// An older stack folded after a newer one (a commit of another node's
	// log order, a replay) leaves the newer; a later one replaces it.
	if err := p.ApplyBatch(ctx, []events.Committed{sc.Marked(Stack(3, Bid(2, "104"), Bid(3, "103.5")))}); err != nil {
		t.Fatal(err)
	}
	if doc, _ := get[projections.MarkDoc](t, s, projections.CollMark, projections.MarkKey("BTC-PERP", "n1")); doc.Stack.N != 5 || len(doc.Stack.Bids) != 3 {
		t.Fatalf("an older stack replaced the newer: %+v", doc.Stack)
	}
	if r := want("98", "103"); r != r1 {
		t.Fatalf("an older stack moved the frame's revision %d -> %d", r1, r)
	}
	if err := p.ApplyBatch(ctx, []events.Committed{sc.Marked(Stack(7, Bid(2, "104"), Bid(4, "103"), Bid(7, "106.2")))}); err != nil {
		t.Fatal(err)
	}
	// A frame the marks changed is ahead of the one before (a client drops
	// a frame at or behind the revision it holds), though the account
	// committed nothing.
	r3 := want("101", "106.2") // 106.2 - 5 = 101.2, at the nearest tick
	if r3 <= r1 {
		t.Fatalf("the frame the newer stack changed names revision %d, not ahead of %d", r3, r1)
	}

	// Another node's stack moves nothing of brackets anchored in n1's.
	other := Stack(9, Bid(9, "200"))
	other.Node = "n2"
	if err := p.ApplyBatch(ctx, []events.Committed{sc.Marked(other)}); err != nil {
		t.Fatal(err)
	}
	if r := want("101", "106.2"); r != r3 {
		t.Fatalf("another node's stack moved the frame's revision %d -> %d", r3, r)
	}
}

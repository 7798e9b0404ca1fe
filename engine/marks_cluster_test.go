package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// node starts an engine named name on log, a node of a cluster.
func node(t *testing.T, log *eventlog.Log, name string, feed market.Feed) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Log: log, Feed: feed, Catalog: market.NewCatalog(market.DefaultCrypto()), Now: clock, Node: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.JoinCluster(context.Background(), engine.ClusterConfig{TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return e
}

// until runs cmd on the account through e until the node owns it and
// decides it (a node that has just joined answers 503 until then).
func until(t *testing.T, e *engine.Engine, id string, cmd commands.Command) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := e.Account(context.Background(), id, e.Envelope(events.Principal{System: "test"}, "", cmd))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%T: %v", cmd, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An account that moves to another node (its first node stopped) has its
// trailing stop where the first node's marks put it: the new owner anchors
// the bracket in its own marks with a Rebase that first takes in the other
// node's, so the level a reader derived before the move is the one the new
// owner records and triggers at.
func TestANodeTakingAnAccountOverTakesInTheOtherNodesMarks(t *testing.T) {
	ctx := context.Background()
	log := tempLog(t)
	sim := market.NewSim(market.DefaultCrypto(), 1, clock)
	n1 := node(t, log, "n1", sim)
	const id = "moving"
	until(t, n1, id, &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "MV1", Currency: "USD", StartingBalance: dec("100000")})
	until(t, n1, id, &trading.PlaceOrder{ClientOrderID: "buy", Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: dec("0.01"), TimeInForce: "day"})
	spec := evplan.Spec{Name: "trail", Stop: &evplan.Distance{Ticks: 40}, Trailing: &evplan.Trailing{Distance: evplan.Distance{Ticks: 20}}}
	until(t, n1, id, &trading.Protect{ClientOrderID: "br", Instrument: "BTC-PERP", PlanID: "xp_1", PlanRevision: "rev_1",
		Plan: &trading.BracketPlan{PlanID: "xp_1", PlanRevision: "rev_1", Spec: spec}})
	q, _ := sim.Quote("BTC-PERP")
	in, _ := market.NewCatalog(market.DefaultCrypto()).Get("BTC-PERP")
	up := in.TickSize.Mul(dec("100"))
	sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: q.Bid.Add(up), Ask: q.Ask.Add(up), Last: q.Last.Add(up), Size: q.Size, At: clock().Add(time.Second)})
	want := q.Bid.Add(up).Sub(in.TickSize.Mul(dec("20")))
	stop := func(e *engine.Engine) (level events.Decimal, b evacct.Bracket) {
		if err := e.InspectAccount(ctx, id, func(s *account.State, _ uint64) {
			for _, br := range s.Brackets {
				b = *br
				if st := br.StopLeg(); st != nil && st.Price != nil {
					level = *st.Price
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		return level, b
	}
	time.Sleep(200 * time.Millisecond) // the quote reaches the reactor, its mark the writer
	if level, b := stop(n1); level.Cmp(want) == 0 || b.MarkNode != "n1" {
		t.Fatalf("on n1 the account recorded the move (stop %s, anchored on %q): a mark should have moved it", level, b.MarkNode)
	}
	n1.Close() // hands the account over, its marks written

	n2 := node(t, log, "n2", market.NewSim(market.DefaultCrypto(), 1, clock))
	defer n2.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		level, b := stop(n2)
		if b.MarkNode == "n2" && b.Marked {
			if level.Cmp(want) != 0 {
				t.Fatalf("n2 anchored the bracket with its stop at %s; n1's marks put it at %s", level, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bracket is still anchored on %q (stop %s) after n2 took the account", b.MarkNode, level)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

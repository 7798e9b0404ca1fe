package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// A clean stop keeps where the paper book's marks put the trailing stops:
// 120 accounts trail a stop 20 ticks behind the bid, one quote 100 ticks
// higher moves them all (one mark, no commit of any account), and the
// engine is closed at once. After a start on the same log, a bid a tick
// above the rule's level fills none of them and a bid at it fills every
// one: their stops are where the mark put them, though no account
// recorded the move (their recorded stops are 60 ticks lower).
func TestCloseKeepsWhereTheMarksPutTheStops(t *testing.T) {
	ctx := context.Background()
	log := tempLog(t)
	sim := market.NewSim(market.DefaultCrypto(), 1, clock)
	e := newEngineOn(t, log, sim, false, 0, nil)
	w := &writer{t: t, e: e}
	spec := evplan.Spec{Name: "trail", Stop: &evplan.Distance{Ticks: 40},
		Trailing: &evplan.Trailing{Activation: evplan.Distance{Ticks: 4}, Distance: evplan.Distance{Ticks: 20}}}
	const n = 120
	var ids []string
	for k := range n {
		id := fmt.Sprintf("trail_%d", k)
		w.account(id, &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: fmt.Sprintf("TR%d", k), Currency: "USD", StartingBalance: dec("100000")})
		w.account(id, &trading.PlaceOrder{ClientOrderID: fmt.Sprintf("buy-%d", k), Instrument: "BTC-PERP", Side: "buy", OrderType: "market",
			Quantity: dec("0.01"), TimeInForce: "day"})
		w.account(id, &trading.Protect{ClientOrderID: fmt.Sprintf("br-%d", k), Instrument: "BTC-PERP", PlanID: "xp_1", PlanRevision: "rev_1",
			Plan: &trading.BracketPlan{PlanID: "xp_1", PlanRevision: "rev_1", Spec: spec}})
		ids = append(ids, id)
	}
	q, ok := sim.Quote("BTC-PERP")
	if !ok {
		t.Fatal("no BTC-PERP quote")
	}
	in, _ := market.NewCatalog(market.DefaultCrypto()).Get("BTC-PERP")
	tick := in.TickSize
	up := tick.Mul(dec("100"))
	sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: q.Bid.Add(up), Ask: q.Ask.Add(up), Last: q.Last.Add(up), Size: q.Size, At: clock().Add(time.Second)})
	e.Close()

	want := q.Bid.Add(up).Sub(tick.Mul(dec("20"))) // the rule's level at that bid
	open := func(e *engine.Engine) (left int) {
		for _, id := range ids {
			if err := e.InspectAccount(ctx, id, func(s *account.State, _ uint64) {
				if p, ok := s.Positions["BTC-PERP"]; ok && p.Quantity.Sign() != 0 {
					left++
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
		return left
	}
	sim2 := market.NewSim(market.DefaultCrypto(), 1, clock)
	again := newEngineOn(t, log, sim2, false, 0, nil)
	defer again.Close()
	at := func(bid events.Decimal) {
		sim2.Publish(market.Quote{Instrument: "BTC-PERP", Bid: bid, Ask: bid.Add(tick), Last: bid, Size: q.Size, At: clock().Add(2 * time.Second)})
	}
	at(want.Add(tick))
	time.Sleep(300 * time.Millisecond)
	if left := open(again); left != n {
		t.Fatalf("%d of %d positions closed by a bid a tick above their stops' level %s", n-left, n, want)
	}
	at(want)
	deadline := time.Now().Add(10 * time.Second)
	for open(again) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := open(again); left != 0 {
		t.Fatalf("%d of %d positions still open after a bid at their stops' level %s; their stops lost the mark with the stop", left, n, want)
	}
	_ = evacct.LegStop
}

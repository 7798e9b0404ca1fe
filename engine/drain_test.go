package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/market"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// A clean stop decides the stop moves the paper book has queued: 120
// accounts trail a stop 20 ticks behind the bid, one quote 100 ticks higher
// queues a move for each (one in flight at a time), and the engine is closed
// at once. A start on the same log, which sees no quote, finds every stop
// where the quote moved it: recorded before the stop, not dropped with the
// queue.
func TestCloseDecidesTheQueuedStopMoves(t *testing.T) {
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
	up := in.TickSize.Mul(dec("100"))
	sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: q.Bid.Add(up), Ask: q.Ask.Add(up), Last: q.Last.Add(up), Size: q.Size, At: clock().Add(time.Second)})
	e.Close()

	// The rule's level at that bid, and where each stop is after a start.
	want := q.Bid.Add(up).Sub(in.TickSize.Mul(dec("20")))
	again := newEngine(t, log, false, 0, nil)
	defer again.Close()
	moved := 0
	for _, id := range ids {
		if err := again.InspectAccount(ctx, id, func(s *account.State, _ uint64) {
			for _, b := range s.Brackets {
				for _, l := range b.Legs {
					if l.Kind == evacct.LegStop && l.Price != nil && l.Price.Cmp(want) == 0 {
						moved++
					}
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if moved != n {
		t.Fatalf("%d of %d trailing stops at %s after the start; the rest lost their move with the stop", moved, n, want)
	}
}

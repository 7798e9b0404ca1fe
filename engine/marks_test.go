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
	evplan "github.com/svc/engine/events/plan"
)

// Brackets recorded before marks (by an engine that records every move,
// as before them) are anchored in the marks at the next start: the engine
// sends each account a Rebase when it tracks it, and from then on a quote
// that moves their stops is a mark, not a commit of theirs. However many
// accounts need one, at most RebaseWorkers Rebases are in flight at once.
func TestAStartAnchorsBracketsRecordedBeforeMarks(t *testing.T) {
	ctx := context.Background()
	log := tempLog(t)
	sim := market.NewSim(market.DefaultCrypto(), 1, clock)
	old, err := engine.New(engine.Config{Log: log, Feed: sim, Catalog: market.NewCatalog(market.DefaultCrypto()), Now: clock, RecordMoves: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	w := &writer{t: t, e: old}
	spec := evplan.Spec{Name: "trail", Stop: &evplan.Distance{Ticks: 40}, Trailing: &evplan.Trailing{Distance: evplan.Distance{Ticks: 20}}}
	n := 5 * engine.RebaseWorkers
	for k := range n {
		id := fmt.Sprintf("old_%d", k)
		w.account(id, &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: fmt.Sprintf("OL%d", k), Currency: "USD", StartingBalance: dec("100000")})
		w.account(id, &trading.PlaceOrder{ClientOrderID: fmt.Sprintf("buy-%d", k), Instrument: "BTC-PERP", Side: "buy", OrderType: "market",
			Quantity: dec("0.01"), TimeInForce: "day"})
		w.account(id, &trading.Protect{ClientOrderID: fmt.Sprintf("br-%d", k), Instrument: "BTC-PERP", PlanID: "xp_1", PlanRevision: "rev_1",
			Plan: &trading.BracketPlan{PlanID: "xp_1", PlanRevision: "rev_1", Spec: spec}})
	}
	old.Close()
	anchored := func(e *engine.Engine) (k int) {
		for i := range n {
			if err := e.InspectAccount(ctx, fmt.Sprintf("old_%d", i), func(s *account.State, _ uint64) {
				for _, b := range s.Brackets {
					if b.Marked {
						k++
					}
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
		return k
	}
	// What the old engine recorded carries no anchor.
	again := newEngineOn(t, log, market.NewSim(market.DefaultCrypto(), 1, clock), false, 0, nil)
	defer again.Close()
	deadline := time.Now().Add(10 * time.Second)
	for anchored(again) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if k := anchored(again); k != n {
		t.Fatalf("%d of %d brackets anchored in the marks after the start", k, n)
	}
	if p := again.RebasePeak(); p < 1 || p > engine.RebaseWorkers {
		t.Fatalf("%d Rebases in flight at once, want 1 to %d", p, engine.RebaseWorkers)
	}
}

package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/projections"
)

// BenchAccounts is how many accounts BenchCore spreads its orders over:
// as many as the cold-start log of scripts/bench, so that each commit
// finds its account's documents as cold as a replay does.
const BenchAccounts = 1000

// BenchCore folds b.N commits through projections.Core into a store from
// open, and reports commits/s, in two shapes: batch=512, a catching-up
// projector's transactions (projections.MaxBatch commits each), and batch=1,
// a live projector's under light load (one commit each, so ns/op is the
// latency one commit adds before a read shows it). Each commit is a market
// order placed and filled in one commit, as the paper book makes them: it
// writes the order, its sequence index, the fill, the position, the day's PnL
// and the account, over BenchAccounts accounts.
func BenchCore(b *testing.B, open Factory) {
	for _, size := range []int{projections.MaxBatch, 1} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) { benchCore(b, open, size) })
	}
}

func benchCore(b *testing.B, open Factory, size int) {
	s := open(b)
	p := projections.NewProjector(s, nil, projections.Core)
	ctx := context.Background()
	g := newGen()
	if err := p.ApplyBatch(ctx, g.opens()); err != nil {
		b.Fatal(err)
	}
	all := make([]events.Committed, b.N) // made before the clock starts: only the fold is timed
	for i := range all {
		all[i] = g.trade()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += size {
		if err := p.ApplyBatch(ctx, all[done:min(done+size, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	fills, err := s.Count(ctx, projections.CollFill, "")
	if err != nil || fills != b.N {
		b.Fatalf("%d fills after %d commits: %v", fills, b.N, err)
	}
}

type gen struct {
	seq  uint64
	n    int
	at   time.Time
	qty  []events.Decimal // position per account
	bal  []events.Decimal
	px   events.Decimal
	step events.Decimal
}

func newGen() *gen {
	g := &gen{at: time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC), px: dec("65000.5"), step: dec("0.5")}
	for range BenchAccounts {
		g.qty = append(g.qty, dec("0"))
		g.bal = append(g.bal, dec("50000"))
	}
	return g
}

func accountID(i int) string { return fmt.Sprintf("01JBENCHACCOUNT%011d", i) }

func (g *gen) commit(acct int, es ...events.Event) events.Committed {
	g.seq++
	g.at = g.at.Add(time.Millisecond)
	return events.Committed{Subject: evacct.Subject(accountID(acct)), Seq: g.seq,
		Commit: events.Commit{CommandID: fmt.Sprintf("cmd-%d", g.seq), At: g.at, Events: es}}
}

func (g *gen) opens() []events.Committed {
	var out []events.Committed
	for i := range BenchAccounts {
		out = append(out, g.commit(i, evacct.Opened{AccountID: accountID(i), TenantID: "tenant", Broker: "paper",
			AccountNumber: fmt.Sprintf("PA%06d", i), Label: "Demo", Currency: "USD", StartingBalance: dec("50000"),
			Kind: "demo", At: g.at}))
	}
	return out
}

// trade is the next market order of the next account, filled at once; the
// accounts alternate buying and selling one lot, so positions open and close.
func (g *gen) trade() events.Committed {
	a := g.n % BenchAccounts
	g.n++
	side, q := "buy", dec("1")
	if !g.qty[a].IsZero() {
		side, q = "sell", dec("-1")
	}
	if g.n%7 == 0 {
		g.px = g.px.Add(g.step)
	}
	g.qty[a] = g.qty[a].Add(q)
	realized := dec("0")
	if side == "sell" {
		realized = g.step
	}
	g.bal[a] = g.bal[a].Add(realized)
	id := fmt.Sprintf("ord-%012d", g.seq+1) // in order, as the engine's time-ordered ids
	at := g.at.Add(time.Millisecond)
	return g.commit(a,
		evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: id, ClientOrderID: "c-" + id, Instrument: "BTC-PERP",
			Side: side, OrderType: "market", Quantity: dec("1"), TimeInForce: "day", CreatedAt: at}},
		evacct.OrderFilled{BrokerOrderID: id, FillID: id + "-1", Instrument: "BTC-PERP", Side: side, Quantity: dec("1"),
			Price: g.px, Realized: realized, Position: evacct.Position{Instrument: "BTC-PERP", Quantity: g.qty[a],
				AvgPrice: g.px, Multiplier: dec("1")}, Balance: g.bal[a], OrderFilled: dec("1"), OrderAvgPrice: g.px,
			Done: true, Quote: &g.px, At: at})
}

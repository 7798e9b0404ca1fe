package risk_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/risk"
	"github.com/svc/engine/events"
)

var dec = events.MustDecimal

func on() *bool { b := true; return &b }

func num(s string) *riskcmd.Number { return &riskcmd.Number{Decimal: dec(s), Set: true} }

// allControls enables every control with values a small move does not cross.
func allControls() *riskcmd.SetSettings {
	return &riskcmd.SetSettings{
		DailyLossEnabled: on(), DailyLossValue: num("5000"), WeeklyLossEnabled: on(), WeeklyLossValue: num("10000"),
		DailyProfitEnabled: on(), DailyProfitValue: num("5000"), WeeklyProfitEnabled: on(), WeeklyProfitValue: num("10000"),
		EODCloseEnabled: on(), EODCloseValue: num("15"),
	}
}

// holder is the state of an account with every control enabled, some realized
// PnL today and an open long position in BTC-PERP.
func holder(id string, at time.Time) *account.State {
	s := account.New(id)
	m := trading.Market{
		Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: dec("64999.5"), Ask: dec("65000.5")}},
		Specs:  map[string]trading.Spec{"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: dec("1"), MaxQuantity: dec("100")}},
	}
	for _, c := range []commands.Command{
		&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: id, Currency: "USD", StartingBalance: dec("50000")},
		allControls(),
		&trading.PlaceOrder{ClientOrderID: "a", Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: dec("2"), TimeInForce: "day", Market: m},
		&trading.PlaceOrder{ClientOrderID: "b", Instrument: "BTC-PERP", Side: "sell", OrderType: "market", Quantity: dec("1"), TimeInForce: "day", Market: m},
	} {
		id := ulid.Make()
		evs, err := account.Decide(s, commands.Envelope{ID: id, At: at, Cmd: c})
		if err != nil {
			panic(fmt.Sprintf("%T: %v", c, err))
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	return s
}

// BenchmarkMarkAgainst10000Accounts: 10,000 accounts hold a position in one
// instrument with all five controls enabled; one op is one mark update
// evaluated against all their controls (on the reactor's in-memory index).
func BenchmarkMarkAgainst10000Accounts(b *testing.B) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	r := risk.New(func() time.Time { return at }, func(context.Context, string, commands.Command) error { return nil }, nil)
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("acct%05d", i)
		r.Track(id, holder(id, at), 0)
	}
	marks := []events.Decimal{dec("65010.5"), dec("64990"), dec("65003.25"), dec("64997.75")}
	if due := r.Mark("BTC-PERP", marks[0]); len(due) != 0 {
		b.Fatalf("%d accounts breached", len(due))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if due := r.Mark("BTC-PERP", marks[i%len(marks)]); len(due) != 0 {
			b.Fatal("breached")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/mark")
}

// BenchmarkMarkBreachingAll10000Accounts is the worst case: the mark crosses
// every account's daily loss limit, so each one is checked exactly.
func BenchmarkMarkBreachingAll10000Accounts(b *testing.B) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	r := risk.New(func() time.Time { return at }, func(context.Context, string, commands.Command) error { return nil }, nil)
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("acct%05d", i)
		r.Track(id, holder(id, at), 0)
	}
	marks := []events.Decimal{dec("59000.5"), dec("58990")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if due := r.Mark("BTC-PERP", marks[i%len(marks)]); len(due) != 10000 {
			b.Fatalf("%d breached", len(due))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/mark")
}

// BenchmarkOrderPathGate places market orders through the engine on a real
// embedded JetStream (fsync before ack) for an account with every control
// enabled, and times the gate's share inside the same run: the reactor's guard
// lookup plus the holds check Decide makes.
func BenchmarkOrderPathGate(b *testing.B) {
	ctx := context.Background()
	log, err := eventlog.Open(ctx, eventlog.Config{DataDir: b.TempDir(), Sync: "always", Replicas: 1, Stream: "EVT"})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	now := func() time.Time { return time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC) }
	sim := market.NewSim(market.DefaultCrypto(), 1, now)
	e, err := engine.New(engine.Config{Log: log, Feed: sim, Catalog: market.NewCatalog(market.DefaultCrypto()), Now: now})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Start(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	sys := events.Principal{System: "bench"}
	exec := func(c commands.Command) {
		if _, err := e.Account(ctx, "a1", e.Envelope(sys, "", c)); err != nil {
			b.Fatal(err)
		}
	}
	exec(&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("100000000")})
	exec(allControls())
	var gate, path time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		side := []string{"buy", "sell"}[i%2]
		c := &trading.PlaceOrder{ClientOrderID: fmt.Sprintf("o%d", i), Instrument: "BTC-PERP", Side: side, OrderType: "market", Quantity: dec("1"), TimeInForce: "day"}
		t0 := time.Now()
		exec(c)
		t1 := time.Now()
		_ = e.InspectAccount(ctx, "a1", func(s *account.State, _ uint64) {
			t2 := time.Now()
			_ = account.Holds(s, now())
			gate += time.Since(t2)
		})
		t3 := time.Now()
		_ = e.Risk().Due("a1")
		gate += time.Since(t3)
		path += t1.Sub(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(path.Microseconds())/float64(b.N), "µs/order")
	b.ReportMetric(float64(gate.Nanoseconds())/float64(b.N), "ns-gate/order")
	b.ReportMetric(100*float64(gate)/float64(path), "gate-%")
}

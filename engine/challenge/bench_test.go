package challenge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/calendar"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/challenge"
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
)

var dec = events.MustDecimal

// enrolled is the state of an enrolled account (10,000 USD stage: 10% target,
// 5% daily and 10% trailing drawdown) holding a long BTC-PERP position, as
// risk's benchmark holder holds one.
func enrolled(id string, at time.Time) *account.State {
	s := account.New(id)
	m := trading.Market{
		Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: dec("64999.5"), Ask: dec("65000.5")}},
		Specs:  map[string]trading.Spec{"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: dec("1"), MaxQuantity: dec("100")}},
	}
	rules := evch.Rules{EnrollmentID: "en-" + id, ChallengeID: "c1", Stage: 1, Size: dec("10000"), ProfitTargetPct: dec("10"),
		MaxDailyDdPct: dec("5"), MaxTotalDdPct: dec("10"), DDMode: evch.DDTrailingEOD, MaxDurationDays: 30, Calendar: calendar.Crypto}
	for _, c := range []commands.Command{
		&challengecmd.OpenEvaluation{Open: tenantcmd.OpenAccount{TenantID: "u", Broker: "paper", AccountNumber: id, Currency: "USD",
			StartingBalance: dec("10000")}, Rules: rules},
		&trading.PlaceOrder{ClientOrderID: "a", Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: dec("0.1"), TimeInForce: "day", Market: m},
	} {
		evs, err := account.Decide(s, commands.Envelope{ID: ulid.Make(), At: at, Cmd: c})
		if err != nil {
			panic(fmt.Sprintf("%T: %v", c, err))
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	return s
}

func reactorOf10000(b *testing.B, at time.Time) *challenge.Reactor {
	r := challenge.NewReactor(func() time.Time { return at }, func(context.Context, string) error { return nil })
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("acct%05d", i)
		r.Track(id, enrolled(id, at))
	}
	return r
}

// BenchmarkEvaluateMarkAgainst10000Enrolled: 10,000 enrolled accounts hold
// a position in one instrument; one op is one mark evaluated against every
// account's drawdown floors and profit target (the evaluation reactor's
// index); ns/op is the time of one mark. Compare with engine/risk's
// BenchmarkMarkAgainst10000Accounts.
func BenchmarkEvaluateMarkAgainst10000Enrolled(b *testing.B) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	r := reactorOf10000(b, at)
	marks := []events.Decimal{dec("65010.5"), dec("64990"), dec("65003.25"), dec("64997.75")}
	if due := r.Mark("BTC-PERP", marks[0]); len(due) != 0 {
		b.Fatalf("%d accounts woken", len(due))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if due := r.Mark("BTC-PERP", marks[i%len(marks)]); len(due) != 0 {
			b.Fatal("woken")
		}
	}
}

// BenchmarkEvaluateMarkCrossing10000Enrolled is the worst case: the mark
// crosses every account's daily floor, so each one is woken.
func BenchmarkEvaluateMarkCrossing10000Enrolled(b *testing.B) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	r := reactorOf10000(b, at)
	marks := []events.Decimal{dec("59000.5"), dec("58990")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if due := r.Mark("BTC-PERP", marks[i%len(marks)]); len(due) != 10000 {
			b.Fatalf("%d woken", len(due))
		}
	}
}

// The band is exact: a mark one cent of equity inside the daily floor wakes
// nothing, at the floor's crossing the account is woken, and the account's
// own Decide agrees.
func TestReactorBandAgreesWithDecide(t *testing.T) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	s := enrolled("a1", at)
	r := challenge.NewReactor(func() time.Time { return at }, func(context.Context, string) error { return nil })
	r.Track("a1", s)
	avg := s.Positions["BTC-PERP"].AvgPrice
	floor := s.Eval.Thresholds().DailyFloor // 9,500: a 500 loss on 0.1 is a 5,000 move
	atFloor := avg.Add(floor.Sub(s.Balance).Quo(dec("0.1")))
	if due := r.Mark("BTC-PERP", atFloor.Add(dec("0.1"))); len(due) != 0 {
		t.Fatalf("a mark over the floor wakes %v", due)
	}
	if due := r.Mark("BTC-PERP", atFloor.Sub(dec("0.1"))); len(due) != 1 {
		t.Fatalf("a mark under the floor wakes %v", due)
	}
	mk := func(px events.Decimal) *challengecmd.EvaluateStage {
		return &challengecmd.EvaluateStage{Market: trading.Market{Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: px, Ask: px}}}}
	}
	for px, want := range map[string]int{atFloor.Add(dec("0.1")).String(): 0, atFloor.Sub(dec("0.1")).String(): 1} {
		evs, err := account.Decide(s, commands.Envelope{ID: ulid.Make(), At: at, Cmd: mk(dec(px))})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range evs {
			if _, ok := e.(interface{ Type() string }); ok && e.Type() == "risk.evaluation_breached.v1" {
				got++
			}
		}
		if got != want {
			t.Fatalf("Decide at %s: %d breaches, want %d (%v)", px, got, want, evs)
		}
	}
}

// The reactor wakes an account with an open position at the end of its
// trading day and at its last allowed moment, and not before.
func TestReactorWakesAtTheRulesMoments(t *testing.T) {
	start := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC) // Wednesday
	now := start
	woken := make(chan string, 4)
	r := challenge.NewReactor(func() time.Time { return now }, func(_ context.Context, id string) error { woken <- id; return nil })
	defer r.Close()
	r.Track("a1", enrolled("a1", start))
	expect := func(want bool) {
		t.Helper()
		r.Tick()
		select {
		case id := <-woken:
			if !want {
				t.Fatalf("woken at %s", now)
			}
			if id != "a1" {
				t.Fatalf("woke %s", id)
			}
		case <-time.After(200 * time.Millisecond):
			if want {
				t.Fatalf("not woken at %s", now)
			}
		}
	}
	now = time.Date(2026, 11, 4, 23, 59, 59, 0, time.UTC)
	expect(false)
	now = time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	expect(true)
}

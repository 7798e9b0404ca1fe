package risk_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/risk"
	"github.com/svc/engine/events"
)

// The reactor's index (quiet bands, fixed-point screening) wakes exactly the
// accounts whose exact Breach fires, for random positions, realized PnL,
// thresholds and marks.
func TestIndexAgreesWithTheAggregate(t *testing.T) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	r := risk.New(func() time.Time { return at }, func(context.Context, string, commands.Command) error { return nil }, nil)
	states := map[string]*account.State{}
	px := func(base int) events.Decimal {
		return events.MustDecimal(fmt.Sprintf("%d.%02d", base+rng.IntN(40)-20, rng.IntN(100)))
	}
	for i := 0; i < 300; i++ {
		id := fmt.Sprintf("a%03d", i)
		s := account.New(id)
		mult := []string{"1", "50", "0.1"}[rng.IntN(3)]
		m := func(bid events.Decimal) trading.Market {
			return trading.Market{
				Quotes: map[string]trading.Quote{"X": {Instrument: "X", Bid: bid, Ask: bid.Add(events.MustDecimal("0.5"))}},
				Specs:  map[string]trading.Spec{"X": {Symbol: "X", Multiplier: events.MustDecimal(mult), MaxQuantity: events.Int(1000)}},
			}
		}
		c := &riskcmd.SetSettings{}
		val := func() *riskcmd.Number { return num(fmt.Sprint(1 + rng.IntN(400))) }
		if rng.IntN(2) == 0 {
			c.DailyLossEnabled, c.DailyLossValue = on(), val()
		}
		if rng.IntN(2) == 0 {
			c.WeeklyLossEnabled, c.WeeklyLossValue = on(), val()
		}
		if rng.IntN(2) == 0 {
			c.DailyProfitEnabled, c.DailyProfitValue = on(), val()
		}
		if rng.IntN(2) == 0 || !(c.DailyLossEnabled != nil || c.WeeklyLossEnabled != nil || c.DailyProfitEnabled != nil) {
			c.WeeklyProfitEnabled, c.WeeklyProfitValue = on(), val()
		}
		cmds := []commands.Command{
			&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: id, Currency: "USD", StartingBalance: events.Int(1000000)},
			c,
		}
		side := []string{"buy", "sell"}[rng.IntN(2)]
		for k := 0; k < 1+rng.IntN(3); k++ { // open, maybe add, maybe realize part
			sd := side
			if k == 2 {
				sd = map[string]string{"buy": "sell", "sell": "buy"}[side]
			}
			cmds = append(cmds, &trading.PlaceOrder{ClientOrderID: fmt.Sprint(k), Instrument: "X", Side: sd, OrderType: "market",
				Quantity: events.Int(int64(1 + rng.IntN(3))), TimeInForce: "day", Market: m(px(100))})
		}
		for n, cmd := range cmds {
			uid := ulid.Make()
			evs, err := account.Decide(s, commands.Envelope{ID: uid, At: at.Add(-time.Duration(len(cmds)-n) * time.Minute), Cmd: cmd})
			if err != nil {
				continue // e.g. a reduce larger than the position
			}
			for _, e := range evs {
				s = account.Apply(s, e)
			}
		}
		if len(s.Positions) == 0 {
			continue
		}
		states[id] = s
		r.Track(id, s, 0)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error { // the wake-ups Track sent for accounts breached already
		if n := r.Pending(); n > 0 {
			return fmt.Errorf("%d commands of the reactor in flight", n)
		}
		return nil
	})
	fires, checks := 0, 0
	for round := 0; round < 200; round++ {
		mark := px(100)
		got := r.Mark("X", mark)
		sort.Strings(got)
		var want []string
		for id, s := range states {
			if _, fire := s.Breach(at, func(string) (events.Decimal, bool) { return mark, true }); fire {
				want = append(want, id)
			}
		}
		sort.Strings(want)
		fires, checks = fires+len(want), checks+len(states)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("mark %s: index wakes %v, aggregate fires %v", mark, got, want)
		}
	}
	if fires == 0 || fires == checks {
		t.Fatalf("%d of %d checks fire: the marks do not straddle the thresholds", fires, checks)
	}
	t.Logf("%d of %d checks fire", fires, checks)
}

// The lock listener hears an account's lock view when the account is first
// tracked and whenever the view changes, once: not again for a commit that
// leaves it as it was.
func TestTheLockListenerHearsEachChangeOfTheViewOnce(t *testing.T) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	r := risk.New(func() time.Time { return at }, func(context.Context, string, commands.Command) error { return nil }, nil)
	var heard []account.LockView
	r.OnLock(func(_ string, _ uint64, v account.LockView) { heard = append(heard, v) })
	s := account.New("a1")
	rev := uint64(0)
	run := func(cmd commands.Command, when time.Time) {
		t.Helper()
		evs, err := account.Decide(s, commands.Envelope{ID: ulid.Make(), At: when, Cmd: cmd})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
		rev++
		r.Track("a1", s, rev)
	}
	run(&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "a1", Currency: "USD", StartingBalance: events.Int(100000)}, at.Add(-3*time.Minute))
	r.Track("a1", s, rev) // the same view again
	if len(heard) != 1 {
		t.Fatalf("heard %d views after the opening, want 1", len(heard))
	}
	run(&riskcmd.SetSettings{DailyLossEnabled: on(), DailyLossValue: num("100")}, at.Add(-2*time.Minute))
	r.Track("a1", s, rev)
	if len(heard) != 2 || heard[1].Settings.DailyLossValue == nil || heard[1].Settings.DailyLossValue.String() != "100" {
		t.Fatalf("heard %d views after the daily loss was set: %+v", len(heard), heard)
	}
	run(&riskcmd.SetSettings{DailyLossEnabled: on(), DailyLossValue: num("200")}, at.Add(-time.Minute))
	if len(heard) != 3 || heard[2].Settings.DailyLossValue.String() != "200" {
		t.Fatalf("heard %d views after the daily loss changed: %+v", len(heard), heard)
	}
}

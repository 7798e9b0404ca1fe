package account_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Property: in random interleavings of orders, marks (with and without the
// reactor's evaluation), fills of resting orders, unlocks, releases, clock
// moves, evaluation breaches and restarts (state rebuilt from the log), no
// order that adds exposure is accepted while tradingLocked, no fill adds
// exposure while a risk lock stands, reverse and replace are always refused
// while locked, and a control fires at most once per period between manual unlocks.
func TestPropertyNoExposureWhileLocked(t *testing.T) {
	runs, steps := 300, 80
	if testing.Short() {
		runs = 50
	}
	tried, accepted := 0, 0
	for seed := 0; seed < runs; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			a, b := propertyRun(t, uint64(seed), steps)
			tried, accepted = tried+a, accepted+b
		})
	}
	t.Logf("%d orders tried while locked, %d of them accepted as reductions", tried, accepted)
	if tried < runs/2 || accepted == 0 {
		t.Fatalf("the interleavings rarely reach a lock: %d orders tried while locked, %d accepted", tried, accepted)
	}
}

// propertyRun plays one interleaving; it counts the orders tried while locked and those accepted.
func propertyRun(t *testing.T, seed uint64, steps int) (tried, accepted int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := account.New("a1")
	var log []events.Event
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	n := 0
	mid := events.Int(100)
	market := func() trading.Market {
		return trading.Market{
			Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: mid.Sub(events.Int(1)), Ask: mid.Add(events.Int(1)), At: at}},
			Specs:  map[string]trading.Spec{"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: events.Int(1), MaxQuantity: events.Int(100)}},
		}
	}
	fired := map[string]int{} // control@period -> locks since the last manual unlock
	exposure := func(st *account.State) events.Decimal { return st.Positions["BTC-PERP"].Quantity.Abs() }
	do := func(cmd commands.Command) ([]events.Event, error) {
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[13], id[14], id[15] = byte(seed), byte(n>>8), byte(n)
		evs, err := account.Decide(s, commands.Envelope{ID: id, At: at, Cmd: cmd})
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			s = account.Apply(s, e)
			if l, ok := e.(evacct.RiskLocked); ok {
				k := l.Control + "@" + l.PeriodStart.String()
				if fired[k]++; fired[k] > 1 {
					t.Fatalf("step %d: %s fired twice in one period", n, k)
				}
			}
			if u, ok := e.(evacct.RiskUnlocked); ok && u.Reason == "manual" {
				fired = map[string]int{}
			}
		}
		log = append(log, evs...)
		return evs, nil
	}
	if _, err := do(&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: events.Int(10000)}); err != nil {
		t.Fatal(err)
	}
	setSettings := func() {
		c := &riskcmd.SetSettings{}
		if rng.IntN(2) == 0 {
			c.DailyLossEnabled, c.DailyLossValue = on(), num(fmt.Sprint(5+rng.IntN(30)))
		}
		if rng.IntN(2) == 0 {
			c.WeeklyLossEnabled, c.WeeklyLossValue = on(), num(fmt.Sprint(10+rng.IntN(60)))
		}
		if rng.IntN(2) == 0 {
			c.DailyProfitEnabled, c.DailyProfitValue = on(), num(fmt.Sprint(5+rng.IntN(30)))
		}
		if rng.IntN(3) == 0 {
			c.WeeklyProfitEnabled, c.WeeklyProfitValue = on(), num(fmt.Sprint(10+rng.IntN(60)))
		}
		if rng.IntN(3) == 0 {
			c.EODCloseEnabled, c.EODCloseValue = on(), num(fmt.Sprint(1+rng.IntN(120)))
		}
		lockSettings := rng.IntN(3) == 0
		c.LockSettingsWhenTradingLocked = &lockSettings
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		_, _ = do(c) // may be refused while settings-locked
	}
	setSettings()
	for i := 0; i < steps; i++ {
		locked := s.RiskLock(at).TradingLocked
		riskLocked := s.ControlLocked(at)
		before := exposure(s)
		switch k := rng.IntN(14); {
		case k < 4: // an order
			c := &trading.PlaceOrder{ClientOrderID: fmt.Sprintf("o%d", i), Instrument: "BTC-PERP", Side: []string{"buy", "sell"}[rng.IntN(2)],
				OrderType: "market", Quantity: events.Int(int64(1 + rng.IntN(3))), TimeInForce: "gtc", ReduceOnly: rng.IntN(3) == 0, Market: market()}
			if rng.IntN(2) == 0 {
				c.OrderType = "limit"
				px := mid.Add(events.Int(int64(rng.IntN(7) - 3)))
				c.LimitPrice = &px
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			_, err := do(c)
			if locked {
				tried++
			}
			if err == nil && locked {
				accepted++
				reducing := c.OrderType == "market" && !before.IsZero() && c.Quantity.Cmp(before) <= 0 &&
					(s.Positions["BTC-PERP"].Quantity.IsZero() || exposure(s).Cmp(before) < 0)
				if !c.ReduceOnly && !reducing {
					t.Fatalf("step %d: %s %s %s (reduceOnly %v) accepted while locked (%v)", i, c.OrderType, c.Side, c.Quantity, c.ReduceOnly, account.Holds(s, at))
				}
				if exposure(s).Cmp(before) > 0 {
					t.Fatalf("step %d: exposure grew from %s to %s while locked", i, before, exposure(s))
				}
			}
		case k < 7: // a mark moves; the reactor evaluates it, or is late
			mid = mid.Add(events.Int(int64(rng.IntN(21) - 10)))
			if mid.Cmp(events.Int(10)) < 0 {
				mid = events.Int(10)
			}
			if rng.IntN(4) != 0 {
				_, _ = do(&riskcmd.Evaluate{Market: market()})
			}
		case k < 9: // resting orders meet the touch
			_, _ = do(&trading.FillWorking{Quote: market().Quotes["BTC-PERP"]})
			if riskLocked && exposure(s).Cmp(before) > 0 {
				t.Fatalf("step %d: a fill grew exposure from %s to %s under a risk lock", i, before, exposure(s))
			}
		case k == 9:
			_, _ = do(&riskcmd.Unlock{})
		case k == 10:
			_, _ = do(&riskcmd.Release{})
		case k == 11: // the clock moves: minutes, hours, or past a day
			at = at.Add([]time.Duration{7 * time.Minute, 3 * time.Hour, 26 * time.Hour}[rng.IntN(3)])
		case k == 12: // restart: the state is rebuilt from the log
			r := account.New("a1")
			for _, e := range log {
				r = account.Apply(r, e)
			}
			if a, b := r.RiskLock(at), s.RiskLock(at); a.TradingLocked != b.TradingLocked || a.LockReason != b.LockReason || a.SettingsLocked != b.SettingsLocked {
				t.Fatalf("step %d: replay gives %+v, live %+v", i, a, b)
			}
			s = r
		default:
			switch rng.IntN(4) {
			case 0:
				_, _ = do(&riskcmd.BreachEvaluation{})
			case 1:
				_, _ = do(&riskcmd.ReleaseEvaluation{})
			case 2:
				setSettings()
			default:
				var ref *commands.Refusal
				if _, err := do(&trading.Reverse{Instrument: "BTC-PERP", ClientOrderID: fmt.Sprintf("r%d", i), Market: market()}); locked && !errors.As(err, &ref) {
					t.Fatalf("step %d: reverse accepted while locked", i)
				}
				for id := range s.Working {
					q := events.Int(5)
					if _, err := do(&trading.ReplaceOrder{BrokerOrderID: id, Quantity: &q, Market: market()}); locked && err == nil {
						t.Fatalf("step %d: replace accepted while locked", i)
					}
					break
				}
			}
		}
	}
	return tried, accepted
}

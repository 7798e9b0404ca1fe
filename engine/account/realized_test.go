package account_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// summed is RealizedIn over what the account keeps, one by one: every
// kept minute at or after start and after the newest manual unlock.
func summed(r *account.Risk, start time.Time) events.Decimal {
	sum := events.Int(0)
	kept := r.Fills
	if r.FillsOpen != nil {
		kept = append(kept[:len(kept):len(kept)], *r.FillsOpen)
	}
	for _, f := range kept {
		if !f.At.Before(start) && f.N > r.CountFromFill {
			sum = sum.Add(f.Amount)
		}
	}
	return sum
}

// fill is one fill as the test made it.
type fill struct {
	n      uint64
	at     time.Time
	amount events.Decimal
}

// byDefinition is a period's realized PnL from the fills themselves: those
// at or after start (a minute) and after the newest manual unlock.
func byDefinition(fills []fill, countFrom uint64, start time.Time) events.Decimal {
	sum := events.Int(0)
	for _, f := range fills {
		if !f.at.Before(start) && f.n > countFrom {
			sum = sum.Add(f.amount)
		}
	}
	return sum
}

// A period's realized PnL is the sum of its fills whatever the account went
// through: fills with and without PnL, the window moving past the oldest,
// manual unlocks, resets, and a clock that goes back now and then; checked
// against the sum by definition at every step, for the starts of periods
// before, inside and after the fills kept.
func TestRealizedInIsTheSumOfThePeriodsFills(t *testing.T) {
	amounts := []string{"1.25", "-3", "0.001", "-0.5", "12345.678901234567", "0", "7"}
	for _, tc := range []struct {
		name      string
		step      time.Duration // between fills
		back      int           // every back-th fill is dated before the one before it (0: never)
		unlockEvy int           // a manual unlock every unlockEvy fills (0: never)
		resetEvy  int           // an account reset every resetEvy fills (0: never)
	}{
		{"in order", 7 * time.Minute, 0, 0, 0},
		{"window moving", 3 * time.Hour, 0, 0, 0},
		{"manual unlocks", 20 * time.Minute, 0, 37, 0},
		{"resets", 20 * time.Minute, 0, 0, 151},
		{"clock going back", 15 * time.Minute, 23, 41, 0},
		{"clock going back, window moving", 2 * time.Hour, 9, 0, 0},
		{"many fills a minute", 7 * time.Second, 0, 0, 0},
		{"many a minute, manual unlocks", 5 * time.Second, 0, 29, 0},
		{"many a minute, clock going back, resets", 3 * time.Second, 13, 0, 97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			s := account.New("acct_1")
			at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
			var made []fill // since the last reset
			var n, countFrom uint64
			for i := 1; i <= 600; i++ {
				at = at.Add(tc.step)
				fillAt := at
				if tc.back > 0 && i%tc.back == 0 {
					fillAt = at.Add(-3 * tc.step)
				}
				amount := events.MustDecimal(amounts[rng.IntN(len(amounts))])
				s = account.Apply(s, evacct.OrderFilled{BrokerOrderID: fmt.Sprintf("ord_%d", i), Done: true, Instrument: "BTC-PERP",
					Quantity: events.Int(1), Price: events.Int(100), Realized: amount, Balance: events.Int(1000), At: fillAt})
				n++
				made = append(made, fill{n: n, at: fillAt, amount: amount})
				if tc.unlockEvy > 0 && i%tc.unlockEvy == 0 {
					s = account.Apply(s, evacct.RiskUnlocked{Reason: "manual", At: at})
					countFrom = n
				}
				if tc.resetEvy > 0 && i%tc.resetEvy == 0 {
					s = account.Apply(s, evacct.AccountReset{Balance: events.Int(1000), At: at})
					made, countFrom = nil, n
				}
				for _, back := range []time.Duration{0, tc.step, 10 * tc.step, 24 * time.Hour, 7 * 24 * time.Hour, 9 * 24 * time.Hour, -time.Hour} {
					start := at.Add(-back).Truncate(account.FillMinute) // a period starts on a minute
					got := s.Risk.RealizedIn(start)
					if want := summed(&s.Risk, start); got.Cmp(want) != 0 {
						t.Fatalf("fill %d, period from %s: %s, want %s (%d minutes kept, unordered %v)", i, start, got, want, len(s.Risk.Fills), s.Risk.FillsUnordered)
					}
					if back > 7*24*time.Hour {
						continue // past the window: only what is kept counts
					}
					if want := byDefinition(made, countFrom, start); got.Cmp(want) != 0 {
						t.Fatalf("fill %d, period from %s: %s, want %s summed fill by fill", i, start, got, want)
					}
				}
			}
		})
	}
}

// BenchmarkRealizedIn is a PnL control's check after a commit of an account
// whose window keeps 50,000 fills with a PnL (about one every 14 s for
// eight days): a day's sum.
func BenchmarkRealizedIn(b *testing.B) {
	s := account.New("acct_1")
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for i := range 50_000 {
		s = account.Apply(s, evacct.OrderFilled{BrokerOrderID: fmt.Sprintf("ord_%d", i), Done: true, Instrument: "BTC-PERP",
			Quantity: events.Int(1), Price: events.Int(100), Realized: events.MustDecimal("1.25"), Balance: events.Int(1000),
			At: at.Add(time.Duration(i) * 13 * time.Second)})
	}
	day := at.Add(50_000*13*time.Second - 24*time.Hour)
	b.Run("running sums", func(b *testing.B) {
		for b.Loop() {
			_ = s.Risk.RealizedIn(day)
		}
	})
	b.Run("one by one", func(b *testing.B) { // the sum by its definition, as before
		for b.Loop() {
			_ = summed(&s.Risk, day)
		}
	})
}

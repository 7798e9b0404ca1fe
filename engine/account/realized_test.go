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

// summed is RealizedIn by its definition: every kept fill at or after
// start and after the newest manual unlock, one by one.
func summed(r *account.Risk, start time.Time) events.Decimal {
	sum := events.Int(0)
	for _, f := range r.Fills {
		if !f.At.Before(start) && f.N > r.CountFromFill {
			sum = sum.Add(f.Amount)
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			s := account.New("acct_1")
			at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
			for i := 1; i <= 600; i++ {
				at = at.Add(tc.step)
				fillAt := at
				if tc.back > 0 && i%tc.back == 0 {
					fillAt = at.Add(-3 * tc.step)
				}
				s = account.Apply(s, evacct.OrderFilled{BrokerOrderID: fmt.Sprintf("ord_%d", i), Done: true, Instrument: "BTC-PERP",
					Quantity: events.Int(1), Price: events.Int(100), Realized: events.MustDecimal(amounts[rng.IntN(len(amounts))]),
					Balance: events.Int(1000), At: fillAt})
				if tc.unlockEvy > 0 && i%tc.unlockEvy == 0 {
					s = account.Apply(s, evacct.RiskUnlocked{Reason: "manual", At: at})
				}
				if tc.resetEvy > 0 && i%tc.resetEvy == 0 {
					s = account.Apply(s, evacct.AccountReset{Balance: events.Int(1000), At: at})
				}
				for _, back := range []time.Duration{0, tc.step, 10 * tc.step, 24 * time.Hour, 7 * 24 * time.Hour, 9 * 24 * time.Hour, -time.Hour} {
					start := at.Add(-back)
					if got, want := s.Risk.RealizedIn(start), summed(&s.Risk, start); got.Cmp(want) != 0 {
						t.Fatalf("fill %d, period from %s: %s, want %s (%d fills kept, unordered %v)", i, start, got, want, len(s.Risk.Fills), s.Risk.FillsUnordered)
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

package account_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// acct is an account driven step by step with its own clock, recording its log.
type acct struct {
	t   *testing.T
	s   *account.State
	at  time.Time
	n   int
	log []events.Event
}

func newAcct(t *testing.T, at time.Time) *acct {
	a := &acct{t: t, s: account.New("a1"), at: at}
	a.must(&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("50000")})
	return a
}

// do decides cmd at the account's clock and applies what it records.
func (a *acct) do(cmd commands.Command) ([]events.Event, error) {
	a.n++
	id := ulid.MustParse("01J00000000000000000000000")
	id[14], id[15] = byte(a.n>>8), byte(a.n)
	evs, err := account.Decide(a.s, commands.Envelope{ID: id, At: a.at, Cmd: cmd})
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		a.s = account.Apply(a.s, e)
	}
	a.log = append(a.log, evs...)
	return evs, nil
}

func (a *acct) must(cmd commands.Command) []events.Event {
	a.t.Helper()
	evs, err := a.do(cmd)
	if err != nil {
		a.t.Fatalf("%T: %v", cmd, err)
	}
	return evs
}

func (a *acct) refused(cmd commands.Command, status int, code string) *commands.Refusal {
	a.t.Helper()
	_, err := a.do(cmd)
	var ref *commands.Refusal
	if !errors.As(err, &ref) || commands.StatusOf(ref.Code, ref.Malformed) != status || string(ref.Code) != code {
		a.t.Fatalf("%T: got %v, want %d %s", cmd, err, status, code)
	}
	return ref
}

// quotes is a market quoting BTC-PERP at bid/ask.
func quotes(bid, ask string) trading.Market { return mkt(bid, ask) }

func settings(mod func(s *riskcmd.SetSettings)) *riskcmd.SetSettings {
	c := &riskcmd.SetSettings{}
	mod(c)
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

func on() *bool { b := true; return &b }

func num(s string) *riskcmd.Number { return &riskcmd.Number{Decimal: dec(s), Set: true} }

func lockOf(evs []events.Event) (evacct.RiskLocked, bool) {
	for _, e := range evs {
		if l, ok := e.(evacct.RiskLocked); ok {
			return l, true
		}
	}
	return evacct.RiskLocked{}, false
}

// scenario: a losing position crosses a control; it fires once, flattens,
// holds the account until the next period, and lifts by itself.
func TestControlsFireOnceFlattenAndLift(t *testing.T) {
	mon := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC) // a Monday
	cases := []struct {
		name       string
		set        func(*riskcmd.SetSettings)
		bid, ask   string // the mark that crosses (position: long 2 bought at 101)
		below      string // a mark that does not cross
		control    string
		trigger    string
		unlockAt   time.Time
		stillAfter time.Time // still locked here
	}{
		{"daily loss", func(c *riskcmd.SetSettings) { c.DailyLossEnabled, c.DailyLossValue = on(), num("100") }, "50", "51", "60", evacct.ControlDailyLoss, "-100", time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 23, 59, 0, 0, time.UTC)},
		{"weekly loss", func(c *riskcmd.SetSettings) { c.WeeklyLossEnabled, c.WeeklyLossValue = on(), num("100") }, "50", "51", "60", evacct.ControlWeeklyLoss, "-100", time.Date(2026, 11, 9, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 8, 23, 0, 0, 0, time.UTC)},
		{"daily profit", func(c *riskcmd.SetSettings) { c.DailyProfitEnabled, c.DailyProfitValue = on(), num("100") }, "150", "152", "140", evacct.ControlDailyProfit, "100", time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 23, 59, 0, 0, time.UTC)},
		{"weekly profit", func(c *riskcmd.SetSettings) { c.WeeklyProfitEnabled, c.WeeklyProfitValue = on(), num("100") }, "150", "152", "140", evacct.ControlWeeklyProfit, "100", time.Date(2026, 11, 9, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newAcct(t, mon)
			a.must(settings(c.set))
			a.must(buy("b1", "2", quotes("100", "101")))
			if evs := a.must(&riskcmd.Evaluate{Market: quotes(c.below, c.below)}); len(evs) != 0 {
				t.Fatalf("fired below the threshold: %v", evs)
			}
			evs := a.must(&riskcmd.Evaluate{Market: quotes(c.bid, c.ask)})
			l, ok := lockOf(evs)
			if !ok || l.Control != c.control || !l.TradingUnlockAt.Equal(c.unlockAt) || !l.FlattenConfirmed {
				t.Fatalf("lock %+v", l)
			}
			if len(a.s.Positions) != 0 || len(a.s.Working) != 0 {
				t.Fatalf("not flat: %v", a.s.Positions)
			}
			v := a.s.RiskLock(a.at)
			if !v.TradingLocked || v.LockReason != c.control || v.TriggerPnl == nil || v.TradingUnlockAt == nil {
				t.Fatalf("view %+v", v)
			}
			// once: a second evaluation records nothing
			if evs := a.must(&riskcmd.Evaluate{Market: quotes(c.bid, c.ask)}); len(evs) != 0 {
				t.Fatalf("fired twice: %v", evs)
			}
			ref := a.refused(buy("b2", "1", quotes("100", "101")), 423, "risk_locked")
			if hs, _ := ref.Params["holds"].([]string); len(hs) != 1 || hs[0] != c.control {
				t.Fatalf("holds %v", ref.Params)
			}
			a.at = c.stillAfter
			a.refused(buy("b3", "1", quotes("100", "101")), 423, "risk_locked")
			if evs := a.must(&riskcmd.Release{}); len(evs) != 0 {
				t.Fatalf("released early: %v", evs)
			}
			// lifts by itself at the next period's start, before any release is recorded
			a.at = c.unlockAt
			if a.s.RiskLock(a.at).TradingLocked {
				t.Fatal("still locked at tradingUnlockAt")
			}
			a.must(buy("b4", "1", quotes("100", "101")))
			if evs := a.must(&riskcmd.Release{}); len(evs) != 1 {
				t.Fatalf("release: %v", evs)
			}
			if a.s.Risk.Lock != nil {
				t.Fatal("lock kept after release")
			}
		})
	}
}

func TestEndOfDayClose(t *testing.T) {
	a := newAcct(t, time.Date(2026, 11, 2, 23, 44, 0, 0, time.UTC))
	a.must(settings(func(c *riskcmd.SetSettings) { c.EODCloseEnabled, c.EODCloseValue = on(), num("15") }))
	a.must(buy("b1", "1", quotes("100", "101")))
	a.must(limit("l1", "buy", "1", "90", quotes("100", "101")))
	if evs := a.must(&riskcmd.Evaluate{Market: quotes("100", "101")}); len(evs) != 0 {
		t.Fatalf("fired before the close: %v", evs)
	}
	a.at = time.Date(2026, 11, 2, 23, 45, 0, 0, time.UTC)
	evs := a.must(&riskcmd.Evaluate{Market: quotes("100", "101")})
	l, ok := lockOf(evs)
	if !ok || l.Control != evacct.ControlEODClose || !l.TradingUnlockAt.Equal(time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)) || l.TriggerPnl != nil {
		t.Fatalf("lock %+v", l)
	}
	if len(a.s.Positions) != 0 || len(a.s.Working) != 0 {
		t.Fatal("not flat")
	}
	a.refused(buy("b2", "1", quotes("100", "101")), 423, "risk_locked")
	a.at = time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	a.must(buy("b3", "1", quotes("100", "101")))
	if evs := a.must(&riskcmd.Evaluate{Market: quotes("100", "101")}); len(evs) != 0 {
		t.Fatalf("fired at the day's start: %v", evs)
	}
	a.at = time.Date(2026, 11, 3, 23, 50, 0, 0, time.UTC)
	if _, ok := lockOf(a.must(&riskcmd.Evaluate{Market: quotes("100", "101")})); !ok {
		t.Fatal("did not fire the next day")
	}
}

func TestFuturesCalendarEndOfDay(t *testing.T) {
	chi, _ := time.LoadLocation("America/Chicago")
	a := newAcct(t, time.Date(2026, 11, 6, 15, 44, 0, 0, chi)) // a Friday
	c := settings(func(c *riskcmd.SetSettings) { c.EODCloseEnabled, c.EODCloseValue = on(), num("15") })
	c.Calendar = "futures"
	a.must(c)
	if evs := a.must(&riskcmd.Evaluate{}); len(evs) != 0 {
		t.Fatal("fired early")
	}
	a.at = time.Date(2026, 11, 6, 15, 45, 0, 0, chi)
	l, ok := lockOf(a.must(&riskcmd.Evaluate{}))
	if !ok || !l.TradingUnlockAt.Equal(time.Date(2026, 11, 8, 17, 0, 0, 0, chi)) {
		t.Fatalf("lock %+v", l)
	}
}

func TestManualUnlock(t *testing.T) {
	fire := func(t *testing.T, lockSettings bool) *acct {
		a := newAcct(t, t0)
		a.must(settings(func(c *riskcmd.SetSettings) {
			c.DailyLossEnabled, c.DailyLossValue = on(), num("100")
			c.LockSettingsWhenTradingLocked = &lockSettings
		}))
		a.must(buy("b1", "2", quotes("100", "101")))
		if _, ok := lockOf(a.must(&riskcmd.Evaluate{Market: quotes("40", "41")})); !ok {
			t.Fatal("no lock")
		}
		return a
	}
	t.Run("clears the lock and its latches; controls count from the unlock", func(t *testing.T) {
		a := fire(t, false)
		if evs := a.must(&riskcmd.Unlock{}); len(evs) != 1 {
			t.Fatalf("unlock: %v", evs)
		}
		if a.s.RiskLock(a.at).TradingLocked || len(a.s.Risk.Latches) != 0 {
			t.Fatal("still locked")
		}
		if evs := a.must(&riskcmd.Evaluate{Market: quotes("40", "41")}); len(evs) != 0 {
			t.Fatal("the loss before the unlock fired again")
		}
		a.at = a.at.Add(time.Minute)
		a.must(buy("b2", "2", quotes("100", "101")))
		if _, ok := lockOf(a.must(&riskcmd.Evaluate{Market: quotes("40", "41")})); !ok {
			t.Fatal("a new loss after the unlock did not fire")
		}
	})
	t.Run("settings-locked: 423 settings_locked and nothing changes", func(t *testing.T) {
		a := fire(t, true)
		v := a.s.RiskLock(a.at)
		if !v.SettingsLocked || v.SettingsUnlockAt == nil || !v.SettingsUnlockAt.Equal(*v.TradingUnlockAt) {
			t.Fatalf("view %+v", v)
		}
		a.refused(&riskcmd.Unlock{}, 423, "settings_locked")
		a.refused(settings(func(*riskcmd.SetSettings) {}), 423, "settings_locked")
		if !a.s.RiskLock(a.at).TradingLocked {
			t.Fatal("unlocked")
		}
		a.at = *v.SettingsUnlockAt
		a.must(settings(func(*riskcmd.SetSettings) {}))
	})
	t.Run("eval_breach stands", func(t *testing.T) {
		a := fire(t, false)
		a.must(&riskcmd.BreachEvaluation{Reason: "max drawdown"})
		a.must(&riskcmd.Unlock{})
		v := a.s.RiskLock(a.at)
		if !v.TradingLocked || v.LockReason != evacct.ReasonEvalBreach || !a.s.ControlLocked(a.at) {
			t.Fatalf("view %+v", v)
		}
		if evs := a.must(&riskcmd.Unlock{}); len(evs) != 0 {
			t.Fatalf("second unlock recorded %v", evs)
		}
		a.refused(buy("b2", "1", quotes("100", "101")), 423, "risk_locked")
		a.must(&riskcmd.ReleaseEvaluation{})
		a.must(buy("b3", "1", quotes("100", "101")))
	})
}

// A lock whose flatten found no price leaves the position: reduce-only and
// reducing market orders are accepted; orders adding exposure, replace and
// reverse are refused.
func TestLockedAccountAcceptsOnlyReductions(t *testing.T) {
	a := newAcct(t, t0)
	a.must(buy("b1", "2", quotes("100", "101")))
	a.must(sell("s1", "2", quotes("50", "51"))) // realized -102
	a.must(buy("b2", "3", quotes("100", "101")))
	a.must(limit("l1", "sell", "1", "500", quotes("100", "101")))
	a.must(settings(func(c *riskcmd.SetSettings) { c.DailyLossEnabled, c.DailyLossValue = on(), num("100") }))
	evs := a.must(&riskcmd.Evaluate{Market: trading.Market{}}) // no price: realized alone crosses
	l, ok := lockOf(evs)
	if !ok || l.FlattenConfirmed || l.TriggerPnl.Cmp(dec("-102")) != 0 {
		t.Fatalf("lock %+v", l)
	}
	if len(a.s.Working) != 0 || a.s.Positions["BTC-PERP"].Quantity.Cmp(dec("3")) != 0 {
		t.Fatalf("working %v positions %v", a.s.Working, a.s.Positions)
	}
	a.refused(buy("b3", "1", quotes("100", "101")), 423, "risk_locked")
	a.refused(limit("l2", "sell", "1", "90", quotes("100", "101")), 423, "risk_locked") // may add exposure later
	a.refused(sell("s2", "4", quotes("100", "101")), 423, "risk_locked")                // flips the position
	a.refused(&trading.Reverse{Instrument: "BTC-PERP", ClientOrderID: "r1", Market: quotes("100", "101")}, 423, "risk_locked")
	ro := limit("l3", "sell", "1", "500", quotes("100", "101"))
	ro.ReduceOnly = true
	a.must(ro)
	a.refused(&trading.ReplaceOrder{BrokerOrderID: a.s.OrderID("l3"), Quantity: ptr("2"), Market: quotes("100", "101")}, 423, "risk_locked")
	a.must(sell("s3", "1", quotes("100", "101")))
	a.must(&trading.ClosePosition{Instrument: "BTC-PERP", Market: quotes("100", "101")})
	if len(a.s.Positions) != 0 {
		t.Fatal("close did not close")
	}
}

func TestRiskStateSurvivesReplay(t *testing.T) {
	a := newAcct(t, t0)
	a.must(settings(func(c *riskcmd.SetSettings) {
		c.DailyLossEnabled, c.DailyLossValue = on(), num("100")
		c.LockSettingsWhenTradingLocked = on()
	}))
	a.must(buy("b1", "2", quotes("100", "101")))
	a.must(&riskcmd.Evaluate{Market: quotes("40", "41")})
	s := account.New("a1")
	for _, e := range a.log {
		s = account.Apply(s, e)
	}
	want, got := a.s.RiskLock(a.at), s.RiskLock(a.at)
	if !got.TradingLocked || got.LockReason != want.LockReason || !got.TradingUnlockAt.Equal(*want.TradingUnlockAt) ||
		got.TriggerPnl.Cmp(*want.TriggerPnl) != 0 || got.SettingsLocked != want.SettingsLocked {
		t.Fatalf("replayed %+v, live %+v", got, want)
	}
}

func TestSettingsValidation(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*riskcmd.SetSettings)
		ok   bool
	}{
		{"all off", func(*riskcmd.SetSettings) {}, true},
		{"enabled without a value", func(c *riskcmd.SetSettings) { c.DailyLossEnabled = on() }, false},
		{"negative", func(c *riskcmd.SetSettings) { c.WeeklyLossValue = num("-1") }, false},
		{"zero while enabled", func(c *riskcmd.SetSettings) { c.DailyProfitEnabled, c.DailyProfitValue = on(), num("0") }, false},
		{"zero while off", func(c *riskcmd.SetSettings) { c.DailyProfitValue = num("0") }, true},
		{"too many decimals", func(c *riskcmd.SetSettings) { c.WeeklyProfitValue = num("1.123456789") }, false},
		{"trailing zeros are fine", func(c *riskcmd.SetSettings) { c.WeeklyProfitValue = num("1.50000000000") }, true},
		{"huge", func(c *riskcmd.SetSettings) { c.WeeklyProfitValue = num("999999999999999") }, false},
		{"eod fractional minutes", func(c *riskcmd.SetSettings) { c.EODCloseEnabled, c.EODCloseValue = on(), num("1.5") }, false},
		{"eod whole minutes", func(c *riskcmd.SetSettings) { c.EODCloseEnabled, c.EODCloseValue = on(), num("15.0") }, true},
		{"eod above 720", func(c *riskcmd.SetSettings) { c.EODCloseEnabled, c.EODCloseValue = on(), num("721") }, false},
		{"eod zero while on", func(c *riskcmd.SetSettings) { c.EODCloseEnabled, c.EODCloseValue = on(), num("0") }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &riskcmd.SetSettings{}
			c.mod(s)
			err := s.Validate()
			var ref *commands.Refusal
			switch {
			case c.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !c.ok && (!errors.As(err, &ref) || commands.StatusOf(ref.Code, ref.Malformed) != 400):
				t.Fatalf("got %v, want a 400", err)
			}
		})
	}
}

func TestFirmHaltShowsInTheLockAndStandsAnUnlock(t *testing.T) {
	a := newAcct(t, t0)
	a.must(&firmcmd.HaltAccount{})
	v := a.s.RiskLock(a.at)
	if !v.TradingLocked || v.LockReason != "firm_halt" || v.TradingUnlockAt != nil || a.s.ControlLocked(a.at) {
		t.Fatalf("view %+v", v)
	}
	if evs := a.must(&riskcmd.Unlock{}); len(evs) != 0 {
		t.Fatalf("unlock recorded %v", evs)
	}
	if v := a.s.RiskLock(a.at); !v.TradingLocked || v.LockReason != "firm_halt" {
		t.Fatalf("after unlock %+v", v)
	}
	a.refused(buy("b1", "1", quotes("100", "101")), 423, "risk_locked")
	a.must(&firmcmd.ResumeAccount{})
	if a.s.RiskLock(a.at).TradingLocked {
		t.Fatal("still locked after resume")
	}
	// a fired control shows first; the firm cannot halt over it
	a.must(settings(func(c *riskcmd.SetSettings) { c.DailyLossEnabled, c.DailyLossValue = on(), num("100") }))
	a.must(buy("b2", "2", quotes("100", "101")))
	a.must(&riskcmd.Evaluate{Market: quotes("40", "41")})
	if !a.s.ControlLocked(a.at) || a.s.RiskLock(a.at).LockReason != evacct.ControlDailyLoss {
		t.Fatal("no control lock")
	}
	a.refused(&firmcmd.HaltAccount{}, 409, "lock_not_owned")
}

func TestResetClearsFiredControls(t *testing.T) {
	a := newAcct(t, t0)
	a.must(settings(func(c *riskcmd.SetSettings) { c.DailyLossEnabled, c.DailyLossValue = on(), num("100") }))
	a.must(buy("b1", "2", quotes("100", "101")))
	a.must(&riskcmd.Evaluate{Market: quotes("40", "41")})
	a.must(&firmcmd.ResetAccount{ReferenceID: "reset-1"})
	if v := a.s.RiskLock(a.at); v.TradingLocked || v.Monitoring != "live" {
		t.Fatalf("after reset %+v", v)
	}
	if evs := a.must(&riskcmd.Evaluate{Market: quotes("40", "41")}); len(evs) != 0 {
		t.Fatalf("the loss before the reset fired: %v", evs)
	}
}

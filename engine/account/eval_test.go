package account_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	firmcmd "github.com/svc/engine/commands/firm"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/calendar"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evch "github.com/svc/engine/events/challenge"
	evidem "github.com/svc/engine/events/idem"
)

// Monday 2026-11-02 10:00 UTC: the evaluation starts here.
var e0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// rules: a 10,000 USD stage with a 10% target (11,000), a 5% daily (500) and
// 10% total (1,000) drawdown trailing the end-of-day equity, 30 days at most.
func rules() evch.Rules {
	return evch.Rules{EnrollmentID: "en1", ChallengeID: "c1", Stage: 1, Size: dec("10000"), ProfitTargetPct: dec("10"),
		MaxDailyDdPct: dec("5"), MaxTotalDdPct: dec("10"), DDMode: evch.DDTrailingEOD, MaxDurationDays: 30,
		AllowWeekendHold: true, Calendar: calendar.Crypto}
}

// flat quotes BTC-PERP at px on both sides, so fills and marks are px.
func flat(px string) trading.Market {
	m := mkt(px, px)
	return m
}

// evalAcct drives an evaluated account through Decide and Apply.
type evalAcct struct {
	t *testing.T
	s *account.State
	n int
}

func newEval(t *testing.T, r evch.Rules) *evalAcct {
	a := &evalAcct{t: t, s: account.New("a1")}
	a.must(e0, &challengecmd.OpenEvaluation{Open: tenantcmd.OpenAccount{TenantID: "u1", Broker: "paper", AccountNumber: "CH1",
		Currency: "USD", StartingBalance: r.Size, Kind: "challenge"}, Rules: r})
	return a
}

func (a *evalAcct) do(at time.Time, c commands.Command) ([]events.Event, error) {
	a.t.Helper()
	a.n++
	id := ulid.MustParse("01J00000000000000000000000")
	id[14], id[15] = byte(a.n>>8), byte(a.n)
	evs, err := account.Decide(a.s, commands.Envelope{ID: id, At: at, Cmd: c})
	if err == nil {
		for _, e := range evs {
			a.s = account.Apply(a.s, e)
		}
	}
	return evs, err
}

func (a *evalAcct) must(at time.Time, c commands.Command) []events.Event {
	a.t.Helper()
	evs, err := a.do(at, c)
	if err != nil {
		a.t.Fatalf("%T: %v", c, err)
	}
	return evs
}

// mark evaluates the account at px.
func (a *evalAcct) mark(at time.Time, px string) []events.Event {
	return a.must(at, &challengecmd.EvaluateStage{Market: flat(px)})
}

func (a *evalAcct) buy(at time.Time, qty, px string) []events.Event {
	a.n++
	return a.must(at, buy(fmt.Sprintf("b%d", a.n), qty, flat(px)))
}

// verdict is the verdict events record: passed, failed:<reason> or "".
func verdict(evs []events.Event) string {
	for _, e := range evs {
		switch e := e.(type) {
		case evch.EvaluationPassed:
			return "passed"
		case evacct.EvaluationBreached:
			return "failed:" + e.Reason
		}
	}
	return ""
}

func TestEvaluationRulesAtTheirBoundaries(t *testing.T) {
	day := 24 * time.Hour
	withRules := func(f func(*evch.Rules)) evch.Rules { r := rules(); f(&r); return r }
	for _, tc := range []struct {
		name  string
		rules evch.Rules
		steps func(a *evalAcct) []events.Event // the events of the last step
		want  string
	}{
		{name: "exactly at the profit target passes", rules: rules(), want: "passed",
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "10", "100"); return a.mark(e0.Add(time.Hour), "200") }},
		{name: "one cent under the profit target does not pass", rules: rules(), want: "",
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "10", "100"); return a.mark(e0.Add(time.Hour), "199.999") }},
		{name: "the target without the minimum trading days does not pass", rules: withRules(func(r *evch.Rules) { r.MinTradingDays = 2 }), want: "",
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "10", "100"); return a.mark(e0.Add(time.Hour), "250") }},
		{name: "the target on the second trading day passes", rules: withRules(func(r *evch.Rules) { r.MinTradingDays = 2 }), want: "passed",
			steps: func(a *evalAcct) []events.Event {
				a.buy(e0, "10", "100")
				a.mark(e0.Add(day), "150")
				return a.buy(e0.Add(day+time.Hour), "1", "200")
			}},
		{name: "exactly at the daily floor holds", rules: rules(), want: "",
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "10", "100"); return a.mark(e0.Add(time.Hour), "50") }},
		{name: "one cent under the daily floor fails", rules: rules(), want: "failed:" + evch.ReasonDailyDrawdown,
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "10", "100"); return a.mark(e0.Add(time.Hour), "49.999") }},
		{name: "one cent under the total floor fails", rules: withRules(func(r *evch.Rules) { r.MaxDailyDdPct = dec("50") }), want: "failed:" + evch.ReasonTotalDrawdown,
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "20", "100"); return a.mark(e0.Add(time.Hour), "49.9995") }},
		{name: "exactly at the total floor holds", rules: withRules(func(r *evch.Rules) { r.MaxDailyDdPct = dec("50") }), want: "",
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "20", "100"); return a.mark(e0.Add(time.Hour), "50") }},
		{name: "the EOD that raises the trailing floor: one cent under it fails", rules: withRules(func(r *evch.Rules) { r.MaxDailyDdPct = dec("50") }),
			want: "failed:" + evch.ReasonTotalDrawdown,
			steps: func(a *evalAcct) []events.Event {
				a.buy(e0, "10", "100")
				a.mark(e0.Add(time.Hour), "190")    // intraday high: raises nothing
				a.mark(e0.Add(13*time.Hour), "180") // late in the day
				a.mark(e0.Add(14*time.Hour), "180") // midnight: the day ends at 10,800
				if got := a.s.Eval.Thresholds().TotalFloor; got.Cmp(dec("9800")) != 0 {
					a.t.Fatalf("total floor after the EOD: %s, want 9800", got)
				}
				return a.mark(e0.Add(15*time.Hour), "79.999") // 9,799.99
			}},
		{name: "the EOD that raises the trailing floor: at it holds", rules: withRules(func(r *evch.Rules) { r.MaxDailyDdPct = dec("50") }), want: "",
			steps: func(a *evalAcct) []events.Event {
				a.buy(e0, "10", "100")
				a.mark(e0.Add(14*time.Hour), "180")
				return a.mark(e0.Add(15*time.Hour), "80") // 9,800
			}},
		{name: "a static floor does not trail the EOD", rules: withRules(func(r *evch.Rules) { r.MaxDailyDdPct = dec("50"); r.DDMode = evch.DDStatic }), want: "",
			steps: func(a *evalAcct) []events.Event {
				a.buy(e0, "10", "100")
				a.mark(e0.Add(14*time.Hour), "180")
				return a.mark(e0.Add(15*time.Hour), "0.001") // 9,000.01: over the static floor, under the trailing one
			}},
		{name: "the last allowed day holds to its end", rules: rules(), want: "",
			steps: func(a *evalAcct) []events.Event {
				a.buy(e0, "1", "100")
				return a.mark(e0.Add(30*day-time.Nanosecond), "100")
			}},
		{name: "the day after the last allowed day fails", rules: rules(), want: "failed:" + evch.ReasonMaxDuration,
			steps: func(a *evalAcct) []events.Event { a.buy(e0, "1", "100"); return a.mark(e0.Add(30*day), "100") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newEval(t, tc.rules)
			if got := verdict(tc.steps(a)); got != tc.want {
				t.Fatalf("verdict %q, want %q", got, tc.want)
			}
			want := map[string]string{"": "", "passed": evch.StatusPassed}[tc.want]
			if tc.want != "" && tc.want != "passed" {
				want = evch.StatusFailed
			}
			if a.s.Eval.Done != want {
				t.Fatalf("done %q, want %q", a.s.Eval.Done, want)
			}
		})
	}
}

func TestEvaluationRows(t *testing.T) {
	a := newEval(t, rules())
	if evs := a.mark(e0, "100"); len(evs) != 0 {
		t.Fatalf("a mark before any fill records %v", evs)
	}
	evs := a.buy(e0, "10", "100")
	if _, ok := evs[len(evs)-1].(evch.EvaluationStarted); !ok {
		t.Fatalf("the first fill does not start the evaluation: %v", evs)
	}
	if evs := a.buy(e0, "1", "100"); verdict(evs) != "" || len(a.s.Eval.Rows) != 1 {
		t.Fatalf("a second fill: %v rows %v", evs, a.s.Eval.Rows)
	}
	a.mark(e0.Add(time.Hour), "40")
	if got := a.s.Eval.Rows; len(got) != 2 || got[1].Status != evch.StatusFailed || got[1].Reason != evch.ReasonDailyDrawdown {
		t.Fatalf("rows %+v", got)
	}
	if evs := a.mark(e0.Add(2*time.Hour), "10"); len(evs) != 0 {
		t.Fatalf("a failed evaluation records more: %v", evs)
	}
}

// A failed evaluation holds the account with eval_breach: additions are
// refused 423 risk_locked, the trader's unlock succeeds and changes nothing,
// a firm's halt answers 409 over it; only the lifecycle's release lifts it.
func TestFailedEvaluationLocksWithEvalBreach(t *testing.T) {
	a := newEval(t, rules())
	a.buy(e0, "10", "100")
	a.mark(e0.Add(time.Hour), "40")
	at := e0.Add(2 * time.Hour)
	if v := a.s.RiskLock(at); !v.TradingLocked || v.LockReason != evacct.ReasonEvalBreach {
		t.Fatalf("lock %+v", v)
	}
	_, err := a.do(at, buy("x1", "1", flat("40")))
	var r *commands.Refusal
	if !errors.As(err, &r) || commands.StatusOf(r.Code, r.Malformed) != 423 || r.Code != "risk_locked" {
		t.Fatalf("an addition: %v", err)
	}
	if evs, err := a.do(at, &riskcmd.Unlock{}); err != nil || len(evs) != 0 {
		t.Fatalf("unlock: %v %v", evs, err)
	}
	if v := a.s.RiskLock(at); v.LockReason != evacct.ReasonEvalBreach {
		t.Fatalf("the unlock cleared the breach: %+v", v)
	}
	if _, err := a.do(at, &firmcmd.HaltAccount{}); !errors.As(err, &r) || commands.StatusOf(r.Code, r.Malformed) != 409 || r.Code != "lock_not_owned" {
		t.Fatalf("halt over the breach: %v", err)
	}
	if _, err := a.do(at, sell("x2", "10", flat("40"))); err != nil {
		t.Fatalf("a reduction is refused: %v", err)
	}
	a.must(at, &riskcmd.ReleaseEvaluation{})
	if v := a.s.RiskLock(at); v.TradingLocked {
		t.Fatalf("released but still locked: %+v", v)
	}
}

func TestPassedStageTakesNoMoreExposure(t *testing.T) {
	a := newEval(t, rules())
	a.buy(e0, "10", "100")
	a.mark(e0.Add(time.Hour), "200")
	_, err := a.do(e0.Add(time.Hour), buy("x1", "1", flat("200")))
	var r *commands.Refusal
	if !errors.As(err, &r) || commands.StatusOf(r.Code, r.Malformed) != 423 || fmt.Sprint(r.Params["holds"]) != "["+account.HoldEvaluationPassed+"]" {
		t.Fatalf("an addition after the pass: %v %+v", err, r)
	}
}

func TestWeekendHoldRefusedAtTheSessionClose(t *testing.T) {
	r := rules()
	r.AllowWeekendHold = false
	a := newEval(t, r)
	a.buy(e0, "10", "100")
	fri := time.Date(2026, 11, 6, 23, 59, 0, 0, time.UTC)
	if evs := a.mark(fri, "101"); len(evs) != 1 { // the day close of Thursday only
		t.Fatalf("before the close: %v", evs)
	}
	sat := time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)
	evs := a.mark(sat, "101")
	if len(a.s.Positions) != 0 {
		t.Fatalf("positions held over the weekend: %v (%v)", a.s.Positions, evs)
	}
	if got := a.s.Eval.Rows[len(a.s.Eval.Rows)-1]; got.Reason != evch.ReasonWeekendHold || got.Status != evch.StatusInProgress {
		t.Fatalf("row %+v", got)
	}
	if evs := a.mark(sat.Add(time.Hour), "101"); len(evs) != 0 {
		t.Fatalf("the weekend closes twice: %v", evs)
	}
	_, err := a.do(sat.Add(time.Hour), buy("w1", "1", flat("101")))
	var ref *commands.Refusal
	if !errors.As(err, &ref) || commands.StatusOf(ref.Code, ref.Malformed) != 423 {
		t.Fatalf("an addition in the weekend: %v", err)
	}
	mon := time.Date(2026, 11, 9, 0, 0, 0, 0, time.UTC)
	if _, err := a.do(mon, buy("m1", "1", flat("101"))); err != nil {
		t.Fatalf("Monday: %v", err)
	}
}

// Property: replaying an evaluated account's log (in both encodings) gives
// the live state, and deciding the same commands again on a state rebuilt
// from the log gives the same events: the verdicts do not depend on anything
// outside the log and the commands.
func TestPropertyEvaluationReplaysToTheSameVerdicts(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 40
	}
	reg := events.Merge(account.Registry(), evch.Registry(), evidem.Registry())
	verdicts := 0
	for seed := 0; seed < runs; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 18))
		r := rules()
		r.AllowWeekendHold = rng.IntN(2) == 0
		r.MinTradingDays = int64(rng.IntN(3))
		if rng.IntN(2) == 0 {
			r.DDMode = evch.DDStatic
		}
		rep := enginetest.NewReplay(t, enginetest.Core[*account.State]{New: func() *account.State { return account.New("a1") },
			Decide: account.Decide, Apply: account.Apply, Registry: reg})
		var envs []commands.Envelope
		var out [][]events.Event
		at := e0
		step := func(c commands.Command) {
			id := ulid.MustParse("01J00000000000000000000000")
			id[14], id[15] = byte(len(envs)>>8), byte(len(envs))
			env := commands.Envelope{ID: id, At: at, Cmd: c}
			if _, err := account.Decide(rep.Live(), env); err != nil {
				return // refused: recorded nothing
			}
			envs = append(envs, env)
			out = append(out, rep.Do(env))
		}
		step(&challengecmd.OpenEvaluation{Open: tenantcmd.OpenAccount{TenantID: "u1", Broker: "paper", AccountNumber: "CH1", Currency: "USD",
			StartingBalance: r.Size, Kind: "challenge"}, Rules: r})
		px := events.Int(100)
		for i := 0; i < 60; i++ {
			at = at.Add(time.Duration(rng.IntN(12*60)) * time.Minute)
			px = px.Add(events.Int(int64(rng.IntN(21) - 10)))
			if px.Sign() <= 0 {
				px = events.Int(1)
			}
			m := flat(px.String())
			switch rng.IntN(4) {
			case 0:
				step(buy(fmt.Sprintf("b%d", i), fmt.Sprint(1+rng.IntN(30)), m))
			case 1:
				step(sell(fmt.Sprintf("s%d", i), fmt.Sprint(1+rng.IntN(30)), m))
			default:
				step(&challengecmd.EvaluateStage{Market: m})
			}
		}
		rep.Check()
		if rep.Live().Eval.Done != "" {
			verdicts++
		}
		// Decide the same commands again from the rebuilt state, in order.
		s := account.New("a1")
		for i, env := range envs {
			evs, err := account.Decide(s, env)
			if err != nil {
				t.Fatalf("seed %d: command %d refused on replay: %v", seed, i, err)
			}
			if d := enginetest.Diff(out[i], evs); len(d) > 0 {
				t.Fatalf("seed %d: command %d decided other events on replay: %v", seed, i, d)
			}
			for _, e := range evs {
				s = account.Apply(s, e)
			}
		}
	}
	if verdicts < runs/4 {
		t.Fatalf("the runs rarely reach a verdict: %d of %d", verdicts, runs)
	}
}

// The lifecycle's release: a restart of a failed evaluation resets the
// account to its size, releases eval_breach and binds the rules anew; the
// same reset again changes nothing, and a live evaluation is not restarted.
func TestRestartReleasesTheBreachOnce(t *testing.T) {
	a := newEval(t, rules())
	if evs := a.must(e0, &challengecmd.RestartEvaluation{Rules: rules(), Ref: "r0"}); len(evs) != 0 {
		t.Fatalf("a live evaluation restarted: %v", evs)
	}
	a.buy(e0, "10", "100")
	a.mark(e0.Add(time.Hour), "40")
	at := e0.Add(2 * time.Hour)
	evs := a.must(at, &challengecmd.RestartEvaluation{Rules: rules(), Ref: "r1"})
	if len(evs) == 0 || a.s.Risk.EvalBreach || a.s.Eval.Done != "" || a.s.Eval.Run != 2 || len(a.s.Positions) != 0 || a.s.Balance.Cmp(dec("10000")) != 0 {
		t.Fatalf("after the restart: %v breach %v eval %+v balance %s", evs, a.s.Risk.EvalBreach, a.s.Eval, a.s.Balance)
	}
	if v := a.s.RiskLock(at); v.TradingLocked {
		t.Fatalf("still locked: %+v", v)
	}
	a.buy(at, "10", "100")
	a.mark(at.Add(time.Hour), "40")
	if a.s.Eval.Done != evch.StatusFailed {
		t.Fatalf("the second run does not fail: %+v", a.s.Eval)
	}
	if evs := a.must(at.Add(2*time.Hour), &challengecmd.RestartEvaluation{Rules: rules(), Ref: "r1"}); len(evs) != 0 {
		t.Fatalf("the same reset restarted twice: %v", evs)
	}
}

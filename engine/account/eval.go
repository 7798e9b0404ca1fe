package account

import (
	"time"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	firmcmd "github.com/svc/engine/commands/firm"
	riskcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/calendar"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evch "github.com/svc/engine/events/challenge"
)

// Holds an evaluation places on an account (beside eval_breach, risk.go).
const (
	HoldEvaluationPassed  = "evaluation_passed"  // the stage is passed: it takes no more exposure
	HoldEvaluationExpired = "evaluation_expired" // the last allowed day has passed
	HoldWeekend           = "weekend_hold"       // the program refuses weekend holds and the weekend is on
)

// Eval is the evaluation an enrolled account runs (issue 18): its rules and
// the figures its verdicts depend on, all folded from the account's own
// events, so a replay reaches the same verdicts.
type Eval struct {
	Bound     bool
	Rules     evch.Rules
	BoundAt   time.Time // the evaluation's start: maxDurationDays count from it
	Started   bool      // the first fill happened (in_progress)
	Done      string    // "", passed or failed
	Day       time.Time // start of the trading day the figures below belong to
	DayEquity events.Decimal
	MaxEOD    events.Decimal // highest end-of-day equity, the starting balance at first
	Days      int64          // trading days: days with a fill
	LastDay   time.Time      // the newest trading day counted
	Weekend   time.Time      // the weekend (its end) whose close was recorded
	Rows      []EvalRow      // the verdicts of this run, in log order
	Run       int            // runs of the evaluation on this account: 1 at issue, one more per reset
	Resets    map[string]bool
}

// EvalRow is one verdict of the evaluation as the enrollment's history shows it.
type EvalRow struct {
	Status, Reason, Ref string
	At                  time.Time
}

// Deadline is the moment the evaluation fails for time (zero: no limit).
func (v *Eval) Deadline() time.Time {
	if v.Rules.MaxDurationDays <= 0 {
		return time.Time{}
	}
	return v.BoundAt.Add(time.Duration(v.Rules.MaxDurationDays) * 24 * time.Hour)
}

// Weekend is the weekend of the week containing at: from the session close
// of its last trading day (crypto: Saturday 00:00 UTC) to the next week's start.
func Weekend(cal string, at time.Time) (from, until time.Time) {
	w := calendar.Week(cal, at)
	if cal == calendar.Futures {
		return w.Close, w.Next
	}
	return w.Start.AddDate(0, 0, 5), w.Next
}

// InWeekend reports whether at falls in a weekend the rules refuse holds over,
// and that weekend's end.
func (v *Eval) InWeekend(at time.Time) (time.Time, bool) {
	if !v.Bound || v.Rules.AllowWeekendHold {
		return time.Time{}, false
	}
	from, until := Weekend(v.Rules.Calendar, at)
	return until, !at.Before(from) && at.Before(until)
}

// Thresholds are the evaluation's figures at one moment: the daily and total
// drawdown floors (equity below a floor fails) and the profit target (equity
// at or above it passes once the minimum trading days are met).
type Thresholds struct {
	DailyFloor, TotalFloor, Target events.Decimal
}

// thresholds computes the figures from the day's opening equity and the highest end-of-day equity.
func (v *Eval) thresholds(dayEquity, maxEOD events.Decimal) Thresholds {
	r := v.Rules
	of := func(pct events.Decimal) events.Decimal { return r.Size.Mul(pct).Quo(events.Int(100)) }
	base := r.Size
	if r.DDMode == evch.DDTrailingEOD {
		base = maxEOD
	}
	return Thresholds{
		DailyFloor: dayEquity.Sub(of(r.MaxDailyDdPct)),
		TotalFloor: base.Sub(of(r.MaxTotalDdPct)),
		Target:     r.Size.Add(of(r.ProfitTargetPct)),
	}
}

// Thresholds are the evaluation's figures now.
func (v *Eval) Thresholds() Thresholds { return v.thresholds(v.DayEquity, v.MaxEOD) }

// Active reports whether the account runs an evaluation without a verdict yet.
func (v *Eval) Active() bool { return v.Bound && v.Done == "" }

// applyEval folds the evaluation's events.
func applyEval(s *State, e events.Event) {
	v := &s.Eval
	switch e := e.(type) {
	case evch.EvaluationBound:
		run, resets := v.Run+1, v.Resets
		if e.ResetRef != "" {
			if resets == nil {
				resets = map[string]bool{}
			}
			resets[e.ResetRef] = true
		}
		*v = Eval{Bound: true, Rules: e.Rules, BoundAt: e.At, Day: calendar.Day(e.Rules.Calendar, e.At).Start,
			DayEquity: e.Rules.Size, MaxEOD: e.Rules.Size, Run: run, Resets: resets}
	case evch.EvaluationStarted:
		v.Started = true
		v.Rows = append(v.Rows, EvalRow{Status: evch.StatusInProgress, Reason: evch.ReasonFirstFill, Ref: "started", At: e.At})
	case evch.EvaluationDayClosed:
		v.Day, v.DayEquity = e.DayStart, e.Equity
		if e.Equity.Cmp(v.MaxEOD) > 0 {
			v.MaxEOD = e.Equity
		}
	case evch.EvaluationPassed:
		v.Done = evch.StatusPassed
		v.Rows = append(v.Rows, EvalRow{Status: evch.StatusPassed, Reason: evch.ReasonProfitTarget, Ref: "passed", At: e.At})
	case evch.EvaluationWeekendClosed:
		v.Weekend = e.Until
		v.Rows = append(v.Rows, EvalRow{Status: evch.StatusInProgress, Reason: evch.ReasonWeekendHold,
			Ref: "weekend:" + e.Until.UTC().Format(time.RFC3339), At: e.At})
	case evacct.EvaluationBreached:
		if v.Active() {
			v.Done = evch.StatusFailed
			v.Rows = append(v.Rows, EvalRow{Status: evch.StatusFailed, Reason: e.Reason, Ref: "failed", At: e.At})
		}
	case evacct.OrderFilled:
		if v.Bound {
			d := calendar.Day(v.Rules.Calendar, e.At).Start
			if !d.Equal(v.LastDay) {
				v.Days, v.LastDay = v.Days+1, d
			}
		}
	}
}

// evalHolds names the holds the evaluation places at time at (eval_breach is risk.go's).
func evalHolds(s *State, at time.Time) []string {
	v := &s.Eval
	if !v.Bound {
		return nil
	}
	var hs []string
	if v.Done == evch.StatusPassed {
		hs = append(hs, HoldEvaluationPassed)
	}
	if d := v.Deadline(); v.Done == "" && !d.IsZero() && !at.Before(d) {
		hs = append(hs, HoldEvaluationExpired)
	}
	if _, on := v.InWeekend(at); on && v.Done == "" {
		hs = append(hs, HoldWeekend)
	}
	return hs
}

// marksOf is the marks (mids) a command carries; partial is true when it
// carries one instrument's quote only (a working order's fill).
func marksOf(cmd commands.Command) (marks map[string]events.Decimal, partial bool) {
	var quotes map[string]trading.Quote
	switch c := cmd.(type) {
	case *trading.FillWorking:
		return map[string]events.Decimal{c.Quote.Instrument: mid(c.Quote)}, true
	case *challengecmd.EvaluateStage:
		quotes = c.Market.Quotes
	case *riskcmd.Evaluate:
		quotes = c.Market.Quotes
	case *trading.PlaceOrder, *trading.ReplaceOrder, *trading.ClosePosition, *trading.Flatten, *trading.Reverse,
		*trading.Protect, *trading.ChangeBracket:
		quotes = marketCarried(cmd).Quotes
	default:
		return nil, false
	}
	marks = make(map[string]events.Decimal, len(quotes))
	for k, q := range quotes {
		marks[k] = mid(q)
	}
	return marks, false
}

// marketCarried is the market a trading command carries.
func marketCarried(cmd commands.Command) trading.Market {
	switch c := cmd.(type) {
	case *trading.PlaceOrder:
		return c.Market
	case *trading.ReplaceOrder:
		return c.Market
	case *trading.ClosePosition:
		return c.Market
	case *trading.Flatten:
		return c.Market
	case *trading.Reverse:
		return c.Market
	case *trading.Protect:
		return c.Market
	case *trading.ChangeBracket:
		return c.Market
	}
	return trading.Market{}
}

func mid(q trading.Quote) events.Decimal { return q.Bid.Add(q.Ask).Quo(events.Int(2)) }

// Equity is balance plus the open PnL of positions at marks; a position
// without a mark counts nothing (it is valued at its average price).
func Equity(balance events.Decimal, positions map[string]evacct.Position, marks map[string]events.Decimal) events.Decimal {
	eq := balance
	for inst, p := range positions {
		m, ok := marks[inst]
		if !ok {
			continue
		}
		mult := p.Multiplier
		if mult.Sign() <= 0 {
			mult = events.Int(1)
		}
		eq = eq.Add(m.Sub(p.AvgPrice).Mul(p.Quantity).Mul(mult))
	}
	return eq
}

// evaluate runs the evaluation after a decision, on the state the decision's
// events leave and the marks the command carries: the first fill starts it,
// the first evaluation of a new trading day closes the previous one (its
// equity opens the new day and may raise the trailing floor), and then the
// first verdict found fails or passes it, in this order: the last allowed day
// passed, the daily drawdown floor, the total drawdown floor, the profit target
// (with the minimum trading days met). Commands without marks and fills
// evaluate nothing.
func evaluate(s *State, env commands.Envelope, evs []events.Event) []events.Event {
	v := &s.Eval
	if !v.Active() {
		return nil
	}
	marks, partial := marksOf(env.Cmd)
	balance := s.Balance
	var positions map[string]evacct.Position
	filled := false
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.OrderFilled:
			if positions == nil {
				positions = make(map[string]evacct.Position, len(s.Positions)+1)
				for k, p := range s.Positions {
					positions[k] = p
				}
			}
			filled, balance = true, e.Balance
			if e.Position.Quantity.IsZero() {
				delete(positions, e.Instrument)
			} else {
				positions[e.Instrument] = e.Position
			}
			if marks == nil {
				marks = map[string]events.Decimal{}
			}
			if _, ok := marks[e.Instrument]; !ok {
				marks[e.Instrument] = e.Price
			}
		case evacct.BalanceChanged:
			balance = e.Balance
		case evacct.EvaluationBreached:
			return nil // the decision failed it already
		}
	}
	if marks == nil && !filled {
		return nil
	}
	if positions == nil {
		positions = s.Positions
	}
	var out []events.Event
	if filled && !v.Started {
		out = append(out, evch.EvaluationStarted{At: env.At})
	}
	dayEq, maxEOD := v.DayEquity, v.MaxEOD
	if day := calendar.Day(v.Rules.Calendar, env.At).Start; day.After(v.Day) && !partial {
		eod := Equity(s.Balance, s.Positions, marks) // as the day ended: before this command's fills
		out = append(out, evch.EvaluationDayClosed{DayStart: day, Equity: eod, At: env.At})
		dayEq = eod
		if eod.Cmp(maxEOD) > 0 {
			maxEOD = eod
		}
	}
	days := v.Days
	if filled && !calendar.Day(v.Rules.Calendar, env.At).Start.Equal(v.LastDay) {
		days++
	}
	eq := Equity(balance, positions, marks)
	th := v.thresholds(dayEq, maxEOD)
	fail := ""
	switch d := v.Deadline(); {
	case !d.IsZero() && !env.At.Before(d):
		fail = evch.ReasonMaxDuration
	case eq.Cmp(th.DailyFloor) < 0:
		fail = evch.ReasonDailyDrawdown
	case eq.Cmp(th.TotalFloor) < 0:
		fail = evch.ReasonTotalDrawdown
	case eq.Cmp(th.Target) >= 0 && days >= v.Rules.MinTradingDays:
		out = append(out, evch.EvaluationPassed{Equity: eq, At: env.At})
		return append(out, cancelAdding(s, env, evs)...)
	}
	if fail != "" {
		out = append(out, evacct.EvaluationBreached{Reason: fail, At: env.At})
		out = append(out, cancelAdding(s, env, evs)...)
	}
	return out
}

// cancelAdding cancels every working order left after evs that could add
// exposure (not reduce-only): a verdict ends the stage's trading.
func cancelAdding(s *State, env commands.Envelope, evs []events.Event) []events.Event {
	working := map[string]bool{}
	for id, w := range s.Working {
		working[id] = !w.ReduceOnly
	}
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.OrderPlaced:
			working[e.Order.BrokerOrderID] = !e.Order.ReduceOnly
		case evacct.OrderCanceled:
			delete(working, e.BrokerOrderID)
		case evacct.OrderFilled:
			if e.Done {
				delete(working, e.BrokerOrderID)
			}
		}
	}
	var out []events.Event
	for _, id := range sortedKeys(working) {
		if working[id] {
			out = append(out, evacct.OrderCanceled{BrokerOrderID: id, Reason: "evaluation", At: env.At})
		}
	}
	return out
}

// decideOpenEvaluation opens an evaluated account: its opening and its rules
// in one commit; a second opening changes nothing.
func decideOpenEvaluation(s *State, env commands.Envelope, c *challengecmd.OpenEvaluation) ([]events.Event, error) {
	if s.Open {
		return nil, nil
	}
	o := c.Open
	return []events.Event{
		evacct.Opened{AccountID: s.ID, TenantID: o.TenantID, Broker: o.Broker, AccountNumber: o.AccountNumber, Label: o.Label,
			Currency: o.Currency, StartingBalance: o.StartingBalance, Kind: o.Kind, Email: o.Email, At: env.At},
		evch.EvaluationBound{Rules: c.Rules, At: env.At},
	}, nil
}

// decideChallenge decides the evaluation's own commands; ok is false for a
// command it does not know. EvaluateStage closes the positions at the
// session close before a weekend the rules refuse holds over (once a
// weekend); the verdicts come from evaluate, after every decision.
// RestartEvaluation resets a failed evaluation's account and binds its rules again.
func decideChallenge(s *State, env commands.Envelope) (evs []events.Event, ok bool, err error) {
	if c, is := env.Cmd.(*challengecmd.RestartEvaluation); is {
		v := &s.Eval
		if !v.Bound || v.Done != evch.StatusFailed || v.Resets[c.Ref] {
			return nil, true, nil // nothing failed to restart, or restarted by this reset already
		}
		out, err := decideReset(s, env, &firmcmd.ResetAccount{ReferenceID: "evaluation-" + c.Ref})
		if err != nil {
			return nil, true, err
		}
		if s.Risk.EvalBreach {
			out = append(out, evacct.EvaluationReleased{At: env.At})
		}
		return append(out, evch.EvaluationBound{Rules: c.Rules, ResetRef: c.Ref, At: env.At}), true, nil
	}
	c, is := env.Cmd.(*challengecmd.EvaluateStage)
	if !is {
		return nil, false, nil
	}
	v := &s.Eval
	until, on := v.InWeekend(env.At)
	if !v.Active() || !on || v.Weekend.Equal(until) {
		return nil, true, nil
	}
	if len(s.Positions) == 0 && len(s.Working) == 0 {
		return nil, true, nil
	}
	b := newBook(s, env, c.Market)
	b.flatten("weekend", "", c.Market.Quotes)
	return append([]events.Event{evch.EvaluationWeekendClosed{Until: until, At: env.At}}, b.out...), true, nil
}

package account

import (
	"slices"
	"time"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/domain/calendar"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// RealizedWindow is how long the account keeps its fills' realized PnL: longer
// than any trading week, so a week's PnL can always be summed.
const RealizedWindow = 8 * 24 * time.Hour

// Realized is the realized PnL of the fills of one minute (FillMinute):
// At is the minute, N counts the account's fills up to the first of them.
// Cum is Amount plus the Cum of the minute kept before it (the first kept
// after the fills emptied starts at its Amount): a period's sum is the
// difference of two of them. Every period a control counts starts on a
// minute (a trading day's start, a manual unlock closes the minute it
// falls in), so a minute's fills are counted together or not at all, and
// the account keeps one element a minute in which it realized PnL, however
// many fills: 8 days are at most 11,520 elements, whatever the orders.
type Realized struct {
	N      uint64
	At     time.Time
	Amount events.Decimal
	Cum    events.Decimal
}

// FillMinute is the span of the fills one Realized sums.
const FillMinute = time.Minute

// Risk is the account's risk controls and lock state.
type Risk struct {
	Settings  evacct.RiskSettings
	UpdatedAt time.Time // of the settings; zero: never set
	Calendar  string    // trading calendar of the periods; "" is crypto
	// Lock is the newest fired control's lock until it is released; it holds
	// only until its TradingUnlockAt, also before the release is recorded.
	Lock *evacct.RiskLocked
	// Latches maps a fired control to the start of the period it fired in: it
	// does not fire again in that period.
	Latches map[string]time.Time
	// CountFrom is the newest manual unlock and CountFromFill the fills
	// before it: within the periods it falls in, the controls count from it.
	CountFrom     time.Time
	CountFromFill uint64
	FillCount     uint64
	Fills         []Realized // realized PnL of the minutes of the last RealizedWindow before FillsOpen, in log order; an element never changes once appended
	FillsFrom     int        // how many minutes of realized fills were dropped before Fills[0], over the account's life (snapshots' index)
	// FillsOpen is the minute fills are being added to: it moves to Fills
	// when a fill of another minute comes, or a manual unlock.
	FillsOpen *Realized
	// FillsUnordered: a fill in Fills is dated before the one kept before it
	// (the clock went back), so a period's fills are no longer the ones
	// from a point on and RealizedIn sums them one by one until Fills empties.
	FillsUnordered bool
	EvalBreach     bool // an eval_breach lock stands
	// Policy is the venue's published risk policy the account lives under
	// (issued accounts of a group bound to one), with its loss limits.
	Policy evacct.RiskPolicyBound
}

// applyRisk folds risk events.
func applyRisk(s *State, e events.Event) {
	r := &s.Risk
	switch e := e.(type) {
	case evacct.RiskSettingsChanged:
		r.Settings, r.Calendar, r.UpdatedAt = e.Settings, e.Calendar, e.At
	case evacct.RiskLocked:
		l := e
		r.Lock = &l
		if r.Latches == nil {
			r.Latches = map[string]time.Time{}
		}
		r.Latches[e.Control] = e.PeriodStart
	case evacct.RiskUnlocked:
		r.Lock = nil
		if e.Reason == "manual" {
			r.Latches, r.CountFrom, r.CountFromFill = nil, e.At, r.FillCount
			r.closeMinute() // the fills after it count apart from those before
		}
	case evacct.RiskPolicyBound:
		r.Policy = e
	case evacct.EvaluationBreached:
		r.EvalBreach = true
	case evacct.EvaluationReleased:
		r.EvalBreach = false
	case evacct.AccountReset:
		// Back to the starting state: no PnL counted, no fired control; the settings stay.
		r.closeMinute()
		r.FillsFrom, r.FillsUnordered = r.FillsFrom+len(r.Fills), false
		r.Lock, r.Latches, r.Fills, r.CountFrom, r.CountFromFill = nil, nil, nil, e.At, r.FillCount
	}
}

// riskFilled keeps a fill's realized PnL for the period sums, in its
// minute's element.
func riskFilled(s *State, e evacct.OrderFilled) {
	r := &s.Risk
	r.FillCount++
	if !e.Realized.IsZero() {
		minute := e.At.Truncate(FillMinute)
		if o := r.FillsOpen; o != nil && o.At.Equal(minute) {
			o.Amount, o.Cum = o.Amount.Add(e.Realized), o.Cum.Add(e.Realized)
		} else {
			f := Realized{N: r.FillCount, At: minute, Amount: e.Realized, Cum: e.Realized}
			last, ok := r.lastMinute()
			if ok {
				f.Cum = last.Cum.Add(e.Realized)
				r.FillsUnordered = r.FillsUnordered || minute.Before(last.At)
			}
			r.closeMinute()
			r.FillsOpen = &f
		}
	}
	cut := 0
	for cut < len(r.Fills) && e.At.Sub(r.Fills[cut].At) > RealizedWindow {
		cut++
	}
	if cut > 0 {
		// Resliced, not copied: a snapshot may be encoding the elements
		// (SnapshotParts), and append moves the live ones to a new array
		// when this one is full, so the dropped ones are let go then.
		r.Fills, r.FillsFrom = r.Fills[cut:], r.FillsFrom+cut
		if len(r.Fills) == 0 { // the open minute alone is in order
			r.FillsUnordered = false
		}
	}
}

// lastMinute is the newest minute kept: the open one, else Fills' last.
func (r *Risk) lastMinute() (Realized, bool) {
	if r.FillsOpen != nil {
		return *r.FillsOpen, true
	}
	if n := len(r.Fills); n > 0 {
		return r.Fills[n-1], true
	}
	return Realized{}, false
}

// closeMinute moves the open minute to Fills.
func (r *Risk) closeMinute() {
	if r.FillsOpen != nil {
		r.Fills = append(r.Fills, *r.FillsOpen)
		r.FillsOpen = nil
	}
}

// RealizedIn sums the realized PnL of the fills a control of the period
// starting at start counts: those at or after start and after the newest
// manual unlock. In date order (the rule) they are the fills from the first
// that is both, found by bisection, and their sum is the difference of two
// running sums: a check costs the same with 50,000 fills in the window as
// with 5 (it runs after every commit of an account with PnL controls).
func (r *Risk) RealizedIn(start time.Time) events.Decimal {
	counted := func(f Realized) bool { return !f.At.Before(start) && f.N > r.CountFromFill }
	if r.FillsUnordered {
		sum := events.Int(0)
		for _, f := range r.Fills {
			if counted(f) {
				sum = sum.Add(f.Amount)
			}
		}
		if o := r.FillsOpen; o != nil && counted(*o) {
			sum = sum.Add(o.Amount)
		}
		return sum
	}
	last, ok := r.lastMinute()
	if !ok {
		return events.Int(0)
	}
	i, _ := slices.BinarySearchFunc(r.Fills, true, func(f Realized, _ bool) int {
		if counted(f) {
			return 1
		}
		return -1
	})
	var first Realized
	switch {
	case i < len(r.Fills):
		first = r.Fills[i]
	case r.FillsOpen != nil && counted(*r.FillsOpen):
		first = *r.FillsOpen
	default:
		return events.Int(0)
	}
	return last.Cum.Sub(first.Cum.Sub(first.Amount))
}

// LockStands reports whether a fired control's lock holds at time at.
func (r *Risk) LockStands(at time.Time) bool {
	return r.Lock != nil && at.Before(r.Lock.TradingUnlockAt)
}

// SettingsLocked reports whether control edits and the manual unlock are refused at time at.
func (r *Risk) SettingsLocked(at time.Time) bool {
	return r.Lock != nil && r.Lock.SettingsLocked && r.Lock.SettingsUnlockAt != nil && at.Before(*r.Lock.SettingsUnlockAt)
}

// Latched reports whether control already fired in the period starting at start.
func (r *Risk) Latched(control string, start time.Time) bool {
	t, ok := r.Latches[control]
	return ok && t.Equal(start)
}

// Periods are the trading day and week containing at, in the account's calendar.
func (r *Risk) Periods(at time.Time) (day, week calendar.Period) {
	return calendar.Day(r.Calendar, at), calendar.Week(r.Calendar, at)
}

// EODAt is the end-of-day close moment of trading day d, and whether the control is set.
func (r *Risk) EODAt(d calendar.Period) (time.Time, bool) {
	st := r.Settings
	if !st.EODCloseEnabled || st.EODCloseValue == nil {
		return time.Time{}, false
	}
	mins := st.EODCloseValue.Apd()
	n, err := mins.Int64()
	if err != nil {
		return time.Time{}, false
	}
	return d.Close.Add(-time.Duration(n) * time.Minute), true
}

// Monitored reports whether any control is enabled.
func (r *Risk) Monitored() bool {
	st := r.Settings
	return st.DailyLossEnabled || st.WeeklyLossEnabled || st.DailyProfitEnabled || st.WeeklyProfitEnabled || st.EODCloseEnabled ||
		r.Policy.DailyLossLimit != nil || r.Policy.WeeklyLossLimit != nil
}

// Unrealized is the open PnL of the account's positions at marks: each priced
// position at its mark against its average price. Positions without a mark count nothing.
func (s *State) Unrealized(mark func(instrument string) (events.Decimal, bool)) events.Decimal {
	sum := events.Int(0)
	for inst, p := range s.Positions {
		m, ok := mark(inst)
		if !ok {
			continue
		}
		mult := p.Multiplier
		if mult.Sign() <= 0 {
			mult = events.Int(1)
		}
		sum = sum.Add(m.Sub(p.AvgPrice).Mul(p.Quantity).Mul(mult))
	}
	return sum
}

// Breach finds the first control breached at time at with the open positions
// marked by mark, in the order daily loss, weekly loss, daily profit, weekly
// profit, end-of-day close, skipping controls latched in their period. The
// period's PnL is the realized PnL since the period's start (or the newest
// manual unlock within it) plus the open positions' PnL at their marks. A
// loss limit fires at PnL <= -limit, a profit target at PnL >= target, the
// end-of-day close from eodCloseValue minutes before the session close until
// the next trading day starts.
func (s *State) Breach(at time.Time, mark func(instrument string) (events.Decimal, bool)) (evacct.RiskLocked, bool) {
	r := &s.Risk
	if !r.Monitored() {
		return evacct.RiskLocked{}, false
	}
	day, week := r.Periods(at)
	unreal := s.Unrealized(mark)
	var dayPnl, weekPnl *events.Decimal
	pnl := func(p calendar.Period, cache **events.Decimal) events.Decimal {
		if *cache == nil {
			v := r.RealizedIn(p.Start).Add(unreal)
			*cache = &v
		}
		return **cache
	}
	st := r.Settings
	checks := []struct {
		control string
		on      bool
		limit   *events.Decimal
		loss    bool
		p       calendar.Period
		cache   **events.Decimal
	}{
		{evacct.ControlDailyLoss, st.DailyLossEnabled, st.DailyLossValue, true, day, &dayPnl},
		{evacct.ControlWeeklyLoss, st.WeeklyLossEnabled, st.WeeklyLossValue, true, week, &weekPnl},
		{evacct.ControlDailyProfit, st.DailyProfitEnabled, st.DailyProfitValue, false, day, &dayPnl},
		{evacct.ControlWeeklyProfit, st.WeeklyProfitEnabled, st.WeeklyProfitValue, false, week, &weekPnl},
		{evacct.ControlPolicyDailyLoss, r.Policy.DailyLossLimit != nil, r.Policy.DailyLossLimit, true, day, &dayPnl},
		{evacct.ControlPolicyWeeklyLoss, r.Policy.WeeklyLossLimit != nil, r.Policy.WeeklyLossLimit, true, week, &weekPnl},
	}
	for _, c := range checks {
		if !c.on || c.limit == nil || r.Latched(c.control, c.p.Start) {
			continue
		}
		v := pnl(c.p, c.cache)
		if (c.loss && v.Cmp(c.limit.Neg()) <= 0) || (!c.loss && v.Cmp(*c.limit) >= 0) {
			return evacct.RiskLocked{Control: c.control, PeriodStart: c.p.Start, TriggerPnl: &v, TradingUnlockAt: c.p.Next, At: at}, true
		}
	}
	if eod, ok := r.EODAt(day); ok && !r.Latched(evacct.ControlEODClose, day.Start) && !at.Before(eod) && r.CountFrom.Before(eod) {
		return evacct.RiskLocked{Control: evacct.ControlEODClose, PeriodStart: day.Start, TradingUnlockAt: day.Next, At: at}, true
	}
	return evacct.RiskLocked{}, false
}

// ControlLocked reports whether a fired control's lock or an eval_breach lock stands at time at.
func (s *State) ControlLocked(at time.Time) bool {
	return s.Risk.LockStands(at) || s.Risk.EvalBreach
}

// riskHolds names the holds risk places on the account at time at.
func riskHolds(s *State, at time.Time) []string {
	var hs []string
	if s.Risk.LockStands(at) {
		hs = append(hs, s.Risk.Lock.Control)
	}
	if s.Risk.EvalBreach {
		hs = append(hs, evacct.ReasonEvalBreach)
	}
	return hs
}

func settingsLockedRefusal(r *Risk) error {
	return commands.Refuse(commands.CodeSettingsLocked,
		"the risk settings are locked while trading is locked; they unlock at settingsUnlockAt",
		map[string]any{"settingsUnlockAt": r.Lock.SettingsUnlockAt.UTC().Format(time.RFC3339)})
}

// decideRisk decides risk commands; ok is false for a command it does not know.
func decideRisk(s *State, env commands.Envelope) (evs []events.Event, ok bool, err error) {
	r := &s.Risk
	at := env.At
	switch c := env.Cmd.(type) {
	case *riskcmd.SetSettings:
		if r.SettingsLocked(at) {
			return nil, true, settingsLockedRefusal(r)
		}
		cal := c.Calendar
		if !calendar.Valid(cal) {
			cal = r.Calendar
		}
		if cal == "" {
			cal = calendar.Crypto
		}
		return []events.Event{evacct.RiskSettingsChanged{Settings: c.Settings(), Calendar: cal, At: at}}, true, nil
	case *riskcmd.Unlock:
		if r.SettingsLocked(at) {
			return nil, true, settingsLockedRefusal(r)
		}
		if r.Lock == nil {
			return nil, true, nil // nothing of the trader's to clear; eval_breach and firm_halt stand
		}
		return []events.Event{evacct.RiskUnlocked{Reason: "manual", At: at}}, true, nil
	case *riskcmd.Release:
		if r.Lock == nil || at.Before(r.Lock.TradingUnlockAt) {
			return nil, true, nil
		}
		return []events.Event{evacct.RiskUnlocked{Reason: "expired", At: at}}, true, nil
	case *riskcmd.Evaluate:
		return decideEvaluate(s, env, c), true, nil
	case *riskcmd.BreachEvaluation:
		if r.EvalBreach {
			return nil, true, nil
		}
		// The breach cancels every working order that could add exposure; positions stay.
		out := []events.Event{evacct.EvaluationBreached{Reason: c.Reason, At: at}}
		for _, id := range sortedKeys(s.Working) {
			if !s.Working[id].ReduceOnly {
				out = append(out, evacct.OrderCanceled{BrokerOrderID: id, Reason: "risk", At: at})
			}
		}
		return out, true, nil
	case *riskcmd.ReleaseEvaluation:
		if !r.EvalBreach {
			return nil, true, nil
		}
		return []events.Event{evacct.EvaluationReleased{At: at}}, true, nil
	}
	return nil, false, nil
}

// decideEvaluate fires the first breached control: one commit records the
// lock, cancels every working order and closes every priced position.
func decideEvaluate(s *State, env commands.Envelope, c *riskcmd.Evaluate) []events.Event {
	if s.Risk.LockStands(env.At) {
		return nil // already locked and flattened; a stale wake-up records nothing
	}
	mark := func(inst string) (events.Decimal, bool) {
		q, ok := c.Market.Quotes[inst]
		if !ok {
			return events.Decimal{}, false
		}
		return q.Bid.Add(q.Ask).Quo(events.Int(2)), true
	}
	lock, ok := s.Breach(env.At, mark)
	for _, g := range c.Gap { // the extremes of a gap no node acted in
		if ok {
			break
		}
		lock, ok = s.Breach(env.At, func(inst string) (events.Decimal, bool) {
			if m, ok := g[inst]; ok {
				return m, true
			}
			return mark(inst)
		})
	}
	if !ok {
		return nil
	}
	if s.Risk.Settings.LockSettingsWhenTradingLocked {
		u := lock.TradingUnlockAt
		lock.SettingsLocked, lock.SettingsUnlockAt = true, &u
	}
	b := newBook(s, env, c.Market)
	unclosed := b.flatten("risk", "", c.Market.Quotes)
	lock.FlattenConfirmed = unclosed == 0
	return append([]events.Event{lock}, b.out...)
}

// LockView is the account's risk lock as the RiskLock resource shows it at one moment.
type LockView struct {
	Broker           string
	AccountNumber    string
	TradingLocked    bool
	SettingsLocked   bool
	FlattenConfirmed bool
	LockReason       string // "": none
	TradingUnlockAt  *time.Time
	SettingsUnlockAt *time.Time
	TriggerPnl       *events.Decimal
	Monitoring       string // live: a control is enabled; off: none is
	Settings         evacct.RiskSettings
	UpdatedAt        time.Time
}

// RiskLock is the account's lock and controls at time at. tradingLocked is
// the gate itself: true exactly when some hold refuses orders adding exposure.
func (s *State) RiskLock(at time.Time) LockView {
	r := &s.Risk
	v := LockView{Broker: s.Broker, AccountNumber: s.AccountNumber, Settings: r.Settings, UpdatedAt: r.UpdatedAt, Monitoring: "off"}
	if r.Monitored() {
		v.Monitoring = "live"
	}
	v.TradingLocked = len(Holds(s, at)) > 0
	switch fh := firmHolds(s, at); {
	case r.LockStands(at):
		u := r.Lock.TradingUnlockAt
		v.LockReason, v.TradingUnlockAt, v.TriggerPnl, v.FlattenConfirmed = r.Lock.Control, &u, r.Lock.TriggerPnl, r.Lock.FlattenConfirmed
	case r.EvalBreach:
		v.LockReason = evacct.ReasonEvalBreach
	case len(fh) > 0:
		v.LockReason = fh[0]
		for _, h := range fh {
			if h == "firm_halt" {
				v.LockReason = h
			}
		}
	}
	if r.SettingsLocked(at) {
		u := *r.Lock.SettingsUnlockAt
		v.SettingsLocked, v.SettingsUnlockAt = true, &u
	}
	return v
}

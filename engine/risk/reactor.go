// Package risk is the engine's risk reactor: it keeps an in-memory index of
// every account's controls, positions and period PnL, evaluates it on every
// mark that moves an open position's PnL and on every commit of the account
// (fills, settings, unlocks), and sends the account an Evaluate command when a
// control looks breached. The account's Decide re-checks the breach from its
// own state and the command's marks, so a stale wake-up records nothing. A
// timer releases locks whose unlock time passed and runs the end-of-day close.
package risk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	rcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/risk/calendar"
	"github.com/svc/engine/events"
	ev "github.com/svc/engine/events/account"
)

// Exec runs cmd on an account (the engine attaches time, id and market context).
type Exec func(ctx context.Context, accountID string, cmd commands.Command) error

// TickInterval is how often the timer looks for locks to release and end-of-day closes due.
const TickInterval = 250 * time.Millisecond

// Reactor is the risk reactor. Its index is fed by Track (from each account's
// mailbox goroutine after a commit) and OnQuote (from the feed).
type Reactor struct {
	now  func() time.Time
	exec Exec

	mu       sync.Mutex
	entries  map[string]*entry
	byInst   map[string]map[string]*entry // instrument -> accounts with a PnL control and a position in it
	marks    map[string]events.Decimal    // newest mark (mid) per instrument
	inflight map[string]bool              // account|kind -> a command on its way
	onLock   func(accountID string, rev uint64, v account.LockView)

	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// term is one position's open PnL as a linear function of its mark: a*mark + c.
type term struct {
	a, c   events.Decimal
	unreal events.Decimal // at the newest mark; zero until marked
}

// entry is what the reactor knows of one account, as of its last commit.
type entry struct {
	id                  string
	cal                 string
	dayLoss, weekLoss   *events.Decimal // negated: fire at PnL <= these
	dayProfit, weekProf *events.Decimal
	eodMinutes          time.Duration // 0: off
	latches             map[string]time.Time
	lockUntil           time.Time // a fired control's lock holds until; zero: none recorded
	countFrom           time.Time
	dayStart, weekStart time.Time      // periods the realized sums below belong to
	dayReal, weekReal   events.Decimal // realized PnL counted in those periods
	terms               map[string]*term
	unreal              events.Decimal // sum of the terms' unreal
	view                string         // signature of the last lock view sent
}

func (e *entry) pnlControls() bool {
	return e.dayLoss != nil || e.weekLoss != nil || e.dayProfit != nil || e.weekProf != nil
}

// New makes a reactor; exec sends commands to accounts.
func New(now func() time.Time, exec Exec) *Reactor {
	return &Reactor{now: now, exec: exec, entries: map[string]*entry{}, byInst: map[string]map[string]*entry{},
		marks: map[string]events.Decimal{}, inflight: map[string]bool{}, stop: make(chan struct{})}
}

// OnLock registers fn for every change of an account's lock view (the stream's `lock` event).
func (r *Reactor) OnLock(fn func(accountID string, rev uint64, v account.LockView)) {
	r.mu.Lock()
	r.onLock = fn
	r.mu.Unlock()
}

// Start runs the timer until Close.
func (r *Reactor) Start() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(TickInterval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.Tick()
			}
		}
	}()
}

// Close stops the timer and waits for it.
func (r *Reactor) Close() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

func neg(d *events.Decimal) *events.Decimal {
	if d == nil {
		return nil
	}
	n := d.Neg()
	return &n
}

func enabled(on bool, v *events.Decimal) *events.Decimal {
	if !on {
		return nil
	}
	return v
}

// Track replaces what the reactor knows of an account with its state after the
// commit at rev, tells the lock listener when the lock view changed, and
// evaluates the account against the newest marks. It runs in the account's
// mailbox goroutine and reads the state only there.
func (r *Reactor) Track(id string, s *account.State, rev uint64) {
	now := r.now()
	rs := &s.Risk
	st := rs.Settings
	e := &entry{id: id, cal: rs.Calendar,
		dayLoss: neg(enabled(st.DailyLossEnabled, st.DailyLossValue)), weekLoss: neg(enabled(st.WeeklyLossEnabled, st.WeeklyLossValue)),
		dayProfit: enabled(st.DailyProfitEnabled, st.DailyProfitValue), weekProf: enabled(st.WeeklyProfitEnabled, st.WeeklyProfitValue),
		countFrom: rs.CountFrom, terms: map[string]*term{}, unreal: events.Int(0)}
	if st.EODCloseEnabled && st.EODCloseValue != nil {
		if n, err := st.EODCloseValue.Apd().Int64(); err == nil {
			e.eodMinutes = time.Duration(n) * time.Minute
		}
	}
	if len(rs.Latches) > 0 {
		e.latches = make(map[string]time.Time, len(rs.Latches))
		for k, v := range rs.Latches {
			e.latches[k] = v
		}
	}
	if rs.Lock != nil {
		e.lockUntil = rs.Lock.TradingUnlockAt
	}
	day, week := rs.Periods(now)
	e.dayStart, e.weekStart = day.Start, week.Start
	if e.pnlControls() {
		e.dayReal, e.weekReal = rs.RealizedIn(day.Start), rs.RealizedIn(week.Start)
	}
	view := s.RiskLock(now)
	sig := signature(view)

	r.mu.Lock()
	old := r.entries[id]
	r.entries[id] = e
	if old != nil {
		for inst := range old.terms {
			delete(r.byInst[inst], id)
		}
	}
	if e.pnlControls() {
		for inst, p := range s.Positions {
			mult := p.Multiplier
			if mult.Sign() <= 0 {
				mult = events.Int(1)
			}
			a := p.Quantity.Mul(mult)
			t := &term{a: a, c: p.AvgPrice.Mul(a).Neg(), unreal: events.Int(0)}
			if m, ok := r.marks[inst]; ok {
				t.unreal = t.a.Mul(m).Add(t.c)
				e.unreal = e.unreal.Add(t.unreal)
			}
			e.terms[inst] = t
			if r.byInst[inst] == nil {
				r.byInst[inst] = map[string]*entry{}
			}
			r.byInst[inst][id] = e
		}
	}
	notify := r.onLock
	changed := old == nil || old.view != sig
	e.view = sig
	due := r.due(e, now, calendar.Day(e.cal, now), calendar.Week(e.cal, now))
	r.mu.Unlock()

	if changed && notify != nil && rev > 0 {
		notify(id, rev, view)
	}
	if due {
		r.send(id, "evaluate", &rcmd.Evaluate{})
	}
}

func signature(v account.LockView) string {
	t := func(p *time.Time) string {
		if p == nil {
			return "-"
		}
		return p.UTC().Format(time.RFC3339Nano)
	}
	d := func(p *events.Decimal) string {
		if p == nil {
			return "-"
		}
		return p.String()
	}
	st := v.Settings
	return fmt.Sprint(v.TradingLocked, v.SettingsLocked, v.FlattenConfirmed, v.LockReason, t(v.TradingUnlockAt), t(v.SettingsUnlockAt),
		d(v.TriggerPnl), v.Monitoring, v.UpdatedAt.Unix(), st.DailyLossEnabled, d(st.DailyLossValue), st.WeeklyLossEnabled, d(st.WeeklyLossValue),
		st.DailyProfitEnabled, d(st.DailyProfitValue), st.WeeklyProfitEnabled, d(st.WeeklyProfitValue), st.EODCloseEnabled, d(st.EODCloseValue),
		st.LockSettingsWhenTradingLocked)
}

func (e *entry) latched(control string, start time.Time) bool {
	t, ok := e.latches[control]
	return ok && t.Equal(start)
}

// due reports whether a control of e looks breached at now: the same test as
// account.State.Breach, on the index. Called with r.mu held.
func (r *Reactor) due(e *entry, now time.Time, day, week calendar.Period) bool {
	if now.Before(e.lockUntil) {
		return false
	}
	if e.pnlControls() {
		dayPnl, weekPnl := e.unreal, e.unreal
		if e.dayStart.Equal(day.Start) {
			dayPnl = dayPnl.Add(e.dayReal)
		}
		if e.weekStart.Equal(week.Start) {
			weekPnl = weekPnl.Add(e.weekReal)
		}
		switch {
		case e.dayLoss != nil && !e.latched(ev.ControlDailyLoss, day.Start) && dayPnl.Cmp(*e.dayLoss) <= 0,
			e.weekLoss != nil && !e.latched(ev.ControlWeeklyLoss, week.Start) && weekPnl.Cmp(*e.weekLoss) <= 0,
			e.dayProfit != nil && !e.latched(ev.ControlDailyProfit, day.Start) && dayPnl.Cmp(*e.dayProfit) >= 0,
			e.weekProf != nil && !e.latched(ev.ControlWeeklyProfit, week.Start) && weekPnl.Cmp(*e.weekProf) >= 0:
			return true
		}
	}
	return r.eodDue(e, now, day)
}

func (r *Reactor) eodDue(e *entry, now time.Time, day calendar.Period) bool {
	if e.eodMinutes == 0 || e.latched(ev.ControlEODClose, day.Start) {
		return false
	}
	eod := day.Close.Add(-e.eodMinutes)
	return !now.Before(eod) && e.countFrom.Before(eod) && !now.Before(e.lockUntil)
}

// periods caches the current day and week of each calendar for one pass.
type periods map[string][2]calendar.Period

func (p periods) of(cal string, now time.Time) (calendar.Period, calendar.Period) {
	if v, ok := p[cal]; ok {
		return v[0], v[1]
	}
	v := [2]calendar.Period{calendar.Day(cal, now), calendar.Week(cal, now)}
	p[cal] = v
	return v[0], v[1]
}

// OnQuote moves the mark of instrument to the quote's mid and evaluates every
// account holding a position in it; it wakes those that look breached.
func (r *Reactor) OnQuote(instrument string, bid, ask events.Decimal) {
	due := r.Mark(instrument, bid.Add(ask).Quo(events.Int(2)))
	for _, id := range due {
		r.send(id, "evaluate", &rcmd.Evaluate{})
	}
}

// Mark records mark as instrument's newest and returns the accounts whose
// controls it breaches (not yet woken). It is the evaluation the benchmark times.
func (r *Reactor) Mark(instrument string, mark events.Decimal) []string {
	now := r.now()
	ps := periods{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks[instrument] = mark
	var due []string
	for id, e := range r.byInst[instrument] {
		t := e.terms[instrument]
		u := t.a.Mul(mark).Add(t.c)
		if len(e.terms) == 1 {
			e.unreal = u
		} else {
			e.unreal = e.unreal.Sub(t.unreal).Add(u)
		}
		t.unreal = u
		day, week := ps.of(e.cal, now)
		if r.due(e, now, day, week) && !r.inflight[id+"|evaluate"] {
			due = append(due, id)
		}
	}
	return due
}

// Tick releases locks whose unlock time passed and wakes accounts whose
// end-of-day close is due.
func (r *Reactor) Tick() {
	now := r.now()
	ps := periods{}
	var release, eod []string
	r.mu.Lock()
	for id, e := range r.entries {
		if !e.lockUntil.IsZero() && !now.Before(e.lockUntil) {
			release = append(release, id)
		}
		if e.eodMinutes > 0 {
			day, _ := ps.of(e.cal, now)
			if r.eodDue(e, now, day) {
				eod = append(eod, id)
			}
		}
	}
	r.mu.Unlock()
	for _, id := range release {
		r.send(id, "release", &rcmd.Release{})
	}
	for _, id := range eod {
		r.send(id, "evaluate", &rcmd.Evaluate{})
	}
}

// Due reports whether a control of the account looks breached now.
func (r *Reactor) Due(id string) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return false
	}
	return r.due(e, now, calendar.Day(e.cal, now), calendar.Week(e.cal, now))
}

// send runs cmd on the account in the background, one of each kind in flight per account.
func (r *Reactor) send(id, kind string, cmd commands.Command) {
	key := id + "|" + kind
	r.mu.Lock()
	if r.inflight[key] {
		r.mu.Unlock()
		return
	}
	r.inflight[key] = true
	r.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.exec(ctx, id, cmd); err != nil {
			slog.Warn("risk", "account", id, "command", kind, "err", err) // the next mark or tick retries
		}
		r.mu.Lock()
		delete(r.inflight, key)
		r.mu.Unlock()
	}()
}

// HoldsUnreadable is the refusal of a command whose account's holds could not be
// read: 503 with Retry-After: 1, never a pass.
func HoldsUnreadable() *commands.Refusal {
	return commands.Refuse(http.StatusServiceUnavailable, "holds_unreadable",
		"the account's holds could not be read; nothing was recorded; retry with the same id", nil)
}

type unreadable struct {
	*commands.Refusal
	cause error
}

func (u unreadable) Unwrap() []error { return []error{u.Refusal, u.cause} }

// FailClosed turns an account command's failure to load or decide into the
// 503 holds_unreadable refusal. Refusals, an unknown outcome and cancellations
// pass unchanged.
func FailClosed(err error) error {
	var ref *commands.Refusal
	switch {
	case err == nil, errors.As(err, &ref), errors.Is(err, eventlog.ErrOutcomeUnknown),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return unreadable{Refusal: HoldsUnreadable(), cause: err}
}

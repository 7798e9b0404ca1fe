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
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/domain/calendar"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Exec runs cmd on an account (the engine attaches time, id and market context).
type Exec func(ctx context.Context, accountID string, cmd commands.Command) error

// TickInterval is how often the timer looks for locks to release and end-of-day closes due.
const TickInterval = 250 * time.Millisecond

// Reactor is the risk reactor. Its index is fed by Track (from each account's
// mailbox goroutine after a commit) and OnQuote (from the feed).
//
// For an account with one open position, every PnL control is linear in that
// position's mark, so the index keeps the band of marks inside which no
// control fires; a mark update compares the mark with each account's band and
// computes PnL exactly only for those outside it.
type Reactor struct {
	now   func() time.Time
	exec  Exec
	quote func(instrument string) (events.Decimal, bool) // the feed's mark, for instruments not yet seen

	mu       sync.Mutex
	entries  map[string]*entry
	byInst   map[string]*holders       // instrument -> accounts with a PnL control and a position in it
	marks    map[string]events.Decimal // newest mark (mid) per instrument
	seen     map[string]*extremes      // per instrument: the lowest and highest marks since a moment (Take)
	inflight map[string]bool           // account|kind -> a command on its way
	onLock   func(accountID string, rev uint64, v account.LockView)

	closed bool // set under mu by Close: nothing more is sent
	stop   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// term is one position's open PnL as a linear function of its mark: a*mark + c.
type term struct {
	a, c events.Decimal
}

// band is the range of one position's mark inside which no PnL control fires,
// for the periods starting at dayStart and weekStart: a control may fire at a
// mark <= lo or >= hi (nil: no bound). Bounds are widened by epsilon so
// rounding never hides a breach; the exact check decides.
type band struct {
	lo, hi              *events.Decimal
	loI, hiI            int64 // lo and hi in units of 1e-8, rounded outward
	loSureI, hiSureI    int64 // see setFixed
	fixedOK             bool  // loI and hiI hold the bounds
	dayStart, weekStart time.Time
}

var epsilon = events.MustDecimal("1e-18")

// Scale of the band's fixed-point bounds: 1e-8.
const scale = 8

// fixed is d in units of 1e-8 rounded by mode, and whether it fits an int64.
func fixed(d events.Decimal, mode apd.Rounder) (int64, bool) {
	ctx := apd.BaseContext.WithPrecision(40)
	ctx.Rounding = mode
	var z apd.Decimal
	if _, err := ctx.Quantize(&z, d.Apd(), -scale); err != nil || !z.Coeff.IsInt64() {
		return 0, false
	}
	v := z.Coeff.Int64()
	if z.Negative {
		v = -v
	}
	return v, true
}

// setFixed fills the band's fixed-point bounds: lo rounded up, hi rounded
// down, so a mark beyond a bound is beyond its fixed-point twin.
// The sure bounds lie 2 epsilon beyond the band's (so epsilon beyond the true
// threshold): a mark at or past them fires a control without the exact check.
func (b *band) setFixed() {
	ok := []bool{true, true, true, true}
	if b.lo != nil {
		b.loI, ok[0] = fixed(*b.lo, apd.RoundCeiling)
		b.loSureI, ok[1] = fixed(b.lo.Sub(epsilon).Sub(epsilon), apd.RoundFloor)
	}
	if b.hi != nil {
		b.hiI, ok[2] = fixed(*b.hi, apd.RoundFloor)
		b.hiSureI, ok[3] = fixed(b.hi.Add(epsilon).Add(epsilon), apd.RoundCeiling)
	}
	b.fixedOK = ok[0] && ok[1] && ok[2] && ok[3]
}

// sure reports whether the mark mi (in 1e-8 units) certainly fires a control.
func (b *band) sure(mi int64, exact bool) bool {
	return exact && b.fixedOK && ((b.lo != nil && mi <= b.loSureI) || (b.hi != nil && mi >= b.hiSureI))
}

// inside reports whether mark (mi in 1e-8 units when exact) lies strictly inside the band.
func (b *band) inside(mark events.Decimal, mi int64, exact bool) bool {
	if exact && b.fixedOK {
		return (b.lo == nil || mi > b.loI) && (b.hi == nil || mi < b.hiI)
	}
	return (b.lo == nil || mark.Cmp(*b.lo) > 0) && (b.hi == nil || mark.Cmp(*b.hi) < 0)
}

// holders lists the accounts indexed under one instrument.
type holders struct {
	list []*entry
	at   map[string]int // account id -> position in list
}

func (h *holders) put(e *entry) {
	if i, ok := h.at[e.id]; ok {
		h.list[i] = e
		return
	}
	h.at[e.id] = len(h.list)
	h.list = append(h.list, e)
}

func (h *holders) remove(id string) {
	i, ok := h.at[id]
	if !ok {
		return
	}
	last := len(h.list) - 1
	h.list[i] = h.list[last]
	h.at[h.list[i].id] = i
	h.list = h.list[:last]
	delete(h.at, id)
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
	dayStart, weekStart time.Time        // periods the realized sums below belong to
	dayReal, weekReal   events.Decimal   // realized PnL counted in those periods
	terms               map[string]*term // nil without PnL controls
	band                *band            // single-position accounts: the quiet band of its mark
	view                lockSig          // the last lock view sent
}

func (e *entry) pnlControls() bool {
	return e.dayLoss != nil || e.weekLoss != nil || e.dayProfit != nil || e.weekProf != nil
}

// New makes a reactor; exec sends commands to accounts; quote (may be nil)
// gives the feed's mark of an instrument no quote has reached the reactor for.
func New(now func() time.Time, exec Exec, quote func(instrument string) (events.Decimal, bool)) *Reactor {
	return &Reactor{now: now, exec: exec, quote: quote, entries: map[string]*entry{}, byInst: map[string]*holders{},
		marks: map[string]events.Decimal{}, seen: map[string]*extremes{}, inflight: map[string]bool{}, stop: make(chan struct{})}
}

// maxExtremes bounds the marks an instrument's extremes keep each side; a
// moment older than the oldest kept counts from it.
const maxExtremes = 4096

// extremes answers the lowest and the highest mark of one instrument since
// a moment: the marks no later mark betters, oldest first, on each side.
type extremes struct{ lows, highs []stamped }

type stamped struct {
	at   time.Time
	mark events.Decimal
}

func (x *extremes) add(at time.Time, m events.Decimal) {
	n := len(x.lows)
	for n > 0 && x.lows[n-1].mark.Cmp(m) >= 0 {
		n--
	}
	x.lows = append(x.lows[:n], stamped{at, m})
	n = len(x.highs)
	for n > 0 && x.highs[n-1].mark.Cmp(m) <= 0 {
		n--
	}
	x.highs = append(x.highs[:n], stamped{at, m})
	if len(x.lows) > 2*maxExtremes {
		x.lows = slices.Clone(x.lows[len(x.lows)-maxExtremes:])
	}
	if len(x.highs) > 2*maxExtremes {
		x.highs = slices.Clone(x.highs[len(x.highs)-maxExtremes:])
	}
}

// since is the lowest and the highest mark from t on; false when none came.
func (x *extremes) since(t time.Time) (lo, hi events.Decimal, ok bool) {
	i := sort.Search(len(x.lows), func(i int) bool { return !x.lows[i].at.Before(t) })
	j := sort.Search(len(x.highs), func(i int) bool { return !x.highs[i].at.Before(t) })
	if i == len(x.lows) || j == len(x.highs) {
		return lo, hi, false
	}
	return x.lows[i].mark, x.highs[j].mark, true
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
				func() { defer contain("risk tick"); r.Tick() }()
			}
		}
	}()
}

// contain, deferred, ends a panic of the reactor's own work in a log line: the
// next tick or mark retries, and the process serves on.
func contain(what string) {
	if v := recover(); v != nil {
		slog.Error("panic contained", "in", what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}
}

// Close stops the timer, sends nothing more and waits for the commands on their way.
func (r *Reactor) Close() {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.stop)
	})
	r.wg.Wait()
}

func neg(d *events.Decimal) *events.Decimal {
	if d == nil {
		return nil
	}
	n := d.Neg()
	return &n
}

// tighter is the negated loss threshold nearer zero: the limit that fires
// first (a venue policy's and the trader's own, whichever is lower).
func tighter(a, b *events.Decimal) *events.Decimal {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.Cmp(*b) >= 0:
		return a
	}
	return b
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
	// What the account is now, built here and copied under the lock into
	// the account's entry, which is reused from commit to commit.
	next := entry{id: id, cal: rs.Calendar,
		dayLoss:   tighter(neg(enabled(st.DailyLossEnabled, st.DailyLossValue)), neg(rs.Policy.DailyLossLimit)),
		weekLoss:  tighter(neg(enabled(st.WeeklyLossEnabled, st.WeeklyLossValue)), neg(rs.Policy.WeeklyLossLimit)),
		dayProfit: enabled(st.DailyProfitEnabled, st.DailyProfitValue), weekProf: enabled(st.WeeklyProfitEnabled, st.WeeklyProfitValue),
		countFrom: rs.CountFrom}
	if st.EODCloseEnabled && st.EODCloseValue != nil {
		if n, err := st.EODCloseValue.Apd().Int64(); err == nil {
			next.eodMinutes = time.Duration(n) * time.Minute
		}
	}
	if len(rs.Latches) > 0 {
		next.latches = make(map[string]time.Time, len(rs.Latches))
		for k, v := range rs.Latches {
			next.latches[k] = v
		}
	}
	if rs.Lock != nil {
		next.lockUntil = rs.Lock.TradingUnlockAt
	}
	day, week := rs.Periods(now)
	next.dayStart, next.weekStart = day.Start, week.Start
	if next.pnlControls() {
		next.dayReal, next.weekReal = rs.RealizedIn(day.Start), rs.RealizedIn(week.Start)
	}
	view := s.RiskLock(now)
	sig := signatureOf(view)

	r.mu.Lock()
	old := r.entries[id]
	changed := old == nil || !old.view.same(&sig)
	var e *entry
	var terms map[string]*term
	if old != nil {
		for inst := range old.terms {
			r.byInst[inst].remove(id)
		}
		terms = old.terms
		clear(terms)
		*old = next
		e = old
	} else {
		e = new(entry)
		*e = next
		r.entries[id] = e
	}
	if e.pnlControls() {
		if terms == nil {
			terms = map[string]*term{}
		}
		e.terms = terms
		for inst, p := range s.Positions {
			mult := p.Multiplier
			if mult.Sign() <= 0 {
				mult = events.Int(1)
			}
			a := p.Quantity.Mul(mult)
			e.terms[inst] = &term{a: a, c: p.AvgPrice.Mul(a).Neg()}
			if r.byInst[inst] == nil {
				r.byInst[inst] = &holders{at: map[string]int{}}
			}
			r.byInst[inst].put(e)
		}
	}
	notify := r.onLock
	e.view = sig
	due := r.due(e, now, calendar.Day(e.cal, now), calendar.Week(e.cal, now))
	r.mu.Unlock()

	if changed && notify != nil && rev > 0 {
		notify(id, rev, view)
	}
	if due {
		r.send(id, "evaluate", &riskcmd.Evaluate{})
	}
}

// Take is Track for an account this node has just begun to own (failover,
// a partition handed over): besides the newest marks, its controls are
// checked at the lowest and at the highest mark of each instrument it holds
// since since, which this node saw while no node acted on the account; a
// breach at them is sent as riskcmd.Evaluate.Gap, which the account
// re-checks, so a breach in the gap locks though the price came back.
func (r *Reactor) Take(id string, s *account.State, rev uint64, since time.Time) {
	r.Track(id, s, rev)
	now := r.now()
	r.mu.Lock()
	e := r.entries[id]
	if e == nil || !e.pnlControls() || len(e.terms) == 0 || r.inflight[id+"|evaluate"] || now.Before(e.lockUntil) {
		r.mu.Unlock()
		return // nothing to check, or the newest marks' evaluation is on its way
	}
	lows, highs := map[string]events.Decimal{}, map[string]events.Decimal{}
	for inst := range e.terms {
		if x := r.seen[inst]; x != nil {
			if lo, hi, ok := x.since(since); ok {
				lows[inst], highs[inst] = lo, hi
			}
		}
	}
	day, week := calendar.Day(e.cal, now), calendar.Week(e.cal, now)
	var gap []map[string]events.Decimal
	for _, at := range []map[string]events.Decimal{lows, highs} {
		if len(at) > 0 && r.dueAt(e, now, day, week, at) {
			gap = append(gap, at)
		}
	}
	r.mu.Unlock()
	if len(gap) > 0 {
		r.send(id, "evaluate", &riskcmd.Evaluate{Gap: gap})
	}
}

// lockSig is what of a lock view tells one view from another, copied out
// of the state the view was read from (which the mailbox goes on changing):
// its fields, times to the nanosecond and decimals by value (10.0 is 10),
// but the update time only to the second.
type lockSig struct {
	tradingLocked, settingsLocked, flattenConfirmed bool
	reason, monitoring                              string
	tradingUnlockAt, settingsUnlockAt               optTime
	triggerPnl                                      optDec
	updated                                         int64
	dayLossOn, weekLossOn, dayProfitOn, weekProfOn  bool
	eodOn, lockSettings                             bool
	dayLoss, weekLoss, dayProfit, weekProf, eod     optDec
}

type optTime struct {
	set bool
	t   time.Time
}

type optDec struct {
	set bool
	d   events.Decimal
}

func timeOf(t *time.Time) optTime {
	if t == nil {
		return optTime{}
	}
	return optTime{true, *t}
}

func decOf(d *events.Decimal) optDec {
	if d == nil {
		return optDec{}
	}
	return optDec{true, *d}
}

func (a optTime) same(b optTime) bool { return a.set == b.set && (!a.set || a.t.Equal(b.t)) }

func (a optDec) same(b optDec) bool { return a.set == b.set && (!a.set || a.d.Cmp(b.d) == 0) }

func signatureOf(v account.LockView) lockSig {
	st := &v.Settings
	return lockSig{tradingLocked: v.TradingLocked, settingsLocked: v.SettingsLocked, flattenConfirmed: v.FlattenConfirmed,
		reason: v.LockReason, monitoring: v.Monitoring, tradingUnlockAt: timeOf(v.TradingUnlockAt), settingsUnlockAt: timeOf(v.SettingsUnlockAt),
		triggerPnl: decOf(v.TriggerPnl), updated: v.UpdatedAt.Unix(),
		dayLossOn: st.DailyLossEnabled, weekLossOn: st.WeeklyLossEnabled, dayProfitOn: st.DailyProfitEnabled, weekProfOn: st.WeeklyProfitEnabled,
		eodOn: st.EODCloseEnabled, lockSettings: st.LockSettingsWhenTradingLocked,
		dayLoss: decOf(st.DailyLossValue), weekLoss: decOf(st.WeeklyLossValue), dayProfit: decOf(st.DailyProfitValue),
		weekProf: decOf(st.WeeklyProfitValue), eod: decOf(st.EODCloseValue)}
}

// same reports whether two views are the same to the stream.
func (a *lockSig) same(b *lockSig) bool {
	return a.tradingLocked == b.tradingLocked && a.settingsLocked == b.settingsLocked && a.flattenConfirmed == b.flattenConfirmed &&
		a.reason == b.reason && a.monitoring == b.monitoring && a.updated == b.updated &&
		a.tradingUnlockAt.same(b.tradingUnlockAt) && a.settingsUnlockAt.same(b.settingsUnlockAt) && a.triggerPnl.same(b.triggerPnl) &&
		a.dayLossOn == b.dayLossOn && a.weekLossOn == b.weekLossOn && a.dayProfitOn == b.dayProfitOn && a.weekProfOn == b.weekProfOn &&
		a.eodOn == b.eodOn && a.lockSettings == b.lockSettings &&
		a.dayLoss.same(b.dayLoss) && a.weekLoss.same(b.weekLoss) && a.dayProfit.same(b.dayProfit) && a.weekProf.same(b.weekProf) &&
		a.eod.same(b.eod)
}

func (e *entry) latched(control string, start time.Time) bool {
	t, ok := e.latches[control]
	return ok && t.Equal(start)
}

// mark is the newest mark of instrument. Called with r.mu held.
func (r *Reactor) mark(instrument string) (events.Decimal, bool) {
	if m, ok := r.marks[instrument]; ok {
		return m, true
	}
	if r.quote != nil {
		if m, ok := r.quote(instrument); ok {
			r.marks[instrument] = m
			return m, true
		}
	}
	return events.Decimal{}, false
}

// unreal is e's open PnL at the newest marks, but where at names
// another (may be nil). Called with r.mu held.
func (r *Reactor) unreal(e *entry, at map[string]events.Decimal) events.Decimal {
	sum := events.Int(0)
	for inst, t := range e.terms {
		m, ok := at[inst]
		if !ok {
			m, ok = r.mark(inst)
		}
		if ok {
			sum = sum.Add(t.a.Mul(m).Add(t.c))
		}
	}
	return sum
}

// quiet builds e's band for the periods day and week, or nil when e holds
// other than exactly one position. Called with r.mu held.
func (r *Reactor) quiet(e *entry, day, week calendar.Period) *band {
	if len(e.terms) != 1 {
		return nil
	}
	var t *term
	for _, x := range e.terms {
		t = x
	}
	if t.a.IsZero() {
		return nil
	}
	b := &band{dayStart: day.Start, weekStart: week.Start}
	dayReal, weekReal := events.Int(0), events.Int(0)
	if e.dayStart.Equal(day.Start) {
		dayReal = e.dayReal
	}
	if e.weekStart.Equal(week.Start) {
		weekReal = e.weekReal
	}
	// A loss limit L fires at a*m + c + R <= L, a profit target P at a*m + c + R >= P:
	// m <= (L-c-R)/a, resp. m >= (P-c-R)/a for a long (a > 0); the other way for a short.
	long := t.a.Sign() > 0
	bound := func(limit *events.Decimal, control string, start time.Time, realized events.Decimal, loss bool) {
		if limit == nil || e.latched(control, start) {
			return
		}
		k := limit.Sub(t.c).Sub(realized).Quo(t.a)
		if loss == long { // fires at m <= k
			k = k.Add(epsilon)
			if b.lo == nil || k.Cmp(*b.lo) > 0 {
				b.lo = &k
			}
		} else { // fires at m >= k
			k = k.Sub(epsilon)
			if b.hi == nil || k.Cmp(*b.hi) < 0 {
				b.hi = &k
			}
		}
	}
	bound(e.dayLoss, evacct.ControlDailyLoss, day.Start, dayReal, true)
	bound(e.weekLoss, evacct.ControlWeeklyLoss, week.Start, weekReal, true)
	bound(e.dayProfit, evacct.ControlDailyProfit, day.Start, dayReal, false)
	bound(e.weekProf, evacct.ControlWeeklyProfit, week.Start, weekReal, false)
	b.setFixed()
	return b
}

// due reports whether a control of e looks breached at now: the same test as
// account.State.Breach, on the index. Called with r.mu held.
func (r *Reactor) due(e *entry, now time.Time, day, week calendar.Period) bool {
	return r.dueAt(e, now, day, week, nil)
}

// dueAt is due at the marks at names, the newest for the others.
func (r *Reactor) dueAt(e *entry, now time.Time, day, week calendar.Period, at map[string]events.Decimal) bool {
	if now.Before(e.lockUntil) {
		return false
	}
	if e.pnlControls() {
		u := r.unreal(e, at)
		dayPnl, weekPnl := u, u
		if e.dayStart.Equal(day.Start) {
			dayPnl = dayPnl.Add(e.dayReal)
		}
		if e.weekStart.Equal(week.Start) {
			weekPnl = weekPnl.Add(e.weekReal)
		}
		switch {
		case e.dayLoss != nil && !e.latched(evacct.ControlDailyLoss, day.Start) && dayPnl.Cmp(*e.dayLoss) <= 0,
			e.weekLoss != nil && !e.latched(evacct.ControlWeeklyLoss, week.Start) && weekPnl.Cmp(*e.weekLoss) <= 0,
			e.dayProfit != nil && !e.latched(evacct.ControlDailyProfit, day.Start) && dayPnl.Cmp(*e.dayProfit) >= 0,
			e.weekProf != nil && !e.latched(evacct.ControlWeeklyProfit, week.Start) && weekPnl.Cmp(*e.weekProf) >= 0:
			return true
		}
	}
	return r.eodDue(e, now, day)
}

func (r *Reactor) eodDue(e *entry, now time.Time, day calendar.Period) bool {
	if e.eodMinutes == 0 || e.latched(evacct.ControlEODClose, day.Start) {
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
		r.send(id, "evaluate", &riskcmd.Evaluate{})
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
	x := r.seen[instrument]
	if x == nil {
		x = &extremes{}
		r.seen[instrument] = x
	}
	x.add(time.Now(), mark)
	h := r.byInst[instrument]
	if h == nil {
		return nil
	}
	mi, exact := fixed(mark, apd.RoundFloor)
	cryptoDay, cryptoWeek := ps.of(calendar.Crypto, now)
	var due []string
	for _, e := range h.list {
		if now.Before(e.lockUntil) {
			continue
		}
		day, week := cryptoDay, cryptoWeek
		if e.cal == calendar.Futures {
			day, week = ps.of(e.cal, now)
		}
		b := e.band
		if b == nil || b.dayStart != day.Start || b.weekStart != week.Start {
			b = r.quiet(e, day, week)
			e.band = b
		}
		if b != nil && b.inside(mark, mi, exact) {
			continue // inside the quiet band: no PnL control fires
		}
		if ((b != nil && b.sure(mi, exact)) || r.due(e, now, day, week)) && !r.inflight[e.id+"|evaluate"] {
			due = append(due, e.id)
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
		r.send(id, "release", &riskcmd.Release{})
	}
	for _, id := range eod {
		r.send(id, "evaluate", &riskcmd.Evaluate{})
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

// Pending counts the commands the reactor has on their way.
func (r *Reactor) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// send runs cmd on the account in the background, one of each kind in flight per account.
func (r *Reactor) send(id, kind string, cmd commands.Command) {
	key := id + "|" + kind
	r.mu.Lock()
	if r.inflight[key] || r.closed {
		r.mu.Unlock()
		return
	}
	r.inflight[key] = true
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer contain("risk command")
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
	return commands.Refuse(commands.CodeHoldsUnreadable,
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
	case err == nil, errors.As(err, &ref), errors.Is(err, eventlog.ErrOutcomeUnknown), errors.Is(err, eventlog.ErrLogUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	// The answer says nothing was recorded: the cause is logged, so an
	// answer that turns out wrong (a fault test's) can be traced to it.
	slog.Warn("holds unreadable", "err", err)
	return unreadable{Refusal: HoldsUnreadable(), cause: err}
}

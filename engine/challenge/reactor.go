package challenge

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/domain/calendar"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Reactor watches the marks and the clock for the accounts that run an
// evaluation and wakes an account (Wake: the engine sends it EvaluateStage
// with the newest marks) when a mark may cross one of its thresholds or a
// moment its rules name comes: the end of a trading day with positions open,
// the last allowed day's end, the session close before a weekend it may not
// hold over. The account's Decide re-checks everything from its own state
// and the command's marks, so a wake that finds nothing records nothing.
//
// An account with one open position is indexed by the band of its mark
// inside which no threshold is crossed (equity is linear in that mark); a
// mark is compared with it in fixed point, and the account is woken only
// outside it. An account with several positions is valued exactly.
type Reactor struct {
	now  func() time.Time
	wake func(ctx context.Context, accountID string) error

	mu       sync.Mutex
	entries  map[string]*entry
	byInst   map[string]map[string]*entry // instrument -> accounts with a position in it
	marks    map[string]events.Decimal
	inflight map[string]bool
	stop     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

// entry is what the reactor knows of one evaluated account, as of its last commit.
type entry struct {
	id        string
	balance   events.Decimal
	positions map[string]evacct.Position
	floor     events.Decimal // equity under it fails
	target    *events.Decimal
	single    string // the instrument of the one position; "" otherwise
	lo, hi    int64  // single: wake at a mark <= lo or >= hi (1e-8 units)
	loOK      bool
	hiOK      bool
	due       time.Time // next moment to wake; zero: none
}

// NewReactor makes a reactor; wake sends an account its evaluation.
func NewReactor(now func() time.Time, wake func(ctx context.Context, accountID string) error) *Reactor {
	return &Reactor{now: now, wake: wake, entries: map[string]*entry{}, byInst: map[string]map[string]*entry{},
		marks: map[string]events.Decimal{}, inflight: map[string]bool{}, stop: make(chan struct{})}
}

const fixedScale = 8

func toFixed(d events.Decimal, mode apd.Rounder) (int64, bool) {
	ctx := apd.BaseContext.WithPrecision(40)
	ctx.Rounding = mode
	var z apd.Decimal
	if _, err := ctx.Quantize(&z, d.Apd(), -fixedScale); err != nil || !z.Coeff.IsInt64() {
		return 0, false
	}
	v := z.Coeff.Int64()
	if z.Negative {
		v = -v
	}
	return v, true
}

// Track indexes the account as its commit left it; called from the account's
// mailbox goroutine after each commit (and for every account at start).
func (r *Reactor) Track(id string, s *account.State) {
	v := &s.Eval
	r.mu.Lock()
	defer r.mu.Unlock()
	r.untrack(id)
	if !v.Active() {
		return
	}
	th := v.Thresholds()
	e := &entry{id: id, balance: s.Balance, positions: make(map[string]evacct.Position, len(s.Positions)), floor: th.DailyFloor}
	if th.TotalFloor.Cmp(e.floor) > 0 {
		e.floor = th.TotalFloor
	}
	if v.Days >= v.Rules.MinTradingDays {
		t := th.Target
		e.target = &t
	}
	for k, p := range s.Positions {
		e.positions[k] = p
	}
	if len(s.Positions) == 1 {
		for inst, p := range s.Positions {
			e.single = inst
			mult := p.Multiplier
			if mult.Sign() <= 0 {
				mult = events.Int(1)
			}
			a := p.Quantity.Mul(mult) // equity = balance + a*(mark-avg)
			at := func(eq events.Decimal) events.Decimal { return p.AvgPrice.Add(eq.Sub(s.Balance).Quo(a)) }
			fail := at(e.floor)
			if a.Sign() > 0 { // a long fails low, passes high
				e.lo, e.loOK = toFixed(fail, apd.RoundCeiling)
				if e.target != nil {
					e.hi, e.hiOK = toFixed(at(*e.target), apd.RoundFloor)
				}
			} else {
				e.hi, e.hiOK = toFixed(fail, apd.RoundFloor)
				if e.target != nil {
					e.lo, e.loOK = toFixed(at(*e.target), apd.RoundCeiling)
				}
			}
		}
	}
	e.due = due(s)
	r.entries[id] = e
	for inst := range e.positions {
		m := r.byInst[inst]
		if m == nil {
			m = map[string]*entry{}
			r.byInst[inst] = m
		}
		m[id] = e
	}
}

// due is the next moment the rules wake the account at.
func due(s *account.State) time.Time {
	v := &s.Eval
	var out time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	earlier(v.Deadline())
	if len(s.Positions) > 0 {
		earlier(calendar.Day(v.Rules.Calendar, v.Day).Next)
	}
	if !v.Rules.AllowWeekendHold && (len(s.Positions) > 0 || len(s.Working) > 0) {
		from, until := account.Weekend(v.Rules.Calendar, v.Day)
		if !v.Weekend.Equal(until) {
			earlier(from)
		}
	}
	return out
}

// Untrack forgets the account (its node no longer owns it).
func (r *Reactor) Untrack(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.untrack(id)
}

func (r *Reactor) untrack(id string) {
	e := r.entries[id]
	if e == nil {
		return
	}
	for inst := range e.positions {
		delete(r.byInst[inst], id)
	}
	delete(r.entries, id)
}

// Mark records mark as the instrument's newest and returns the accounts it
// may cross a threshold of (not yet woken). It is what the benchmark times.
func (r *Reactor) Mark(instrument string, mark events.Decimal) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks[instrument] = mark
	h := r.byInst[instrument]
	if len(h) == 0 {
		return nil
	}
	mi, exact := toFixed(mark, apd.RoundFloor)
	var out []string
	for id, e := range h {
		if r.inflight[id] {
			continue
		}
		if e.single == instrument && exact {
			if (e.loOK && mi <= e.lo) || (e.hiOK && mi >= e.hi) {
				out = append(out, id)
			}
			continue
		}
		eq := account.Equity(e.balance, e.positions, r.marks)
		if eq.Cmp(e.floor) < 0 || (e.target != nil && eq.Cmp(*e.target) >= 0) {
			out = append(out, id)
		}
	}
	return out
}

// Check wakes the account when the newest marks cross one of its
// thresholds (the test Mark makes of every quote): a node that has just
// begun to own it acts on the marks it holds, not on the next quote.
func (r *Reactor) Check(id string) {
	r.mu.Lock()
	e := r.entries[id]
	due := e != nil && !r.inflight[id] && len(e.positions) > 0
	if due {
		eq := account.Equity(e.balance, e.positions, r.marks)
		due = eq.Cmp(e.floor) < 0 || (e.target != nil && eq.Cmp(*e.target) >= 0)
	}
	r.mu.Unlock()
	if due {
		r.send(id)
	}
}

// OnQuote wakes the accounts a quote's mark may cross a threshold of.
func (r *Reactor) OnQuote(instrument string, bid, ask events.Decimal) {
	for _, id := range r.Mark(instrument, bid.Add(ask).Quo(events.Int(2))) {
		r.send(id)
	}
}

// Tick wakes the accounts whose due moment has come.
func (r *Reactor) Tick() {
	now := r.now()
	r.mu.Lock()
	var ids []string
	for id, e := range r.entries {
		if !e.due.IsZero() && !now.Before(e.due) && !r.inflight[id] {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.send(id)
	}
}

func (r *Reactor) send(id string) {
	r.mu.Lock()
	if r.inflight[id] {
		r.mu.Unlock()
		return
	}
	select {
	case <-r.stop:
		r.mu.Unlock()
		return
	default:
	}
	r.inflight[id] = true
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.wake(ctx, id); err != nil {
			slog.Warn("challenge: evaluation wake failed", "account", id, "err", err)
		}
		r.mu.Lock()
		delete(r.inflight, id)
		if e := r.entries[id]; e != nil && !e.due.IsZero() && !r.now().Before(e.due) {
			e.due = r.now().Add(time.Minute) // the wake recorded nothing: not again at once
		}
		r.mu.Unlock()
	}()
}

// Start runs the timer until Close.
func (r *Reactor) Start(every time.Duration) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(every)
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

// Close stops the timer and waits for the wakes on their way.
func (r *Reactor) Close() {
	r.once.Do(func() {
		r.mu.Lock()
		close(r.stop)
		r.mu.Unlock()
	})
	r.wg.Wait()
}

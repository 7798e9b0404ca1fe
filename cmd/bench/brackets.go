package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evmark "github.com/svc/engine/events/mark"
	evplan "github.com/svc/engine/events/plan"
)

// The brackets phase (issue 14): N accounts each hold one long BTC-PERP
// position from a market entry whose exit plan has a stop and a trailing
// rule, while the bench streams quotes to BTC-PERP by hand (the simulated
// feed is not stepped; nothing else quotes it): a random walk with an upward
// drift and three sharp drops. Ordinary market orders on other accounts, over
// HTTP and through the command path at a fixed pace, measure the latency a
// trader sees, first idle and then under the stream. A consumer of the log
// (an ordered consumer, in this process) follows every commit of the
// bracketed accounts and records when it saw each stop move and each stop
// fill; the figures are computed from those records and the quotes published.

const bkInstrument = "BTC-PERP"

// bkDrops are the sharp drops, in ticks, a quarter into each third of the
// stream: one quote falls that far and the walk goes on from there, so each
// third has its drop, the recovery, and new highs after it.
var bkDrops = [3]int64{30, 40, 50}

// Walk steps per quote: up a tick with bkUp, down with bkDown, else flat;
// +0.1 tick a quote on average, 20 ticks (10 USD) a second at 200 quotes/s,
// so that new highs move the stops in every third of the stream.
const bkUp, bkDown = 0.30, 0.20

// bkPlan is account i's plan: a stop and a trailing rule at the same
// distance (20 to 200 ticks across accounts), trailing active at once or
// from 2 or 4 ticks above the entry.
func bkPlan(i int) (dist, act int64) { return 20 + int64(i*37%181), int64(i%3) * 2 }

func bkAccountID(i int) string { return fmt.Sprintf("acct_bk_%05d", i) }

// bkQuote is one published quote: when Publish was called and its bid, in ticks.
type bkQuote struct {
	at  time.Time
	bid int64
}

// bkAccount is what the follower knows of one bracketed account.
type bkAccount struct {
	dist, act   int64          // the plan's trailing distance and activation, ticks
	entry       int64          // entry price, ticks; 0 until the entry's commit is seen
	stop0, stop int64          // the first and the current stop, ticks
	setAt       time.Time      // when the current stop was decided: its commit's time
	live        bool           // the bracket is active
	bracket     evacct.Bracket // as last recorded: its anchor, for the level the marks derive
}

// ruleLevel is where a's plan puts its stop once the best bid since the
// entry is high (ticks): its first stop, raised to high less the trailing
// distance once high reached the activation.
func (a bkAccount) ruleLevel(high int64) int64 {
	if high >= a.entry+a.act {
		return max(a.stop0, high-a.dist)
	}
	return a.stop0
}

const (
	bkMoved  = iota // the stop moved to stop
	bkFilled        // the stop filled
	bkEnded         // the bracket ended otherwise
	bkMarked        // the paper book recorded a mark (acct -1): the stops it moves are derived
)

// bkChange is one change of a bracketed account, in the order the follower saw them.
type bkChange struct {
	acct  int32
	kind  uint8
	stop  int64     // moved: the new stop; filled: the stop that filled
	best  int64     // moved: the trailing rule's best bid, ticks (0: not recorded)
	at    time.Time // when the follower saw the commit
	setAt time.Time // filled: when the stop that filled was decided
	// filled: the stop's rules moved it up the quotes its wake walked, and it
	// triggered in the same commit (no commit recorded the level it filled
	// at before the quote that crossed it: the rule's row times it)
	walked bool
	woke   time.Time     // moved: the commit's time, when the reactor's wake made its command
	stack  *evmark.Stack // marked: the stack recorded
}

// bkTracker follows the log and records the bracketed accounts' changes.
// onMsg runs in the log consumer's goroutine; mu guards what it writes.
type bkTracker struct {
	reg  events.Registry
	tick events.Decimal
	ids  map[string]int // read-only after newBkTracker

	mu      sync.Mutex
	accts   []bkAccount
	entered int
	changes []bkChange
	commits []int64        // when the follower saw each commit of a bracketed account, Unix ns
	ends    map[string]int // brackets ended other than by their stop, by reason
	busy    time.Duration  // time spent in onMsg
}

func newBkTracker(n int, tick events.Decimal) *bkTracker {
	t := &bkTracker{reg: engine.Registry(), tick: tick, ids: make(map[string]int, n), accts: make([]bkAccount, n), ends: map[string]int{}}
	for i := range n {
		t.ids[bkAccountID(i)] = i
		t.accts[i].dist, t.accts[i].act = bkPlan(i)
	}
	return t
}

func (t *bkTracker) ticks(d events.Decimal) int64 {
	n, _ := d.Quo(t.tick).Int64()
	return n
}

func bkStopLeg(b evacct.Bracket) (evacct.BracketLeg, bool) {
	for _, l := range b.Legs {
		if l.Kind == evacct.LegStop && l.State == evacct.LegWorking && l.Price != nil {
			return l, true
		}
	}
	return evacct.BracketLeg{}, false
}

// onMsg records a commit of a bracketed account: its entry, stop moves, and the bracket's end.
func (t *bkTracker) onMsg(m eventlog.Msg) error {
	at := time.Now()
	if events.IsKind(m.Subject, events.KindMark) {
		return t.onMark(m, at)
	}
	id, ok := events.SubjectID(m.Subject, events.KindAccount)
	if !ok {
		return nil
	}
	k, ok := t.ids[id]
	if !ok {
		return nil
	}
	c, err := t.reg.Decode(m.Data)
	if err != nil {
		return fmt.Errorf("decode %s at %d: %w", m.Subject, m.Seq, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.commits = append(t.commits, at.UnixNano())
	a := &t.accts[k]
	var trig int64 // the level the commit triggered the stop at (0: none)
	for _, e := range c.Events {
		switch e := e.(type) {
		case evacct.StopTriggered:
			trig = t.ticks(e.Price)
		case evacct.BracketSet:
			a.bracket = e.Bracket
			st, ok := bkStopLeg(e.Bracket)
			if !ok {
				continue
			}
			px := t.ticks(*st.Price)
			if a.entry == 0 {
				if e.Bracket.Armed.Sign() > 0 {
					a.entry, a.stop0, a.stop, a.setAt, a.live = t.ticks(e.Bracket.EntryPrice), px, px, c.At, true
					t.entered++
				}
				continue
			}
			if px != a.stop && a.live {
				var best int64
				if tr := e.Bracket.Trailing; tr != nil && tr.Best != nil {
					best = t.ticks(*tr.Best)
				}
				a.stop, a.setAt = px, c.At
				t.changes = append(t.changes, bkChange{acct: int32(k), kind: bkMoved, stop: px, best: best, at: at, woke: c.At})
			}
		case evacct.BracketEnd:
			if !a.live {
				continue
			}
			a.live = false
			if e.Reason == "stop_filled" {
				ch := bkChange{acct: int32(k), kind: bkFilled, stop: a.stop, at: at, setAt: a.setAt}
				if trig != 0 && trig != a.stop {
					ch.stop, ch.walked = trig, true
				}
				t.changes = append(t.changes, ch)
			} else {
				t.ends[e.Reason]++
				t.changes = append(t.changes, bkChange{acct: int32(k), kind: bkEnded, at: at})
			}
		}
	}
	t.busy += time.Since(at)
	return nil
}

// onMark records a mark of the stream's instrument: one commit that moves
// every stop whose rule its touch reaches, derived, not recorded.
func (t *bkTracker) onMark(m eventlog.Msg, at time.Time) error {
	c, err := t.reg.Decode(m.Data)
	if err != nil {
		return fmt.Errorf("decode %s at %d: %w", m.Subject, m.Seq, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range c.Events {
		mk, ok := e.(evmark.Marked)
		if !ok || mk.Stack.Instrument != bkInstrument {
			continue
		}
		s := mk.Stack
		ch := bkChange{acct: -1, kind: bkMarked, at: at, woke: c.At, stack: &s}
		if n := len(s.Bids); n > 0 && s.Bids[n-1].N == s.N {
			ch.best = t.ticks(s.Bids[n-1].Price)
		}
		t.commits = append(t.commits, at.UnixNano())
		t.changes = append(t.changes, ch)
	}
	t.busy += time.Since(at)
	return nil
}

func (t *bkTracker) enteredCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entered
}

// lastCommit is when the follower saw the newest commit of a bracketed account.
func (t *bkTracker) lastCommit() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.commits) == 0 {
		return time.Time{}
	}
	return time.Unix(0, t.commits[len(t.commits)-1])
}

// bkResult is one run of the brackets phase.
type bkResult struct {
	Accounts   int
	Setup      time.Duration // opening the accounts and their bracketed entries, read models caught up
	HeapMB     float64       // heap in use after the setup
	Goroutines int

	Quotes        int           // published in the stream
	Window        time.Duration // from the first quote to the last
	Publish       sample        // duration of each Publish (the paper and risk reactors' scans run inside it)
	Commits       int           // commits of bracketed accounts from the first quote to the end of the drain
	LogCommits    uint64        // every commit appended meanwhile (ordinary orders included)
	Moves         int           // stop moves seen inside the window
	MovesAll      int           // stop moves seen until the end of the drain
	Marks         int           // marks recorded until the end of the drain
	Fills         int           // stops filled until the end of the drain
	Untimed       int           // fills with no crossing quote found (expected 0)
	Walked        int           // fills at a level the wake's walk of the quotes moved the stop to (timed by the rule's row)
	Ends          map[string]int
	TriggerToFill sample
	RuleToFill    sample        // from the crossing of the rule's level (ruleTriggers)
	RuleUnder     []int64       // ticks each filled stop sat under the rule's level at that crossing, sorted
	RuleNone      int           // fills with no crossing of the rule's level found
	RuleCrossed   int           // entered accounts whose rule's level a quote of the stream crossed
	WakeLag       [3]sample     // quote that woke an account to its stop move, by thirds of the window; the last includes the drain
	Behind        [4]bkBehind   // at the end of each third and after the drain
	Drain         time.Duration // from the last quote to the last commit of a bracketed account
	FollowerBusy  time.Duration // the follower's own time inside the window and drain

	IdleHTTP, LoadHTTP sample
	IdleCmd, LoadCmd   sample
	IdleCPU, LoadCPU   float64 // cores busy (process CPU / wall time)
	IdleOthers         float64 // cores busy in other processes during the idle window
	Thirds             [3]bkThird
}

// bkThird is one third of the stream: the bracketed accounts' commits the
// follower saw, and the cores busy in this process and in all others.
type bkThird struct {
	Commits      int
	CPU, Others  float64
	from, to     time.Time
	cpu0, cpu1   time.Duration
	mach0, mach1 time.Duration
}

// machineBusy is the CPU time every process on the machine has used
// (/proc/stat), to tell this process's share from the others'.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 2 {
		return 0
	}
	var busy int64
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * 10 * time.Millisecond // USER_HZ is 100
}

// bkBehind counts the live brackets whose stop is below where the trailing
// rule puts it for the highest bid published so far.
type bkBehind struct {
	Live, Behind int
	Mean         float64 // ticks, over the live brackets
	P99, Max     int64   // ticks
}

func (b bkBehind) String() string {
	if b.Live == 0 {
		return "-"
	}
	return fmt.Sprintf("%d of %d (%.0f%%), mean %.1f, p99 %d, max %d ticks", b.Behind, b.Live, 100*float64(b.Behind)/float64(b.Live), b.Mean, b.P99, b.Max)
}

// bkOpen opens n accounts and places each one bracketed market buy at the
// current quote, from 64 goroutines through the engine's command API.
func bkOpen(ctx context.Context, s *service, n int, ask events.Decimal) error {
	e := s.App.Engine
	p := events.Principal{TenantID: app.DemoTenant, KeyID: "bench"}
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n && ctx.Err() == nil; i += 64 {
				id := bkAccountID(i)
				open := &tenantcmd.OpenAccount{TenantID: app.DemoTenant, Broker: "paper", AccountNumber: fmt.Sprintf("BK%06d", i),
					Label: fmt.Sprintf("Bracket %d", i), Currency: "USD", StartingBalance: events.Int(50000), Kind: "demo"}
				if _, err := e.Account(ctx, id, e.Envelope(p, "", open)); err != nil {
					errs[w] = fmt.Errorf("open %s: %w", id, err)
					return
				}
				dist, act := bkPlan(i)
				spec := evplan.Spec{Name: "trail", Stop: &evplan.Distance{Ticks: dist},
					Trailing: &evplan.Trailing{Activation: evplan.Distance{Ticks: act}, Distance: evplan.Distance{Ticks: dist}}}
				key := "bk-entry-" + strconv.Itoa(i)
				order := &trading.PlaceOrder{ClientOrderID: key, Instrument: bkInstrument, Side: "buy", OrderType: "market", Quantity: qty,
					Bracket: &trading.BracketPlan{PlanID: "bench_trail", PlanRevision: "1", Spec: spec, Entry: ask}}
				res, err := e.Account(ctx, id, e.Envelope(p, key, order))
				if err == nil && len(res.Events) < 3 {
					err = fmt.Errorf("entry not filled and armed: %d events", len(res.Events))
				}
				if err != nil {
					errs[w] = fmt.Errorf("entry %s: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// paced runs op on workers goroutines, rate per second in all, each worker
// on its own schedule (an op that overruns its slot starts the next at once),
// for dur, and summarizes the latency of each op. It stops by itself.
func paced(ctx context.Context, workers int, rate float64, dur time.Duration, op func(ctx context.Context, w, i int) error) sample {
	every := time.Duration(float64(workers) / rate * float64(time.Second))
	start := time.Now()
	end := start.Add(dur)
	lats := make([][]time.Duration, workers)
	errs := make([]int, workers)
	firsts := make([]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := start.Add(every * time.Duration(w) / time.Duration(workers))
			for i := 0; ctx.Err() == nil; i++ {
				time.Sleep(time.Until(next))
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				err := op(ctx, w, i)
				next = next.Add(every)
				if err != nil {
					if errs[w] == 0 {
						firsts[w] = err.Error()
					}
					errs[w]++
					continue
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	return collect(dur, lats, errs, firsts)
}

// httpOrder posts one market order for acct, as httpPath does, and checks it filled.
func (s *service) httpOrder(ctx context.Context, c *http.Client, acct credAccount, clientOrderID string, i int) error {
	body := orderBody(clientOrderID, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/trading/order?account="+acct.AccountNumber, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	return orderFilled(resp.StatusCode, b)
}

// orderBody is the JSON of the market order httpOrder posts.
func orderBody(clientOrderID string, i int) string {
	return `{"clientOrderId":"` + clientOrderID + `","instrument":"BTC-PERP","side":"` + side(i) + `","orderType":"market","quantity":"0.01"}`
}

// orderFilled is nil when an order's answer says it filled.
func orderFilled(status int, b []byte) error {
	if status != http.StatusOK || !bytes.Contains(b, filled) {
		return fmt.Errorf("order: %d %.200s", status, b)
	}
	return nil
}

const bkProbeWorkers = 4

// bkProbes measures ordinary market orders for dur at rate per second over
// HTTP (the first bkProbeWorkers demo accounts) and, at the same time and
// rate, through the command path (the next bkProbeWorkers). The HTTP clients
// run in a child process (http-load), as a trader's would: in this process,
// busy with the engine, a client's goroutine waited for the runtime to see
// its answer arrive, and that wait (up to 10 ms under the stream, measured
// against the handler's own time) was the client's, not the engine's.
func bkProbes(ctx context.Context, s *service, rate float64, dur time.Duration) (web, cmd sample) {
	n := window.Add(1)
	from := time.Now().Add(500 * time.Millisecond) // the child starts and connects meanwhile
	accts := make([]string, bkProbeWorkers)
	for w := range accts {
		accts[w] = s.Accounts[w].AccountNumber
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		web = s.httpChild(ctx, accts, rate, from, from.Add(dur))
		web.CPU = 0 // the process's CPU over the window is the stream's, not these orders'.
	}()
	go func() {
		defer wg.Done()
		time.Sleep(time.Until(from))
		cmd = paced(ctx, bkProbeWorkers, rate, dur, func(ctx context.Context, w, i int) error {
			_, err := placeMarket(ctx, s, s.Accounts[bkProbeWorkers+w].AccountID, fmt.Sprintf("bkc-%d-%d-%d", n, w, i), i)
			return err
		})
	}()
	wg.Wait()
	return web, cmd
}

// bkStream publishes rate quotes a second for dur on a schedule (a late
// quote goes out at once), a seeded random walk of the bid from bid0 ticks
// with the drops of bkDrops, and returns each quote and how long Publish took.
func bkStream(ctx context.Context, sim *market.Sim, tick events.Decimal, bid0 int64, rate float64, dur time.Duration) ([]bkQuote, []time.Duration) {
	n := int(rate * dur.Seconds())
	every := time.Duration(float64(time.Second) / rate)
	drops := map[int]int64{n / 12: bkDrops[0], 5 * n / 12: bkDrops[1], 9 * n / 12: bkDrops[2]}
	rng := rand.New(rand.NewPCG(14, 200))
	hist := make([]bkQuote, 0, n)
	took := make([]time.Duration, 0, n)
	bid := bid0
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		if d, ok := drops[i]; ok {
			bid -= d
		} else if r := rng.Float64(); r < bkUp {
			bid++
		} else if r < bkUp+bkDown {
			bid--
		}
		b := tick.Mul(events.Int(bid))
		t0 := time.Now()
		sim.Publish(market.Quote{Instrument: bkInstrument, Bid: b, Ask: b.Add(tick.Mul(events.Int(2))), Last: b.Add(tick), Size: events.Int(1), At: t0})
		took = append(took, time.Since(t0))
		hist = append(hist, bkQuote{at: t0, bid: bid})
	}
	return hist, took
}

// bracketsPhase runs the phase once: setup, an idle window of ordinary
// orders, then the quote stream with the same ordinary orders, then a drain
// until the bracketed accounts stop committing.
func bracketsPhase(ctx context.Context, o opts) (bkResult, error) {
	res := bkResult{Accounts: o.brAccounts}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute) // a bound for a stalled engine; the phase takes about a minute
	defer cancel()
	s, err := startService(ctx, o, o.sync, 2*bkProbeWorkers, true, "", app.Options{ManualFeed: true, RecordMoves: o.brRecord})
	if err != nil {
		return res, err
	}
	defer s.Close()
	a := s.App
	in, ok := a.Engine.Catalog().Get(bkInstrument)
	if !ok {
		return res, fmt.Errorf("no %s in the catalog", bkInstrument)
	}
	q0, ok := a.Sim.Quote(bkInstrument)
	if !ok {
		return res, fmt.Errorf("no opening quote of %s", bkInstrument)
	}
	tr := newBkTracker(o.brAccounts, in.TickSize)
	from, err := a.Log.LastSeq(ctx)
	if err != nil {
		return res, err
	}
	fctx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	var followErr error
	go func() { followErr = a.Log.Follow(fctx, from, tr.onMsg); close(followed) }()
	defer func() { stopFollow(); <-followed }()
	// wait polls cond until it holds, the follower fails, or timeout.
	wait := func(what string, timeout time.Duration, cond func() bool) error {
		end := time.Now().Add(timeout)
		for !cond() {
			select {
			case <-followed:
				return fmt.Errorf("log follower: %w", followErr)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(end) {
				return fmt.Errorf("%s: not after %s", what, timeout)
			}
		}
		return nil
	}

	t0 := time.Now()
	if err := bkOpen(ctx, s, o.brAccounts, q0.Ask); err != nil {
		return res, err
	}
	if err := wait("entries seen by the follower", 2*time.Minute, func() bool { return tr.enteredCount() == o.brAccounts }); err != nil {
		return res, err
	}
	last, err := a.Log.LastSeq(ctx)
	if err == nil {
		err = a.Projector.WaitFor(ctx, last)
	}
	if err != nil {
		return res, err
	}
	res.Setup = time.Since(t0)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapMB, res.Goroutines = float64(ms.HeapInuse)/(1<<20), runtime.NumGoroutine()
	progress("brackets: %d accounts opened with a bracketed entry in %s; heap %.0f MB, %d goroutines",
		o.brAccounts, res.Setup.Round(time.Millisecond), res.HeapMB, res.Goroutines)

	c0, m0, w0 := cpuTime(), machineBusy(), time.Now()
	res.IdleHTTP, res.IdleCmd = bkProbes(ctx, s, o.brOrders, o.brIdle)
	wall := float64(time.Since(w0))
	res.IdleCPU = float64(cpuTime()-c0) / wall
	res.IdleOthers = max(float64(machineBusy()-m0)/wall-res.IdleCPU, 0)
	progress("brackets idle: HTTP %s; command path %s; %.2f cores (other processes %.2f)", res.IdleHTTP, res.IdleCmd, res.IdleCPU, res.IdleOthers)

	bid0 := tr.ticks(q0.Bid)
	seq0, err := a.Log.LastSeq(ctx)
	if err != nil {
		return res, err
	}
	var hist []bkQuote
	var took []time.Duration
	_, _ = profiled(o, "brackets-stream", func() (struct{}, error) {
		c0, w0 = cpuTime(), time.Now()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			res.LoadHTTP, res.LoadCmd = bkProbes(ctx, s, o.brOrders, o.brDur)
		}()
		go func() { // the CPU of each third
			defer wg.Done()
			cpu, mach, at := c0, machineBusy(), w0
			for k := range res.Thirds {
				th := &res.Thirds[k]
				th.from, th.cpu0, th.mach0 = at, cpu, mach
				time.Sleep(time.Until(w0.Add(time.Duration(k+1) * o.brDur / 3)))
				cpu, mach, at = cpuTime(), machineBusy(), time.Now()
				th.to, th.cpu1, th.mach1 = at, cpu, mach
			}
		}()
		hist, took = bkStream(ctx, a.Sim, in.TickSize, bid0, o.brRate, o.brDur)
		res.LoadCPU = float64(cpuTime()-c0) / float64(time.Since(w0))
		wg.Wait()
		return struct{}{}, nil
	})
	if len(hist) < 2 {
		return res, errors.New("the stream published no quotes")
	}
	start, end := hist[0].at, hist[len(hist)-1].at
	res.Quotes, res.Window = len(hist), end.Sub(start)
	res.Publish = sample{Window: res.Window}
	summarize(&res.Publish, took)
	// The drain: until no bracketed account has committed for 2 s.
	if err := wait("drain", 5*time.Minute, func() bool { return time.Since(tr.lastCommit()) > 2*time.Second }); err != nil {
		return res, err
	}
	if seq1, err := a.Log.LastSeq(ctx); err == nil {
		res.LogCommits = seq1 - seq0
	}
	drained := time.Now()
	stopFollow()
	<-followed

	tr.mu.Lock()
	defer tr.mu.Unlock()
	if lc := time.Unix(0, tr.commits[len(tr.commits)-1]); lc.After(end) {
		res.Drain = lc.Sub(end)
	}
	for _, c := range tr.commits {
		if c >= start.UnixNano() {
			res.Commits++
		}
		for k := range res.Thirds {
			if th := &res.Thirds[k]; c >= th.from.UnixNano() && c < th.to.UnixNano() {
				th.Commits++
			}
		}
	}
	for k := range res.Thirds {
		th := &res.Thirds[k]
		wall := float64(th.to.Sub(th.from))
		th.CPU = float64(th.cpu1-th.cpu0) / wall
		th.Others = max(float64(th.mach1-th.mach0)/wall-th.CPU, 0)
	}
	res.Ends = tr.ends
	for _, ch := range tr.changes {
		switch {
		case ch.at.Before(start):
		case ch.kind == bkMarked:
			res.Marks++
		case ch.kind == bkMoved:
			res.MovesAll++
			if !ch.at.After(end) {
				res.Moves++
			}
		case ch.kind == bkFilled:
			res.Fills++
		}
	}
	res.FollowerBusy = tr.busy
	full := append([]bkQuote{{at: t0, bid: bid0}}, hist...) // the opening quote, in force during the setup
	var t2f []time.Duration
	t2f, res.Untimed, res.Walked = triggerToFill(full, tr.changes, start)
	res.TriggerToFill = sample{Window: res.Window}
	summarize(&res.TriggerToFill, t2f)
	var r2f []time.Duration
	r2f, res.RuleUnder, res.RuleNone = ruleTriggers(tr.accts, full, tr.changes, start)
	slices.Sort(res.RuleUnder)
	res.RuleToFill = sample{Window: res.Window}
	res.RuleCrossed = ruleCrossed(tr.accts, full, end)
	summarize(&res.RuleToFill, r2f)
	for k, lags := range wakeLags(full, tr.changes, start, res.Window) {
		res.WakeLag[k] = sample{Window: res.Window / 3}
		summarize(&res.WakeLag[k], lags)
	}
	at := []time.Time{start.Add(res.Window / 3), start.Add(2 * res.Window / 3), end, drained}
	copy(res.Behind[:], behindAt(tr.accts, tr.changes, full, at, tr.ticks))
	progress("brackets stream: %d quotes in %s; %d commits of bracketed accounts, %d stop moves, %d stops filled, other ends %v; HTTP %s; command path %s; %.2f cores",
		res.Quotes, res.Window.Round(time.Millisecond), res.Commits, res.MovesAll, res.Fills, res.Ends, res.LoadHTTP, res.LoadCmd, res.LoadCPU)
	return res, nil
}

// triggerToFill is, for each stop filled at or after from, the time from the
// market crossing the stop to the follower seeing the fill (triggerAt), the
// number of fills with no crossing quote, and the number left to the rule's
// row (walked: no commit recorded the level they triggered at before it).
func triggerToFill(hist []bkQuote, changes []bkChange, from time.Time) (lats []time.Duration, untimed, walked int) {
	for _, ch := range changes {
		if ch.kind != bkFilled || ch.at.Before(from) {
			continue
		}
		if ch.walked {
			walked++
			continue
		}
		t, ok := triggerAt(hist, ch.stop, ch.setAt)
		if !ok {
			untimed++
			continue
		}
		lats = append(lats, ch.at.Sub(t))
	}
	return lats, untimed, walked
}

// ruleTriggers is, for each stop filled at or after from, how the fill
// compares with the trader's rule: the time from the first quote at or under
// the level the rule put the stop at by then (its first stop, raised to the
// best bid since the entry less the trailing distance once the activation
// was reached, as behindAt) to the follower seeing the fill, and how many
// ticks the stop triggered under where the rule triggers it: that level, or
// the crossing quote's bid when that quote gapped through it (a stop
// triggers at the quote that crosses it, as the paper book fills). A stop the log moved
// behind its rule triggers later and lower than the rule's; triggerToFill,
// which starts at the crossing of the recorded stop, does not show that.
// The fills with no such crossing are counted apart.
func ruleTriggers(accts []bkAccount, hist []bkQuote, changes []bkChange, from time.Time) (lats []time.Duration, under []int64, none int) {

	for _, ch := range changes {
		if ch.kind != bkFilled || ch.at.Before(from) {
			continue
		}
		at, want, ok := ruleCrossing(accts[ch.acct], hist)
		if !ok {
			none++
			continue
		}
		lats, under = append(lats, ch.at.Sub(at)), append(under, max(want-ch.stop, 0))
	}
	return lats, under, none
}

// ruleCrossing is the first quote of hist at or under the level a's rule
// put its stop at by then, and where the rule triggers it: that level, or
// the quote's bid when the quote gapped through it.
func ruleCrossing(a bkAccount, hist []bkQuote) (time.Time, int64, bool) {
	var high int64
	for _, q := range hist {
		high = max(high, q.bid)
		want := a.ruleLevel(high)
		if q.bid <= want {
			return q.at, min(want, q.bid), true
		}
	}
	return time.Time{}, 0, false
}

// ruleCrossed counts the entered accounts whose rule's level a quote of hist
// up to end crossed (each should have filled by then, give or take the
// engine's reaction).
func ruleCrossed(accts []bkAccount, hist []bkQuote, end time.Time) int {
	n := 0
	upTo := hist[:sort.Search(len(hist), func(i int) bool { return hist[i].at.After(end) })]
	for _, a := range accts {
		if a.entry == 0 {
			continue
		}
		if _, _, ok := ruleCrossing(a, upTo); ok {
			n++
		}
	}
	return n
}

// triggerAt is when the market crossed a long's stop at stop, decided at
// setAt (the time of the commit that set it, taken when its command was
// made, so a quote between the command and the commit counts): setAt itself
// when the bid in force then was at or under the stop, else the first later
// quote at or under it. hist is in publication order.
func triggerAt(hist []bkQuote, stop int64, setAt time.Time) (time.Time, bool) {
	i := sort.Search(len(hist), func(i int) bool { return hist[i].at.After(setAt) }) // first quote after setAt
	if i > 0 && hist[i-1].bid <= stop {
		return setAt, true
	}
	for ; i < len(hist); i++ {
		if hist[i].bid <= stop {
			return hist[i].at, true
		}
	}
	return time.Time{}, false
}

// wakeLags is, for each trailing move seen at or after from, the time from
// the quote that woke the account to the follower seeing the move, by third
// of window (moves after the window count in the last third). The waking
// quote is the newest one published by the commit's time (the wake's
// command time, 1 ms of slack for the codec) whose bid is the best bid the
// move records; moves with none are left out.
func wakeLags(hist []bkQuote, changes []bkChange, from time.Time, window time.Duration) [3][]time.Duration {
	var out [3][]time.Duration
	for _, ch := range changes {
		if (ch.kind != bkMoved && ch.kind != bkMarked) || ch.best == 0 || ch.at.Before(from) {
			continue
		}
		by := ch.woke.Add(time.Millisecond)
		i := sort.Search(len(hist), func(i int) bool { return hist[i].at.After(by) }) - 1
		for ; i >= 0 && hist[i].bid != ch.best; i-- {
		}
		if i < 0 {
			continue
		}
		k := min(int(3*ch.at.Sub(from)/window), 2)
		out[k] = append(out[k], ch.at.Sub(hist[i].at))
	}
	return out
}

// behindAt measures at each time in at (ascending) how far the live
// brackets' stops are below where their trailing rule puts them for the
// highest bid published by then: max(first stop, high - distance) once the
// high reached the activation. accts holds each account's plan, entry and
// first stop; changes are replayed up to each time.
func behindAt(accts []bkAccount, changes []bkChange, hist []bkQuote, at []time.Time, ticks func(events.Decimal) int64) []bkBehind {
	stop := make([]int64, len(accts))
	live := make([]bool, len(accts))
	for i, a := range accts {
		stop[i], live[i] = a.stop0, a.entry != 0
	}
	out := make([]bkBehind, 0, len(at))
	c, q := 0, 0
	var high int64
	var stack *evmark.Stack
	for _, t := range at {
		for ; c < len(changes) && !changes[c].at.After(t); c++ {
			switch ch := changes[c]; ch.kind {
			case bkMarked:
				stack = ch.stack
			case bkMoved:
				stop[ch.acct] = ch.stop
			default:
				live[ch.acct] = false
			}
		}
		if stack != nil { // where the marks recorded by then put each stop
			for i, a := range accts {
				if !live[i] {
					continue
				}
				if st, ok := bkStopLeg(evacct.Derive(a.bracket, stack)); ok {
					stop[i] = max(stop[i], ticks(*st.Price))
				}
			}
		}
		for ; q < len(hist) && !hist[q].at.After(t); q++ {
			high = max(high, hist[q].bid)
		}
		var b bkBehind
		var gaps []int64
		sum := int64(0)
		for i, a := range accts {
			if !live[i] {
				continue
			}
			b.Live++
			gap := max(a.ruleLevel(high)-stop[i], 0)
			if gap > 0 {
				b.Behind++
			}
			sum += gap
			gaps = append(gaps, gap)
		}
		if b.Live > 0 {
			slices.Sort(gaps)
			b.Mean = float64(sum) / float64(b.Live)
			b.P99, b.Max = gaps[int(0.99*float64(len(gaps)-1)+0.5)], gaps[len(gaps)-1]
		}
		out = append(out, b)
	}
	return out
}

// bracketRows adds the phase's figures to t: the baseline column is the
// idle window, the engine column the stream.
func bracketRows(t *table, r bkResult, o opts) {
	rate := float64(r.Quotes) / r.Window.Seconds()
	t.add(row{fmt.Sprintf("setup: %d accounts opened, each with a bracketed market entry (s)", r.Accounts), "-", f1(r.Setup.Seconds()),
		"-", "-", fmt.Sprintf("heap %.0f MB, %d goroutines", r.HeapMB, r.Goroutines)})
	t.add(row{"quotes offered (/s)", "-", fmt.Sprintf("%s (%d in %s)", f1(rate), r.Quotes, r.Window.Round(time.Millisecond)), "-", fmt.Sprintf("%.0f", o.brRate), "-"})
	t.add(row{"Publish of one quote, p50 / p99 / max (ms)", "-", fmt.Sprintf("%s / %s / %s", f2(float64(r.Publish.P50)/1e6), f2(float64(r.Publish.P99)/1e6), f2(float64(r.Publish.Max)/1e6)), "-", "-", "-"})
	t.add(row{"commits of bracketed accounts and marks per quote", "-", fmt.Sprintf("%s (%d; %d in the log with the ordinary orders)", f1(float64(r.Commits)/float64(r.Quotes)), r.Commits, r.LogCommits), "-", "stated", "-"})
	t.add(row{"marks recorded (/s): each moves every stop its touch reaches", "-", fmt.Sprintf("%s (%d with the drain)", f0(float64(r.Marks)/r.Window.Seconds()), r.Marks), "-", "-", "-"})
	t.add(row{"stop moves recorded in accounts (/s)", "-", fmt.Sprintf("%s (%d in the window, %d with the drain)", f0(float64(r.Moves)/r.Window.Seconds()), r.Moves, r.MovesAll), "-", "-", "-"})
	t.add(row{fmt.Sprintf("trigger-to-fill p50 / p99 / max (ms), %d stops filled at a recorded level (%d more at a level their wake's walk of the quotes moved them to: the next row)", r.TriggerToFill.N, r.Walked), "-",
		fmt.Sprintf("%s / %s / %s", f1(float64(r.TriggerToFill.P50)/1e6), f1(float64(r.TriggerToFill.P99)/1e6), f1(float64(r.TriggerToFill.Max)/1e6)), "-", "stated", untimed(r.Untimed)})
	t.add(row{fmt.Sprintf("the rule's trigger to fill p50 / p99 / max (ms), %d stops filled", r.RuleToFill.N), "-",
		fmt.Sprintf("%s / %s / %s", f1(float64(r.RuleToFill.P50)/1e6), f1(float64(r.RuleToFill.P99)/1e6), f1(float64(r.RuleToFill.Max)/1e6)), "-", "-", untimed(r.RuleNone)})
	t.add(row{"stops whose rule's level a quote of the stream crossed / stops filled by the drain's end", "-", fmt.Sprintf("%d / %d", r.RuleCrossed, r.Fills), "-", "-", "-"})
	t.add(row{"filled stops under the rule's level at its crossing: how many / p50 / p99 / max (ticks)", "-", underRule(r.RuleUnder), "-", "-", "-"})
	for k, name := range []string{"first", "middle", "last (+drain)"} {
		l := r.WakeLag[k]
		t.add(row{fmt.Sprintf("waking quote to stop move (with marks: to its mark), %s third: p50 / p99 / max (ms), %d moves or marks", name, l.N), "-",
			fmt.Sprintf("%s / %s / %s", f0(float64(l.P50)/1e6), f0(float64(l.P99)/1e6), f0(float64(l.Max)/1e6)), "-", "-", "-"})
	}
	grow := "-"
	if first, last := r.WakeLag[0].P99, r.WakeLag[2].P99; first > 0 {
		grow = f2(float64(last)/float64(first)) + "x"
	}
	t.add(row{"waking quote to stop move p99, last third / first third", "-", grow, "-", "no growing lag", "-"})
	for k, name := range []string{"end of the first third", "end of the middle third", "end of the stream", "after the drain"} {
		t.add(row{"stops behind the trailing rule, " + name, "-", r.Behind[k].String(), "-", "-", "-"})
	}
	for k, name := range []string{"first", "middle", "last"} {
		th := r.Thirds[k]
		t.add(row{fmt.Sprintf("%s third: commits of bracketed accounts (/s); CPU of this process / of other processes (cores)", name), "-",
			fmt.Sprintf("%s; %s / %s", f0(float64(th.Commits)/th.to.Sub(th.from).Seconds()), f2(th.CPU), f2(th.Others)), "-", "-", "-"})
	}
	t.add(row{"drain: last quote to the last commit of a bracketed account (ms)", "-", f0(float64(r.Drain) / 1e6), "-", "-", "-"})
	hr := float64(r.LoadHTTP.P99) / float64(max(r.IdleHTTP.P99, 1))
	t.add(row{fmt.Sprintf("ordinary HTTP market orders at %.0f/s, p99 (ms)", o.brOrders), f2(float64(r.IdleHTTP.P99) / 1e6), f2(float64(r.LoadHTTP.P99) / 1e6), f2(hr) + "x", "<= 1.5x", passIf(hr <= 1.5 && r.LoadHTTP.Errors == 0)})
	t.add(row{"ordinary HTTP market orders, p50 (ms)", f2(float64(r.IdleHTTP.P50) / 1e6), f2(float64(r.LoadHTTP.P50) / 1e6), f2(float64(r.LoadHTTP.P50)/float64(max(r.IdleHTTP.P50, 1))) + "x", "-", "-"})
	t.add(row{fmt.Sprintf("ordinary orders through the command path at %.0f/s, p50 / p99 (ms)", o.brOrders), f2(float64(r.IdleCmd.P50)/1e6) + " / " + f2(float64(r.IdleCmd.P99)/1e6),
		f2(float64(r.LoadCmd.P50)/1e6) + " / " + f2(float64(r.LoadCmd.P99)/1e6), f2(float64(r.LoadCmd.P99)/float64(max(r.IdleCmd.P99, 1))) + "x (p99)", "-", "-"})
	t.add(row{"process CPU (cores busy)", f2(r.IdleCPU), f2(r.LoadCPU), "-", "-", fmt.Sprintf("follower %s", r.FollowerBusy.Round(time.Millisecond))})
	t.add(row{"CPU of other processes on the machine (cores)", f2(r.IdleOthers), f2((r.Thirds[0].Others + r.Thirds[1].Others + r.Thirds[2].Others) / 3), "-", "-", "-"})
}

func untimed(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d fills with no crossing quote", n)
}

// underRule states the ticks filled stops sat under their rule's level
// (sorted): how many sat under it at all, and the p50, p99 and max.
func underRule(ticks []int64) string {
	if len(ticks) == 0 {
		return "-"
	}
	n := 0
	for _, t := range ticks {
		if t > 0 {
			n++
		}
	}
	at := func(p int) int64 { return ticks[(p*(len(ticks)-1)+50)/100] }
	return fmt.Sprintf("%d of %d / %d / %d / %d", n, len(ticks), at(50), at(99), ticks[len(ticks)-1])
}

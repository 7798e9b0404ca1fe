package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/events"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// futuresOpts are the futures phase's settings.
type futuresOpts struct {
	accounts int // linked logins, one account each; 0: -workers
	paced    int // orders a second over all clients in the paced window; 0 skips it
}

// futuresFlags declares the futures phase's flags on fs.
func futuresFlags(fs *flag.FlagSet, o *futuresOpts) {
	fs.IntVar(&o.accounts, "futures-accounts", 0, "futures: Tradovate logins linked, one account each (0: -workers; the first -workers place the orders)")
	fs.IntVar(&o.paced, "futures-paced-rate", 128, "futures: orders a second over all clients in the paced window, well below saturation (0 skips it)")
}

// tvTimer serves the Tradovate simulator through its Go handler and
// records when each order placement (by its clOrdId) entered and left the
// simulator, and counts 429 answers, so the bench subtracts the
// simulator's own time from the engine's answer. As for the Binance
// simulator (simTimer), the placement's time is the provider's side of the
// exchange: from its request's first byte read off the connection to its
// answer's last byte written. The engine may answer
// before the placement's REST answer is back (the user-data socket can
// report the order first): only the simulator's time inside the answer
// is subtracted.
type tvTimer struct {
	sim     *tradovatesim.Sim
	mu      sync.Mutex
	spans   map[string]*simSpan // clOrdId -> its time in the simulator
	limited atomic.Int64        // answers 429
}

// simSpan is one request's time inside the simulator; end is set before
// done closes.
type simSpan struct {
	start, end time.Time
	done       chan struct{}
}

func (t *tvTimer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sp *simSpan
	if r.Method == http.MethodPost && r.URL.Path == "/v1/order/placeorder" && r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var p struct {
			ClOrdID string `json:"clOrdId"`
		}
		if json.Unmarshal(b, &p) == nil && p.ClOrdID != "" {
			sp = &simSpan{done: make(chan struct{})}
			t.mu.Lock()
			t.spans[p.ClOrdID] = sp
			t.mu.Unlock()
		}
	}
	sw := &statusWriter{ResponseWriter: w, status: 200}
	start := time.Now()
	t.sim.ServeHTTP(sw, r)
	if sp != nil {
		sw.Flush() // the answer's last byte written before the clock stops
		if c, ok := r.Context().Value(wireKey{}).(*wireConn); ok && !c.arrival().IsZero() {
			start = c.arrival()
		}
		sp.start, sp.end = start, time.Now()
		close(sp.done)
	}
	if sw.status == http.StatusTooManyRequests {
		t.limited.Add(1)
	}
}

// serviceOf is the simulator's service time of the placement of cid and
// the part of it inside the engine's answer [from, to]; early reports an
// answer that came before the simulator's REST answer.
func (t *tvTimer) serviceOf(cid string, from, to time.Time) (service, inside time.Duration, early bool, err error) {
	t.mu.Lock()
	sp, ok := t.spans[cid]
	delete(t.spans, cid)
	t.mu.Unlock()
	if !ok {
		return 0, 0, false, fmt.Errorf("order %s: the simulator saw no placement", cid)
	}
	select {
	case <-sp.done:
	case <-time.After(10 * time.Second):
		return 0, 0, false, fmt.Errorf("order %s: the simulator's placement did not end within 10 s", cid)
	}
	end := sp.end
	if to.Before(end) {
		end = to
	}
	inside = max(0, end.Sub(later(sp.start, from)))
	return sp.end.Sub(sp.start), inside, to.Before(sp.end), nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// futWindow is one measured window of futures orders: the engine's
// answer, the simulator's service time of the same orders and their
// difference, the engine-added time.
type futWindow struct {
	answer, sim, added sample
	early              int // answers before the simulator's REST answer (the socket reported the order first)
}

// futOrder is one order's figures: the engine's answer time, the
// simulator's service time of its placement and the engine-added time
// (the answer less the simulator's time inside it).
type futOrder struct {
	answer, service, added time.Duration
	early                  bool
}

// futuresResult is what the futures phase measured.
type futuresResult struct {
	linked   int
	clients  int
	linkTime time.Duration
	loaded   futWindow // closed loop: every client as fast as it goes
	paced    futWindow // the same orders at a fixed total rate
	floor    sample    // two durable appends in a row, paced the same (pairFloor)
	// the floor with both HTTP hops and two appends, and one (hopFloor)
	hopFloor2, hopFloor1 sample
	limited              int64
}

// benchPassword is the simulator logins' password: each login has its own.
func benchPassword(i int) string { return fmt.Sprintf("bench-futures-pw-%06d", i) }

// runFutures links o.futures.accounts Tradovate logins (one demo account
// each, each signed in with its own login name and password) on one
// in-process engine against the in-process simulator (sim/tradovate) on
// 127.0.0.1, configured by the ENGINE_TRADOVATE_* settings, and measures
// market orders of one ES contract over HTTP from -workers clients, each on
// its own account: first a closed loop, then paced at -futures-paced-rate.
func runFutures(ctx context.Context, o opts) (futuresResult, error) {
	var res futuresResult
	n := o.futures.accounts
	if n <= 0 {
		n = o.workers
	}
	const cid, sec = "8", "bench-app-secret-never-logged"
	sim, err := tradovatesim.New(tradovatesim.Options{CID: cid, Sec: sec})
	if err != nil {
		return res, err
	}
	timer := &tvTimer{sim: sim, spans: map[string]*simSpan{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := serveWire(ln, timer) // the placement's time from its first byte read (provider.go)
	defer sim.Close()
	defer srv.Close()
	sim.SetBaseURL("http://" + ln.Addr().String())
	for i := range n {
		l := tradovatesim.Login{Name: fmt.Sprintf("bench-futures-%06d", i), Password: benchPassword(i), Kind: "demo",
			Accounts: []tradovatesim.AccountSpec{{Name: fmt.Sprintf("DEMOB%06d", i)}}}
		if _, _, err := sim.AddLogin(l); err != nil {
			return res, err
		}
	}

	dir, err := os.MkdirTemp(o.tmp, "bench-futures-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	settings := map[string]string{"ENGINE_TRADOVATE_ENV": "demo", "ENGINE_TRADOVATE_DEMO_REST_URL": sim.URL(),
		"ENGINE_TRADOVATE_DEMO_WS_URL": sim.WSURL(), "ENGINE_TRADOVATE_DEMO_MD_URL": sim.MDURL(),
		"ENGINE_TRADOVATE_CID": cid, "ENGINE_TRADOVATE_SEC": sec, "ENGINE_PROVIDER_ALLOW_PRIVATE": "1"}
	cfg, err := app.ParseConfig(nil, func(k string) string { return settings[k] }, io.Discard)
	if err != nil {
		return res, err
	}
	cfg.DataDir, cfg.Sync, cfg.DemoAccounts, cfg.RateLimit, cfg.StreamsPerKey = dir, o.sync, 1, 0, 100000
	cfg.Listen = "127.0.0.1:0"
	a, err := app.Start(ctx, cfg, app.Options{})
	if err != nil {
		return res, err
	}
	defer a.Close()
	cred, err := os.ReadFile(dir + "/dev-credentials.json")
	if err != nil {
		return res, err
	}
	var c struct {
		TradingKey string `json:"tradingKey"`
	}
	if err := json.Unmarshal(cred, &c); err != nil {
		return res, err
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	hs := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(hl)
	defer hs.Close()
	url := "http://" + hl.Addr().String()

	// Link every login (8 at a time), as the first-party route does: one
	// sign-in with the login's password, its one account linked.
	ids := make([]string, n)
	t0 := time.Now()
	var wg sync.WaitGroup
	var linkErr atomic.Value
	var done atomic.Int64
	sem := make(chan struct{}, 8)
	for i := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			linked, err := a.Engine.LinkLogin(ctx, engine.LoginLinkRequest{Provider: "tradovate", Login: fmt.Sprintf("bench-futures-%06d", i),
				Password: seal.NewSecret([]byte(benchPassword(i))), TenantID: app.DemoTenant, Scope: "session\x00" + app.DemoTenant,
				Principal: events.Principal{TenantID: app.DemoTenant, KeyID: "bench"}})
			switch {
			case err != nil:
				linkErr.Store(fmt.Errorf("link login %d: %w", i, err))
			case len(linked.AccountIDs) != 1:
				linkErr.Store(fmt.Errorf("link login %d: %d accounts linked, want 1", i, len(linked.AccountIDs)))
			default:
				ids[i] = linked.AccountIDs[0]
			}
			if k := done.Add(1); k%16 == 0 && int(k) < n {
				progress("futures: %d of %d logins linked in %s", k, n, time.Since(t0).Round(time.Millisecond))
			}
		}(i)
	}
	wg.Wait()
	res.linkTime = time.Since(t0)
	if err, _ := linkErr.Load().(error); err != nil {
		return res, err
	}
	res.linked = n
	// Every account listed, and every session's user-data socket synced.
	var numbers map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if numbers, err = accountNumbers(url, c.TradingKey); err != nil {
			return res, err
		}
		listed := 0
		for _, id := range ids {
			if numbers[id] != "" {
				listed++
			}
		}
		if listed == n && sim.RequestCount("user/syncrequest") >= n {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d accounts listed and %d user/syncrequest within 30 s of linking", listed, n, sim.RequestCount("user/syncrequest"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	progress("futures: %d logins linked in %s", n, res.linkTime.Round(time.Millisecond))

	res.clients = min(o.workers, n)
	es := sim.FrontContract("ES")
	cl := httpClient(res.clients)
	place := func(ctx context.Context, w int, cid, side string) (futOrder, error) {
		body := fmt.Sprintf(`{"clientOrderId":%q,"instrument":%q,"side":%q,"orderType":"market","quantity":"1"}`, cid, es, side)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/trading/order?broker=tradovate&account="+numbers[ids[w]], strings.NewReader(body))
		if err != nil {
			return futOrder{}, err
		}
		req.Header.Set("Authorization", "Bearer "+c.TradingKey)
		req.Header.Set("Content-Type", "application/json")
		from := time.Now()
		resp, err := cl.Do(req)
		if err != nil {
			return futOrder{}, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		to := time.Now()
		if resp.StatusCode != http.StatusOK {
			return futOrder{}, fmt.Errorf("order %d: %.200s", resp.StatusCode, b)
		}
		svc, inside, early, err := timer.serviceOf(provider.ClientOrderID(ids[w], cid), from, to)
		if err != nil {
			return futOrder{}, err
		}
		return futOrder{answer: to.Sub(from), service: svc, added: to.Sub(from) - inside, early: early}, nil
	}
	limited := timer.limited.Load()
	k := window.Add(1)
	res.loaded = futLoad(ctx, res.clients, 0, o.warm, o.dur, func(ctx context.Context, w, i int) (futOrder, error) {
		return place(ctx, w, fmt.Sprintf("fl-%d-%d-%d", k, w, i), side(i))
	})
	if s := res.loaded.answer; s.Errors > 0 {
		return res, fmt.Errorf("orders: %d errors, first: %s", s.Errors, s.FirstErr)
	}
	progress("futures orders, %d clients: answer p50 %s p99 %s (%.0f/s, n=%d, %s CPU/order); simulator p50 %s; engine-added p50 %s p99 %s; %d answered before the simulator's REST answer",
		res.clients, ms(res.loaded.answer.P50), ms(res.loaded.answer.P99), res.loaded.answer.Rate, res.loaded.answer.N, ms(res.loaded.answer.CPU), ms(res.loaded.sim.P50),
		ms(res.loaded.added.P50), ms(res.loaded.added.P99), res.loaded.early)
	if o.futures.paced > 0 {
		every := time.Duration(int64(res.clients) * int64(time.Second) / int64(o.futures.paced))
		k := window.Add(1)
		res.paced = futLoad(ctx, res.clients, every, o.warm, o.dur, func(ctx context.Context, w, i int) (futOrder, error) {
			return place(ctx, w, fmt.Sprintf("fp-%d-%d-%d", k, w, i), side(i))
		})
		if s := res.paced.answer; s.Errors > 0 {
			return res, fmt.Errorf("paced orders: %d errors, first: %s", s.Errors, s.FirstErr)
		}
		progress("futures orders paced at %d/s: answer p50 %s p99 %s (%.0f/s, n=%d, %s CPU/order); simulator p50 %s; engine-added p50 %s p99 %s; %d answered before the simulator's REST answer",
			o.futures.paced, ms(res.paced.answer.P50), ms(res.paced.answer.P99), res.paced.answer.Rate, res.paced.answer.N, ms(res.paced.answer.CPU), ms(res.paced.sim.P50),
			ms(res.paced.added.P50), ms(res.paced.added.P99), res.paced.early)
		fo := o
		fo.workers = res.clients
		var err error
		if res.floor, err = pairFloor(ctx, fo, o.futures.paced, make([]byte, 625)); err != nil {
			return res, err
		}
		progress("futures orders paced: their floor, two durable appends in a row at the same pace: p50 %s p99 %s (n=%d)", ms(res.floor.P50), ms(res.floor.P99), res.floor.N)
		if res.hopFloor2, res.hopFloor1, err = hopFloors(ctx, fo, o.futures.paced, "futures orders"); err != nil {
			return res, err
		}
	}
	res.limited = timer.limited.Load() - limited
	return res, nil
}

// futLoad runs place on workers goroutines for warm+dur: in a closed loop
// when every is 0, else each worker places one order every `every`, the
// workers' slots spread evenly over it (a fixed total rate, whatever the
// answers take, as long as each answer comes within its slot). Orders that
// start after the warm-up and finish inside the window count. The
// answers' sample carries the process's CPU per order in the window (the
// engine, the simulator and the clients together).
func futLoad(ctx context.Context, workers int, every, warm, dur time.Duration, place func(ctx context.Context, w, i int) (futOrder, error)) futWindow {
	t0 := time.Now()
	from := t0.Add(warm)
	end := from.Add(dur)
	got := make([][]futOrder, workers)
	errs, firsts := make([]int, workers), make([]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if every > 0 {
					at := t0.Add(time.Duration(i)*every + time.Duration(w)*every/time.Duration(workers))
					if !at.Before(end) {
						return
					}
					select {
					case <-time.After(time.Until(at)):
					case <-ctx.Done():
						return
					}
				}
				start := time.Now()
				if !start.Before(end) {
					return
				}
				o, err := place(ctx, w, i)
				if start.Before(from) || time.Now().After(end) {
					continue
				}
				if err != nil {
					if errs[w] == 0 {
						firsts[w] = err.Error()
					}
					errs[w]++
					continue
				}
				got[w] = append(got[w], o)
			}
		}()
	}
	time.Sleep(time.Until(from))
	cpu0 := cpuTime()
	time.Sleep(time.Until(end))
	cpu1 := cpuTime()
	wg.Wait()
	var out futWindow
	var ans, svc, added []time.Duration
	for w := range workers {
		for _, o := range got[w] {
			ans, svc, added = append(ans, o.answer), append(svc, o.service), append(added, o.added)
			if o.early {
				out.early++
			}
		}
		out.answer.Errors += errs[w]
		if errs[w] > 0 && out.answer.FirstErr == "" {
			out.answer.FirstErr = firsts[w]
		}
	}
	out.answer.Window, out.sim.Window, out.added.Window = dur, dur, dur
	summarize(&out.answer, ans)
	summarize(&out.sim, svc)
	summarize(&out.added, added)
	if out.answer.N > 0 {
		out.answer.CPU = (cpu1 - cpu0) / time.Duration(out.answer.N)
	}
	return out
}

// futuresPhase runs the futures phase and adds its rows to t.
func futuresPhase(ctx context.Context, o opts, t *table) error {
	r, err := profiled(o, "futures", func() (futuresResult, error) { return runFutures(ctx, o) })
	if err != nil {
		return fmt.Errorf("futures: %w", err)
	}
	futuresRows(t, r, o)
	return nil
}

// futuresRows adds the futures phase's figures to t.
func futuresRows(t *table, r futuresResult, o opts) {
	goal := func(w futWindow) string {
		return passIf(w.added.P50 <= time.Millisecond && w.added.P99 <= 5*time.Millisecond)
	}
	t.add(row{fmt.Sprintf("futures order (Tradovate, %d logins linked), engine-added p50 / p99 (ms; answer minus the simulator's time inside it, %d clients closed loop)", r.linked, r.clients),
		"", fmt.Sprintf("%s / %s", ms(r.loaded.added.P50), ms(r.loaded.added.P99)), "", "<= 1 / <= 5 ms", goal(r.loaded)})
	t.add(row{"futures order answer p50 / p99, orders/s, process CPU per order (simulator p50; answers before the simulator's REST answer)", "",
		fmt.Sprintf("%s / %s, %.0f/s, %s (%s; %d of %d)", ms(r.loaded.answer.P50), ms(r.loaded.answer.P99), r.loaded.answer.Rate, ms(r.loaded.answer.CPU),
			ms(r.loaded.sim.P50), r.loaded.early, r.loaded.answer.N), "", "", ""})
	if r.paced.answer.N > 0 {
		t.add(row{fmt.Sprintf("futures order paced at %d/s over %d clients, engine-added p50 / p99 (answer p50 / p99, simulator p50, CPU per order; baseline: two durable appends in a row, paced the same, same run)", o.futures.paced, r.clients),
			fmt.Sprintf("%s / %s", ms(r.floor.P50), ms(r.floor.P99)),
			fmt.Sprintf("%s / %s (%s / %s, %s, %s)", ms(r.paced.added.P50), ms(r.paced.added.P99), ms(r.paced.answer.P50), ms(r.paced.answer.P99), ms(r.paced.sim.P50), ms(r.paced.answer.CPU)),
			f2(float64(r.paced.added.P50)/max(1, float64(r.floor.P50))) + "x", "<= 1 / <= 5 ms", goal(r.paced)})
		hopRows(t, r.paced.added.P50, r.hopFloor2, r.hopFloor1)
	}
	t.add(row{fmt.Sprintf("linking %d Tradovate logins (8 at a time), answers 429 during the orders", r.linked), "",
		fmt.Sprintf("%s, %d", r.linkTime.Round(time.Millisecond), r.limited), "", "", ""})
}

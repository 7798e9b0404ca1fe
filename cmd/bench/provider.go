package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/events"
	"github.com/svc/engine/sim/binance"
)

// simTimer serves the Binance simulator through its Go handler and records
// each order placement's service time (by the exchange's client order id) and
// every answer's status, so the bench subtracts the simulator's own time from
// the engine's answer and counts 429s and 418s. The service time is the
// exchange's side of the exchange: from the request's first byte read off
// the connection to its answer's last byte written (the simulator's HTTP
// server reading, routing and writing, as a real exchange's front does),
// besides the time inside the simulator's handler alone.
type simTimer struct {
	sim     *binance.Sim
	mu      sync.Mutex
	service map[string]time.Duration // newClientOrderId -> first byte in to last byte out
	handler map[string]time.Duration // newClientOrderId -> time inside the simulator's handler
	limited atomic.Int64             // answers 429 or 418
}

// wireConn notes when each request's first byte arrived: the first read
// that returns data after an answer was written (or on a new connection).
type wireConn struct {
	net.Conn
	mu      sync.Mutex
	idle    bool // the last operation was a write, or none yet
	arrived time.Time
}

func (c *wireConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		if c.idle {
			c.arrived, c.idle = time.Now(), false
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *wireConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.mu.Lock()
	c.idle = true
	c.mu.Unlock()
	return n, err
}

func (c *wireConn) arrival() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arrived
}

// wireListener wraps each accepted connection in a wireConn.
type wireListener struct{ net.Listener }

func (l wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c, idle: true}, nil
}

type wireKey struct{}

// serve serves h through a listener whose requests carry their arrival
// (wireConn) in their context.
func serveWire(ln net.Listener, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, wireKey{}, c) }}
	go srv.Serve(wireListener{ln})
	return srv
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(c int) { w.status = c; w.ResponseWriter.WriteHeader(c) }

// Hijack lets the simulator's websocket upgrade through the wrapper.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *simTimer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var cid string
	if r.Method == http.MethodPost && r.URL.Path == "/fapi/v1/order" {
		cid = r.URL.Query().Get("newClientOrderId")
		if cid == "" && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			for _, kv := range strings.Split(string(b), "&") {
				if k, v, ok := strings.Cut(kv, "="); ok && k == "newClientOrderId" {
					cid = v
				}
			}
		}
	}
	sw := &statusWriter{ResponseWriter: w, status: 200}
	start := time.Now()
	t.sim.ServeHTTP(sw, r)
	inside := time.Since(start)
	if cid != "" {
		sw.Flush() // the answer's last byte written before the clock stops
		wire := inside
		if c, ok := r.Context().Value(wireKey{}).(*wireConn); ok && !c.arrival().IsZero() {
			wire = time.Since(c.arrival())
		}
		t.mu.Lock()
		t.service[cid], t.handler[cid] = wire, inside
		t.mu.Unlock()
	}
	if sw.status == 429 || sw.status == 418 {
		t.limited.Add(1)
	}
}

func (t *simTimer) serviceOf(cid string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.service[cid]
	return d, ok
}

// handlerOf is the time of cid's placement inside the simulator's handler.
func (t *simTimer) handlerOf(cid string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handler[cid]
}

// providerResult is what the provider phase measured.
type providerResult struct {
	added, answer, simTime sample
	// paced: the same orders at -provider-paced-rate, below saturation.
	paced, pacedAnswer, pacedSim sample
	// the same less only the time inside the simulator's handler (its
	// HTTP server's reading and writing counted as the engine's)
	addedHandler, pacedHandler sample
	// pacedFloor: two durable appends in a row on a log of their own,
	// paced the same (pairFloor): the design's floor of the paced order
	pacedFloor sample
	// hopFloor2, hopFloor1: the floor with the order's two HTTP hops
	// (hopFloor), with this design's two appends and with one (any design
	// that commits the intent before sending), paced the same
	hopFloor2, hopFloor1 sample
	commitsPerOrder      float64 // log commits per order in the paced window (intent, outcome, observations)
	event                sample
	linked               int
	linkTime             time.Duration
	heapPerAccount       float64 // bytes
	goroutinesPerAccount float64
	resync               time.Duration
	resynced             bool
	limited              int64
}

func simKeyOf(i int) (string, string) {
	return fmt.Sprintf("benchKEY%06dxxxxxxxxxxxxxxxxxxxxxxxx", i), fmt.Sprintf("benchSECRET%06dyyyyyyyyyyyyyyyyyyyy", i)
}

// providerPhase: linked Binance accounts on one in-process engine against the
// in-process simulator on 127.0.0.1.
func providerPhase(ctx context.Context, o opts) (providerResult, error) {
	var res providerResult
	sim := binance.New(binance.Options{})
	timer := &simTimer{sim: sim, service: map[string]time.Duration{}, handler: map[string]time.Duration{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := serveWire(ln, timer)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	sim.SetBaseURL(base)
	for i := 0; i < o.provAccounts; i++ {
		k, s := simKeyOf(i)
		if err := sim.AddAccount(binance.Account{APIKey: k, Secret: s}); err != nil {
			return res, err
		}
	}

	dir, err := os.MkdirTemp(o.tmp, "bench-provider-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	cfg, err := app.ParseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		return res, err
	}
	cfg.DataDir, cfg.Sync, cfg.DemoAccounts, cfg.RateLimit, cfg.StreamsPerKey = dir, o.sync, 1, 0, 100000
	cfg.Listen = "127.0.0.1:0"
	cfg.Providers.BinanceREST, cfg.Providers.BinanceWS, cfg.Providers.BinanceSpot = base, sim.WSURL(), base
	cfg.Providers.AllowPrivate = true
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	a, err := app.Start(ctx, cfg, app.Options{})
	if err != nil {
		return res, err
	}
	defer a.Close()
	svc := &service{App: a}
	cred, err := os.ReadFile(dir + "/dev-credentials.json")
	if err != nil {
		return res, err
	}
	var c struct {
		TradingKey string `json:"tradingKey"`
	}
	_ = json.Unmarshal(cred, &c)
	svc.Key = c.TradingKey
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	hs := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(hl)
	defer hs.Close()
	url := "http://" + hl.Addr().String()

	// Link every account (8 at a time) and read the heap before and after.
	runtime.GC()
	var mid runtime.MemStats
	runtime.ReadMemStats(&mid)
	g0 := runtime.NumGoroutine()
	ids := make([]string, o.provAccounts)
	t0 := time.Now()
	var wg sync.WaitGroup
	var linkErr atomic.Value
	sem := make(chan struct{}, 8)
	for i := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			k, s := simKeyOf(i)
			ids[i] = fmt.Sprintf("acct_BENCHPROV%010d", i)
			_, err := a.Engine.LinkProvider(ctx, engine.LinkRequest{AccountID: ids[i], Provider: "binance-futures", APIKey: k,
				Secret: seal.NewSecret([]byte(s)), TenantID: app.DemoTenant, Principal: events.Principal{TenantID: app.DemoTenant, KeyID: "bench"}})
			if err != nil {
				linkErr.Store(fmt.Errorf("link %d: %w", i, err))
			}
		}(i)
	}
	wg.Wait()
	res.linkTime = time.Since(t0)
	if err, _ := linkErr.Load().(error); err != nil {
		return res, err
	}
	res.linked = len(ids)
	time.Sleep(2 * time.Second) // streams open
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	res.heapPerAccount = float64(int64(after.HeapInuse)-int64(mid.HeapInuse)) / float64(len(ids))
	res.goroutinesPerAccount = float64(runtime.NumGoroutine()-g0) / float64(len(ids))
	progress("provider: %d accounts linked in %s, %.0f KiB heap and %.1f goroutines each", len(ids), res.linkTime.Round(time.Millisecond),
		res.heapPerAccount/1024, res.goroutinesPerAccount)

	numbers, err := accountNumbers(url, svc.Key)
	if err != nil {
		return res, err
	}

	// Engine-added latency per order at o.workers clients, one account each:
	// first as fast as they go (closed loop: queueing for the two cores
	// included), then paced below saturation.
	cl := httpClient(o.workers)
	// place places one market order on the worker's account and answers the
	// engine's answer time and the simulator's service time of it.
	place := func(ctx context.Context, w int, cid string, side string) (took, st, inside time.Duration, err error) {
		body := fmt.Sprintf(`{"clientOrderId":%q,"instrument":"BTCUSDT","side":%q,"orderType":"market","quantity":"0.002"}`, cid, side)
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/api/trading/order?broker=binance&account="+numbers[ids[w]], strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+svc.Key)
		req.Header.Set("Content-Type", "application/json")
		t := time.Now()
		resp, err := cl.Do(req)
		if err != nil {
			return 0, 0, 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took = time.Since(t)
		if resp.StatusCode != 200 {
			return 0, 0, 0, fmt.Errorf("order %d: %.200s", resp.StatusCode, b)
		}
		// The user stream may report the order before the REST answer, and
		// the engine answers on whichever comes first: wait for the
		// simulator's handler to return, and count no engine time below 0.
		st, ok := timer.serviceOf(provider.ClientOrderID(ids[w], cid))
		for wait := time.Now().Add(time.Second); !ok && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
			st, ok = timer.serviceOf(provider.ClientOrderID(ids[w], cid))
		}
		if !ok {
			return 0, 0, 0, fmt.Errorf("order %s: the simulator saw no placement", cid)
		}
		return took, min(st, took), min(timer.handlerOf(provider.ClientOrderID(ids[w], cid)), took), nil
	}
	var mu sync.Mutex
	var added, answers, simTimes, addedHandler []time.Duration
	keep := func(took, st, inside time.Duration) {
		mu.Lock()
		added, answers, simTimes = append(added, took-st), append(answers, took), append(simTimes, st)
		addedHandler = append(addedHandler, took-inside)
		mu.Unlock()
	}
	if o.provClosed {
		n := window.Add(1)
		s := drive(ctx, o.workers, o.warm, o.dur, func(ctx context.Context, w, i int) error {
			took, st, inside, err := place(ctx, w, fmt.Sprintf("pb-%d-%d-%d", n, w, i), side(i))
			if err == nil {
				keep(took, st, inside)
			}
			return err
		})
		res.answer, res.added, res.simTime = s, s, s
		summarize(&res.answer, answers)
		summarize(&res.added, added)
		summarize(&res.simTime, simTimes)
		summarize(&res.addedHandler, addedHandler)
		progress("provider orders: answer %s; simulator %s; engine-added p50 %s p99 %s (less the handler's time alone: %s / %s)", res.answer, ms(res.simTime.P50),
			ms(res.added.P50), ms(res.added.P99), ms(res.addedHandler.P50), ms(res.addedHandler.P99))
	}

	if o.provPaced > 0 {
		// Each client places at rate/workers a second on its own schedule,
		// the clients' slots spread evenly, so the engine meets the orders
		// one by one: its own time without queueing for the two cores.
		added, answers, simTimes, addedHandler = nil, nil, nil, nil
		seq0, _ := a.Log.LastSeq(ctx)
		var placedN atomic.Int64
		every := time.Duration(int64(o.workers) * int64(time.Second) / int64(o.provPaced))
		t0 := time.Now()
		from, end := t0.Add(o.warm), t0.Add(o.warm+o.dur)
		n := window.Add(1)
		var errs atomic.Int64
		var first atomic.Value
		var wg sync.WaitGroup
		for w := 0; w < o.workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					at := t0.Add(time.Duration(i)*every + time.Duration(w)*every/time.Duration(o.workers))
					if !at.Before(end) || ctx.Err() != nil {
						return
					}
					time.Sleep(time.Until(at))
					took, st, inside, err := place(ctx, w, fmt.Sprintf("pp-%d-%d-%d", n, w, i), side(i))
					placedN.Add(1)
					switch {
					case err != nil:
						errs.Add(1)
						first.CompareAndSwap(nil, err.Error())
					case !at.Before(from):
						keep(took, st, inside)
					}
				}
			}()
		}
		wg.Wait()
		if e := errs.Load(); e > 0 {
			return res, fmt.Errorf("paced orders: %d errors, first: %s", e, first.Load())
		}
		time.Sleep(200 * time.Millisecond) // the last orders' stream reports
		if seq1, err := a.Log.LastSeq(ctx); err == nil && placedN.Load() > 0 {
			res.commitsPerOrder = float64(seq1-seq0) / float64(placedN.Load())
		}
		res.pacedAnswer.Window = o.dur
		summarize(&res.paced, added)
		summarize(&res.pacedAnswer, answers)
		summarize(&res.pacedSim, simTimes)
		summarize(&res.pacedHandler, addedHandler)
		progress("provider orders paced at %d/s: answer p50 %s p99 %s (n=%d, %.0f/s, %.2f commits an order); simulator p50 %s; engine-added p50 %s p99 %s (less the handler's time alone: %s / %s)",
			o.provPaced, ms(res.pacedAnswer.P50), ms(res.pacedAnswer.P99), res.pacedAnswer.N, res.pacedAnswer.Rate, res.commitsPerOrder, ms(res.pacedSim.P50), ms(res.paced.P50), ms(res.paced.P99),
			ms(res.pacedHandler.P50), ms(res.pacedHandler.P99))
		if res.pacedFloor, err = pairFloor(ctx, o, o.provPaced, make([]byte, 625)); err != nil {
			return res, err
		}
		progress("provider orders paced: their floor, two durable appends in a row at the same pace: p50 %s p99 %s (n=%d)",
			ms(res.pacedFloor.P50), ms(res.pacedFloor.P99), res.pacedFloor.N)
		if res.hopFloor2, res.hopFloor1, err = hopFloors(ctx, o, o.provPaced, "provider orders"); err != nil {
			return res, err
		}
	}

	// Provider event to SSE frame: an order placed at the exchange outside
	// the engine, until the account's stream shows the new position.
	if res.event, err = eventToFrame(ctx, sim, url, svc.Key, numbers[ids[0]], o.provEvents); err != nil {
		return res, err
	}
	progress("provider event to SSE frame: p50 %s p99 %s (n=%d)", ms(res.event.P50), ms(res.event.P99), res.event.N)

	// The simulator restarts: every stream drops and every listen key dies.
	limitedBefore := timer.limited.Load()
	keysBefore := sim.RequestCount("POST /fapi/v1/listenKey")
	readsBefore := sim.RequestCount("GET /fapi/v1/openOrders")
	t0 = time.Now()
	sim.Restart()
	deadline := t0.Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if sim.RequestCount("POST /fapi/v1/listenKey")-keysBefore >= len(ids) && sim.RequestCount("GET /fapi/v1/openOrders")-readsBefore >= len(ids) {
			res.resynced = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.resync = time.Since(t0)
	res.limited = timer.limited.Load() - limitedBefore
	progress("provider restart: %d listen keys and %d open-order reads in %s (all %v), %d answers 429/418",
		sim.RequestCount("POST /fapi/v1/listenKey")-keysBefore, sim.RequestCount("GET /fapi/v1/openOrders")-readsBefore, res.resync.Round(time.Millisecond), res.resynced, res.limited)
	return res, nil
}

// accountNumbers maps account ids to numbers from /api/account/list.
func accountNumbers(url, key string) (map[string]string, error) {
	req, _ := http.NewRequest("GET", url+"/api/account/list", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var l struct {
		Accounts []credAccount `json:"accounts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, a := range l.Accounts {
		out[a.AccountID] = a.AccountNumber
	}
	return out, nil
}

// eventToFrame places count orders at the exchange outside the engine (the
// user stream reports them) and times each until the account's SSE stream
// carries a frame with the new position.
func eventToFrame(ctx context.Context, sim *binance.Sim, url, key, number string, count int) (sample, error) {
	k, _ := simKeyOf(0)
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/account/stream?broker=binance&account="+number, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	frames := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 4<<20), 4<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "data:") {
				frames <- l
			}
		}
		close(frames)
	}()
	quantity := func(f string) string {
		var fr struct {
			Positions []struct {
				Instrument, Side, Quantity string
			} `json:"positions"`
		}
		_ = json.Unmarshal([]byte(strings.TrimPrefix(f, "data:")), &fr)
		for _, p := range fr.Positions {
			if p.Instrument == "BTCUSDT" {
				return p.Side + p.Quantity
			}
		}
		return "flat"
	}
	last := ""
	drain := func() {
		for {
			select {
			case f := <-frames:
				last = quantity(f)
			case <-time.After(300 * time.Millisecond):
				return
			}
		}
	}
	drain()
	var lats []time.Duration
	for i := 0; i < count; i++ {
		t := time.Now()
		if _, err := sim.PlaceOutside(k, map[string]string{"symbol": "BTCUSDT", "side": strings.ToUpper(side(i)), "type": "MARKET", "quantity": "0.002"}); err != nil {
			return sample{}, err
		}
		prev := last
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					return sample{}, fmt.Errorf("the stream ended")
				}
				if last = quantity(f); last != prev {
					lats = append(lats, time.Since(t))
					break wait
				}
			case <-timeout:
				return sample{}, fmt.Errorf("no frame within 5 s of the exchange's fill %d", i)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var s sample
	summarize(&s, lats)
	slices.Sort(lats)
	return s, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/engine/eventlog"
)

// The history phase (issue 46): what the engine's memory holds per order of
// history. For each account count of -history-accounts it generates a log of
// -history-orders market orders spread over that many accounts (the
// cold-start generator: the account aggregate's own Decide and Apply), has
// one preparing start bring PostgreSQL read models (a fresh schema) to the
// log's end and snapshot every account at its stop, then starts the service
// again in a fresh process (history-once) and, once it is ready, collects
// the garbage and reports the Go heap in use and the process's resident
// memory (VmRSS: the engine and its embedded nats-server, which share the
// process and its heap), the start's time to ready, a heap profile
// (inuse_space) in -history-profile (and one after the windows, -after), and a short window of market orders
// over HTTP, new ones (answer 200, filled) and repeats of a clientOrderId of
// the history (answer 409), as baselines of the order path.

type historyOpts struct {
	orders   string // comma-separated history sizes, in orders
	accounts string // comma-separated account counts
	clients  int
	latency  time.Duration
	profile  string
}

func historyFlags(fs *flag.FlagSet, o *historyOpts) {
	fs.StringVar(&o.orders, "history-orders", "1000000", "history: market orders in the log (comma-separated: one run per size and account count)")
	fs.StringVar(&o.accounts, "history-accounts", "100,1", "history: accounts the orders spread over (comma-separated)")
	fs.IntVar(&o.clients, "history-clients", 4, "history: HTTP clients of each latency window (in the engine's process, closed loop)")
	fs.DurationVar(&o.latency, "history-latency", 5*time.Second, "history: each latency window after the restart (new orders, then repeated clientOrderIds); 0 skips them")
	fs.StringVar(&o.profile, "history-profile", ".", "history: directory of the heap profiles (history-<orders>-<accounts>.pprof, inuse_space after a collection)")
}

// historyResult is what history-once prints.
type historyResult struct {
	Ready        int64  `json:"readyNanos"`   // app.Start's call to Ready()
	HeapInuse    uint64 `json:"heapInuse"`    // runtime.MemStats.HeapInuse after runtime.GC
	HeapAlloc    uint64 `json:"heapAlloc"`    // live bytes after runtime.GC
	HeapObjects  uint64 `json:"heapObjects"`  // live objects after runtime.GC
	Sys          uint64 `json:"sys"`          // runtime.MemStats.Sys
	RSS          uint64 `json:"rss"`          // VmRSS after runtime.GC
	RSSReleased  uint64 `json:"rssReleased"`  // VmRSS after debug.FreeOSMemory
	Goroutines   int    `json:"goroutines"`   // runtime.NumGoroutine
	New          sample `json:"new"`          // market orders with new clientOrderIds
	Repeat       sample `json:"repeat"`       // orders repeating a clientOrderId of the history (409)
	HeapAfter    uint64 `json:"heapAfter"`    // HeapAlloc after the windows and a collection
	RSSAfter     uint64 `json:"rssAfter"`     // VmRSS after the windows
	HistoryLast  uint64 `json:"historyLast"`  // the log's last sequence at the start
	AppliedReady uint64 `json:"appliedReady"` // the projector's applied sequence at ready
}

func historyPhase(ctx context.Context, o opts, t *table) error {
	if o.databaseURL == "" {
		return errors.New("the history phase needs -database-url (or DATABASE_URL)")
	}
	sizes, err := intList(o.history.orders)
	if err != nil {
		return fmt.Errorf("-history-orders: %w", err)
	}
	counts, err := intList(o.history.accounts)
	if err != nil {
		return fmt.Errorf("-history-accounts: %w", err)
	}
	type point struct {
		n int
		r historyResult
	}
	prev := map[int]point{} // by account count: the last size's result
	for _, n := range sizes {
		for _, a := range counts {
			r, err := historyRun(ctx, o, n, a)
			if err != nil {
				return fmt.Errorf("history %d orders over %d accounts: %w", n, a, err)
			}
			if p, ok := prev[a]; ok && n > p.n {
				// What each order more costs, the fixed part (the service's own heap) left out.
				d := float64(n - p.n)
				t.add(row{fmt.Sprintf("history %d to %d orders / %d accounts: heap and resident per order more (after FreeOSMemory)", p.n, n, a), "-",
					fmt.Sprintf("%.0f B, %.0f B", (float64(r.HeapAlloc)-float64(p.r.HeapAlloc))/d, (float64(r.RSSReleased)-float64(p.r.RSSReleased))/d), "-", "<= 100 B",
					passIf((float64(r.HeapAlloc)-float64(p.r.HeapAlloc))/d <= 100)})
			}
			prev[a] = point{n, r}
			per := func(b uint64) string { return fmt.Sprintf("%.0f B", float64(b)/float64(n)) }
			mb := func(b uint64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }
			name := fmt.Sprintf("history %d orders / %d accounts", n, a)
			t.add(row{name + ": heap in use after GC (per order)", mb(r.HeapAlloc), per(r.HeapAlloc), "-", "<= 100 B", passIf(float64(r.HeapAlloc)/float64(n) <= 100)})
			t.add(row{name + ": resident (per order; after FreeOSMemory)", mb(r.RSS), per(r.RSS) + " (" + per(r.RSSReleased) + ")", "-", "<= 100 B", passIf(float64(r.RSSReleased)/float64(n) <= 100)})
			t.add(row{name + ": restart to ready (s)", "-", f2(time.Duration(r.Ready).Seconds()), "-", "<= 5 s", passIf(time.Duration(r.Ready) <= 5*time.Second)})
			if r.New.N > 0 || r.Repeat.N > 0 {
				t.add(row{name + ": HTTP market order p50 / p99 (new clientOrderId)", "-", ms(r.New.P50) + " / " + ms(r.New.P99), "-", "-", "-"})
				t.add(row{name + ": HTTP repeated clientOrderId (409) p50 / p99 (baseline: new)", ms(r.New.P99), ms(r.Repeat.P50) + " / " + ms(r.Repeat.P99),
					f2(float64(r.Repeat.P99)/float64(max(r.New.P99, 1))) + "x", "<= 2x", passIf(r.Repeat.P99 <= 2*r.New.P99)})
			}
		}
	}
	return nil
}

// historyRun generates one log of orders market orders over accounts
// accounts, prepares it (read models in PostgreSQL, snapshots) and measures
// a restart on it.
func historyRun(ctx context.Context, o opts, orders, accounts int) (historyResult, error) {
	var r historyResult
	if orders < accounts || accounts < 1 {
		return r, fmt.Errorf("%d orders over %d accounts", orders, accounts)
	}
	dir, err := os.MkdirTemp(o.tmp, "bench-history-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	t := time.Now()
	per := orders / accounts
	last, err := generate(ctx, dir, accounts*(per+1), accounts) // each account's Opened, then its orders
	if err != nil {
		return r, fmt.Errorf("generate: %w", err)
	}
	progress("history: generated %d commits (%d orders over %d accounts) in %s", last, per*accounts, accounts, time.Since(t).Round(time.Millisecond))
	generated := time.Now()
	dbURL, drop, err := pgSchema(ctx, o.databaseURL)
	if err != nil {
		return r, fmt.Errorf("a schema for the read models: %w", err)
	}
	defer drop()
	t = time.Now()
	for attempt := 0; ; attempt++ {
		// A start gives the read models at most 5 minutes to catch up; the next goes on from their checkpoint.
		_, err := historyProcess(ctx, dir, dbURL, "-prepare")
		if err == nil {
			break
		}
		if attempt == 3 {
			return r, fmt.Errorf("preparing start: %w", err)
		}
		progress("history: preparing start %d: %v; again", attempt+1, err)
	}
	progress("history: prepared (PostgreSQL read models at the log's end, every account snapshotted) in %s", time.Since(t).Round(time.Millisecond))
	// The measured start comes after the log's duplicate window: a server
	// that starts holds the message ids of the commits written within it
	// (a burst's worth, not the history's), which a start right after the
	// generation would count as history (126 MB at 1M orders; a small log's
	// ids are too few to wait for).
	if wait := time.Until(generated.Add(eventlog.DuplicateWindow + 5*time.Second)); wait > 0 && orders >= 100_000 {
		progress("history: waiting %s for the log's duplicate window to pass", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := os.MkdirAll(o.history.profile, 0o755); err != nil {
		return r, err
	}
	prof := filepath.Join(o.history.profile, fmt.Sprintf("history-%d-%d.pprof", orders, accounts))
	r, err = historyProcess(ctx, dir, dbURL, "-heapprofile", prof, "-accounts", strconv.Itoa(accounts), "-per", strconv.Itoa(per),
		"-clients", strconv.Itoa(o.history.clients), "-latency", o.history.latency.String())
	if err != nil {
		return r, err
	}
	n := float64(per * accounts)
	progress("history: %d orders over %d accounts: ready in %s; heap %d MB live (%.0f B/order), %d MB in use spans, %d objects (%.2f/order); RSS %d MB (%.0f B/order), %d MB after FreeOSMemory (%.0f B/order); %d goroutines; profile %s",
		per*accounts, accounts, time.Duration(r.Ready).Round(time.Millisecond), r.HeapAlloc>>20, float64(r.HeapAlloc)/n, r.HeapInuse>>20, r.HeapObjects, float64(r.HeapObjects)/n,
		r.RSS>>20, float64(r.RSS)/n, r.RSSReleased>>20, float64(r.RSSReleased)/n, r.Goroutines, prof)
	if r.New.N > 0 || r.Repeat.N > 0 {
		progress("history: after the restart, HTTP new orders: %s; repeated clientOrderId (409): %s; heap after %d MB, RSS after %d MB",
			r.New, r.Repeat, r.HeapAfter>>20, r.RSSAfter>>20)
	}
	return r, nil
}

// historyProcess runs history-once on dir in a fresh process and reads back its result.
func historyProcess(ctx context.Context, dir, dbURL string, more ...string) (historyResult, error) {
	var r historyResult
	exe, err := os.Executable()
	if err != nil {
		return r, err
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{"history-once", "-dir", dir, "-database-url", dbURL}, more...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("history-once answered %.200q: %w", out, err)
	}
	return r, nil
}

// historyOnce is the history-once subcommand: the service started as
// cmd/engine starts it on -dir (embedded JetStream, read models in
// PostgreSQL, snapshots on, no demo accounts: the history's accounts are the
// demo tenant's), timed from app.Start's call to Ready(). With -prepare it
// snapshots every aggregate and stops. Otherwise it measures the heap and
// resident memory after a collection, writes the heap profile, and runs the
// latency windows against the history's accounts over HTTP.
func historyOnce(args []string) error {
	fs := flag.NewFlagSet("history-once", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory of the log")
	db := fs.String("database-url", "", "PostgreSQL of the read models")
	prepare := fs.Bool("prepare", false, "snapshot every aggregate and stop")
	heapProfile := fs.String("heapprofile", "", "heap profile after the collection")
	accounts := fs.Int("accounts", 1, "accounts of the history (acct_bench_000001..., PA000001...)")
	per := fs.Int("per", 1, "orders of each account in the history (clientOrderIds c-<k>-0 ... c-<k>-<per-1>)")
	clients := fs.Int("clients", 4, "HTTP clients of each latency window")
	latency := fs.Duration("latency", 5*time.Second, "each latency window")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logTo(os.Stderr, slog.LevelWarn) // as cmd/engine at ENGINE_LOG_LEVEL=warn: no line per request
	env := map[string]string{"ENGINE_DATA_DIR": *dir, "DATABASE_URL": *db, "ENGINE_SNAPSHOTS": "on", "ENGINE_LOG_LEVEL": "warn",
		"ENGINE_DEMO_ACCOUNTS": "0", "ENGINE_RATE_LIMIT": "0"}
	ctx := context.Background()
	a, ready, err := startReady(ctx, env)
	if err != nil {
		return err
	}
	defer a.Close()
	var r historyResult
	r.Ready = int64(ready)
	if *prepare {
		n, err := a.Engine.SnapshotRound(ctx, -1)
		fmt.Fprintf(os.Stderr, "history-once: %d snapshots written\n", n)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	r.HistoryLast, _ = a.Log.LastSeq(ctx)
	r.AppliedReady = a.Projector.Applied()
	// Let the start's background work settle (the relaxed collector of the
	// warm-up restored, deliveries in flight), then collect twice.
	time.Sleep(2 * time.Second)
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	r.HeapInuse, r.HeapAlloc, r.HeapObjects, r.Sys = m.HeapInuse, m.HeapAlloc, m.HeapObjects, m.Sys
	r.RSS = rss()
	r.Goroutines = runtime.NumGoroutine()
	if *heapProfile != "" {
		if err := writeHeapProfile(*heapProfile); err != nil {
			return err
		}
	}
	debug.FreeOSMemory()
	r.RSSReleased = rss()
	if *latency > 0 {
		if r.New, r.Repeat, err = historyLatency(ctx, a, *dir, *accounts, *per, *clients, *latency); err != nil {
			return err
		}
		runtime.GC()
		runtime.ReadMemStats(&m)
		r.HeapAfter, r.RSSAfter = m.HeapAlloc, rss()
		if *heapProfile != "" {
			// What the windows left live (history-<orders>-<accounts>-after.pprof).
			if err := writeHeapProfile(strings.TrimSuffix(*heapProfile, ".pprof") + "-after.pprof"); err != nil {
				return err
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// historyLatency serves a's handler on 127.0.0.1 and runs two closed-loop
// windows of market orders over HTTP, client w on the history's account
// w mod accounts: new clientOrderIds (each must fill), then clientOrderIds
// of the history (each must answer 409).
func historyLatency(ctx context.Context, a *app.App, dir string, accounts, per, clients int, dur time.Duration) (sample, sample, error) {
	var creds struct {
		TradingKey string `json:"tradingKey"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err == nil {
		err = json.Unmarshal(b, &creds)
	}
	if err != nil {
		return sample{}, sample{}, fmt.Errorf("dev credentials: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return sample{}, sample{}, err
	}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	conns := make([]keepAlive, clients)
	for w := range conns {
		conns[w] = keepAlive{addr: ln.Addr().String(), key: creds.TradingKey}
		defer conns[w].close()
	}
	path := func(w int) string { return "/api/trading/order?account=" + fmt.Sprintf("PA%06d", w%accounts+1) }
	window := func(op func(ctx context.Context, w, i int) error) sample {
		from := time.Now().Add(500 * time.Millisecond) // a warm-up
		wctx, cancel := context.WithDeadline(ctx, from.Add(dur).Add(30*time.Second))
		defer cancel()
		return driveAt(wctx, clients, from, from.Add(dur), op)
	}
	fresh := window(func(ctx context.Context, w, i int) error {
		status, b, err := conns[w].post(ctx, path(w), orderBody("h-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), i))
		if err != nil {
			return err
		}
		return orderFilled(status, b)
	})
	repeat := window(func(ctx context.Context, w, i int) error {
		// Spread over the account's history, oldest to newest.
		j := int((int64(i)*7919 + int64(w)*104729) % int64(per))
		id := "c-" + strconv.Itoa(w%accounts) + "-" + strconv.Itoa(j)
		status, b, err := conns[w].post(ctx, path(w), orderBody(id, j))
		if err != nil {
			return err
		}
		if status != http.StatusConflict {
			return fmt.Errorf("repeated clientOrderId %s: %d %.200s", id, status, b)
		}
		return nil
	})
	return fresh, repeat, nil
}

// rss is the process's resident memory (VmRSS), 0 if unknown.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

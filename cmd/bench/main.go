// Command bench measures the engine against raw JetStream in one run, on an
// embedded in-process nats-server with file storage in a temporary directory
// and the engine's sync setting, and prints a table of ratios:
//
//   - baseline: workers goroutines publishing with ack and
//     Nats-Expected-Last-Subject-Sequence, each to its own subject;
//   - command path: market orders through engine.Engine.Account, one account per worker;
//   - HTTP: market orders to POST /api/trading/order from keep-alive clients;
//   - SSE: many subscribers of one account's stream (opened by a child
//     process), delivery after each commit's ack;
//   - cold start: replay of a generated log into the memory read models and
//     the aggregates, against the raw ordered consumer.
//
// Baseline, command path and HTTP windows take turns on one raw log and one
// service, so every round compares windows seconds apart; each window also
// reports the process CPU per operation. Probes (the projector's and the HTTP
// layer's shares, request logging, atomic-batch group commit, several
// streams, interval sync) measure the levers the README discusses. Load goes
// to 127.0.0.1 only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/svc/engine/cmd/engine/app"
)

type opts struct {
	databaseURL  string
	phases       map[string]bool
	runs         int
	workers      int
	warm, dur    time.Duration
	sync         string
	sseSubs      int
	sseRate      float64
	sseDur       time.Duration
	sseRuns      int
	commits      int
	coldAccounts int
	coldRuns     int
	coldLog      string
	probeRuns    int
	brAccounts   int
	brRate       float64
	brRecord     bool
	brDur        time.Duration
	brIdle       time.Duration
	brOrders     float64
	provAccounts int
	provEvents   int
	futures      futuresOpts
	provPaced    int
	provClosed   bool
	cluster      clusterOpts
	history      historyOpts // history.go
	streams      streamsOpts // streams.go
	tmp          string
	profile      string
	trace        time.Duration // with profile: an execution trace of each profiled phase's first this long
	out          io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := run
	if len(os.Args) > 1 && os.Args[1] == "sse-client" {
		run = func(_ context.Context, args []string) error { return sseClient(args[1:]) }
	}
	if len(os.Args) > 1 && os.Args[1] == "streams-client" {
		run = func(_ context.Context, args []string) error { return streamsClientMain(args[1:]) }
	}
	if len(os.Args) > 1 && os.Args[1] == "write-sink" {
		run = func(_ context.Context, args []string) error { return writeSinkMain(args[1:]) }
	}
	if len(os.Args) > 1 && os.Args[1] == "http-load" {
		run = func(_ context.Context, args []string) error { return httpLoad(args[1:]) }
	}
	if len(os.Args) > 1 && os.Args[1] == "cold-replay" {
		run = func(_ context.Context, args []string) error { return coldReplay(args[1:]) }
	}
	if len(os.Args) > 1 && os.Args[1] == "restart-once" {
		run = func(_ context.Context, args []string) error { return restartOnce(args[1:]) }
	}
	if len(os.Args) > 1 && os.Args[1] == "history-once" {
		run = func(_ context.Context, args []string) error { return historyOnce(args[1:]) }
	}
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var o opts
	var phases string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&phases, "phases", "load,probes,sse,cold", "comma-separated: load (baseline, command path, HTTP), probes, sse, cold, cold-probes (the projector at other GC settings on the first fifth of the log, in the bench process, with cold), brackets (trailing stops under a quote stream, issue 14), pg (HTTP orders with PostgreSQL read models against memory's, issue 22), cluster (real engine and nats-server processes: one node against three, kill -9 failover, lease traffic, raw R1/R3 append), restart (the service's restart to ready over the cold-start log with PostgreSQL read models at their checkpoint, with aggregate snapshots and without, issue 22; needs -database-url), provider (linked Binance accounts against the in-process simulator: engine-added order latency, exchange event to SSE frame, memory per linked account, resubscription after a simulator restart; issue 43), futures (linked Tradovate logins against the in-process simulator: engine-added futures order latency, closed loop and paced; issue 44), history (heap and resident memory per order of history after a restart with PostgreSQL read models, restart time, a heap profile, order and repeated-clientOrderId latency; issue 46; needs -database-url), streams (market orders over HTTP round robin over -streams-accounts accounts without stream subscribers, with -streams-subs per account, and without again: rate, CPU and allocations per order, frame after the answer; issue 49)")
	fs.IntVar(&o.runs, "runs", 5, "rounds of baseline, command path and HTTP")
	fs.IntVar(&o.workers, "workers", 64, "concurrent publishers, accounts and HTTP clients")
	fs.DurationVar(&o.warm, "warmup", 500*time.Millisecond, "warm-up before each measured window")
	fs.DurationVar(&o.dur, "duration", 2*time.Second, "measured window of each load phase")
	fs.StringVar(&o.sync, "sync", "always", "always (fsync before each ack, the engine's default) or interval")
	fs.IntVar(&o.sseSubs, "sse-subs", 10000, "SSE subscribers of one account")
	fs.Float64Var(&o.sseRate, "sse-rate", 10, "orders per second on the streamed account")
	fs.DurationVar(&o.sseDur, "sse-duration", 8*time.Second, "how long orders go to the streamed account")
	fs.IntVar(&o.sseRuns, "sse-runs", 1, "SSE rounds")
	fs.IntVar(&o.probeRuns, "probe-runs", 2, "rounds of the probes")
	fs.IntVar(&o.commits, "commits", 1_000_000, "commits in the cold-start log")
	fs.IntVar(&o.coldAccounts, "cold-accounts", 1000, "accounts the cold-start log spreads over")
	fs.IntVar(&o.coldRuns, "cold-runs", 1, "cold starts of the generated log")
	fs.StringVar(&o.coldLog, "cold-log", "", "directory of the cold-start log: generated there on first use and kept, reused by later runs (default: a fresh temporary one)")
	fs.IntVar(&o.brAccounts, "brackets-accounts", 10000, "brackets: accounts, each long BTC-PERP with a stop and a trailing rule")
	fs.Float64Var(&o.brRate, "brackets-rate", 200, "brackets: quotes per second streamed to BTC-PERP")
	fs.BoolVar(&o.brRecord, "brackets-record-moves", false, "brackets: the paper book records every stop move in its account, as before marks (a comparison)")
	fs.DurationVar(&o.brDur, "brackets-duration", 30*time.Second, "brackets: how long quotes stream")
	fs.DurationVar(&o.brIdle, "brackets-idle", 30*time.Second, "brackets: the idle window of ordinary orders before the stream (as long as the stream by default: the p99 of each is the 12th-slowest of 1,200 orders)")
	fs.Float64Var(&o.brOrders, "brackets-orders", 40, "brackets: ordinary market orders per second over HTTP, and as many through the command path")
	fs.IntVar(&o.provAccounts, "provider-accounts", 1000, "provider: linked Binance accounts with live streams on one engine (the first -workers place the orders)")
	fs.IntVar(&o.provPaced, "provider-paced-rate", 128, "provider: orders a second, spread over the -workers clients, in the paced window (engine-added time below saturation; 0 skips it)")
	fs.BoolVar(&o.provClosed, "provider-closed-loop", true, "provider: measure the closed loop of -workers clients before the paced window (false: the paced window alone, e.g. under -trace)")
	fs.IntVar(&o.provEvents, "provider-events", 200, "provider: fills placed at the exchange outside the engine, each timed to its SSE frame")
	futuresFlags(fs, &o.futures) // futures.go
	historyFlags(fs, &o.history) // history.go
	streamsFlags(fs, &o.streams) // streams.go
	fs.DurationVar(&o.cluster.warm, "cluster-warmup", 2*time.Second, "cluster: warm-up before each load window")
	fs.DurationVar(&o.cluster.dur, "cluster-dur", 10*time.Second, "cluster: each load window (single node, three nodes)")
	fs.IntVar(&o.cluster.rounds, "cluster-rounds", 3, "cluster: kill -9 rounds, each killing the next node and starting it again")
	fs.IntVar(&o.cluster.failClients, "cluster-fail-clients", 8, "cluster: clients of the light load during a kill")
	fs.DurationVar(&o.cluster.pubDur, "cluster-pub-dur", 5*time.Second, "cluster: each raw append window, and the idle window of lease traffic")
	fs.StringVar(&o.cluster.natsSync, "cluster-nats-sync", "always", "cluster: the nats-servers' sync_interval: always (fsync before each ack, as the operations guide asks) or default (every 2 minutes)")
	fs.StringVar(&o.cluster.engine, "cluster-engine", "", "cluster and pg: an engine binary to run (default: ./cmd/engine built from the working tree, so those phases run from inside the module)")
	fs.StringVar(&o.tmp, "tmp", os.TempDir(), "where data directories are made (and removed)")
	fs.StringVar(&o.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "pg phase: the PostgreSQL database a fresh schema of read models is made in (DATABASE_URL)")
	fs.StringVar(&o.profile, "cpuprofile", "", "directory for one CPU profile per phase")
	fs.DurationVar(&o.trace, "trace", 0, "with -cpuprofile: an execution trace of each profiled phase's first this long (go tool trace -pprof=sched)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.phases = map[string]bool{}
	for _, p := range strings.Split(phases, ",") {
		o.phases[strings.TrimSpace(p)] = true
	}
	if o.sync != "always" && o.sync != "interval" {
		return fmt.Errorf("sync %q is neither always nor interval", o.sync)
	}
	if o.cluster.natsSync != "always" && o.cluster.natsSync != "default" {
		return fmt.Errorf("cluster-nats-sync %q is neither always nor default", o.cluster.natsSync)
	}
	o.out = os.Stdout
	logTo(io.Discard, slog.LevelWarn)
	return bench(ctx, o)
}

// progress reports a finished step on stderr with the machine's 1-minute load
// average, since other processes share the cores.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s load %s  %s\n", time.Now().Format("15:04:05"), loadavg(), fmt.Sprintf(format, args...))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// profiled runs fn with a CPU profile written to o.profile/name.pprof when asked.
func profiled[T any](o opts, name string, fn func() (T, error)) (T, error) {
	if o.profile == "" {
		return fn()
	}
	var zero T
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return zero, err
	}
	stop, err := cpuProfile(filepath.Join(o.profile, name+".pprof"))
	if err != nil {
		return zero, err
	}
	defer stop()
	if o.trace > 0 {
		f, err := os.Create(filepath.Join(o.profile, name+".trace"))
		if err != nil {
			return zero, err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return zero, err
		}
		t := time.AfterFunc(o.trace, trace.Stop)
		defer func() {
			if t.Stop() {
				trace.Stop()
			}
		}()
	}
	// The heap at the phase's start: what the phase allocated is its end's
	// alloc_space less this one's (go tool pprof -diff_base).
	if f, err := os.Create(filepath.Join(o.profile, name+"-heap-start.pprof")); err == nil {
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	// Lock contention of the same window, beside the CPU: a wait on a
	// mutex costs latency without costing CPU.
	runtime.SetMutexProfileFraction(10)
	defer func() {
		runtime.SetMutexProfileFraction(0)
		if f, err := os.Create(filepath.Join(o.profile, name+"-mutex.pprof")); err == nil {
			_ = pprof.Lookup("mutex").WriteTo(f, 0)
			f.Close()
		}
		// The heap at the phase's end (inuse: what each collection marks)
		// and what the phase allocated (alloc: what sets their pace).
		if f, err := os.Create(filepath.Join(o.profile, name+"-heap.pprof")); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}()
	return fn()
}

// cpuProfile starts a CPU profile written to path; stop ends it.
func cpuProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeHeapProfile writes the heap profile (what is live and what was
// allocated since the start) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC() // the live figures as of now
	err = pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// row is one line of the result table.
type row struct {
	metric, baseline, engine, ratio, target, pass string
}

type table struct{ rows []row }

func (t *table) add(r row) { t.rows = append(t.rows, r) }

func (t *table) print(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tbaseline\tengine\tratio\ttarget\tpass")
	for _, r := range t.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.metric, r.baseline, r.engine, r.ratio, r.target, r.pass)
	}
	tw.Flush()
}

// spread renders the median of xs with its range over runs.
func spread(xs []float64, unit string, f func(float64) string) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) == 1 {
		return f(med) + unit
	}
	return fmt.Sprintf("%s%s (%s-%s)", f(med), unit, f(s[0]), f(s[len(s)-1]))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func f0(x float64) string { return fmt.Sprintf("%.0f", x) }
func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

func passIf(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func rates(ss []sample) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = s.Rate
	}
	return out
}

func p99s(ss []sample) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = float64(s.P99) / 1e6
	}
	return out
}

func cpus(ss []sample) []float64 { return perOp(ss, func(s sample) time.Duration { return s.CPU }) }

// gens is each sample's load generator CPU per operation, in us.
func gens(ss []sample) []float64 { return perOp(ss, func(s sample) time.Duration { return s.Gen }) }

// perOp is a CPU figure of each sample, in us.
func perOp(ss []sample, cpu func(sample) time.Duration) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = float64(cpu(s)) / 1e3
	}
	return out
}

func p50s(ss []sample) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = float64(s.P50) / 1e6
	}
	return out
}

func ratios(a, b []float64) []float64 {
	out := make([]float64, 0, len(a))
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

func sampleErr(name string, ss []sample) error {
	for _, s := range ss {
		if s.Errors > 0 {
			return fmt.Errorf("%s: %d errors, first: %s", name, s.Errors, s.FirstErr)
		}
	}
	return nil
}

func bench(ctx context.Context, o opts) error {
	payload, err := sampleCommit()
	if err != nil {
		return fmt.Errorf("sample commit: %w", err)
	}
	// The engine serves with one processor more than the cores (app.TuneProcs);
	// set it before anything runs, so the raw baselines of this process run
	// with the same processors as the engine and the line below is true.
	app.TuneProcs(os.Getenv)
	progress("bench: GOMAXPROCS %d, %d workers, sync %s, payload %d bytes (one encoded market-order commit), warm-up %s + window %s",
		runtime.GOMAXPROCS(0), o.workers, o.sync, len(payload), o.warm, o.dur)
	main, probes, brk := &table{}, &table{}, &table{}
	var failures []string

	var raw *rawLog
	var svc *service
	if o.phases["load"] || o.phases["probes"] {
		if raw, err = openRaw(ctx, o, o.sync); err != nil {
			return err
		}
		defer raw.Close()
		if svc, err = startService(ctx, o, o.sync, o.workers, true, ""); err != nil {
			return err
		}
		defer svc.Close()
	}
	if o.phases["load"] {
		// Baseline, command path and HTTP take turns on one raw log and one
		// service, so each round's ratio compares windows seconds apart.
		var base, cmd, web []sample
		for r := range o.runs {
			b, _ := profiled(o, fmt.Sprintf("baseline-%d", r), func() (sample, error) { return raw.baseline(ctx, o, payload), nil })
			progress("run %d baseline:     %s", r+1, b)
			c, _ := profiled(o, fmt.Sprintf("command-%d", r), func() (sample, error) { return svc.commandPath(ctx, o), nil })
			progress("run %d command path: %s", r+1, c)
			h, _ := profiled(o, fmt.Sprintf("http-%d", r), func() (sample, error) { return svc.httpPath(ctx, o), nil })
			progress("run %d HTTP:         %s", r+1, h)
			base, cmd, web = append(base, b), append(cmd, c), append(web, h)
		}
		for _, e := range []error{sampleErr("baseline", base), sampleErr("command path", cmd), sampleErr("http", web)} {
			if e != nil {
				failures = append(failures, e.Error())
			}
		}
		cr, hr, hl := ratios(rates(cmd), rates(base)), ratios(rates(web), rates(base)), ratios(p99s(web), p99s(base))
		main.add(row{"command path rate (orders/s)", spread(rates(base), "", f0), spread(rates(cmd), "", f0), spread(cr, "x", f2), ">= 0.8x", passIf(median(cr) >= 0.8)})
		main.add(row{"command path p99 (ms)", spread(p99s(base), "", f2), spread(p99s(cmd), "", f2), spread(ratios(p99s(cmd), p99s(base)), "x", f2), "-", "-"})
		main.add(row{"HTTP market orders rate (orders/s)", spread(rates(base), "", f0), spread(rates(web), "", f0), spread(hr, "x", f2), ">= 0.5x", passIf(median(hr) >= 0.5)})
		main.add(row{"HTTP market orders p99 (ms)", spread(p99s(base), "", f2), spread(p99s(web), "", f2), spread(hl, "x", f2), "<= 2x", passIf(median(hl) <= 2)})
		main.add(row{"process CPU per order, command path (us)", spread(cpus(base), "", f0), spread(cpus(cmd), "", f0), spread(ratios(cpus(cmd), cpus(base)), "x", f2), "-", "-"})
		main.add(row{"process CPU per order, HTTP (us; the engine's process, clients apart)", spread(cpus(base), "", f0), spread(cpus(web), "", f0), spread(ratios(cpus(web), cpus(base)), "x", f2), "<= 150us", passIf(median(cpus(web)) <= 150)})
		main.add(row{"  load generator CPU per HTTP order (us; its own process)", "-", spread(gens(web), "", f0), "-", "-", "-"})
		main.add(row{"HTTP market orders p50 (ms)", spread(p50s(base), "", f2), spread(p50s(web), "", f2), spread(ratios(p50s(web), p50s(base)), "x", f2), "-", "-"})
	}

	if o.phases["pg"] {
		if err := pgPhase(ctx, o, main); err != nil {
			return err
		}
	}

	if o.phases["probes"] {
		if err := runProbes(ctx, o, payload, raw, svc, probes); err != nil {
			return err
		}
	}

	if o.phases["sse"] {
		var p99, p50, mx []float64
		var missed int
		for r := range o.sseRuns {
			res, err := profiled(o, fmt.Sprintf("sse-%d", r), func() (sseResult, error) { return ssePhase(ctx, o, o.sync) })
			if err != nil {
				return fmt.Errorf("sse: %w", err)
			}
			progress("run %d SSE: %d subscribers connected in %s; %d commits; %d deliveries (%d exact revision, rest conflated to a newer one), %d missed; p50 %s p99 %s max %s",
				r+1, res.Subs, res.Connect.Round(time.Millisecond), res.Commits, res.Deliveries, res.Exact, res.Missed, ms(res.P50), ms(res.P99), ms(res.Max))
			p99, p50, mx = append(p99, float64(res.P99)/1e6), append(p50, float64(res.P50)/1e6), append(mx, float64(res.Max)/1e6)
			missed += res.Missed
		}
		main.add(row{fmt.Sprintf("SSE %d subscribers, delivery after ack p99 (ms)", o.sseSubs), "-", spread(p99, "", f1), "-", "<= 250 ms", passIf(median(p99) <= 250 && missed == 0)})
		main.add(row{"SSE delivery p50 / max (ms)", "-", spread(p50, "", f1) + " / " + spread(mx, "", f1), "-", "-", "-"})
	}

	if o.phases["cold"] {
		var cps []coldProbe
		res, err := profiled(o, "cold", func() ([]coldResult, error) {
			res, ps, err := coldPhase(ctx, o, o.coldRuns, o.phases["cold-probes"], func(s string) { progress("%s", s) })
			cps = ps
			return res, err
		})
		if err != nil {
			return fmt.Errorf("cold start: %w", err)
		}
		if len(cps) > 0 {
			raw := rate(cps[0].n, cps[0].took)
			for _, p := range cps[1:] {
				probes.add(row{fmt.Sprintf("cold start, first %d commits: %s (/s)", p.n, p.name), f0(raw), f0(rate(p.n, p.took)), f2(rate(p.n, p.took)/raw) + "x", "vs raw ordered consumer", "-"})
			}
		}
		var raw, proj, warm []float64
		for _, r := range res {
			raw, proj, warm = append(raw, rate(r.Commits, r.Raw)), append(proj, rate(r.Commits, r.Projector)), append(warm, rate(r.Commits, r.Warmup))
		}
		pr, wr := ratios(proj, raw), ratios(warm, raw)
		n := res[0].Commits
		main.add(row{fmt.Sprintf("cold start: replay of %d commits into the memory read models (commits/s)", n), spread(raw, "", f0), spread(proj, "", f0), spread(pr, "x", f2), ">= 0.5x", passIf(median(pr) >= 0.5)})
		main.add(row{fmt.Sprintf("service start: %d commits into aggregates and memory read models, one pass (commits/s)", n), spread(raw, "", f0), spread(warm, "", f0), spread(wr, "x", f2), "-", "-"})
	}

	if o.phases["provider"] {
		r, err := profiled(o, "provider", func() (providerResult, error) { return providerPhase(ctx, o) })
		if err != nil {
			return fmt.Errorf("provider: %w", err)
		}
		if r.added.N > 0 { // -provider-closed-loop=false runs none
			main.add(row{fmt.Sprintf("provider order, engine-added p50 / p99 (ms; answer minus the simulator's service time, first byte in to last byte out, %d clients)", o.workers),
				"", fmt.Sprintf("%s / %s", ms(r.added.P50), ms(r.added.P99)), "", "<= 1 / <= 5 ms", passIf(r.added.P50 <= time.Millisecond && r.added.P99 <= 5*time.Millisecond)})
			main.add(row{"provider order answer p50 / p99, orders/s", "", fmt.Sprintf("%s / %s, %.0f/s", ms(r.answer.P50), ms(r.answer.P99), r.answer.Rate), "", "", ""})
			main.add(row{"  the same less the simulator's handler time alone (its HTTP server's share counted as the engine's)", "",
				fmt.Sprintf("%s / %s", ms(r.addedHandler.P50), ms(r.addedHandler.P99)), "", "", ""})
		}
		if r.paced.N > 0 {
			main.add(row{fmt.Sprintf("provider order paced at %d/s over %d clients, engine-added p50 / p99 (answer p50, simulator p50; baseline: two durable appends in a row, paced the same, same run)", o.provPaced, o.workers),
				fmt.Sprintf("%s / %s", ms(r.pacedFloor.P50), ms(r.pacedFloor.P99)), fmt.Sprintf("%s / %s (%s, %s)", ms(r.paced.P50), ms(r.paced.P99), ms(r.pacedAnswer.P50), ms(r.pacedSim.P50)),
				f2(float64(r.paced.P50)/max(1, float64(r.pacedFloor.P50))) + "x", "<= 1 / <= 5 ms", passIf(r.paced.P50 <= time.Millisecond && r.paced.P99 <= 5*time.Millisecond)})
			main.add(row{"  the same less the simulator's handler time alone", "", fmt.Sprintf("%s / %s", ms(r.pacedHandler.P50), ms(r.pacedHandler.P99)), "", "", ""})
			hopRows(main, r.paced.P50, r.hopFloor2, r.hopFloor1)
			main.add(row{"  log commits an order (intent, outcome, the stream's observations)", "", fmt.Sprintf("%.2f", r.commitsPerOrder), "", "", ""})
		}
		main.add(row{"provider event to SSE frame p50 / p99", "", fmt.Sprintf("%s / %s", ms(r.event.P50), ms(r.event.P99)), "", "p99 <= 10 ms", passIf(r.event.P99 <= 10*time.Millisecond)})
		main.add(row{fmt.Sprintf("memory per linked account (%d linked, live streams)", r.linked), "", fmt.Sprintf("%.0f KiB heap, %.1f goroutines", r.heapPerAccount/1024, r.goroutinesPerAccount), "", "", ""})
		main.add(row{fmt.Sprintf("simulator restart to all %d resubscribed and reconciled", r.linked), "", fmt.Sprintf("%s, %d answers 429/418", r.resync.Round(time.Millisecond), r.limited), "", "<= 30 s, no 429", passIf(r.resynced && r.resync <= 30*time.Second && r.limited == 0)})
	}

	if o.phases["futures"] {
		if err := futuresPhase(ctx, o, main); err != nil { // futures.go
			return err
		}
	}

	if o.phases["copier"] {
		if err := copierPhase(ctx, o, main); err != nil { // copier.go (issue 45)
			return err
		}
	}

	if o.phases["streams"] {
		if err := streamsPhase(ctx, o, main); err != nil { // streams.go (issue 49)
			return err
		}
	}

	if o.phases["history"] {
		if err := historyPhase(ctx, o, main); err != nil { // history.go (issue 46)
			return fmt.Errorf("history: %w", err)
		}
	}

	if o.phases["restart"] {
		res, err := restartPhase(ctx, o, o.coldRuns, func(s string) { progress("%s", s) })
		if err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		var full, snap []float64
		for _, r := range res {
			full, snap = append(full, r.Full.Seconds()), append(snap, r.Snapshot.Seconds())
		}
		main.add(row{fmt.Sprintf("restart to ready over %d commits, PostgreSQL read models at their checkpoint (s; baseline: without snapshots)", res[0].Commits),
			spread(full, "", f2), spread(snap, "", f2), spread(ratios(snap, full), "x", f2), "<= 5 s", passIf(median(snap) <= 5)})
	}

	if o.phases["brackets"] {
		res, err := bracketsPhase(ctx, o)
		if err != nil {
			return fmt.Errorf("brackets: %w", err)
		}
		bracketRows(brk, res, o)
	}

	var clu *clusterReport
	if o.phases["cluster"] {
		if clu, err = clusterPhase(ctx, o, payload); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}

	if len(main.rows) > 0 {
		main.print(o.out, fmt.Sprintf("Engine against raw JetStream (sync=%s, %d workers, %d cores; median of runs, range in brackets)", o.sync, o.workers, runtime.NumCPU()))
	}
	if len(probes.rows) > 0 {
		probes.print(o.out, "Probes (each against its reference window of the same round; median of rounds, range in brackets)")
	}
	if len(brk.rows) > 0 {
		brk.print(o.out, fmt.Sprintf("Brackets (issue 14; sync=%s, %d cores): baseline = idle window, engine = under the quote stream", o.sync, runtime.NumCPU()))
	}
	if clu != nil {
		clu.print(o.out)
	}
	for _, f := range failures {
		fmt.Fprintln(o.out, "error:", f)
	}
	return nil
}

// slug makes a probe name a file name.
func slug(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
}

// probe is one kind of measured window and the kind it is compared with.
type probe struct {
	name, ref, note string
	run             func() (sample, error)
}

// runProbes measures the levers in rounds of adjacent windows: the
// projector's share (settle), the HTTP layer, request logging, atomic-batch
// group commit, several streams, and interval sync. Each ratio compares with
// its reference window of the same round; the table shows medians over rounds.
func runProbes(ctx context.Context, o opts, payload []byte, raw *rawLog, svc *service, t *table) error {
	ri, err := openRaw(ctx, o, "interval")
	if err != nil {
		return err
	}
	defer ri.Close()
	si, err := startService(ctx, o, "interval", o.workers, true, "")
	if err != nil {
		return err
	}
	defer si.Close()
	logFile, err := os.CreateTemp(o.tmp, "bench-log-")
	if err != nil {
		return err
	}
	defer func() { logFile.Close(); os.Remove(logFile.Name()) }()
	ok := func(s sample) (sample, error) { return s, nil }
	ps := []probe{
		{"raw baseline", "", "", func() (sample, error) { return ok(raw.baseline(ctx, o, payload)) }},
		{"raw, atomic-batch group commit", "raw baseline", "one committer, batches of what is queued", func() (sample, error) { return raw.batched(ctx, o, payload, 1) }},
		{"raw, 4 streams", "raw baseline", "subjects sharded over 4 streams", func() (sample, error) { return raw.sharded(ctx, o, payload, 4) }},
		{"raw, sync=interval", "raw baseline", "durability trade-off", func() (sample, error) { return ok(ri.baseline(ctx, o, payload)) }},
		{"command path", "raw baseline", "", func() (sample, error) { return ok(svc.commandPath(ctx, o)) }},
		{"command path + read-model settle", "command path", "the projector's share", func() (sample, error) { return ok(svc.settledPath(ctx, o)) }},
		{"command path, sync=interval", "command path", "durability trade-off", func() (sample, error) { return ok(si.commandPath(ctx, o)) }},
		{"HTTP orders", "command path + read-model settle", "the HTTP layer's share", func() (sample, error) { return ok(svc.httpPath(ctx, o)) }},
		{"HTTP orders, info request log", "HTTP orders", "a JSON line per request to a file", func() (sample, error) {
			logTo(logFile, slog.LevelInfo)
			defer logTo(io.Discard, slog.LevelWarn)
			return ok(svc.httpPath(ctx, o))
		}},
		{"HTTP orders, sync=interval", "HTTP orders", "durability trade-off", func() (sample, error) { return ok(si.httpPath(ctx, o)) }},
	}
	got := map[string][]sample{}
	for r := range o.probeRuns {
		for _, p := range ps {
			s, err := profiled(o, fmt.Sprintf("probe-%d-%s", r, slug(p.name)), p.run)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			progress("probe %d %-34s %s", r+1, p.name+":", s)
			got[p.name] = append(got[p.name], s)
		}
	}
	for _, p := range ps {
		if p.ref == "" {
			continue
		}
		b, s := got[p.ref], got[p.name]
		t.add(row{p.name + " vs " + p.ref + ": rate (/s)", spread(rates(b), "", f0), spread(rates(s), "", f0), spread(ratios(rates(s), rates(b)), "x", f2), p.note, "-"})
		t.add(row{"  p99 (ms)", spread(p99s(b), "", f1), spread(p99s(s), "", f1), spread(ratios(p99s(s), p99s(b)), "x", f2), "", "-"})
		t.add(row{"  CPU per op (us)", spread(cpus(b), "", f0), spread(cpus(s), "", f0), spread(ratios(cpus(s), cpus(b)), "x", f2), "", "-"})
	}
	return nil
}

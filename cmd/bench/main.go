// Command bench measures the engine against raw JetStream in one run, on an
// embedded in-process nats-server with file storage in a temporary directory
// and the engine's sync setting, and prints a table of ratios:
//
//   - baseline: workers goroutines publishing with ack and
//     Nats-Expected-Last-Subject-Sequence, each to its own subject;
//   - command path: market orders through engine.Engine.Account, one account per worker;
//   - HTTP: market orders to POST /api/trading/order from keep-alive clients;
//   - SSE: many subscribers of one account's stream, delivery after each commit's ack;
//   - cold start: replay of a generated log into the memory read models and
//     the aggregates, against the raw ordered consumer.
//
// Probes (interval sync, request logging, atomic-batch group commit, several
// streams) measure the levers the README discusses. Load goes to 127.0.0.1 only.
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
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

type opts struct {
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
	tmp          string
	profile      string
	out          io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := run
	if len(os.Args) > 1 && os.Args[1] == "sse-client" {
		run = func(_ context.Context, args []string) error { return sseClient(args[1:]) }
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
	fs.StringVar(&phases, "phases", "load,probes,sse,cold", "comma-separated: load (baseline, command path, HTTP), probes, sse, cold")
	fs.IntVar(&o.runs, "runs", 6, "rounds of baseline, command path and HTTP")
	fs.IntVar(&o.workers, "workers", 64, "concurrent publishers, accounts and HTTP clients")
	fs.DurationVar(&o.warm, "warmup", 500*time.Millisecond, "warm-up before each measured window")
	fs.DurationVar(&o.dur, "duration", 2*time.Second, "measured window of each load phase")
	fs.StringVar(&o.sync, "sync", "always", "always (fsync before each ack, the engine's default) or interval")
	fs.IntVar(&o.sseSubs, "sse-subs", 10000, "SSE subscribers of one account")
	fs.Float64Var(&o.sseRate, "sse-rate", 10, "orders per second on the streamed account")
	fs.DurationVar(&o.sseDur, "sse-duration", 8*time.Second, "how long orders go to the streamed account")
	fs.IntVar(&o.sseRuns, "sse-runs", 1, "SSE rounds")
	fs.IntVar(&o.commits, "commits", 1_000_000, "commits in the cold-start log")
	fs.IntVar(&o.coldAccounts, "cold-accounts", 1000, "accounts the cold-start log spreads over")
	fs.IntVar(&o.coldRuns, "cold-runs", 1, "cold starts of the generated log")
	fs.StringVar(&o.tmp, "tmp", os.TempDir(), "where data directories are made (and removed)")
	fs.StringVar(&o.profile, "cpuprofile", "", "directory for one CPU profile per phase")
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
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		var zero T
		return zero, err
	}
	f, err := os.Create(filepath.Join(o.profile, name+".pprof"))
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		var zero T
		return zero, err
	}
	defer pprof.StopCPUProfile()
	return fn()
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
	progress("bench: GOMAXPROCS %d, %d workers, sync %s, payload %d bytes (one encoded market-order commit), warm-up %s + window %s",
		runtime.GOMAXPROCS(0), o.workers, o.sync, len(payload), o.warm, o.dur)
	main, probes := &table{}, &table{}
	var failures []string

	var raw *rawLog
	var svc *service
	if o.phases["load"] || o.phases["probes"] {
		if raw, err = openRaw(ctx, o, o.sync); err != nil {
			return err
		}
		defer raw.Close()
		if svc, err = startService(ctx, o, o.sync, o.workers, true); err != nil {
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
		main.add(row{"HTTP market orders p50 (ms)", spread(p50s(base), "", f2), spread(p50s(web), "", f2), spread(ratios(p50s(web), p50s(base)), "x", f2), "-", "-"})
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
			res, ps, err := coldPhase(ctx, o, o.coldRuns, o.phases["probes"], func(s string) { progress("%s", s) })
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
		main.add(row{fmt.Sprintf("cold start: %d commits into memory read models (commits/s)", n), spread(raw, "", f0), spread(proj, "", f0), spread(pr, "x", f2), ">= 0.5x", passIf(median(pr) >= 0.5)})
		main.add(row{fmt.Sprintf("cold start: engine.Start aggregate warm-up of %d commits (commits/s)", n), spread(raw, "", f0), spread(warm, "", f0), spread(wr, "x", f2), "-", "-"})
	}

	if len(main.rows) > 0 {
		main.print(o.out, fmt.Sprintf("Engine against raw JetStream (sync=%s, %d workers, %d cores; median of runs, range in brackets)", o.sync, o.workers, runtime.NumCPU()))
	}
	if len(probes.rows) > 0 {
		probes.print(o.out, "Probes (one window each; raw and interval rows against the mean of two sync=always baselines taken around them)")
	}
	for _, f := range failures {
		fmt.Fprintln(o.out, "error:", f)
	}
	return nil
}

// runProbes measures the levers: request logging, atomic-batch group commit,
// several streams and interval sync. Raw probes compare with the mean of the
// baselines measured just before and after them.
func runProbes(ctx context.Context, o opts, payload []byte, raw *rawLog, svc *service, t *table) error {
	pre := raw.baseline(ctx, o, payload)
	progress("probe baseline (always):             %s", pre)
	cp := svc.commandPath(ctx, o)
	progress("probe command path:                  %s", cp)
	st := svc.settledPath(ctx, o)
	progress("probe command path + settle:         %s", st)
	hw := svc.httpPath(ctx, o)
	progress("probe HTTP orders, warn logging:     %s", hw)
	logFile, err := os.CreateTemp(o.tmp, "bench-log-")
	if err != nil {
		return err
	}
	defer os.Remove(logFile.Name())
	logTo(logFile, slog.LevelInfo)
	hi := svc.httpPath(ctx, o)
	logTo(io.Discard, slog.LevelWarn)
	logFile.Close()
	progress("probe HTTP orders, info logging:     %s", hi)
	g1, err := raw.batched(ctx, o, payload, 1)
	if err != nil {
		return err
	}
	progress("probe raw, atomic-batch group commit: %s", g1)
	g2, err := raw.batched(ctx, o, payload, 2)
	if err != nil {
		return err
	}
	progress("probe raw, atomic batches x2:        %s", g2)
	sh, err := raw.sharded(ctx, o, payload, 4)
	if err != nil {
		return err
	}
	progress("probe raw, 4 streams:                %s", sh)
	post := raw.baseline(ctx, o, payload)
	progress("probe baseline (always):             %s", post)

	ri, err := openRaw(ctx, o, "interval")
	if err != nil {
		return err
	}
	defer ri.Close()
	si, err := startService(ctx, o, "interval", o.workers, true)
	if err != nil {
		return err
	}
	defer si.Close()
	bi := ri.baseline(ctx, o, payload)
	progress("probe raw, sync=interval:            %s", bi)
	ci := si.commandPath(ctx, o)
	progress("probe command path, sync=interval:   %s", ci)
	hti := si.httpPath(ctx, o)
	progress("probe HTTP orders, sync=interval:    %s", hti)

	base := sample{Rate: (pre.Rate + post.Rate) / 2, P99: (pre.P99 + post.P99) / 2}
	add := func(name string, b, s sample, note string) {
		t.add(row{name + " rate (/s)", f0(b.Rate), f0(s.Rate), f2(s.Rate/b.Rate) + "x", note, "-"})
		t.add(row{name + " p99 (ms)", f2(float64(b.P99) / 1e6), f2(float64(s.P99) / 1e6), f2(float64(s.P99)/float64(b.P99)) + "x", "", "-"})
	}
	add("command path + read-model settle vs command path", cp, st, "projector wait")
	add("HTTP orders vs command path + settle", st, hw, "HTTP, auth, JSON")
	add("HTTP orders, info request log vs warn", hw, hi, "log file, JSON")
	add("raw, atomic-batch group commit", base, g1, "1 batch in flight")
	add("raw, atomic-batch group commit x2", base, g2, "2 batches in flight")
	add("raw, 4 streams", base, sh, "subjects sharded")
	add("raw, sync=interval", base, bi, "durability trade-off")
	add("command path, sync=interval", base, ci, "durability trade-off")
	add("HTTP orders, sync=interval", base, hti, "durability trade-off")
	return nil
}

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/svc/engine/gateway/api"
)

// The streams phase (issue 49) is the cost of account streams to market
// orders over HTTP: one engine with o.streams.accounts demo accounts,
// o.workers keep-alive clients in the bench process placing market orders
// round robin over every account, closed loop, in three windows of one
// run: A without subscribers, B with o.streams.subs subscribers of
// /api/account/stream per account (opened by a child process,
// streams-client), C without subscribers again. Each window reports the
// orders' rate and latency, the bench process's CPU and allocations per
// order (the engine's and its HTTP clients': the clients' share is the
// same in every window, so B less the mean of A and C is the streams'), and
// B the time from each order's answer to each subscriber of its account
// reading a frame at its revision or a newer one.

// streamsOpts are the streams phase's settings.
type streamsOpts struct {
	accounts int // demo accounts the orders go round robin over
	subs     int // subscribers of each account in window B
}

// streamsFlags declares the streams phase's flags on fs.
func streamsFlags(fs *flag.FlagSet, o *streamsOpts) {
	fs.IntVar(&o.accounts, "streams-accounts", 1000, "streams: demo accounts the market orders go round robin over")
	fs.IntVar(&o.subs, "streams-subs", 2, "streams: subscribers of /api/account/stream per account in the streamed window (opened by a child process)")
}

// streamsWindow is one window of the streams phase: the orders' sample (its
// CPU the bench process's per order) and what the process allocated per
// order.
type streamsWindow struct {
	sample
	Bytes, Objects float64
	Subscribers    time.Duration // the subscribers' process's CPU per order (window B)
}

func (w streamsWindow) String() string {
	s := fmt.Sprintf("%s, %.1f KB and %.0f objects allocated/op", w.sample, w.Bytes/1024, w.Objects)
	if w.Subscribers > 0 {
		s += fmt.Sprintf(", subscribers' process %.0fus CPU/op", float64(w.Subscribers)/1e3)
	}
	return s
}

// frameResult is the subscribers' account of window B, from the child.
type frameResult struct {
	Subs       int
	Connect    time.Duration // to open every stream and read its first frame
	Deliveries int           // (order, subscriber) pairs measured
	Exact      int           // pairs read at the order's own revision (the rest: a newer one, conflated)
	Missed     int           // pairs whose subscriber never read the order's revision or a newer one
	P50, P99   time.Duration
	Max        time.Duration
}

// streamsResult is the streams phase: windows A, B and C and B's frames.
type streamsResult struct {
	A, B, C  streamsWindow
	Frames   frameResult
	Acks     int   // orders of B's measured window told to the child
	Lingered int64 // subscribers the hub still counted when C began
	// RawWrite is the baseline: one raw loopback write of a frame to an
	// idle reader of another process, at B's frame rate over as many
	// connections (rawWriteBaseline).
	RawWrite time.Duration
}

// ack is an answered order: its account's index, the log sequence it
// committed at and when the answer was read (Unix nanoseconds).
type ack struct {
	acct int
	rev  uint64
	at   int64
}

// streamsPhase runs the streams phase and adds its rows to t.
func streamsPhase(ctx context.Context, o opts, t *table) error {
	r, err := profiled(o, "streams", func() (streamsResult, error) { return runStreams(ctx, o) })
	if err != nil {
		return fmt.Errorf("streams: %w", err)
	}
	streamsRows(t, r, o)
	return nil
}

func runStreams(ctx context.Context, o opts) (streamsResult, error) {
	var res streamsResult
	if o.streams.accounts < 1 || o.streams.subs < 1 {
		return res, fmt.Errorf("streams-accounts %d and streams-subs %d must be at least 1", o.streams.accounts, o.streams.subs)
	}
	s, err := startService(ctx, o, o.sync, o.streams.accounts, true, "")
	if err != nil {
		return res, err
	}
	defer s.Close()
	addr := strings.TrimPrefix(s.URL, "http://")
	paths := make([]string, len(s.Accounts))
	for i, a := range s.Accounts {
		paths[i] = "/api/trading/order?account=" + a.AccountNumber
	}
	conns := make([]keepAlive, o.workers)
	for w := range conns {
		conns[w] = keepAlive{addr: addr, key: s.Key}
		defer conns[w].close()
	}
	// next numbers the orders of the whole run: order k goes to account
	// k mod accounts, buying and selling in turn on each account.
	var next atomic.Uint64
	orders := func(acks [][]ack, other func() time.Duration) streamsWindow {
		return streamsOrders(ctx, o, conns, paths, &next, acks, other)
	}

	res.A = orders(nil, nil)
	progress("streams A, no subscribers:       %s", res.A)
	if err := sampleErr("streams A", []sample{res.A.sample}); err != nil {
		return res, err
	}

	c, err := startStreamsClient(ctx, o, s)
	if err != nil {
		return res, err
	}
	defer c.close()
	res.Frames.Subs, res.Frames.Connect = c.subs, c.connect
	if n, want := s.App.Hub.Subscribers(), int64(len(s.Accounts)*o.streams.subs); n < want {
		return res, fmt.Errorf("the hub counts %d subscribers, want %d", n, want)
	}
	progress("streams: %d subscribers connected in %s", c.subs, c.connect.Round(time.Millisecond))
	acks := make([][]ack, o.workers)
	res.B = orders(acks, c.cpu)
	progress("streams B, %d subscribers:    %s", c.subs, res.B)
	if err := sampleErr("streams B", []sample{res.B.sample}); err != nil {
		return res, err
	}
	for _, a := range acks {
		res.Acks += len(a)
	}
	if res.Frames, err = c.finish(acks); err != nil {
		return res, err
	}
	progress("streams B frames: %d deliveries (%d exact revision), %d missed; after the answer p50 %s p99 %s max %s",
		res.Frames.Deliveries, res.Frames.Exact, res.Frames.Missed, ms(res.Frames.P50), ms(res.Frames.P99), ms(res.Frames.Max))
	// The child has closed its sockets: the hub drops each stream when its
	// read of the connection fails.
	for wait := time.Now().Add(10 * time.Second); s.App.Hub.Subscribers() > 0 && time.Now().Before(wait); {
		time.Sleep(20 * time.Millisecond)
	}
	res.Lingered = s.App.Hub.Subscribers()

	res.C = orders(nil, nil)
	progress("streams C, no subscribers:       %s", res.C)
	if err := sampleErr("streams C", []sample{res.C.sample}); err != nil {
		return res, err
	}
	n := len(s.Accounts) * o.streams.subs
	if res.RawWrite, err = rawWriteBaseline(ctx, n, res.B.Rate*float64(o.streams.subs), min(o.dur, 4*time.Second)); err != nil {
		return res, err
	}
	progress("streams baseline: a raw write of a %d-byte frame over %d connections at B's frame rate: %s of CPU", rawFrame, n, res.RawWrite)
	return res, nil
}

// streamsOrders is one window of closed-loop market orders from conns (a
// client each), round robin over paths' accounts. With acks, each client's
// orders of the measured window are appended to acks[client]; with other,
// the CPU of that process over the window is its Subscribers.
func streamsOrders(ctx context.Context, o opts, conns []keepAlive, paths []string, next *atomic.Uint64, acks [][]ack, other func() time.Duration) streamsWindow {
	n := "st-" + strconv.FormatInt(window.Add(1), 10) + "-"
	accounts := uint64(len(paths))
	runtime.GC() // each window starts from a collected heap
	from := time.Now().Add(o.warm)
	end := from.Add(o.dur)
	var m0, m1 runtime.MemStats
	var sub0, sub1 time.Duration
	mem := make(chan struct{})
	go func() {
		defer close(mem)
		time.Sleep(time.Until(from))
		runtime.ReadMemStats(&m0)
		if other != nil {
			sub0 = other()
		}
		time.Sleep(time.Until(end))
		runtime.ReadMemStats(&m1)
		if other != nil {
			sub1 = other()
		}
	}()
	s := driveAt(ctx, len(conns), from, end, func(ctx context.Context, w, _ int) error {
		k := next.Add(1) - 1
		a := int(k % accounts)
		t0 := time.Now()
		status, seq, b, err := conns[w].postSeq(ctx, paths[a], orderBody(n+strconv.FormatUint(k, 10), int(k/accounts)))
		if err != nil {
			return err
		}
		if err := orderFilled(status, b); err != nil {
			return err
		}
		if seq == 0 {
			return fmt.Errorf("order: no %s in the answer", api.SeqHeader)
		}
		if acks != nil && !t0.Before(from) {
			if t1 := time.Now(); !t1.After(end) {
				acks[w] = append(acks[w], ack{acct: a, rev: seq, at: t1.UnixNano()})
			}
		}
		return nil
	})
	<-mem
	out := streamsWindow{sample: s}
	if s.N > 0 {
		out.Bytes = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(s.N)
		out.Objects = float64(m1.Mallocs-m0.Mallocs) / float64(s.N)
		out.Subscribers = (sub1 - sub0) / time.Duration(s.N)
	}
	return out
}

// streamsClient is the parent's end of a streams-client child.
type streamsClient struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   *bufio.Scanner
	subs    int
	connect time.Duration
	cancel  context.CancelFunc
}

// startStreamsClient starts the child and waits for its subscribers to
// read their first frames.
func startStreamsClient(ctx context.Context, o opts, s *service) (*streamsClient, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	numbers := make([]string, len(s.Accounts))
	for i, a := range s.Accounts {
		numbers[i] = a.AccountNumber
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute+2*(o.warm+o.dur))
	c := &streamsClient{cancel: cancel}
	c.cmd = exec.CommandContext(cctx, exe, "streams-client", "-addr", strings.TrimPrefix(s.URL, "http://"),
		"-accounts", strings.Join(numbers, ","), "-subs", strconv.Itoa(o.streams.subs))
	c.cmd.Env = append(os.Environ(), "BENCH_SSE_KEY="+s.Key) // not on the command line, which ps shows
	if o.profile != "" {
		c.cmd.Env = append(c.cmd.Env, "BENCH_SSE_CPUPROFILE="+filepath.Join(o.profile, "streams-client.pprof"))
	}
	c.cmd.Stderr = os.Stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		cancel()
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	c.lines = bufio.NewScanner(stdout)
	if !c.lines.Scan() {
		c.close()
		return nil, errors.New("streams client ended before its subscribers were ready")
	}
	var connectNs int64
	if _, err := fmt.Sscanf(c.lines.Text(), "ready %d %d", &c.subs, &connectNs); err != nil {
		c.close()
		return nil, fmt.Errorf("streams client: %q: %w", c.lines.Text(), err)
	}
	c.connect = time.Duration(connectNs)
	return c, nil
}

// finish tells the child the answered orders and reads its account of
// their frames; the child then closes its streams and exits.
func (c *streamsClient) finish(acks [][]ack) (frameResult, error) {
	r := frameResult{Subs: c.subs, Connect: c.connect}
	w := bufio.NewWriterSize(c.stdin, 64<<10)
	var line []byte
	for _, as := range acks {
		for _, a := range as {
			line = append(line[:0], "ack "...)
			line = strconv.AppendInt(line, int64(a.acct), 10)
			line = append(line, ' ')
			line = strconv.AppendUint(line, a.rev, 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, a.at, 10)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return r, err
			}
		}
	}
	if _, err := w.WriteString("end\n"); err != nil {
		return r, err
	}
	if err := w.Flush(); err != nil {
		return r, err
	}
	if !c.lines.Scan() {
		return r, errors.New("streams client ended without a result")
	}
	var p50, p99, mx int64
	if _, err := fmt.Sscanf(c.lines.Text(), "result %d %d %d %d %d %d", &r.Deliveries, &r.Exact, &r.Missed, &p50, &p99, &mx); err != nil {
		return r, fmt.Errorf("streams client: %q: %w", c.lines.Text(), err)
	}
	r.P50, r.P99, r.Max = time.Duration(p50), time.Duration(p99), time.Duration(mx)
	err := c.close()
	return r, err
}

// cpu is the CPU time (user and system) the child has used so far, in
// ticks of 10 ms.
func (c *streamsClient) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return statCPU(b)
}

// close ends the child's input and waits for it to exit (at most until
// its context's deadline); it may be called more than once.
func (c *streamsClient) close() error {
	if c.stdin == nil {
		return nil
	}
	c.stdin.Close()
	c.stdin = nil
	err := c.cmd.Wait()
	c.cancel()
	return err
}

// streamsClientMain is the streams-client child: it opens -subs streams of
// each account in -accounts, says "ready <subscribers> <connect ns>", reads
// "ack <account index> <revision> <unix ns>" lines until "end", waits (at
// most 10 s) for every subscriber to read its account's last answered
// revision, and prints "result <deliveries> <exact> <missed> <p50 ns>
// <p99 ns> <max ns>" over every (order, subscriber of its account) pair:
// the time from the answer to the subscriber's first frame at the order's
// revision or a newer one (frameLags).
func streamsClientMain(args []string) error {
	fs := flag.NewFlagSet("streams-client", flag.ContinueOnError)
	addr := fs.String("addr", "", "host:port of the service (127.0.0.1)")
	accounts := fs.String("accounts", "", "comma-separated account numbers")
	per := fs.Int("subs", 2, "subscribers of each account")
	if err := fs.Parse(args); err != nil {
		return err
	}
	numbers := strings.Split(*accounts, ",")
	if *accounts == "" || *per < 1 {
		return errors.New("streams client: accounts and subs are required")
	}
	n := len(numbers) * *per
	if err := loopbackChild("streams client", *addr, n); err != nil {
		return err
	}
	key := os.Getenv("BENCH_SSE_KEY")
	if path := os.Getenv("BENCH_SSE_CPUPROFILE"); path != "" {
		stop, err := cpuProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	// Subscriber i streams account i / per.
	set, took, err := openSubscribers(*addr, key, n, func(i int) string { return "/api/account/stream?account=" + numbers[i / *per] })
	if err != nil {
		return err
	}
	defer set.close()
	subs := set.subs
	fmt.Printf("ready %d %d\n", len(subs), took.Nanoseconds())

	acks := make([][]recv, len(numbers)) // by account
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() != "end" {
		a, r, err := parseAck(in.Bytes())
		if err != nil || a >= len(numbers) {
			return fmt.Errorf("streams client: %q: %v", in.Text(), err)
		}
		acks[a] = append(acks[a], r)
	}
	if err := in.Err(); err != nil {
		return err
	}
	for _, as := range acks {
		slices.SortFunc(as, func(x, y recv) int { return cmp.Compare(x.rev, y.rev) })
	}
	wait := time.Now().Add(10 * time.Second)
	for i, sub := range subs {
		as := acks[i / *per]
		if len(as) == 0 {
			continue
		}
		for sub.last.Load() < as[len(as)-1].rev && time.Now().Before(wait) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	set.halt()
	var r frameResult
	var lags []time.Duration
	for i, sub := range subs {
		l, exact, missed := frameLags(sub.got, acks[i / *per])
		lags = append(lags, l...)
		r.Exact += exact
		r.Missed += missed
	}
	slices.Sort(lags)
	r.Deliveries = len(lags)
	r.P50, r.P99 = percentile(lags, 0.5), percentile(lags, 0.99)
	if len(lags) > 0 {
		r.Max = lags[len(lags)-1]
	}
	fmt.Printf("result %d %d %d %d %d %d\n", r.Deliveries, r.Exact, r.Missed, r.P50.Nanoseconds(), r.P99.Nanoseconds(), r.Max.Nanoseconds())
	return nil
}

// parseAck parses "ack <account index> <revision> <unix ns>".
func parseAck(line []byte) (int, recv, error) {
	f := bytes.Fields(line)
	if len(f) != 4 || string(f[0]) != "ack" {
		return 0, recv{}, errors.New("not an ack line")
	}
	a, err1 := strconv.Atoi(string(f[1]))
	rev, err2 := strconv.ParseUint(string(f[2]), 10, 64)
	at, err3 := strconv.ParseInt(string(f[3]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, recv{}, err
	}
	if a < 0 {
		return 0, recv{}, errors.New("negative account index")
	}
	return a, recv{rev: rev, at: at}, nil
}

// frameLags matches one subscriber's frames (got, in the order read, so by
// revision) against its account's answered orders (acks, by revision): for
// each order the time from its answer to the first frame at its revision or
// a newer one (0 when that frame came first), how many of those frames were
// at the order's very revision, and how many orders no frame reached.
func frameLags(got, acks []recv) (lags []time.Duration, exact, missed int) {
	j := 0
	for _, a := range acks {
		for j < len(got) && got[j].rev < a.rev {
			j++
		}
		if j == len(got) {
			missed++
			continue
		}
		if got[j].rev == a.rev {
			exact++
		}
		lags = append(lags, time.Duration(max(0, got[j].at-a.at)))
	}
	return lags, exact, missed
}

// streamsRows adds the streams phase's rows: baseline is windows A and C
// (without subscribers), engine is window B (with them).
func streamsRows(t *table, r streamsResult, o opts) {
	mean := func(f func(streamsWindow) float64) float64 { return (f(r.A) + f(r.C)) / 2 }
	rate := func(w streamsWindow) float64 { return w.Rate }
	cpu := func(w streamsWindow) float64 { return float64(w.CPU) / 1e3 }
	kb := func(w streamsWindow) float64 { return w.Bytes / 1024 }
	objs := func(w streamsWindow) float64 { return w.Objects }
	base := mean(rate)
	ratio := 0.0
	if base > 0 {
		ratio = r.B.Rate / base
	}
	extra := cpu(r.B) - mean(cpu)
	t.add(row{fmt.Sprintf("streams: market orders over HTTP, %d clients round robin over %d accounts, rate (/s; baseline: mean of A and C without subscribers, engine: B with %d per account)", o.workers, o.streams.accounts, o.streams.subs),
		fmt.Sprintf("%.0f (A %.0f, C %.0f)", base, r.A.Rate, r.C.Rate), f0(r.B.Rate), f2(ratio) + "x", ">= 0.95x", passIf(ratio >= 0.95)})
	t.add(row{"  order p50 / p99", fmt.Sprintf("A %s / %s, C %s / %s", ms(r.A.P50), ms(r.A.P99), ms(r.C.P50), ms(r.C.P99)),
		fmt.Sprintf("%s / %s", ms(r.B.P50), ms(r.B.P99)), f2(float64(r.B.P99)/max(1, float64(r.A.P99+r.C.P99)/2)) + "x", "-", "-"})
	t.add(row{"  process CPU per order (us; the engine and its in-process clients)", fmt.Sprintf("%.0f (A %.0f, C %.0f)", mean(cpu), cpu(r.A), cpu(r.C)), f0(cpu(r.B)), "-", "-", "-"})
	raw := float64(r.RawWrite) / 1e3 * float64(o.streams.subs) // the floor of an order's frames
	floor := "-"
	if raw > 0 {
		floor = f2(extra/raw) + "x"
	}
	t.add(row{fmt.Sprintf("  streams' engine CPU per order (us; B less the mean of A and C; baseline: %d raw loopback writes of a %d-byte frame to idle readers, same run)", o.streams.subs, rawFrame),
		f1(raw), f1(extra), floor, "<= 15 us", passIf(extra <= 15)})
	t.add(row{"  the subscribers' process's CPU per order (us; a child on the same cores)", "", f0(float64(r.B.Subscribers) / 1e3), "", "-", "-"})
	t.add(row{"  allocated per order (KB / objects; the engine and its in-process clients)", fmt.Sprintf("%.1f / %.0f (A %.1f, C %.1f)", mean(kb), mean(objs), kb(r.A), kb(r.C)),
		fmt.Sprintf("%.1f / %.0f", kb(r.B), objs(r.B)), "-", "-", "-"})
	f := r.Frames
	t.add(row{fmt.Sprintf("  frame after the order's answer p50 / p99 / max (%d subscribers, every (order, subscriber) pair of B)", f.Subs),
		"", fmt.Sprintf("%s / %s / %s", ms(f.P50), ms(f.P99), ms(f.Max)), "", "p99 <= 10 ms", passIf(f.Deliveries > 0 && f.P99 <= 10*time.Millisecond)})
	lingered := ""
	if r.Lingered > 0 {
		lingered = fmt.Sprintf("; %d streams still open when C began", r.Lingered)
	}
	t.add(row{"  frames missed / pairs measured (at the order's own revision)", "", fmt.Sprintf("%d / %d (%d)%s", f.Missed, f.Deliveries+f.Missed, f.Exact, lingered), "", "0 missed", passIf(f.Deliveries > 0 && f.Missed == 0)})
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
)

// commitGen makes the commits the engine writes for market orders, by running
// the account aggregate's own Decide and Apply and encoding with the engine's
// registry, so the replayed log looks like a real one.
type commitGen struct {
	reg    events.Registry
	quotes []trading.Market
	at     time.Time
}

func newCommitGen() *commitGen {
	g := &commitGen{reg: engine.Registry(), at: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	specs := map[string]trading.Spec{}
	for _, in := range market.DefaultCrypto() {
		specs[in.Symbol] = trading.Spec{Symbol: in.Symbol, Multiplier: in.Multiplier, MaxQuantity: in.MaxQuantity}
	}
	for k := range 64 {
		m := trading.Market{Specs: specs, Quotes: map[string]trading.Quote{}}
		for _, in := range market.DefaultCrypto() {
			p := in.StartPrice.Add(in.TickSize.Mul(events.Int(int64(k - 32))))
			m.Quotes[in.Symbol] = trading.Quote{Instrument: in.Symbol, Bid: p.Sub(in.TickSize), Ask: p.Add(in.TickSize), At: g.at}
		}
		g.quotes = append(g.quotes, m)
	}
	return g
}

// commit decides cmd on s, applies the events and returns the encoded commit.
func (g *commitGen) commit(s *account.State, n int, cmd commands.Command) ([]byte, error) {
	at := g.at.Add(time.Duration(n) * time.Millisecond)
	env := commands.Envelope{ID: ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()), At: at,
		Principal: events.Principal{TenantID: "demo", KeyID: "bench"}, Cmd: cmd}
	if p, ok := cmd.(*trading.PlaceOrder); ok {
		env.Key = p.ClientOrderID
	}
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	evs, err := account.Decide(s, env)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		account.Apply(s, e)
	}
	return g.reg.Encode(events.Commit{CommandID: env.ID.String(), Key: env.Key, Principal: env.Principal, At: env.At, Events: evs})
}

func (g *commitGen) open(s *account.State, k int) ([]byte, error) {
	return g.commit(s, 0, &tenantcmd.OpenAccount{TenantID: "demo", Broker: "paper", AccountNumber: fmt.Sprintf("PA%06d", k+1),
		Label: "Bench", Currency: "USD", StartingBalance: events.Int(50000), Kind: "demo"})
}

func (g *commitGen) order(s *account.State, k, i int) ([]byte, error) {
	ins := "BTC-PERP"
	if (i/2)%2 == 1 {
		ins = "ETH-PERP"
	}
	c := &trading.PlaceOrder{ClientOrderID: "c-" + strconv.Itoa(k) + "-" + strconv.Itoa(i), Instrument: ins,
		Side: side(i), OrderType: "market", Quantity: qty, Market: g.quotes[(k+i)%len(g.quotes)]}
	return g.commit(s, i+1, c)
}

// sampleCommit is one encoded market-order commit: the baseline's payload.
func sampleCommit() ([]byte, error) {
	g := newCommitGen()
	s := account.New("acct_bench_0001")
	if _, err := g.open(s, 0); err != nil {
		return nil, err
	}
	return g.order(s, 0, 0)
}

// generate appends total commits over accounts accounts (one Opened, then
// market orders, per account) with async publish on an interval-sync server.
func generate(ctx context.Context, dir string, total, accounts int) (uint64, error) {
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "interval", Stream: "EVT", Replicas: 1})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	var pubErrs atomic.Int64
	js, err := jetstream.New(l.Conn(), jetstream.WithPublishAsyncMaxPending(16384),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { pubErrs.Add(1) }))
	if err != nil {
		return 0, err
	}
	per := total / accounts // commits per account, the Opened one included
	type msg struct {
		subject string
		data    []byte
	}
	ch := make(chan msg, 8192)
	producers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	var genErr atomic.Value
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := newCommitGen()
			var mine []int
			for k := p; k < accounts; k += producers {
				mine = append(mine, k)
			}
			states := make([]*account.State, len(mine))
			for i := 0; i < per; i++ {
				for j, k := range mine {
					var b []byte
					var err error
					if i == 0 {
						states[j] = account.New(fmt.Sprintf("acct_bench_%06d", k+1))
						b, err = g.open(states[j], k)
					} else {
						b, err = g.order(states[j], k, i-1)
					}
					if err != nil {
						genErr.CompareAndSwap(nil, err)
						stop()
						return
					}
					select {
					case ch <- msg{evacct.Subject(states[j].ID), b}:
					case <-gctx.Done():
						return
					}
				}
			}
		}()
	}
	go func() { wg.Wait(); close(ch) }()
	// Each message carries the headers the engine's append sets (its command
	// id, the expected last sequence of its subject, the stream), as a real
	// log's do and every reader of it parses. One publisher on an empty
	// stream (past its identity commit): the n-th message published is
	// sequence n after the stream's last, so the expected sequence is known
	// before the acks arrive; the server checks it.
	lastOf := make(map[string]uint64, accounts)
	seq, err := l.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	for m := range ch {
		msg := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{}}
		_, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(ulid.Make().String()),
			jetstream.WithExpectLastSequencePerSubject(lastOf[m.subject]), jetstream.WithExpectStream(l.StreamName()),
			jetstream.WithStallWait(30*time.Second)) // a slow disk holds 16,384 acks longer than the default 200 ms
		if err != nil {
			return 0, err
		}
		seq++
		lastOf[m.subject] = seq
	}
	if err, _ := genErr.Load().(error); err != nil {
		return 0, err
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		return 0, errors.New("generate: async publishes not acknowledged within 60s")
	}
	if n := pubErrs.Load(); n > 0 {
		return 0, fmt.Errorf("generate: %d publishes failed", n)
	}
	return l.LastSeq(ctx)
}

// coldResult is one cold start of the same log three ways.
type coldResult struct {
	Commits   uint64
	Bytes     int64
	Raw       time.Duration // ordered consumer reading every message
	Projector time.Duration // projections.Projector into the memory store, Run to WaitFor(last)
	Warmup    time.Duration // the service's start: one replay into the aggregates and the memory read models
}

func rate(n uint64, d time.Duration) float64 { return float64(n) / d.Seconds() }

// readLog reads the stream from its start to sequence until with an ordered
// consumer, through Consume (a handler on the subscription's goroutine, the
// cheaper of nats.go's two ways and the one eventlog uses), handing each
// message to fn.
func readLog(ctx context.Context, l *eventlog.Log, until uint64, fn func(subject string, seq uint64, data []byte)) error {
	st, err := l.JetStream().Stream(ctx, l.StreamName())
	if err != nil {
		return err
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	var ended atomic.Bool
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ended.Load() {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			ended.Store(true)
			done <- err
			return
		}
		fn(m.Subject(), md.Sequence.Stream, m.Data())
		if md.Sequence.Stream >= until {
			ended.Store(true)
			done <- nil
		}
	}, jetstream.PullMaxMessages(4096))
	if err != nil {
		return err
	}
	defer cc.Stop()
	select {
	case err := <-done:
		return err
	case <-cc.Closed():
		return errors.New("read log: consumer closed")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rawReplay is the raw ordered consumer: it reads every message, decoding nothing.
func rawReplay(ctx context.Context, l *eventlog.Log, until uint64) (int64, error) {
	var n int64
	err := readLog(ctx, l, until, func(_ string, _ uint64, data []byte) { n += int64(len(data)) })
	return n, err
}

// project times the stock projector catching a fresh memory store up to
// until: Projector.Run, whose catch-up decodes on every core.
func project(ctx context.Context, l *eventlog.Log, until uint64) (time.Duration, error) {
	p := projections.NewProjector(memory.New(), engine.Registry(), projections.Core)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	t := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(pctx, l) }()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	err := p.WaitFor(wctx, until)
	took := time.Since(t)
	stop()
	<-runErr
	return took, err
}

// coldStart times, on a log of dir holding last commits, each in a fresh
// process as a real cold start is (a process that replayed once already has
// its heap mapped, and page faults are a large part of a first replay's cost
// on a virtual machine): the raw ordered consumer, the projector catching
// the memory read models up, and the service's warm-up (engine.Start with
// the read models fed from the same pass).
func coldStart(ctx context.Context, o opts, dir string, last uint64) (coldResult, error) {
	r := coldResult{Commits: last}
	var err error
	if r.Raw, r.Bytes, err = coldReplayProcess(ctx, o, dir, "raw", last); err != nil {
		return r, fmt.Errorf("raw replay: %w", err)
	}
	if r.Projector, _, err = coldReplayProcess(ctx, o, dir, "project", last); err != nil {
		return r, fmt.Errorf("projector: %w", err)
	}
	if r.Warmup, _, err = coldReplayProcess(ctx, o, dir, "warm", last); err != nil {
		return r, fmt.Errorf("engine warm-up: %w", err)
	}
	return r, nil
}

// coldReplayProcess runs one cold replay in a child process (this binary's
// cold-replay subcommand) and reads back its time and bytes.
func coldReplayProcess(ctx context.Context, o opts, dir, mode string, last uint64) (time.Duration, int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	args := []string{"cold-replay", "-dir", dir, "-mode", mode, "-last", strconv.FormatUint(last, 10)}
	if o.profile != "" {
		args = append(args, "-cpuprofile", filepath.Join(o.profile, "cold-"+mode+".pprof"))
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, err
	}
	var res struct {
		Nanos int64 `json:"nanos"`
		Bytes int64 `json:"bytes"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, 0, fmt.Errorf("cold-replay answered %q: %w", out, err)
	}
	return time.Duration(res.Nanos), res.Bytes, nil
}

// coldReplay is the cold-replay subcommand: one timed replay of the log in
// -dir, from the log opened to the last commit applied, printed as JSON.
func coldReplay(args []string) error {
	fs := flag.NewFlagSet("cold-replay", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory of the log")
	mode := fs.String("mode", "raw", "raw, project or warm")
	last := fs.Uint64("last", 0, "last sequence of the log")
	profile := fs.String("cpuprofile", "", "CPU profile of the replay")
	memProfile := fs.String("memprofile", "", "allocation profile of the replay, written at its end")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: *dir, Sync: "always", Stream: "EVT", Replicas: 1})
	if err != nil {
		return err
	}
	defer l.Close()
	if *profile != "" {
		stop, err := cpuProfile(*profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var took time.Duration
	var n int64
	switch *mode {
	case "raw":
		t := time.Now()
		n, err = rawReplay(ctx, l, *last)
		took = time.Since(t)
	case "project":
		// The service relaxes the collector the same way while it warms up.
		restore := app.RelaxGC()
		took, err = project(ctx, l, *last)
		restore()
	case "warm":
		took, err = warm(ctx, l, *last)
	default:
		err = fmt.Errorf("mode %q is none of raw, project, warm", *mode)
	}
	if err != nil {
		return err
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]int64{"nanos": int64(took), "bytes": n})
}

// warm times the service's start: one replay rebuilds the aggregates and
// feeds the memory read models (app.warm).
func warm(ctx context.Context, l *eventlog.Log, last uint64) (time.Duration, error) {
	e, err := engine.New(engine.Config{Log: l, Feed: market.NewSim(market.DefaultCrypto(), 1, time.Now),
		Catalog: market.NewCatalog(market.DefaultCrypto()), Now: time.Now})
	if err != nil {
		return 0, err
	}
	defer e.Close()
	t := time.Now()
	defer app.RelaxGC()()
	p := projections.NewProjector(memory.New(), engine.Registry(), projections.Core)
	tap, flush, err := p.Feed(ctx)
	if err != nil {
		return 0, err
	}
	got, err := e.Start(ctx, tap)
	if err == nil {
		err = flush()
	}
	took := time.Since(t)
	if err == nil && got != last {
		err = fmt.Errorf("replayed to %d, want %d", got, last)
	}
	return took, err
}

// coldProbe is one timed replay of a prefix of the log.
type coldProbe struct {
	name string
	n    uint64
	took time.Duration
}

// coldProbes time candidate projector changes on the first fifth of the log:
// more headroom for the garbage collector.
func coldProbes(ctx context.Context, dir string, last uint64) ([]coldProbe, error) {
	n := max(last/5, 1)
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "always", Stream: "EVT", Replicas: 1})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	var out []coldProbe
	timed := func(name string, gogc int, fn func(context.Context, *eventlog.Log, uint64) (time.Duration, error)) error {
		runtime.GC()
		old := debug.SetGCPercent(gogc)
		took, err := fn(ctx, l, n)
		debug.SetGCPercent(old)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, coldProbe{name, n, took})
		return nil
	}
	steps := []struct {
		name string
		gogc int
		fn   func(context.Context, *eventlog.Log, uint64) (time.Duration, error)
	}{
		{"raw ordered consumer", 100, func(ctx context.Context, l *eventlog.Log, n uint64) (time.Duration, error) {
			t := time.Now()
			_, err := rawReplay(ctx, l, n)
			return time.Since(t), err
		}},
		{"projector", 100, project},
		{"projector, GOGC=400", 400, project},
		{"projector, GOGC=" + strconv.Itoa(app.WarmGOGC) + " (the warm-up's)", app.WarmGOGC, project},
	}
	for _, s := range steps {
		if err := timed(s.name, s.gogc, s.fn); err != nil {
			return out, err
		}
	}
	return out, nil
}

// coldPhase generates the log once in a fresh directory and times runs cold
// starts of it, then the probes when asked.
func coldPhase(ctx context.Context, o opts, runs int, probes bool, progress func(string)) ([]coldResult, []coldProbe, error) {
	dir, last, err := coldLog(ctx, o, progress)
	if err != nil {
		return nil, nil, err
	}
	if o.coldLog == "" {
		defer os.RemoveAll(dir)
	}
	var out []coldResult
	for range runs {
		r, err := coldStart(ctx, o, dir, last)
		if err != nil {
			return out, nil, err
		}
		progress(fmt.Sprintf("cold: raw %.0f/s (%s, %d MB), projector %.0f/s (%s), engine warm-up %.0f/s (%s)",
			rate(last, r.Raw), r.Raw.Round(time.Millisecond), r.Bytes>>20, rate(last, r.Projector), r.Projector.Round(time.Millisecond),
			rate(last, r.Warmup), r.Warmup.Round(time.Millisecond)))
		out = append(out, r)
	}
	if !probes {
		return out, nil, nil
	}
	ps, err := coldProbes(ctx, dir, last)
	for _, p := range ps {
		progress(fmt.Sprintf("cold probe: %s: %.0f commits/s (%d in %s)", p.name, rate(p.n, p.took), p.n, p.took.Round(time.Millisecond)))
	}
	return out, ps, err
}

// coldLog is the directory of the cold-start log and its last sequence: a
// fresh temporary one, or o.coldLog, generated there on first use and kept,
// so that repeated runs replay the same log without generating it again.
func coldLog(ctx context.Context, o opts, progress func(string)) (string, uint64, error) {
	dir := o.coldLog
	if dir == "" {
		d, err := os.MkdirTemp(o.tmp, "bench-cold-")
		if err != nil {
			return "", 0, err
		}
		dir = d
	} else if _, err := os.Stat(filepath.Join(dir, "nats")); err == nil {
		l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "always", Stream: "EVT", Replicas: 1})
		if err != nil {
			return "", 0, err
		}
		defer l.Close()
		last, err := l.LastSeq(ctx)
		progress(fmt.Sprintf("cold: reusing the log of %d commits in %s", last, dir))
		return dir, last, err
	}
	t := time.Now()
	last, err := generate(ctx, dir, o.commits, o.coldAccounts)
	if err != nil {
		return dir, 0, err
	}
	progress(fmt.Sprintf("cold: generated %d commits in %s (%.0f/s, decide+encode+async publish)", last, time.Since(t).Round(time.Millisecond), rate(last, time.Since(t))))
	return dir, last, nil
}

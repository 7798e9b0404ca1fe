package bars

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/replay"
	"github.com/svc/engine/engine/market/spread"
)

func played(t *testing.T, saver Saver) (*Service, *replay.Feed) {
	t.Helper()
	rows, err := replay.ReadFile("../replay/testdata/session.csv")
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(DefaultRetention, saver)
	f := replay.New(rows, replay.Options{})
	svc.Attach(f)
	return svc, f
}

func tf(t *testing.T, s string) market.Timeframe {
	t.Helper()
	x, err := market.ParseTimeframe(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func render(bars []market.Bar) string {
	var out []string
	for _, b := range bars {
		out = append(out, string(b.AppendJSON(nil)))
	}
	return strings.Join(out, "\n")
}

func known(name string) (string, bool) {
	return name, name == "BTC-PERP" || name == "ETH-PERP"
}

func TestBarsFromReplay(t *testing.T) {
	svc, f := played(t, nil)
	f.StepN(100)
	cases := []struct {
		symbol, tf string
		count      int
		to         int64
		want       string
	}{
		{"BTC-PERP", "1m", 10, 0, `{"time":1717408800,"open":"65000","high":"65010.5","low":"64990","close":"64990","volume":"3.5"}
{"time":1717408860,"open":"65005","high":"65020","low":"65005","close":"65020","volume":"1.25"}
{"time":1717408920,"open":"65015","high":"65015","low":"65015","close":"65015","volume":"1"}`},
		{"BTC-PERP", "1m", 1, 0, `{"time":1717408920,"open":"65015","high":"65015","low":"65015","close":"65015","volume":"1"}`},
		{"BTC-PERP", "1m", 1, 1717408920, `{"time":1717408860,"open":"65005","high":"65020","low":"65005","close":"65020","volume":"1.25"}`},
		{"BTC-PERP", "5m", 10, 0, `{"time":1717408800,"open":"65000","high":"65020","low":"64990","close":"65015","volume":"5.75"}`},
		{"BTC-PERP", "2m", 10, 0, `{"time":1717408800,"open":"65000","high":"65020","low":"64990","close":"65020","volume":"4.75"}
{"time":1717408920,"open":"65015","high":"65015","low":"65015","close":"65015","volume":"1"}`},
		{"ETH-PERP", "1m", 10, 0, `{"time":1717408800,"open":"3200","high":"3205.5","low":"3200","close":"3205.5","volume":"3"}
{"time":1717408860,"open":"3203.5","high":"3203.5","low":"3203.5","close":"3203.5","volume":"0"}`},
		{"BTC-PERP", "15s", 2, 0, `{"time":1717408890,"open":"65020","high":"65020","low":"65020","close":"65020","volume":"0.25"}
{"time":1717408950,"open":"65015","high":"65015","low":"65015","close":"65015","volume":"1"}`},
		{"BTC-PERP", "1d", 5, 0, `{"time":1717372800,"open":"65000","high":"65020","low":"64990","close":"65015","volume":"5.75"}`},
		{"BTC-PERP", "1w", 5, 0, `{"time":1717372800,"open":"65000","high":"65020","low":"64990","close":"65015","volume":"5.75"}`},
	}
	for _, c := range cases {
		got := render(svc.Store.History(c.symbol, tf(t, c.tf), c.count, c.to))
		if got != c.want {
			t.Errorf("%s %s count %d to %d:\n got %s\nwant %s", c.symbol, c.tf, c.count, c.to, got, c.want)
		}
	}
	if got := svc.Store.History("SOL-PERP", tf(t, "1m"), 10, 0); len(got) != 0 {
		t.Fatalf("no ticks, no bars: %v", got)
	}
}

func TestSpreadHistoryOverTheIntersection(t *testing.T) {
	svc, f := played(t, nil)
	f.StepN(100)
	e, err := spread.Parse("BTC-PERP - 10*ETH-PERP", known)
	if err != nil {
		t.Fatal(err)
	}
	got := render(svc.Store.SpreadHistory(e, tf(t, "1m"), 10, 0))
	want := `{"time":1717408800,"open":"33000","high":"33000","low":"32935","close":"32935","volume":"0"}
{"time":1717408860,"open":"32970","high":"32985","low":"32970","close":"32985","volume":"0"}`
	if got != want {
		t.Fatalf("spread:\n got %s\nwant %s", got, want)
	}
	got = render(svc.Store.SpreadHistory(e, tf(t, "1m"), 1, 0))
	if !strings.HasPrefix(got, `{"time":1717408860`) {
		t.Fatalf("countBack 1 keeps the newest: %s", got)
	}
	undefined, _ := spread.Parse("BTC-PERP / (ETH-PERP - ETH-PERP)", known)
	if got := svc.Store.SpreadHistory(undefined, tf(t, "1m"), 10, 0); len(got) != 0 {
		t.Fatalf("undefined buckets are left out: %s", render(got))
	}
}

type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) fn(u Update) {
	r.mu.Lock()
	r.got = append(r.got, string(u.JSON))
	r.mu.Unlock()
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func TestLiveBarsFollowTheReplay(t *testing.T) {
	svc, f := played(t, nil)
	single, _ := spread.Parse("BTC-PERP", known)
	sp, _ := spread.Parse("BTC-PERP-10*ETH-PERP", known)
	var a, b recorder
	cancelA := svc.Live.Subscribe(single, tf(t, "1m"), a.fn)
	defer cancelA()
	cancelB := svc.Live.Subscribe(sp, tf(t, "1m"), b.fn)
	defer cancelB()
	for f.Step() {
		svc.Live.Flush()
	}
	wantA := []string{
		`{"time":1717408800,"open":"65000","high":"65000","low":"65000","close":"65000","volume":"1"}`,
		`{"time":1717408800,"open":"65000","high":"65010.5","low":"65000","close":"65010.5","volume":"1.5"}`,
		`{"time":1717408800,"open":"65000","high":"65010.5","low":"64990","close":"64990","volume":"3.5"}`,
		`{"time":1717408860,"open":"65005","high":"65005","low":"65005","close":"65005","volume":"1"}`,
		`{"time":1717408860,"open":"65005","high":"65020","low":"65005","close":"65020","volume":"1.25"}`,
		`{"time":1717408920,"open":"65015","high":"65015","low":"65015","close":"65015","volume":"1"}`,
	}
	if got := a.all(); strings.Join(got, "\n") != strings.Join(wantA, "\n") {
		t.Fatalf("live BTC-PERP 1m:\n%s", strings.Join(got, "\n"))
	}
	gotB := b.all()
	if len(gotB) == 0 || gotB[len(gotB)-1] != `{"time":1717408860,"open":"32970","high":"32985","low":"32970","close":"32985","volume":"0"}` {
		t.Fatalf("live spread:\n%s", strings.Join(gotB, "\n"))
	}
	// a late subscriber gets the newest bar at once
	var c recorder
	cancelC := svc.Live.Subscribe(single, tf(t, "1m"), c.fn)
	cancelC()
	if got := c.all(); len(got) != 1 || got[0] != wantA[len(wantA)-1] {
		t.Fatalf("late subscriber: %v", got)
	}
	if svc.Live.Keys() != 2 {
		t.Fatalf("keys %d, want 2 (the canceled third shared a key)", svc.Live.Keys())
	}
}

func TestHistorySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() (*eventlog.Log, *JetStream) {
		log, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: dir, Sync: "interval"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := OpenJetStream(context.Background(), log.JetStream(), market.DefaultNames, DefaultRetention)
		if err != nil {
			t.Fatal(err)
		}
		return log, p
	}
	log, p := open()
	ctx, cancel := context.WithCancel(context.Background())
	p.Start(ctx)
	svc, f := played(t, p)
	f.StepN(100)
	svc.Store.FlushOpen()
	cancel()
	p.Close()
	before := render(svc.Store.History("BTC-PERP", tf(t, "1m"), 10, 0)) + render(svc.Store.History("BTC-PERP", tf(t, "15s"), 10, 0)) +
		render(svc.Store.History("ETH-PERP", tf(t, "1d"), 10, 0))
	log.Close()

	log, p = open()
	defer log.Close()
	st := NewStore(DefaultRetention, nil)
	n, err := p.Load(context.Background(), st)
	if err != nil || n == 0 {
		t.Fatalf("load: %d bars, %v", n, err)
	}
	after := render(st.History("BTC-PERP", tf(t, "1m"), 10, 0)) + render(st.History("BTC-PERP", tf(t, "15s"), 10, 0)) +
		render(st.History("ETH-PERP", tf(t, "1d"), 10, 0))
	if before != after {
		t.Fatalf("history changed across a restart:\nbefore %s\nafter  %s", before, after)
	}
	_ = time.Second
}

// A read of the history that stalls holds a start for LoadWait at most: Load
// answers with the bars read by then, the rest come in the background, and a
// stored bar never replaces the live feed's bar of the same time.
func TestAStalledHistoryReadDoesNotHoldTheStart(t *testing.T) {
	log, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "interval"})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p, err := OpenJetStream(context.Background(), log.JetStream(), market.DefaultNames, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	bar := func(at int64, px string) market.Bar {
		var d apd.Decimal
		d.SetString(px)
		return market.Bar{Time: at, Open: d, High: d, Low: d, Close: d}
	}
	stalled, finished := make(chan struct{}), make(chan struct{})
	p.read = func(ctx context.Context, st *Store, n *atomic.Int64) error {
		defer close(finished)
		st.Fill("BTC-PERP", market.Minute, bar(60, "100"))
		n.Add(1)
		<-stalled                                          // a consumer the cluster is slow to create
		st.Fill("BTC-PERP", market.Minute, bar(120, "90")) // an older version of the live bar
		st.Fill("BTC-PERP", market.Minute, bar(0, "80"))
		n.Add(2)
		return nil
	}
	st := NewStore(DefaultRetention, nil)
	begun := time.Now()
	n, err := p.Load(context.Background(), st)
	if took := time.Since(begun); err != nil || n != 1 || took > LoadWait+time.Second {
		t.Fatalf("Load: %d bars, %v, after %v; want 1 bar within %v", n, err, took, LoadWait)
	}
	st.Put("BTC-PERP", market.Minute, bar(120, "95")) // the live feed's bar
	close(stalled)
	<-finished
	if got := render(st.History("BTC-PERP", tf(t, "1m"), 10, 0)); !strings.Contains(got, "95") || strings.Contains(got, "90") || !strings.Contains(got, "80") {
		t.Fatalf("history after the background read: %s; want the live bar at 95 kept and the bar at 80 added", got)
	}
}

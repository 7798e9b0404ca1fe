package webhook

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// readerTail stands for the projector as a tail: a reader of the log of its
// own that hands each commit, decoded, to the reactor listening, from where
// the test tells it to begin, dropping and repeating some on the way.
type readerTail struct {
	g      *markRig
	mu     sync.Mutex
	fn     func(events.Committed)
	onHear func() // called once, as the reactor starts listening (in Start, before its replay)
}

func (rt *readerTail) tail(fn func(events.Committed)) func() {
	rt.mu.Lock()
	rt.fn = fn
	on := rt.onHear
	rt.onHear = nil
	rt.mu.Unlock()
	if on != nil {
		on()
	}
	return func() {
		rt.mu.Lock()
		rt.fn = nil
		rt.mu.Unlock()
	}
}

// run reads the log after from until ctx ends, handing each commit to the
// listener unless drop names it, twice when twice does.
func (rt *readerTail) run(ctx context.Context, from uint64, drop, twice func(seq uint64) bool) {
	_ = rt.g.log.Follow(ctx, from, func(m eventlog.Msg) error {
		if drop(m.Seq) {
			return nil
		}
		c, err := rt.g.reg.Decode(m.Data)
		if err != nil {
			return err
		}
		rt.mu.Lock()
		fn := rt.fn
		rt.mu.Unlock()
		if fn == nil {
			return nil
		}
		fn(events.Committed{Subject: m.Subject, Seq: m.Seq, Commit: c})
		if twice(m.Seq) {
			fn(events.Committed{Subject: m.Subject, Seq: m.Seq, Commit: c})
		}
		return nil
	})
}

// startTail starts a reactor that hears rt and reads the log itself when
// the tail leaves it behind for lag.
func (g *markRig) startTail(rt *readerTail, lag time.Duration) *Reactor {
	g.t.Helper()
	r, err := New(Config{Log: g.log, Registry: g.reg, Key: make([]byte, 32), Client: g.srv.Client(), AllowPrivate: true,
		Timeout: 5 * time.Second, Now: time.Now, MarkEvery: 20 * time.Millisecond, Tail: rt.tail, TailLag: lag})
	if err != nil {
		g.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		g.t.Fatal(err)
	}
	return r
}

// onceEach fails unless every id was sent to path exactly once, and path
// received nothing else.
func (g *markRig) onceEach(path string, ids []string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if n := g.tries[path+" "+id]; n != 1 {
			return fmt.Errorf("%s sent %d times, want once", id, n)
		}
	}
	total := 0
	for _, n := range g.tries {
		total += n
	}
	if total != len(ids) {
		return fmt.Errorf("%d attempts in all, want %d", total, len(ids))
	}
	return nil
}

// settled fails unless every id was sent to path exactly once and r holds
// nothing of them: its replay mark is past the last. (A delivery routed
// twice is sent once, the ledger refusing its second attempt 1, but then
// counts as taken by another node and pins the mark for good.)
func (g *markRig) settled(r *Reactor, path string, ids []string) error {
	if err := g.onceEach(path, ids); err != nil {
		return err
	}
	if m, last := r.mark(), seqOf(ids[len(ids)-1]); m <= last {
		return fmt.Errorf("replay mark %d, want past %d: a delivery is still held", m, last)
	}
	return nil
}

// A reactor that takes its commits from a tail delivers every webhook once:
// those of commits made while it replays the log, made after its replay but
// before the tail gave it anything, dropped or repeated by the tail, and
// across a restart whose tail repeats the whole log.
func TestATailedReactorDeliversEveryWebhookOnceAcrossTheGap(t *testing.T) {
	g := newMarkRig(t)
	g.register("f", "w1", "/w1")
	g.open("f", "a1", "EV1")
	var mu sync.Mutex
	var ids []string
	halt := func() string {
		id := g.halt("a1")
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
		return id
	}
	for range 200 { // a replay long enough for commits to arrive during it
		halt()
	}
	during := make(chan struct{})
	rt := &readerTail{g: g, onHear: func() {
		go func() { // while the reactor replays, and past its replay's end
			defer close(during)
			for range 30 {
				halt()
			}
		}()
	}}
	// A lag longer than the test: only the gaps the tail shows make the
	// reactor read the log.
	r := g.startTail(rt, time.Minute)
	replayed := r.pos.Load()
	<-during
	for range 5 { // after the replay, before the tail gives anything
		halt()
	}
	end := g.last()
	if end <= replayed+3 {
		t.Fatalf("the replay reached %d, the log %d: no gap to bridge", replayed, end)
	}
	// The tail begins before the replay's end (repeats of what it read) and
	// skips what followed it but the last two commits: the gap.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader := make(chan struct{})
	var dropMu sync.Mutex
	dropped := map[uint64]bool{}
	drop := func(seq uint64) bool {
		dropMu.Lock()
		defer dropMu.Unlock()
		return seq > replayed && seq <= end-2 || dropped[seq]
	}
	go func() {
		defer close(reader)
		rt.run(ctx, replayed-3, drop, func(seq uint64) bool { return seq%3 == 0 })
	}()
	enginetest.WaitFor(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		return g.settled(r, "/w1", ids)
	})
	if r.bridged.Load() == 0 {
		t.Fatal("the gap after the replay was not read from the log")
	}
	// Live commits the tail drops in the middle are read from the log.
	next := g.last()
	dropMu.Lock()
	dropped[next+3], dropped[next+4] = true, true
	dropMu.Unlock()
	before := r.bridged.Load()
	for range 8 {
		halt()
	}
	enginetest.WaitFor(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		return g.settled(r, "/w1", ids)
	})
	if r.bridged.Load() == before {
		t.Fatal("the commits the tail dropped were not read from the log")
	}
	// With the tail whole, the reactor reads nothing from the log.
	before = r.bridged.Load()
	for range 5 {
		id := halt()
		enginetest.WaitFor(t, 5*time.Second, func() error {
			if g.delivered("/w1", id, 1) != 1 {
				return fmt.Errorf("%s not delivered", id)
			}
			return nil
		})
	}
	if n := r.bridged.Load() - before; n != 0 {
		t.Fatalf("%d commits read from the log while the tail gave them all", n)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		return g.settled(r, "/w1", ids)
	})
	r.Close(time.Second)
	cancel()
	<-reader

	// A restart: the tail repeats the whole log (a projector folding into
	// memory starts from the beginning), commits arrive meanwhile.
	for range 3 {
		halt()
	}
	rt2 := &readerTail{g: g}
	r2 := g.startTail(rt2, time.Minute)
	defer r2.Close(time.Second)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go rt2.run(ctx2, 0, func(uint64) bool { return false }, func(uint64) bool { return false })
	for range 3 {
		halt()
	}
	enginetest.WaitFor(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		return g.settled(r2, "/w1", ids)
	})
}

// A tail that gives nothing (its reader stopped) delays deliveries by the
// lag at most: the reactor reads the log itself.
func TestATailedReactorReadsTheLogWhenTheTailIsSilent(t *testing.T) {
	g := newMarkRig(t)
	g.register("f", "w1", "/w1")
	g.open("f", "a1", "EV1")
	r := g.startTail(&readerTail{g: g}, 50*time.Millisecond)
	defer r.Close(time.Second)
	var ids []string
	for range 3 {
		ids = append(ids, g.halt("a1"))
	}
	enginetest.WaitFor(t, 5*time.Second, func() error { return g.settled(r, "/w1", ids) })
	ids = append(ids, g.halt("a1"))
	enginetest.WaitFor(t, 5*time.Second, func() error { return g.settled(r, "/w1", ids) })
}

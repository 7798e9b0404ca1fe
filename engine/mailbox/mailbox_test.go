package mailbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/events"
)

// A counter aggregate: Add{N} is refused when it would pass Max.
type added struct {
	N int `json:"n"`
}

func (added) Type() string { return "test.added.v1" }

type add struct{ N int }

func (*add) Validate() error { return nil }

type counter struct{ total int }

const max = 100

func kind() mailbox.Kind[*counter] {
	return mailbox.Kind[*counter]{
		Name:    "counter",
		Subject: func(id string) string { return "evt.counter." + id },
		New:     func(string) *counter { return &counter{} },
		Decide: func(s *counter, env commands.Envelope) ([]events.Event, error) {
			c := env.Cmd.(*add)
			if s.total+c.N > max {
				return nil, commands.Refuse("over", "over the maximum", nil)
			}
			if s.total+c.N < 0 {
				return nil, commands.Refuse("under", "below zero", nil)
			}
			if c.N == 0 {
				return nil, nil // nothing to change
			}
			return []events.Event{added{N: c.N}}, nil
		},
		Apply: func(s *counter, e events.Event) *counter { s.total += e.(added).N; return s },
	}
}

var reg = events.Registry{"test.added.v1": events.Of[added]()}

func open(t *testing.T) *eventlog.Log {
	l, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func env(n int) commands.Envelope {
	return commands.Envelope{ID: ulid.Make(), At: time.Now(), Cmd: &add{N: n}}
}

func total(t *testing.T, l *eventlog.Log, id string) int {
	sum := 0
	_, err := l.Load(context.Background(), "evt.counter."+id, func(m eventlog.Msg) error {
		c, err := reg.Decode(m.Data)
		if err != nil {
			return err
		}
		for _, e := range c.Events {
			sum += e.(added).N
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// Two groups (two writers, as two nodes would be) act on one aggregate: the
// expected-sequence guard makes the stale one reload and decide again, so the
// invariant holds and no write is lost.
func TestConcurrentWritersNeverBothActOnTheSameState(t *testing.T) {
	l := open(t)
	a := mailbox.NewGroup(kind(), l, reg, nil)
	b := mailbox.NewGroup(kind(), l, reg, nil)
	defer a.Close()
	defer b.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for i := 0; i < 40; i++ {
		g := a
		if i%2 == 1 {
			g = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.Execute(context.Background(), "c1", env(5))
			var ref *commands.Refusal
			switch {
			case err == nil:
				mu.Lock()
				accepted++
				mu.Unlock()
			case errors.As(err, &ref):
			default:
				// Retries exhausted under heavy contention is allowed; it records nothing.
				if !errors.Is(err, eventlog.ErrConcurrency) {
					t.Errorf("execute: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	got := total(t, l, "c1")
	if got > max || got != accepted*5 {
		t.Fatalf("log holds %d, accepted %d adds of 5 (max %d)", got, accepted, max)
	}
	if accepted == 0 {
		t.Fatal("nothing accepted")
	}
}

func TestRefusalAppendsNothingAndDryRunCommitsNothing(t *testing.T) {
	l := open(t)
	g := mailbox.NewGroup(kind(), l, reg, nil)
	defer g.Close()
	if _, err := g.Execute(context.Background(), "c2", env(max+1)); err == nil {
		t.Fatal("refusal expected")
	}
	res, err := g.DryRun(context.Background(), "c2", env(3))
	if err != nil || len(res.Events) != 1 {
		t.Fatalf("dry run %v %v", res, err)
	}
	if n, _ := l.LastSubjectSeq(context.Background(), "evt.counter.c2"); n != 0 {
		t.Fatalf("log has commits at %d", n)
	}
	res, err = g.Execute(context.Background(), "c2", env(3))
	if err != nil || res.Seq == 0 {
		t.Fatalf("execute %v %v", res, err)
	}
	var seen int
	if err := g.Inspect(context.Background(), "c2", func(s *counter, rev uint64) {
		seen = s.total
		if rev != res.Seq {
			t.Errorf("revision %d, want %d", rev, res.Seq)
		}
	}); err != nil || seen != 3 {
		t.Fatalf("inspect %d %v", seen, err)
	}
}

func TestStateIsRebuiltFromTheLog(t *testing.T) {
	l := open(t)
	g := mailbox.NewGroup(kind(), l, reg, nil)
	for i := 0; i < 5; i++ {
		if _, err := g.Execute(context.Background(), "c3", env(10)); err != nil {
			t.Fatal(err)
		}
	}
	g.Close()
	g2 := mailbox.NewGroup(kind(), l, reg, nil)
	defer g2.Close()
	_, err := g2.Execute(context.Background(), "c3", env(60))
	var ref *commands.Refusal
	if !errors.As(err, &ref) {
		t.Fatalf("a fresh group did not see the earlier 50: %v", err)
	}
	if _, err := g2.Execute(context.Background(), "c3", env(50)); err != nil {
		t.Fatal(err)
	}
	if got := total(t, l, "c3"); got != 100 {
		t.Fatalf("total %d", got)
	}
}

type countingObserver struct {
	mu       sync.Mutex
	outcomes map[string]int
}

func (o *countingObserver) Command(_, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes[outcome]++
}

// A panic while deciding fails that one command with 500 internal_error and
// records nothing; a panic while applying a commit leaves the write standing.
// Either way the mailbox keeps serving and the panic is counted.
func TestAPanicFailsOneCommandAndTheMailboxServesOn(t *testing.T) {
	l := open(t)
	k := kind()
	decide, apply := k.Decide, k.Apply
	k.Decide = func(s *counter, env commands.Envelope) ([]events.Event, error) {
		if env.Cmd.(*add).N == 7 {
			panic("boom in decide")
		}
		return decide(s, env)
	}
	applyPanics := 1
	k.Apply = func(s *counter, e events.Event) *counter {
		if e.(added).N == 11 {
			panic("apply of 11 always panics")
		}
		if e.(added).N == 9 && applyPanics > 0 {
			applyPanics-- // once, live; the reload from the log applies it cleanly
			s.total = -1000
			panic("boom in apply")
		}
		return apply(s, e)
	}
	obs := &countingObserver{outcomes: map[string]int{}}
	g := mailbox.NewGroup(k, l, reg, obs)
	defer g.Close()

	_, err := g.Execute(context.Background(), "p1", env(7))
	var ref *commands.Refusal
	if !errors.As(err, &ref) || commands.StatusOf(ref.Code, ref.Malformed) != 500 || ref.Code != mailbox.CodeInternal || ref.Params["commandId"] == "" {
		t.Fatalf("decide panic answered %v", err)
	}
	if n, _ := l.LastSubjectSeq(context.Background(), "evt.counter.p1"); n != 0 {
		t.Fatalf("a panicking decision appended at %d", n)
	}
	if _, err := g.Execute(context.Background(), "p1", env(3)); err != nil {
		t.Fatalf("the mailbox stopped serving after a panic: %v", err)
	}

	// Apply panics after the append: the write stands and the state reloads.
	res, err := g.Execute(context.Background(), "p2", env(9))
	if err != nil || res.Seq == 0 {
		t.Fatalf("a commit whose apply panicked answered %v %v", res, err)
	}
	var seen int
	if err := g.Inspect(context.Background(), "p2", func(s *counter, _ uint64) { seen = s.total }); err != nil {
		t.Fatal(err)
	}
	if seen != 9 {
		t.Fatalf("state after the reload: %d", seen)
	}

	// A commit whose apply always panics: the reload from the log (run in the
	// log client's goroutine) fails the next command instead of the process.
	if res, err := g.Execute(context.Background(), "p3", env(11)); err != nil || res.Seq == 0 {
		t.Fatalf("commit with a panicking apply: %v %v", res, err)
	}
	if _, err := g.Execute(context.Background(), "p3", env(1)); err == nil {
		t.Fatal("a command on an aggregate that cannot be rebuilt succeeded")
	}
	if _, err := g.Execute(context.Background(), "p1", env(1)); err != nil {
		t.Fatalf("another aggregate stopped serving: %v", err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.outcomes["panic"] != 4 {
		t.Fatalf("panics counted %d, want 4", obs.outcomes["panic"])
	}
}

// Two groups on one log, as two nodes: a refusal is decided on the state
// only once the log holds nothing newer on the aggregate. A group that saw
// the aggregate at 0, asked to take 5 after the other added 10, reloads and
// takes it, instead of refusing on what it held (a refusal appends nothing,
// so the log's guard never sees it).
func TestARefusalIsNeverDecidedOnAStaleState(t *testing.T) {
	l := open(t)
	a := mailbox.NewGroup(kind(), l, reg, nil)
	b := mailbox.NewGroup(kind(), l, reg, nil)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	if _, err := a.Execute(ctx, "c9", env(-1)); err == nil { // a now holds the aggregate, at 0
		t.Fatal("taking 1 from 0 was not refused")
	}
	if _, err := b.Execute(ctx, "c9", env(10)); err != nil {
		t.Fatal(err)
	}
	res, err := a.Execute(ctx, "c9", env(-5))
	if err != nil {
		t.Fatalf("taking 5 after the other group added 10: %v (decided on the state it held)", err)
	}
	if got := total(t, l, "c9"); got != 5 || res.Seq == 0 {
		t.Fatalf("the log holds %d at %d, want 5", got, res.Seq)
	}
	// A caller's command that changes nothing answers at the log's revision
	// too, not at the one a stale state held.
	seq, err := b.Execute(ctx, "c9", env(1))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Execute(ctx, "c9", env(0)); err != nil || res.Seq != seq.Seq {
		t.Fatalf("a command changing nothing answered at %d (%v), want the aggregate's last commit %d", res.Seq, err, seq.Seq)
	}
	// And a refusal that stands on the current state still stands.
	if _, err := b.Execute(ctx, "c9", env(-7)); err == nil {
		t.Fatal("taking 7 from 6 was not refused")
	}
}

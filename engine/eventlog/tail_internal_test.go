package eventlog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// soleWriter opens an embedded log that keeps a tail.
func soleWriter(t *testing.T) *Log {
	t.Helper()
	l, err := Open(context.Background(), Config{DataDir: t.TempDir(), Sync: "interval", Replicas: 1, SoleWriter: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if l.tail == nil {
		t.Fatal("a sole writer's log keeps no tail")
	}
	return l
}

// seen is one commit as FollowCommits handed it out.
type seen struct {
	subject string
	seq     uint64
	id      string
	data    string
}

// collect follows l from from in the background until the test ends.
func collect(t *testing.T, l *Log, from uint64) (got func() []seen, fromLog *atomic.Int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		all  []seen
		done = make(chan struct{})
		read atomic.Int64
	)
	go func() {
		defer close(done)
		_ = l.FollowCommits(ctx, from, func(subject string, seq uint64, id string, data []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if e, _, ok := l.tail.get(seq); !ok || e.id != id {
				read.Add(1) // not the tail's: read from the log
			}
			all = append(all, seen{subject, seq, id, string(data)})
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(all)
	}, &read
}

// untilHead waits for the follower to reach the log's last sequence.
func untilHead(t *testing.T, l *Log, got func() []seen, within time.Duration) []seen {
	t.Helper()
	last, err := l.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for {
		s := got()
		if len(s) > 0 && s[len(s)-1].seq >= last {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower at %d of %d after %v", len(s), last, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// fromServer is every commit after from as the server delivers it.
func fromServer(t *testing.T, l *Log, from uint64) []seen {
	t.Helper()
	var all []seen
	if _, err := l.Replay(context.Background(), from, func(m Msg) error {
		all = append(all, seen{m.Subject, m.Seq, m.ID, string(m.Data)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return all
}

// Many appenders at once (group commit taking them in batches), another
// writer's commits between theirs and after the last of them: the follower
// hands out exactly what the server holds, in order, each once, and takes
// this process's own commits from the tail.
func TestFollowCommitsFromTheTailIsTheLog(t *testing.T) {
	l := soleWriter(t)
	ctx := context.Background()
	got, fromLog := collect(t, l, 0)
	var wg sync.WaitGroup
	var own atomic.Int64
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subj := l.Subject(fmt.Sprintf("account.w%d", w))
			var prev uint64
			for i := range 150 {
				seq, err := l.Append(ctx, subj, prev, ulid.Make().String(), fmt.Appendf(nil, "w%d-%d", w, i))
				if err != nil {
					t.Error(err)
					return
				}
				prev = seq
				own.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // another writer: nothing of it passes this log's appends
		defer wg.Done()
		for i := range 40 {
			if _, err := l.JetStream().Publish(ctx, l.phys(l.Subject("other.x")), fmt.Appendf(nil, "other-%d", i)); err != nil {
				t.Error(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	wg.Wait()
	if _, err := l.JetStream().Publish(ctx, l.phys(l.Subject("other.last")), []byte("after every append")); err != nil {
		t.Fatal(err)
	}
	if !l.GroupCommit() {
		t.Fatal("the embedded log has no group commit: the batches' sequences went untested")
	}
	followed := untilHead(t, l, got, 5*time.Second)
	want := fromServer(t, l, 0)
	if !slices.Equal(followed, want) {
		t.Fatalf("followed %d commits, the server holds %d; first difference at %d", len(followed), len(want), firstDiff(followed, want))
	}
	// The other writer's 41 came from the server; almost all of this
	// process's own 2,400 and its identity from the tail (a few may have
	// been read with a gap's read of the log).
	if n := fromLog.Load(); n < 41 || n > 41+own.Load()/10 {
		t.Fatalf("%d of %d commits read from the log", n, len(followed))
	}
}

func firstDiff(a, b []seen) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A follower further behind than the tail keeps reads what the tail no
// longer holds from the log, then goes on from the tail.
func TestAFollowerBehindTheTailReadsTheLog(t *testing.T) {
	l := soleWriter(t)
	ctx := context.Background()
	subj := l.Subject("account.behind")
	var prev uint64
	appendN := func(n int) {
		for i := range n {
			seq, err := l.Append(ctx, subj, prev, ulid.Make().String(), fmt.Appendf(nil, "c%d", i))
			if err != nil {
				t.Fatal(err)
			}
			prev = seq
		}
	}
	appendN(tailSize + 300)
	got, _ := collect(t, l, 0)
	appendN(50) // while it reads
	followed := untilHead(t, l, got, 10*time.Second)
	if want := fromServer(t, l, 0); !slices.Equal(followed, want) {
		t.Fatalf("followed %d commits, the server holds %d; first difference at %d", len(followed), len(want), firstDiff(followed, want))
	}
}

// After a reconnect the tail holds nothing: the server may be another one,
// or have lost what it had acknowledged.
func TestAReconnectClearsTheTail(t *testing.T) {
	l := soleWriter(t)
	if _, err := l.Append(context.Background(), l.Subject("account.c"), 0, ulid.Make().String(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, top, _ := l.tail.get(2); top != 2 {
		t.Fatalf("tail top %d after the first append", top)
	}
	gen := l.tail.generation() // an append sent before the reconnect, its ack handled after it
	l.reconnected(l.nc)
	if e, top, ok := l.tail.get(2); ok || top != 0 || e.data != nil {
		t.Fatalf("after a reconnect the tail still holds %d (top %d)", e.seq, top)
	}
	l.keep(gen, 3, l.Subject("account.c"), "late", 2, []byte("y"))
	if e, _, ok := l.tail.get(3); ok {
		t.Fatalf("an ack of the connection before the reconnect was kept: %d %q", e.seq, e.id)
	}
	l.keep(l.tail.generation(), 3, l.Subject("account.c"), "now", 2, []byte("y"))
	if e, _, ok := l.tail.get(3); !ok || e.id != "now" {
		t.Fatal("an ack of the new connection was not kept")
	}
}

package eventlog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A commit context is one an append can use as context.WithDeadline of its
// connection's: it ends at its deadline or when the connection breaks,
// with the causes Append reads, and it is used again only when neither
// happened.
func TestCommitContextEndsAsWithDeadlineAndIsReusedOnlyUnended(t *testing.T) {
	commitCtxs = commitCtxPool{}
	conn, lose := context.WithCancelCause(context.WithValue(context.Background(), connKey{}, "log"))

	c := commitCtxs.get(conn, time.Now().Add(time.Minute))
	if d, ok := c.Deadline(); !ok || time.Until(d) < 50*time.Second {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if c.Value(connKey{}) != "log" || c.Err() != nil {
		t.Fatalf("value %v, err %v", c.Value(connKey{}), c.Err())
	}
	c.cancel()
	again := commitCtxs.get(conn, time.Now().Add(time.Minute))
	if again != c {
		t.Fatal("an unended context was not used again")
	}
	again.cancel()

	short := commitCtxs.get(conn, time.Now().Add(20*time.Millisecond))
	select {
	case <-short.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end at its deadline")
	}
	if !errors.Is(short.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(short), context.DeadlineExceeded) {
		t.Fatalf("at the deadline: err %v, cause %v", short.Err(), context.Cause(short))
	}
	short.cancel()
	next := commitCtxs.get(conn, time.Now().Add(time.Minute))
	if next == short || next.Err() != nil {
		t.Fatal("a context that ended at its deadline was handed out again")
	}

	kept := commitCtxs.get(conn, time.Now().Add(time.Minute))
	kept.cancel() // kept while its connection breaks
	lose(errConnectionLost)
	select {
	case <-next.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end with its connection")
	}
	if !errors.Is(next.Err(), context.Canceled) || !errors.Is(context.Cause(next), errConnectionLost) {
		t.Fatalf("after the break: err %v, cause %v", next.Err(), context.Cause(next))
	}
	next.cancel()
	conn2, lose2 := context.WithCancelCause(context.WithValue(context.Background(), connKey{}, "log"))
	defer lose2(nil)
	fresh := commitCtxs.get(conn2, time.Now().Add(time.Minute))
	if fresh == kept || fresh == next || fresh.Err() != nil || fresh.conn != conn2 {
		t.Fatal("a context of the broken connection was handed out for the new one")
	}
	fresh.cancel()
}

// A timer that fires after its append let the context go never ends the
// next append's use of it; concurrent appends each hold a context of their
// own (run with -race).
func TestCommitContextsUnderConcurrentAppends(t *testing.T) {
	commitCtxs = commitCtxPool{}
	conn, lose := context.WithCancelCause(context.Background())
	defer lose(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := map[*commitCtx]bool{}
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				d := time.Minute
				if (w+i)%7 == 0 {
					d = time.Microsecond // ends at once, or just after its release
				}
				c := commitCtxs.get(conn, time.Now().Add(d))
				mu.Lock()
				if held[c] {
					mu.Unlock()
					t.Error("one context held by two appends")
					return
				}
				held[c] = true
				mu.Unlock()
				if d == time.Minute && c.Err() != nil {
					t.Errorf("a context handed out ended: %v", c.Err())
				}
				mu.Lock()
				delete(held, c)
				mu.Unlock()
				c.cancel()
			}
		})
	}
	wg.Wait()
	commitCtxs.mu.Lock()
	kept := len(commitCtxs.free)
	commitCtxs.mu.Unlock()
	if kept == 0 || kept > maxCommitCtxs {
		t.Fatalf("%d contexts kept", kept)
	}
}

// A context asked for on a connection that already broke is ended when it
// is handed out, kept one or new, as WithDeadline of that connection's is:
// an append on it is refused before anything is sent.
func TestCommitContextOfABrokenConnectionIsEndedAtOnce(t *testing.T) {
	for range 200 {
		commitCtxs = commitCtxPool{}
		conn, lose := context.WithCancelCause(context.WithValue(context.Background(), connKey{}, "log"))
		kept := commitCtxs.get(conn, time.Now().Add(time.Minute))
		kept.cancel()
		lose(errConnectionLost)
		for i := range 2 { // the kept one (its watch may not have run yet), then a new one
			c := commitCtxs.get(conn, time.Now().Add(time.Minute))
			if c.Err() == nil || !errors.Is(context.Cause(c), errConnectionLost) {
				t.Fatalf("get %d on a broken connection: err %v, cause %v", i, c.Err(), context.Cause(c))
			}
			c.cancel()
		}
	}
}

package eventlog

import (
	"context"
	"testing"
	"time"
)

func queued(n int) chan groupReq {
	q := make(chan groupReq, groupMax)
	for i := range n {
		q <- groupReq{id: string(rune('a' + i%26))}
	}
	return q
}

// A large batch takes what else is queued, up to gatherTo, and leaves the
// rest for the next batch; with nothing more coming it is committed after
// gatherFor, as it was.
func TestGatherBoundsTheBatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := &grouper{queue: queued(gatherTo + 5), ctx: ctx}
	batch := g.gather(make([]groupReq, 0, groupMax))
	if len(batch) != gatherTo || len(g.queue) != 5 {
		t.Fatalf("gathered %d, left %d; want %d and 5", len(batch), len(g.queue), gatherTo)
	}

	g = &grouper{queue: queued(0), ctx: ctx}
	start := time.Now()
	batch = g.gather(make([]groupReq, gatherFrom))
	if len(batch) != gatherFrom {
		t.Fatalf("nothing queued: gathered %d, want the batch of %d as it was", len(batch), gatherFrom)
	}
	if took := time.Since(start); took < gatherFor {
		t.Fatalf("returned after %v, before gatherFor (%v) passed", took, gatherFor)
	}

	// Appends that arrive while the batch waits join it.
	arriving := queued(0)
	g = &grouper{queue: arriving, ctx: ctx}
	go func() {
		for range gatherTo {
			arriving <- groupReq{}
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if batch = g.gather(nil); len(batch) > 0 {
			break
		}
	}
	if len(batch) == 0 {
		t.Fatal("no append that arrived while the batch waited joined it")
	}

	// A stopping log does not wait.
	cancel()
	g = &grouper{queue: queued(0), ctx: ctx}
	start = time.Now()
	g.gather(nil)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a stopped grouper waited %v", took)
	}
}

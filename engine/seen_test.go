package engine

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Every wait returns once the follower stores its sequence or a later one,
// however the waits and the stores interleave, and a wait whose context
// ends returns its error.
func TestASeenSequenceWakesEveryWaitThatReachedIt(t *testing.T) {
	var s seen
	const last = 2000
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(want uint64) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.wait(ctx, want); err != nil {
				errs <- err
				return
			}
			if got := s.Load(); got < want {
				t.Errorf("wait for %d returned at %d", want, got)
			}
		}(uint64(1 + i*last/64))
	}
	for seq := uint64(1); seq <= last; seq++ {
		s.Store(seq)
		if seq%100 == 0 {
			time.Sleep(time.Millisecond) // let waits register between stores
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a wait for a stored sequence failed: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if err := s.wait(ctx, last+1); err != context.Canceled {
		t.Fatalf("a wait past the last store whose context ended: %v, want context.Canceled", err)
	}
}

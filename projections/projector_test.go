package projections_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
)

func batch(seqs ...uint64) []events.Committed {
	var out []events.Committed
	for _, s := range seqs {
		out = append(out, events.Committed{Subject: "evt.other.x", Seq: s})
	}
	return out
}

// Each waiter returns once its own sequence is applied, not before.
func TestWaitForReleasesEachWaiterAtItsSequence(t *testing.T) {
	p := projections.NewProjector(memory.New(), nil, projections.Core)
	ctx := context.Background()
	done := make(map[uint64]chan error)
	for _, seq := range []uint64{5, 2, 9, 2} {
		ch := make(chan error, 1)
		done[seq] = ch
		go func() { ch <- p.WaitFor(ctx, seq) }()
	}
	time.Sleep(20 * time.Millisecond)
	returned := func(seq uint64) bool {
		select {
		case err := <-done[seq]:
			if err != nil {
				t.Fatalf("WaitFor(%d): %v", seq, err)
			}
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}
	if err := p.ApplyBatch(ctx, batch(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if !returned(2) {
		t.Error("WaitFor(2) still waits after 3 was applied")
	}
	if returned(5) || returned(9) {
		t.Fatal("a waiter returned before its sequence was applied")
	}
	if err := p.ApplyBatch(ctx, batch(4, 5, 6)); err != nil {
		t.Fatal(err)
	}
	if !returned(5) {
		t.Error("WaitFor(5) still waits after 6 was applied")
	}
	if returned(9) {
		t.Error("WaitFor(9) returned at 6")
	}
	if err := p.WaitFor(ctx, 6); err != nil {
		t.Errorf("WaitFor of an applied sequence: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := p.WaitFor(cctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFor past its deadline = %v", err)
	}
}

// A projector that fails releases its waiters with the failure.
func TestWaitForReportsTheProjectorsFailure(t *testing.T) {
	p := projections.NewProjector(memory.New(), nil, projections.Core)
	ctx := context.Background()
	got := make(chan error, 1)
	go func() { got <- p.WaitFor(ctx, 10) }()
	time.Sleep(20 * time.Millisecond)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	failing := source{err: errors.New("log gone")}
	if err := p.Run(runCtx, failing); err == nil {
		t.Fatal("Run of a failing source returned nil")
	}
	select {
	case err := <-got:
		if err == nil || err.Error() != "log gone" {
			t.Errorf("waiter got %v, want the projector's failure", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter was not released by the failure")
	}
	if err := p.WaitFor(ctx, 11); err == nil {
		t.Error("WaitFor after a failure returned nil")
	}
}

type source struct{ err error }

func (s source) FollowCommits(context.Context, uint64, func(string, uint64, string, []byte) error) error {
	return s.err
}
func (s source) LastSeq(context.Context) (uint64, error) { return 0, nil }

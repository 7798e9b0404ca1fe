package events_test

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// pipelineLog is n encoded commits, each canceling the order named by its
// sequence, on subjects "evt.account.a" and (every third) "evt.other".
func pipelineLog(t *testing.T, reg events.Registry, n int) []events.Raw {
	t.Helper()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	var out []events.Raw
	for i := 1; i <= n; i++ {
		b, err := reg.Encode(events.Commit{CommandID: "c" + strconv.Itoa(i), At: at,
			Events: []events.Event{evacct.OrderCanceled{BrokerOrderID: "o" + strconv.Itoa(i), At: at}}})
		if err != nil {
			t.Fatal(err)
		}
		subject := "evt.account.a"
		if i%3 == 0 {
			subject = "evt.other"
		}
		out = append(out, events.Raw{Subject: subject, Seq: uint64(i), Data: b})
	}
	return out
}

// Every sink sees every wanted commit exactly once, decoded, in the order
// added, across many chunks decoded on several goroutines.
func TestPipelineKeepsOrder(t *testing.T) {
	reg := evacct.Registry()
	msgs := pipelineLog(t, reg, 5000)
	var got [2][]events.Committed
	sink := func(i int) func([]events.Committed) error {
		return func(cs []events.Committed) error { got[i] = append(got[i], cs...); return nil }
	}
	p := reg.Pipeline(func(s string) bool { return s == "evt.other" }, sink(0), sink(1))
	for _, m := range msgs {
		if err := p.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		var want uint64 = 1
		for _, c := range got[i] {
			if want%3 == 0 {
				want++
			}
			if c.Seq != want || c.Subject != "evt.account.a" || c.CommandID != "c"+strconv.FormatUint(want, 10) ||
				c.Events[0].(evacct.OrderCanceled).BrokerOrderID != "o"+strconv.FormatUint(want, 10) {
				t.Fatalf("sink %d: commit %+v, want sequence %d", i, c, want)
			}
			want++
		}
		if len(got[i]) != 5000-5000/3 {
			t.Fatalf("sink %d saw %d commits, want %d", i, len(got[i]), 5000-5000/3)
		}
	}
}

// A commit that does not decode stops the pipeline with an error naming it,
// and no sink sees anything at or after it.
func TestPipelineStopsAtABadCommit(t *testing.T) {
	reg := evacct.Registry()
	msgs := pipelineLog(t, reg, 3000)
	msgs[1500].Data = []byte(`{"id":"x","events":[{"type":"nope.v1","data":{}}]}`)
	var last atomic.Uint64
	p := reg.Pipeline(nil, func(cs []events.Committed) error {
		for _, c := range cs {
			last.Store(c.Seq)
		}
		return nil
	})
	var addErr error
	for _, m := range msgs {
		if addErr = p.Add(m); addErr != nil {
			break
		}
	}
	err := p.Close()
	if !errors.Is(err, events.ErrUnknownType) {
		t.Fatalf("Close = %v, want the unknown type", err)
	}
	if addErr != nil && !errors.Is(addErr, events.ErrUnknownType) {
		t.Fatalf("Add = %v", addErr)
	}
	if last.Load() >= 1501 {
		t.Fatalf("a sink saw sequence %d, past the bad commit 1501", last.Load())
	}
}

// A sink's error stops the pipeline: Add refuses more and Close returns it.
func TestPipelineStopsWhenASinkFails(t *testing.T) {
	reg := evacct.Registry()
	msgs := pipelineLog(t, reg, 20000)
	boom := errors.New("boom")
	var calls atomic.Int64
	p := reg.Pipeline(nil, func([]events.Committed) error {
		calls.Add(1)
		return boom
	}, func([]events.Committed) error { return nil })
	stoppedAt := -1
	for i, m := range msgs {
		if err := p.Add(m); err != nil {
			stoppedAt = i
			break
		}
		if i > 0 && i%1000 == 0 {
			time.Sleep(time.Millisecond) // let the sink fail before all is added
		}
	}
	if err := p.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want boom", err)
	}
	if stoppedAt < 0 {
		t.Fatal("Add went on after the sink failed")
	}
	if calls.Load() != 1 {
		t.Fatalf("the failing sink was called %d times, want once", calls.Load())
	}
}

// An aborted pipeline hands no more queued chunks to its sinks: Close
// returns the abort's error without folding what was still queued.
func TestPipelineAbortDropsWhatIsQueued(t *testing.T) {
	reg := evacct.Registry()
	msgs := pipelineLog(t, reg, 20000)
	var folded atomic.Int64
	release := make(chan struct{})
	p := reg.Pipeline(nil, func(cs []events.Committed) error {
		<-release // a slow sink: everything added queues behind it
		folded.Add(int64(len(cs)))
		return nil
	})
	added := 0
	for _, m := range msgs[:5000] {
		if err := p.Add(m); err != nil {
			break
		}
		added++
	}
	cancelled := errors.New("cancelled")
	p.Abort(cancelled)
	close(release)
	if err := p.Close(); !errors.Is(err, cancelled) {
		t.Fatalf("Close = %v, want the abort's error", err)
	}
	if n := folded.Load(); n >= int64(added) || n > 512 {
		t.Fatalf("the sink folded %d of %d commits added before the abort; want at most the chunk in hand", n, added)
	}
	if err := p.Add(msgs[5000]); !errors.Is(err, cancelled) {
		t.Fatalf("Add after the abort = %v", err)
	}
}

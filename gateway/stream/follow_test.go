package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
	"github.com/svc/engine/projections/memory"
	"github.com/svc/engine/projections/storetest"
)

type noPrices struct{}

func (noPrices) Mark(string) (events.Decimal, bool) { return events.Decimal{}, false }

// stopOf is the stop level a payload's frame shows for its one trailing exit.
func stopOf(t *testing.T, p Payload) string {
	t.Helper()
	var f frames.Frame
	if err := json.Unmarshal(p.Data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.ManagedExits) != 1 || f.ManagedExits[0].StopPrice == nil {
		return "none"
	}
	return f.ManagedExits[0].StopPrice.String()
}

func (h *Hub) dirtyIDs() []string {
	h.dmu.Lock()
	defer h.dmu.Unlock()
	return slices.Sorted(maps.Keys(h.dirty))
}

// A Marked commit is urgent for, and reframes, every streamed account whose
// brackets it moves, and no other: not an account without brackets, not one
// nobody streams, and nobody for another node's stack.
func TestAMarkedCommitReframesTheAccountsItMoves(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	store := memory.New()
	p := projections.NewProjector(store, nil, projections.Core)
	h := NewHub(store, noPrices{}, nil)
	p.Listen(h.OnCommit)
	var sc storetest.StopsScenario
	cs := sc.Commits() // a1's and a2's brackets, then the stack that moves their stops
	marked := cs[len(cs)-1]
	if err := p.ApplyBatch(ctx, cs[:len(cs)-1]); err != nil {
		t.Fatal(err)
	}
	a3 := events.Committed{Subject: evacct.Subject("a3"), Seq: marked.Seq, Commit: events.Commit{At: time.Now(),
		Events: []events.Event{evacct.Opened{AccountID: "a3", TenantID: "t1", Broker: "paper", AccountNumber: "PA-a3",
			Currency: "USD", StartingBalance: events.Int(10), Kind: "demo"}}}}
	marked.Seq++
	if err := p.ApplyBatch(ctx, []events.Committed{a3}); err != nil {
		t.Fatal(err)
	}
	subs := map[string]*Sub{}
	var firstRev uint64                       // a1's first frame's
	for _, id := range []string{"a1", "a3"} { // a2 nobody streams (yet)
		s, cancel, err := h.Subscribe(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cancel)
		subs[id] = s
		got := s.Take()
		if len(got) != 1 || (id == "a1" && stopOf(t, got[0]) != "95") {
			t.Fatalf("%s: first payloads %v", id, got)
		}
		if id == "a1" {
			firstRev = got[0].Rev
		}
	}
	h.dmu.Lock()
	clear(h.dirty)
	h.dmu.Unlock()

	if !h.Watched(marked) {
		t.Fatal("a Marked commit of a stack a streamed account follows is not urgent")
	}
	if err := p.ApplyBatch(ctx, []events.Committed{marked}); err != nil {
		t.Fatal(err)
	}
	if got := h.dirtyIDs(); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("the Marked commit made %v dirty, want a1 alone", got)
	}
	go h.Run(ctx)
	enginetest.WaitFor(t, 5*time.Second, func() error {
		got := subs["a1"].Take()
		if len(got) == 0 {
			return fmt.Errorf("no frame yet")
		}
		if s := stopOf(t, got[len(got)-1]); s != "98" {
			t.Fatalf("a1's frame shows the stop at %s, want 98", s)
		}
		// A client drops a frame at or behind the revision it holds: the
		// frame a mark changed is ahead, though a1 committed nothing.
		if r := got[len(got)-1].Rev; r <= firstRev || r != marked.Seq {
			t.Fatalf("a1's frame after the mark names revision %d (before: %d), want the mark's commit %d", r, firstRev, marked.Seq)
		}
		return nil
	})
	if got := subs["a3"].Take(); len(got) != 0 {
		t.Fatalf("a3, without brackets, got %d payloads", len(got))
	}

	s2, cancel2, err := h.Subscribe(ctx, "a2")
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Take(); len(got) != 1 || stopOf(t, got[0]) != "98" {
		t.Fatalf("a2's first frame %v, want its stop at 98", got)
	}
	next := sc.Marked(storetest.Stack(7, storetest.Bid(2, "104"), storetest.Bid(4, "103"), storetest.Bid(7, "106.2")))
	next.Seq = marked.Seq + 1
	other := storetest.Stack(9, storetest.Bid(9, "200"))
	other.Node = "n2"
	elsewhere := sc.Marked(other)
	elsewhere.Seq = next.Seq + 1
	if h.Watched(elsewhere) {
		t.Fatal("a Marked commit of a stack nobody follows is urgent")
	}
	if err := p.ApplyBatch(ctx, []events.Committed{next, elsewhere}); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		for id, s := range map[string]*Sub{"a1": subs["a1"], "a2": s2} {
			if got := s.Take(); len(got) > 0 {
				shown[id] = stopOf(t, got[len(got)-1])
			}
		}
		if shown["a1"] != "101" || shown["a2"] != "101" {
			return fmt.Errorf("frames show the stops at %v, want 101", shown)
		}
		return nil
	})

	// Whom nobody streams any more, no Marked commit reframes.
	cancel2()
	key := projections.MarkKey("BTC-PERP", "n1")
	h.stacks.mu.Lock()
	followers := slices.Sorted(maps.Keys(h.stacks.by[key]))
	_, a2 := h.stacks.of["a2"]
	h.stacks.mu.Unlock()
	if !slices.Equal(followers, []string{"a1"}) || a2 {
		t.Fatalf("after a2's stream ended, %s is followed by %v (a2 kept: %v)", key, followers, a2)
	}
}

// A Marked commit heard while a streamed account's frame was being built,
// before the hub knew the frame follows its stack, reframes the account:
// that frame may have read the stack before the commit.
func TestAMarkedCommitHeardDuringAFrameReframes(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	p := projections.NewProjector(store, nil, projections.Core)
	h := NewHub(store, noPrices{}, nil)
	p.Listen(h.OnCommit)
	var sc storetest.StopsScenario
	cs := sc.Commits()
	if err := p.ApplyBatch(ctx, cs[:len(cs)-1]); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.subs["a1"] = map[*Sub]struct{}{newSub(): {}}
	h.mu.Unlock()

	from := h.heard() // Run starts a1's frame
	f, err := frames.Build(ctx, store, "a1", noPrices{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ApplyBatch(ctx, cs[len(cs)-1:]); err != nil { // the stack moves a1's stop meanwhile
		t.Fatal(err)
	}
	if got := h.dirtyIDs(); len(got) != 0 {
		t.Fatalf("dirty before a1's frame follows the stack: %v", got)
	}
	h.follow("a1", f.Revision, f.Follows, from)
	if got := h.dirtyIDs(); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("dirty after the frame: %v, want a1 again", got)
	}

	h.dmu.Lock()
	clear(h.dirty)
	h.dmu.Unlock()
	h.follow("a1", f.Revision, f.Follows, h.heard()) // a frame built after the commit shows it
	if got := h.dirtyIDs(); len(got) != 0 {
		t.Fatalf("dirty after a frame that shows every stack heard: %v", got)
	}
}

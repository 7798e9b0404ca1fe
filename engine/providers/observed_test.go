package providers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// An intent another node committed is that node's to send: a node that
// also believes it owns the account (one cut from the cluster that has not
// yet heard it lost its lease, after the cut heals) only looks it up, and
// records what the lookup finds; the same intent in a commit of its own
// is sent, once; one open in the node's state from an earlier commit (the
// state read again from the log after its append was refused) only looked
// up. (Found by TestProviderFaults: after a split healed, both nodes sent
// the new owner's intents, and each market order filled twice.)
func TestAnIntentAnotherNodeCommittedIsLookedUpNeverSent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		observed  bool
		wantPlace int32
		earlier   bool // the intent opened by an earlier commit (a state read again), not this one
	}{{"committed here: sent once", false, 1, false}, {"committed by another node: looked up, never sent", true, 0, false},
		{"open in this node's state from an earlier commit: looked up, never sent", false, 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			sess := &fakeSess{finds: true}
			var mu sync.Mutex
			var settled []*providercmd.Settle
			r := quietReactor(sess, true, func(c commands.Command) {
				if c, ok := c.(*providercmd.Settle); ok {
					mu.Lock()
					settled = append(settled, c)
					mu.Unlock()
				}
			})
			defer r.Close()
			s := intended(t)
			c := events.Committed{Seq: 7}
			for _, in := range s.OpenIntents() {
				if !tc.earlier {
					c.Events = append(c.Events, in)
				}
			}
			if tc.observed {
				r.TrackObserved("a1", s, c)
			} else {
				r.TrackCommit("a1", s, c)
			}
			deadline := time.Now().Add(3 * time.Second)
			for {
				mu.Lock()
				n := len(settled)
				mu.Unlock()
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			if n := sess.places.Load(); n != tc.wantPlace {
				t.Fatalf("%d placements, want %d", n, tc.wantPlace)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(settled) == 0 || settled[0].Outcome != evacct.OutcomeAccepted {
				t.Fatalf("settled %+v, want the order accepted", settled)
			}
			if tc.wantPlace == 0 && sess.lookups.Load() == 0 {
				t.Fatal("the intent was settled without a lookup")
			}
		})
	}
}

// A reconciliation whose reading another node's commit overtook (it
// reached this node while the snapshot was being read) reads again before
// it judges: the first reading may predate a fill the log now holds, and
// would contradict it for nothing (a reconciliation_hold, seen after a
// split healed in TestProviderFaults).
func TestAReadingOvertakenByAnotherNodesCommitIsReadAgain(t *testing.T) {
	sess := &fakeSess{}
	var mu sync.Mutex
	var complete []int32 // the reading each complete observation was made of
	var r *providers.Reactor
	sess.onSnapshot = func(n int32) {
		if n == 1 {
			r.TrackObserved("a1", intended(t), events.Committed{Seq: 9})
		}
	}
	r = quietReactor(sess, true, func(c commands.Command) {
		if o, ok := c.(*providercmd.Observe); ok && o.Complete {
			mu.Lock()
			complete = append(complete, sess.snapshots.Load())
			mu.Unlock()
		}
	})
	defer r.Close()
	r.Resume("a1", intended(t))
	deadline := time.Now().Add(3 * time.Second)
	for {
		mu.Lock()
		n := len(complete)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(complete) != 1 || complete[0] != 2 {
		t.Fatalf("complete observations made of readings %v, want one, of the second", complete)
	}
}

// quietReactor is a reactor on the fake provider's session sess that owns
// the account as owns says and hands exec what it records (with the
// recording's lock held: exec keeps its own state); no periodic reading,
// and no lookup concludes never placed within a test.
func quietReactor(sess *fakeSess, owns bool, exec func(commands.Command)) *providers.Reactor {
	var mu sync.Mutex
	return providers.New(providers.Config{
		Providers: map[string]provider.Provider{"fake": &fakeProv{sess: sess}},
		Open:      openFake,
		Exec: func(_ context.Context, _ string, c commands.Command) error {
			mu.Lock()
			defer mu.Unlock()
			exec(c)
			return nil
		},
		Owns:             func(string) bool { return owns },
		ReconcileEvery:   time.Hour,
		NeverPlacedAfter: time.Hour,
		Retry:            10 * time.Millisecond,
	})
}

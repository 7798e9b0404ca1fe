package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	copiercmd "github.com/svc/engine/commands/copier"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/enginetest"
	evcopier "github.com/svc/engine/events/copier"
)

// waitMirrored waits until group g has recorded every leader commit.
func waitMirrored(t *testing.T, e *engine.Engine, g, leader string) {
	t.Helper()
	enginetest.WaitFor(t, 20*time.Second, func() error {
		v, _, _, err := e.CopierGroup(context.Background(), g, "", 1)
		lead, _ := lastRev(t, e, leader)
		if err != nil || v.MirroredThrough < lead {
			return fmt.Errorf("through %d of %d (%v)", v.MirroredThrough, lead, err)
		}
		return nil
	})
}

// waitIdle waits until the copier holds no follower worker and no group
// recorder: each leaves when it has nothing left to do.
func waitIdle(t *testing.T, e *engine.Engine) {
	t.Helper()
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if _, f, r := e.CopierWorkers(); f != 0 || r != 0 {
			return fmt.Errorf("%d follower workers and %d recorders still held", f, r)
		}
		return nil
	})
}

// A leader's placements and cancels in quick succession reach each
// follower in the leader's order (every cancel finds its mirror: none is
// left working, none skipped), the group records them in the leader's
// order, and the followers' workers and the group's recorder leave once
// idle, as does a removed follower's.
func TestCopierFollowersInOrderAndPruned(t *testing.T) {
	log := tempLog(t)
	e := newEngine(t, log, false, 0, nil)
	defer e.Close()
	r := &copierRig{t: t, log: log}
	fs := []string{"F1", "F2", "F3"}
	for _, id := range append([]string{"L"}, fs...) {
		r.open(e, id)
	}
	var specs []copiercmd.FollowerSpec
	for _, f := range fs {
		specs = append(specs, followerSpec(f, evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("1")}, "same", true))
	}
	r.group(e, "g1", &copiercmd.CreateGroup{Leader: "L", Followers: specs})

	const n = 15
	var lead []string
	for i := range n {
		id, err := r.order(e, "L", limitBuy(fmt.Sprintf("o-%d", i), "0.01"))
		if err != nil {
			t.Fatal(err)
		}
		r.cancel(e, "L", id)
		lead = append(lead, id)
	}
	waitMirrored(t, e, "g1", "L")
	for _, f := range fs {
		placed, working := mirrors(t, e, log, f)
		if len(placed) != n || len(working) != 0 {
			t.Fatalf("%s: %d mirrors placed of %d, %d still working: a cancel ran before its placement", f, len(placed), n, len(working))
		}
	}
	_, recent, _, err := e.CopierGroup(context.Background(), "g1", "", 2*n)
	if err != nil || len(recent) != 2*n {
		t.Fatalf("%d actions recorded (%v)", len(recent), err)
	}
	for i, a := range recent { // newest first: the leader's order reversed
		want, op := lead[n-1-i/2], "cancel"
		if i%2 == 1 {
			op = "place"
		}
		if a.LeaderOrderID != want || a.Op != op {
			t.Fatalf("action %d recorded %s %s, the leader did %s %s", i, a.Op, a.LeaderOrderID, op, want)
		}
		if i > 0 && a.LeaderRevision > recent[i-1].LeaderRevision {
			t.Fatalf("recorded out of the leader's order: %d after %d", recent[i-1].LeaderRevision, a.LeaderRevision)
		}
		for _, m := range a.Followers {
			if m.Status != evcopier.StatusMirrored {
				t.Fatalf("%s of %s on %s: %s %s", a.Op, a.LeaderOrderID, m.AccountID, m.Status, m.Code)
			}
		}
	}
	waitIdle(t, e)
	if l, _, _ := e.CopierWorkers(); l != 1 {
		t.Fatalf("%d leader workers for one leader", l)
	}

	// A follower taken out: its worker is gone with the rest once idle, and
	// it mirrors nothing more.
	r.group(e, "g1", &copiercmd.RemoveFollower{AccountID: "F3"})
	id, err := r.order(e, "L", limitBuy("o-last", "0.01"))
	if err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, e, "g1", "L")
	for _, f := range fs {
		_, working := mirrors(t, e, log, f)
		if got := len(working[id]); got != map[bool]int{true: 0, false: 1}[f == "F3"] {
			t.Fatalf("%s holds %d mirrors of the order placed after F3 left", f, got)
		}
	}
	waitIdle(t, e)
}

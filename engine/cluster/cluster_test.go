package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/engine/cluster"
	"github.com/svc/engine/engine/eventlog"
)

func node(t *testing.T, log *eventlog.Log, name string, leads *atomic.Int32) *cluster.Cluster {
	t.Helper()
	return fitNode(t, log, "T", name, leads, nil)
}

func fitNode(t *testing.T, log *eventlog.Log, deployment, name string, leads *atomic.Int32, fit func() bool) *cluster.Cluster {
	t.Helper()
	c, err := cluster.New(context.Background(), cluster.Config{Conn: log.Conn(), JS: log.JetStream(), Name: deployment, Node: name, TTL: time.Second,
		Lead: func(ctx context.Context) { leads.Add(1); <-ctx.Done(); leads.Add(-1) }, Fit: fit})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not in 10 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two nodes split the partitions between them, never both owning one, with
// one leader; when one leaves, the other owns every partition and leads.
func TestTwoNodesSplitThePartitionsAndOneTakesAllWhenTheOtherLeaves(t *testing.T) {
	log, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "interval", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var leads atomic.Int32
	a, b := node(t, log, "a", &leads), node(t, log, "b", &leads)
	defer b.Close()
	owned := func(c *cluster.Cluster) int { return c.Status().Owned }
	waitFor(t, "both nodes own partitions, 32 in all", func() bool {
		return owned(a) > 0 && owned(b) > 0 && owned(a)+owned(b) == cluster.DefaultPartitions
	})
	for p := range cluster.DefaultPartitions {
		if a.OwnsPartition(p) && b.OwnsPartition(p) {
			t.Fatalf("partition %d owned by both", p)
		}
	}
	waitFor(t, "one leader", func() bool { return leads.Load() == 1 }) // its duties start on their own goroutine
	// The owner of an account is the same from both nodes once each has
	// seen the other's leases (a node learns them from the bucket's watch,
	// which may lag the lease's write on a busy machine).
	disagree := func() string {
		for i := range 100 {
			id := fmt.Sprintf("acct-%d", i)
			if a.Owner(id) != b.Owner(id) || a.Owner(id) == "" {
				return fmt.Sprintf("%s: owner %q from a, %q from b", id, a.Owner(id), b.Owner(id))
			}
		}
		return ""
	}
	waitFor(t, "both nodes name the same owner of every account", func() bool { return disagree() == "" })
	var fromA []int
	for p := range cluster.DefaultPartitions {
		if a.OwnsPartition(p) {
			fromA = append(fromA, p)
		}
	}
	before := time.Now()
	a.Close() // hands its partitions and any lead over at once
	waitFor(t, "b owns every partition and leads", func() bool {
		return owned(b) == cluster.DefaultPartitions && b.Status().Leading && leads.Load() == 1
	})
	// b dates the gap of a's partitions from a's hand-over, a TTL back: the
	// quotes since then count for their accounts (engine: takeOver).
	for _, p := range fromA {
		if v := b.Vacated(p); v.IsZero() || v.After(time.Now().Add(-time.Second)) || v.Before(before.Add(-3*time.Second)) {
			t.Fatalf("partition %d vacated at %v; a handed it over at about %v, TTL 1 s", p, v, before)
		}
	}
}

// A leader that cannot do the leader's duties (cut from the read models'
// database) hands the lease to a live node that can, which keeps it; a
// lone node leads whether fit or not, once the lease stayed free for a TTL.
func TestAnUnfitLeaderHandsTheLeaseToAFitNode(t *testing.T) {
	log, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "interval", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var aFit, bFit atomic.Bool
	aFit.Store(true)
	bFit.Store(true)
	var leadsA, leadsB atomic.Int32
	a := fitNode(t, log, "F", "a", &leadsA, aFit.Load)
	defer a.Close()
	waitFor(t, "a leads alone", func() bool { return a.Status().Leading && leadsA.Load() == 1 })
	b := fitNode(t, log, "F", "b", &leadsB, bFit.Load)
	defer b.Close()
	waitFor(t, "a sees b live", func() bool { return len(a.Status().Live) == 2 })
	time.Sleep(2 * time.Second)
	if !a.Status().Leading || b.Status().Leading {
		t.Fatalf("the lease moved while both were fit: a %v, b %v", a.Status().Leading, b.Status().Leading)
	}
	aFit.Store(false)
	waitFor(t, "b leads, a does not", func() bool {
		return b.Status().Leading && leadsB.Load() == 1 && !a.Status().Leading && leadsA.Load() == 0
	})
	time.Sleep(3 * time.Second) // a TTL and more: a, unfit, does not take it back
	if a.Status().Leading || !b.Status().Leading {
		t.Fatalf("after the hand-over: a leads %v, b leads %v", a.Status().Leading, b.Status().Leading)
	}
	bFit.Store(false) // both unfit: b yields to a live node once, a takes the free lease after a TTL
	waitFor(t, "someone leads while both are unfit", func() bool { return a.Status().Leading || b.Status().Leading })
	b.Close()
	waitFor(t, "a, unfit and alone, leads", func() bool { return a.Status().Leading && leadsA.Load() == 1 })
}

// A leader that handed the lease over for being unfit, then was fit again
// and leads again, hands it over at once when it is unfit again (a new
// spell: PostgreSQL cut from it minutes after a partition healed), not only
// YieldEvery after its first hand-over.
func TestALeaderFitAgainHandsTheLeaseOverAtOnceWhenUnfitAgain(t *testing.T) {
	log, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "interval", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var aFit, bFit atomic.Bool
	aFit.Store(true)
	bFit.Store(true)
	var leadsA, leadsB atomic.Int32
	a := fitNode(t, log, "G", "a", &leadsA, aFit.Load)
	defer a.Close()
	waitFor(t, "a leads alone", func() bool { return a.Status().Leading && leadsA.Load() == 1 })
	b := fitNode(t, log, "G", "b", &leadsB, bFit.Load)
	defer b.Close()
	waitFor(t, "a sees b live", func() bool { return len(a.Status().Live) == 2 })
	aFit.Store(false) // a's first hand-over
	waitFor(t, "b leads", func() bool { return b.Status().Leading && !a.Status().Leading })
	aFit.Store(true)
	bFit.Store(false) // b hands it back to a, fit again
	waitFor(t, "a leads again", func() bool { return a.Status().Leading && !b.Status().Leading })
	bFit.Store(true)
	aFit.Store(false) // well inside YieldEvery of a's first hand-over
	start := time.Now()
	waitFor(t, "b leads again", func() bool { return b.Status().Leading && !a.Status().Leading })
	if d := time.Since(start); d >= cluster.YieldEvery/3 {
		t.Fatalf("a, unfit again, handed the lease over after %v", d)
	}
}

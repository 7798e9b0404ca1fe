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
	c, err := cluster.New(context.Background(), cluster.Config{Conn: log.Conn(), JS: log.JetStream(), Name: "T", Node: name, TTL: time.Second,
		Lead: func(ctx context.Context) { leads.Add(1); <-ctx.Done(); leads.Add(-1) }})
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

package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	copiercmd "github.com/svc/engine/commands/copier"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/engine/enginetest"
	evcopier "github.com/svc/engine/events/copier"
)

// A leader order's outcomes stay readable by its id however many actions
// followed it (the group keeps only its latest copier.MaxRecent for the
// unfiltered list), across a stop in the middle of the recording and a
// start on the same log: its placement, long past, and its cancel, recent.
func TestCopierOutcomesOfAnOldLeaderOrder(t *testing.T) {
	log := tempLog(t)
	r := &copierRig{t: t, log: log}
	a := newEngine(t, log, false, 0, nil)
	for _, id := range []string{"L", "F1"} {
		r.open(a, id)
	}
	r.group(a, "g1", &copiercmd.CreateGroup{Leader: "L", Followers: []copiercmd.FollowerSpec{
		followerSpec("F1", evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("1")}, "same", true),
	}})
	var ids []string
	for i := range copier.MaxRecent + 20 {
		id, err := r.order(a, "L", limitBuy(fmt.Sprintf("o-%d", i), "0.01"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	r.cancel(a, "L", ids[0])
	a.Close() // the recording may be under way: the next start catches up

	b := newEngine(t, log, false, 0, nil)
	defer b.Close()
	enginetest.WaitFor(t, 20*time.Second, func() error {
		v, _, _, err := b.CopierGroup(context.Background(), "g1", "", 1)
		if err != nil {
			return err
		}
		lead, err := lastRev(t, b, "L")
		if err != nil || v.MirroredThrough < lead {
			return fmt.Errorf("through %d of %d (%v)", v.MirroredThrough, lead, err)
		}
		return nil
	})
	check := func(e *engine.Engine) {
		t.Helper()
		_, all, _, err := e.CopierGroup(context.Background(), "g1", "", copier.MaxRecent+100)
		if err != nil || len(all) != copier.MaxRecent {
			t.Fatalf("the group lists %d recent actions (%v), want its latest %d", len(all), err, copier.MaxRecent)
		}
		_, acts, _, err := e.CopierGroup(context.Background(), "g1", ids[0], 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(acts) != 2 || acts[0].Op != evcopier.OpCancel || acts[1].Op != evcopier.OpPlace {
			t.Fatalf("the first order's actions %+v, want its cancel and its placement, newest first", acts)
		}
		for _, a := range acts {
			if a.LeaderOrderID != ids[0] || len(a.Followers) != 1 || a.Followers[0].Status != evcopier.StatusMirrored ||
				a.Followers[0].BrokerOrderID == "" {
				t.Fatalf("the first order's outcomes %+v", a)
			}
		}
		if _, acts, _, _ = e.CopierGroup(context.Background(), "g1", ids[0], 1); len(acts) != 1 || acts[0].Op != evcopier.OpCancel {
			t.Fatalf("with limit 1: %+v, want the cancel", acts)
		}
		_, acts, _, _ = e.CopierGroup(context.Background(), "g1", ids[len(ids)-1], 10)
		if len(acts) != 1 || acts[0].Op != evcopier.OpPlace || acts[0].Followers[0].Status != evcopier.StatusMirrored {
			t.Fatalf("the last order's outcomes %+v", acts)
		}
		if _, acts, _, _ = e.CopierGroup(context.Background(), "g1", "no-such-order", 10); len(acts) != 0 {
			t.Fatalf("an order never placed has outcomes %+v", acts)
		}
	}
	check(b)
	b.Close()

	c := newEngine(t, log, false, 0, nil) // the index rebuilt from the log alone
	defer c.Close()
	check(c)
}

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	copiercmd "github.com/svc/engine/commands/copier"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evcopier "github.com/svc/engine/events/copier"
)

// copierRig drives engines on one log as the gateway does.
type copierRig struct {
	t   *testing.T
	log *eventlog.Log
	n   int
}

func (r *copierRig) open(e *engine.Engine, id string) {
	r.t.Helper()
	env := e.Envelope(events.Principal{System: "test"}, "", &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: id,
		Currency: "USD", StartingBalance: dec("100000")})
	if _, err := e.Account(context.Background(), id, env); err != nil {
		r.t.Fatal(err)
	}
}

// group runs a copier command under a fresh Idempotency-Key.
func (r *copierRig) group(e *engine.Engine, id string, c commands.Command) {
	r.t.Helper()
	r.n++
	env := e.Envelope(events.Principal{TenantID: "t"}, fmt.Sprintf("idem-%d", r.n), c)
	env.Digest = env.Key
	if _, err := e.Copier(context.Background(), id, env); err != nil {
		r.t.Fatal(err)
	}
}

// order places an order on the account and answers its id, or the refusal.
func (r *copierRig) order(e *engine.Engine, id string, c *trading.PlaceOrder) (string, error) {
	env := e.Envelope(events.Principal{System: "test"}, c.ClientOrderID, c)
	_, err := e.Account(context.Background(), id, env)
	return env.ID.String(), err
}

func (r *copierRig) cancel(e *engine.Engine, id, orderID string) {
	r.t.Helper()
	if _, err := e.Account(context.Background(), id, e.Envelope(events.Principal{System: "test"}, "", &trading.CancelOrder{BrokerOrderID: orderID})); err != nil {
		r.t.Fatal(err)
	}
}

// mirrors are the account's orders placed under a copier's clientOrderId
// (coid -> order id), read from its commits, and those of them still
// working, by leader order.
func mirrors(t *testing.T, e *engine.Engine, log *eventlog.Log, id string) (placed map[string]string, working map[string][]evacct.Order) {
	t.Helper()
	placed, working = map[string]string{}, map[string][]evacct.Order{}
	reg := engine.Registry()
	_, err := log.Load(context.Background(), evacct.Subject(id), func(m eventlog.Msg) error {
		c, err := reg.Decode(m.Data)
		if err != nil {
			return err
		}
		for _, ev := range c.Events {
			if p, ok := ev.(evacct.OrderPlaced); ok && strings.HasPrefix(p.Order.ClientOrderID, "cp-") {
				placed[p.Order.ClientOrderID] = p.Order.BrokerOrderID
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.InspectAccount(context.Background(), id, func(s *account.State, _ uint64) {
		for _, w := range s.Working {
			if w.LeaderOrderID != "" && strings.HasPrefix(w.ClientOrderID, "cp-") {
				working[w.LeaderOrderID] = append(working[w.LeaderOrderID], w.Order)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return placed, working
}

func followerSpec(id string, sizing evcopier.Sizing, dir string, on bool) copiercmd.FollowerSpec {
	return copiercmd.FollowerSpec{AccountID: id, Sizing: &sizing, Direction: dir, Enabled: &on}
}

func limitBuy(coid, qty string) *trading.PlaceOrder {
	return &trading.PlaceOrder{ClientOrderID: coid, Instrument: "BTC-PERP", Side: "buy", OrderType: "limit", Quantity: dec(qty),
		LimitPrice: ptr(dec("1000.5")), TimeInForce: "gtc"}
}

// A leader's accepted orders are mirrored on each enabled follower at its
// size and side, after acceptance; its cancel follows; a refused order is
// mirrored nowhere; the outcomes are readable per leader order.
func TestCopierMirrorsAcceptedOrders(t *testing.T) {
	log := tempLog(t)
	e := newEngine(t, log, false, 0, nil)
	defer e.Close()
	r := &copierRig{t: t, log: log}
	for _, id := range []string{"L", "F1", "F2", "F3", "F4"} {
		r.open(e, id)
	}
	r.group(e, "g1", &copiercmd.CreateGroup{Leader: "L", Followers: []copiercmd.FollowerSpec{
		followerSpec("F1", evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("2")}, "same", true),
		followerSpec("F2", evcopier.Sizing{Mode: evcopier.SizeFixed, Value: dec("0.1")}, "inverse", true),
		followerSpec("F3", evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("1")}, "same", false),
		followerSpec("F4", evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("0.0001")}, "same", true),
	}})

	lim, err := r.order(e, "L", limitBuy("lim-1", "0.5"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.order(e, "L", &trading.PlaceOrder{ClientOrderID: "bad-1", Instrument: "NOPE", Side: "buy", OrderType: "market",
		Quantity: dec("1")}); err == nil {
		t.Fatal("an order on an unknown instrument was accepted")
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		p1, w1 := mirrors(t, e, log, "F1")
		p2, _ := mirrors(t, e, log, "F2")
		if len(w1[lim]) != 1 || len(p1) != 1 || len(p2) != 1 {
			return errors.New("not mirrored yet")
		}
		return nil
	})
	_, w1 := mirrors(t, e, log, "F1")
	if f1 := w1[lim][0]; f1.Quantity.Cmp(dec("1")) != 0 || f1.Side != "buy" || f1.ClientOrderID != copier.ClientOrderID("L", lim, "F1") || f1.LimitPrice.Cmp(dec("1000.5")) != 0 {
		t.Fatalf("F1's mirror %+v", f1)
	}
	p3, _ := mirrors(t, e, log, "F3")
	p4, _ := mirrors(t, e, log, "F4")
	if len(p3) != 0 || len(p4) != 0 {
		t.Fatalf("a disabled follower or one sized to nothing got a mirror: %v %v", p3, p4)
	}

	r.cancel(e, "L", lim)
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if _, w1 := mirrors(t, e, log, "F1"); len(w1[lim]) != 0 {
			return errors.New("the cancel is not mirrored yet")
		}
		return nil
	})
	var recent []copier.ActionView
	enginetest.WaitFor(t, 5*time.Second, func() error {
		_, recent, _, err = e.CopierGroup(context.Background(), "g1", lim, 10)
		if err != nil || len(recent) != 2 {
			return fmt.Errorf("%d actions recorded (%v)", len(recent), err)
		}
		return nil
	})
	place, cancel := recent[1], recent[0]
	if place.Op != "place" || cancel.Op != "cancel" || len(place.Followers) != 3 {
		t.Fatalf("recorded %+v", recent)
	}
	status := map[string]string{}
	for _, f := range place.Followers {
		status[f.AccountID] = f.Status + "/" + f.Code
	}
	if status["F1"] != "mirrored/" || status["F2"] != "mirrored/" || status["F4"] != "skipped/copy_quantity_too_small" {
		t.Fatalf("outcomes %v", status)
	}
	for _, f := range place.Followers {
		if f.AccountID == "F2" && (f.Quantity.Cmp(dec("0.1")) != 0 || f.Side != "sell") {
			t.Fatalf("F2's mirror %+v", f)
		}
	}
	cancels := map[string]string{}
	for _, f := range cancel.Followers {
		cancels[f.AccountID] = f.Status + "/" + f.Code
	}
	// F2's inverse mirror (a sell at 1000.5) filled at once: nothing left to cancel.
	if cancels["F1"] != "mirrored/" || cancels["F2"] != "skipped/not_found" {
		t.Fatalf("cancels %v", cancels)
	}
	if e.CopierMirrored() != 3 { // two places, one cancel
		t.Fatalf("%d follower commands", e.CopierMirrored())
	}
}

// A leader's commits made while no engine knew the group (as after a crash
// before the mirrors) are mirrored by the next start's catch-up, once: a
// mirror that was placed before its outcome was recorded counts as
// mirrored, and a start after that mirrors nothing again. The log alone
// rebuilds every decision (checkReplay).
func TestCopierCatchesUpOnStartExactlyOnce(t *testing.T) {
	log := tempLog(t)
	r := &copierRig{t: t, log: log}
	a := newEngine(t, log, false, 0, nil)
	for _, id := range []string{"L", "F1", "F2"} {
		r.open(a, id)
	}
	b := newEngine(t, log, false, 0, nil) // b makes the group; a never learns of it
	r.group(b, "g1", &copiercmd.CreateGroup{Leader: "L", Followers: []copiercmd.FollowerSpec{
		followerSpec("F1", evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("1")}, "same", true),
		followerSpec("F2", evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: dec("3")}, "inverse", true),
	}})
	b.Close()

	var ids []string
	for i := range 5 {
		id, err := r.order(a, "L", limitBuy(fmt.Sprintf("o-%d", i), "0.01"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	r.cancel(a, "L", ids[4])
	// F1's mirror of the first order was placed before the crash, its outcome not recorded.
	pre := limitBuy(copier.ClientOrderID("L", ids[0], "F1"), "0.01")
	pre.LeaderOrderID = ids[0]
	if _, err := r.order(a, "F1", pre); err != nil {
		t.Fatal(err)
	}
	a.Close()

	c := newEngine(t, log, false, 0, nil)
	enginetest.WaitFor(t, 10*time.Second, func() error {
		v, _, _, err := c.CopierGroup(context.Background(), "g1", "", 1)
		if err != nil || v.MirroredThrough == 0 {
			return fmt.Errorf("not caught up (%v)", err)
		}
		lead, _ := lastRev(t, c, "L")
		if v.MirroredThrough < lead {
			return fmt.Errorf("through %d of %d", v.MirroredThrough, lead)
		}
		return nil
	})
	check := func(e *engine.Engine) {
		t.Helper()
		for _, f := range []string{"F1", "F2"} {
			placed, working := mirrors(t, e, log, f)
			if len(placed) != len(ids) {
				t.Fatalf("%s holds %d mirrors of %d leader orders: %v", f, len(placed), len(ids), placed)
			}
			for i, id := range ids {
				if _, ok := placed[copier.ClientOrderID("L", id, f)]; !ok {
					t.Fatalf("%s has no mirror of leader order %d", f, i)
				}
				if f == "F1" && i < 4 && len(working[id]) != 1 {
					t.Fatalf("%s's mirror of leader order %d is not working: %v", f, i, working)
				}
				if len(working[id]) > 0 && i == 4 {
					t.Fatalf("%s's mirror of the canceled leader order works on", f)
				}
			}
		}
		_, recent, _, _ := e.CopierGroup(context.Background(), "g1", ids[0], 10)
		if len(recent) != 1 || recent[0].Followers[0].Status != "mirrored" || recent[0].Followers[0].BrokerOrderID == "" {
			t.Fatalf("the first order's outcomes %+v", recent)
		}
	}
	check(c)
	c.Close()

	d := newEngine(t, log, false, 0, nil)
	time.Sleep(300 * time.Millisecond) // a catch-up would start at once
	if d.CopierMirrored() != 0 {
		t.Fatalf("a second start mirrored %d orders again", d.CopierMirrored())
	}
	check(d)
	d.Close()
	checkReplay(t, log)
}

func lastRev(t *testing.T, e *engine.Engine, id string) (uint64, error) {
	var rev uint64
	err := e.InspectAccount(context.Background(), id, func(_ *account.State, r uint64) { rev = r })
	return rev, err
}

// checkReplay rebuilds every mirror decision from the log alone: each
// recorded action is one the leader's commit did (copier.Actions on the
// leader folded to it), on exactly the followers the group held then
// (copier.Participants), with the derived clientOrderId, side, instrument
// and, for a placement, the size copier.Size gives from what was recorded.
func checkReplay(t *testing.T, log *eventlog.Log) {
	t.Helper()
	reg := engine.Registry()
	groups := map[string]*copier.State{}
	leaders := map[string]*account.State{}
	type decided struct {
		actions []copier.LeaderAction
	}
	byLeaderSeq := map[uint64]decided{}
	entries := map[string]copier.Entries{} // by leader
	checked := 0
	_, err := log.Replay(context.Background(), 0, func(m eventlog.Msg) error {
		c, err := reg.Decode(m.Data)
		if err != nil {
			return err
		}
		if id, ok := events.SubjectID(m.Subject, events.KindAccount); ok {
			s := leaders[id]
			if s == nil {
				s = account.New(id)
			}
			for _, ev := range c.Events {
				s = account.Apply(s, ev)
			}
			leaders[id] = s
			// The engine's rule: the commit's placements, cancels and
			// replaces, then its bracket actions, named by their entries
			// as the leader's commits so far give them.
			bracket := func(id string) *evacct.Bracket { return s.Brackets[id] }
			acts := copier.Actions(c.Events, func(inst string) events.Decimal { return s.Positions[inst].Quantity.Abs() }, bracket)
			bacts, ended := copier.BracketActions(c, bracket)
			if acts = append(acts, bacts...); len(acts) > 0 || len(ended) > 0 {
				if entries[id] == nil {
					entries[id] = copier.Entries{}
				}
				acts = entries[id].Resolve(acts, ended)
			}
			byLeaderSeq[m.Seq] = decided{acts}
			return nil
		}
		id, ok := events.SubjectID(m.Subject, events.KindCopier)
		if !ok {
			return nil
		}
		g := groups[id]
		if g == nil {
			g = copier.New(id)
		}
		for _, ev := range c.Events {
			if rec, ok := ev.(evcopier.MirrorsRecorded); ok {
				want := byLeaderSeq[rec.LeaderSeq].actions
				parts := copier.Participants(g, rec.LeaderSeq)
				if len(rec.Actions) != len(want) {
					t.Errorf("leader commit %d: %d actions recorded, the log gives %d", rec.LeaderSeq, len(rec.Actions), len(want))
					continue
				}
				for j, act := range rec.Actions {
					w := want[j]
					if act.Op != w.Op || act.LeaderOrderID != w.OrderID || len(act.Mirrors) != len(parts) {
						t.Errorf("leader commit %d action %d: recorded %s %s on %d, the log gives %s %s on %d", rec.LeaderSeq, j,
							act.Op, act.LeaderOrderID, len(act.Mirrors), w.Op, w.OrderID, len(parts))
						continue
					}
					for i, mr := range act.Mirrors {
						f := parts[i]
						if mr.Follower != f.AccountID || mr.ClientOrderID != copier.ClientOrderID(g.Leader, w.OrderID, f.AccountID) {
							t.Errorf("mirror %+v is not %s's", mr, f.AccountID)
						}
						if w.Op != evcopier.OpPlace || mr.Status != evcopier.StatusMirrored {
							continue
						}
						q := copier.Size(copier.SizeInput{Sizing: f.Sizing, Leader: w.Order.Quantity, LeaderEquity: mr.LeaderEquity,
							FollowerEquity: mr.FollowerEquity, LotStep: dec("0.001"), MinQuantity: dec("0.001")})
						if mr.Quantity == nil || mr.Quantity.Cmp(q) != 0 || mr.Side != copier.Side(f.Follower, w.Order.Side) ||
							mr.Instrument != copier.Instrument(f.Follower, w.Order.Instrument) {
							t.Errorf("mirror %+v: the log gives %s %s", mr, q, copier.Side(f.Follower, w.Order.Side))
						}
						checked++
					}
				}
			}
			g = copier.Apply(g, ev)
		}
		groups[id] = g
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("the replay checked no placement")
	}
}

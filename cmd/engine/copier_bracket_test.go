package main_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
)

// TestCopierMirrorsBracketChanges drives the binary: a paper leader's
// market entry with an exit plan (a stop and a target) is mirrored on two
// paper followers, and an inverse one, each with a bracket of its own. The
// leader moves its stop: each same-side follower's bracket shows the new
// level in its frame, and the group records the change per leader order;
// the inverse follower's is left, recorded skipped with its reason. The
// leader withdraws its bracket: the same-side followers' brackets end,
// their positions stay. After a kill and a start nothing is mirrored again.
func TestCopierMirrorsBracketChanges(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	c := readCreds(t, dir)
	if len(c.Accounts) < 4 {
		t.Fatalf("%d demo accounts", len(c.Accounts))
	}
	leader, f1, f2, inv := c.Accounts[0].AccountID, c.Accounts[1].AccountID, c.Accounts[2].AccountID, c.Accounts[3].AccountID
	key := c.TradingKey
	st, g, err := copierCall(p.base, key, "grp-b", "POST", "/api/copier/groups", map[string]any{"leaderAccountId": leader, "followers": []any{
		map[string]any{"accountId": f1}, map[string]any{"accountId": f2, "sizing": map[string]any{"mode": "multiplier", "value": "2"}},
		map[string]any{"accountId": inv, "direction": "inverse"},
	}})
	if err != nil || st != 201 {
		t.Fatalf("group: %d %v %v", st, g, err)
	}
	groupID := g["groupId"].(string)

	// A stop 100 ticks and a target 200 ticks of BTC-PERP (0.5) from the entry.
	st, pl := doJSON(t, p.base, key, "POST", "/api/exit-plans", map[string]any{"name": "copied", "stop": map[string]any{"ticks": 100},
		"targets": []any{map[string]any{"distance": map[string]any{"ticks": 200}, "share": "1"}}})
	if st != 201 {
		t.Fatalf("plan: %d %v", st, pl)
	}
	planID, rev := pl["plan"].(map[string]any)["id"].(string), pl["plan"].(map[string]any)["revision"].(string)
	order := map[string]any{"clientOrderId": "lead-b", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}
	o := placeWithPlan(t, p.base, key, leader, planID, rev, order)
	lead := o["order"].(map[string]any)["brokerOrderId"].(string)
	bracketID := o["bracket"].(map[string]any)["id"].(string)

	// mirrors are the group's outcomes of the leader's entry, oldest first.
	mirrors := func() []map[string]any {
		_, m, _ := copierCall(p.base, key, "", "GET", "/api/copier/groups/"+groupID+"/mirrors?leaderOrderId="+lead, nil)
		acts, _ := m["mirrors"].([]any)
		var out []map[string]any
		for i := len(acts) - 1; i >= 0; i-- {
			out = append(out, acts[i].(map[string]any))
		}
		return out
	}
	// allMirrored checks the action's op and that the same-side followers
	// mirrored it; the inverse one mirrors a placement, and skips a bracket
	// action, saying why.
	allMirrored := func(a map[string]any, op string) error {
		fs, _ := a["followers"].([]any)
		if a["op"] != op || len(fs) != 3 {
			return fmt.Errorf("action %v, want %s on 3 followers", a, op)
		}
		for _, f := range fs {
			f := f.(map[string]any)
			if f["accountId"] == inv && op != "place" {
				if f["status"] != "skipped" || f["code"] != "unsupported_value" || f["reason"] != "direction_inverse" {
					return fmt.Errorf("the inverse follower's outcome %v of %s", f, op)
				}
				continue
			}
			if f["status"] != "mirrored" || (op != "place" && f["bracketId"] == nil) {
				return fmt.Errorf("outcome %v of %s", f, op)
			}
		}
		return nil
	}
	enginetest.WaitFor(t, 20*time.Second, func() error {
		ms := mirrors()
		if len(ms) != 1 {
			return fmt.Errorf("outcomes %v", ms)
		}
		return allMirrored(ms[0], "place")
	})
	// frameBracket is the account's one bracket in its frame (nil: none)
	// and the frame's positions.
	frameBracket := func(account string) (map[string]any, []any, error) {
		st, f := doJSON(t, p.base, key, "GET", "/api/account/snapshot?account="+account, nil)
		if st != 200 {
			return nil, nil, fmt.Errorf("snapshot of %s: %d %v", account, st, f)
		}
		bs, _ := f["brackets"].([]any)
		ps, _ := f["positions"].([]any)
		switch len(bs) {
		case 0:
			return nil, ps, nil
		case 1:
			return bs[0].(map[string]any), ps, nil
		}
		return nil, nil, fmt.Errorf("%s's frame holds %d brackets", account, len(bs))
	}
	legOf := func(b map[string]any, kind string) map[string]any {
		for _, l := range b["legs"].([]any) {
			if l := l.(map[string]any); l["kind"] == kind {
				return l
			}
		}
		t.Fatalf("no %s leg in %v", kind, b)
		return nil
	}
	targets, invStop := map[string]any{}, any(nil)
	enginetest.WaitFor(t, 10*time.Second, func() error {
		for _, a := range []string{leader, f1, f2, inv} {
			b, _, err := frameBracket(a)
			if err != nil {
				return err
			}
			if b == nil || legOf(b, "stop")["state"] != "working" {
				return fmt.Errorf("%s's bracket is not armed: %v", a, b)
			}
			targets[a] = legOf(b, "target")["price"]
			if a == inv {
				invStop = legOf(b, "stop")["price"]
			}
		}
		return nil
	})
	lb, _, _ := frameBracket(leader)
	stop := legOf(lb, "stop")
	oldStop := wholePrice(t, stop["price"].(string))
	newStop := fmt.Sprintf("%d", oldStop+10) // 20 ticks closer

	// A change the leader's account refuses (a level off the tick) is
	// mirrored nowhere: the group records one change below, the accepted one.
	if st, m := doJSON(t, p.base, key, "PATCH", "/api/trading/exits/"+bracketID+"?account="+leader,
		map[string]any{"legs": []any{map[string]any{"id": stop["id"], "price": newStop + ".25"}}}); st < 400 {
		t.Fatalf("a change off the tick: %d %v", st, m)
	}

	// The leader moves its stop: both followers' stops go to the same level,
	// their targets stay where their own entries put them.
	st, m := doJSON(t, p.base, key, "PATCH", "/api/trading/exits/"+bracketID+"?account="+leader,
		map[string]any{"legs": []any{map[string]any{"id": stop["id"], "price": newStop}}})
	if st != 200 {
		t.Fatalf("change: %d %v", st, m)
	}
	enginetest.WaitFor(t, 10*time.Second, func() error {
		for _, a := range []string{f1, f2} {
			b, _, err := frameBracket(a)
			if err != nil {
				return err
			}
			if b == nil || fmt.Sprint(legOf(b, "stop")["price"]) != newStop || legOf(b, "target")["price"] != targets[a] {
				return fmt.Errorf("%s's bracket %v, want its stop at %s, its target at %v; outcomes %v", a, b, newStop, targets[a], mirrors())
			}
		}
		ms := mirrors()
		if len(ms) != 2 {
			return fmt.Errorf("outcomes %v", ms)
		}
		return allMirrored(ms[1], "change_bracket")
	})
	if b, _, err := frameBracket(inv); err != nil || b == nil || legOf(b, "stop")["price"] != invStop {
		t.Fatalf("the inverse follower's bracket %v (%v), want its stop left at %v", b, err, invStop)
	}

	// The leader withdraws its bracket: the followers' brackets end, their
	// positions stay.
	st, m = doJSON(t, p.base, key, http.MethodDelete, "/api/trading/exits/"+bracketID+"?account="+leader, nil)
	if st != 200 {
		t.Fatalf("withdraw: %d %v", st, m)
	}
	ended := func() error {
		for _, a := range []string{f1, f2} {
			b, ps, err := frameBracket(a)
			if err != nil {
				return err
			}
			if b != nil || len(ps) != 1 {
				return fmt.Errorf("%s after the withdrawal: bracket %v, positions %v", a, b, ps)
			}
		}
		if b, ps, err := frameBracket(inv); err != nil || b == nil || len(ps) != 1 {
			return fmt.Errorf("the inverse follower after the withdrawal: bracket %v, positions %v (%v)", b, ps, err)
		}
		ms := mirrors()
		if len(ms) != 3 {
			return fmt.Errorf("outcomes %v", ms)
		}
		return allMirrored(ms[2], "withdraw_bracket")
	}
	enginetest.WaitFor(t, 10*time.Second, ended)

	// A kill and a start: the catch-up mirrors nothing again.
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
	p = start(t, bin, dir, addr)
	time.Sleep(500 * time.Millisecond)
	if err := ended(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{f1, f2, inv} {
		var mirrored []copierOrder
		for _, o := range listOrders(t, p.base, key, a) {
			if o.LeaderOrderID != "" {
				mirrored = append(mirrored, o)
			}
		}
		if len(mirrored) != 1 || mirrored[0].LeaderOrderID != lead {
			t.Fatalf("%s's mirrors: %+v", a, mirrored)
		}
	}
}

// wholePrice reads a price such as "60000" or "60000.5" (rounded down).
func wholePrice(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		t.Fatalf("price %q: %v", s, err)
	}
	return n
}

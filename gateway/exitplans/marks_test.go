package exitplans_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	evacct "github.com/svc/engine/events/account"
)

// A trailing stop follows a new high without a commit of its account: the
// paper book records the quote as a mark, and the brackets, the managed
// exits, the open orders and the frame all show the stop where the marks
// put it; a dip to that level fills it there. With read models in memory
// and in PostgreSQL.
func TestATrailingStopFollowsTheMarks(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "postgres"}[pg], func(t *testing.T) { trailingFollowsMarks(t, startOn(t, pg)) })
	}
}

func trailingFollowsMarks(t *testing.T, e env) {
	e.quote("60000", "60000.5")
	id, rev := e.plan(t, map[string]any{"name": "trail", "stop": map[string]any{"ticks": 40},
		"trailing": map[string]any{"distance": map[string]any{"ticks": 10}}})
	token := e.preview(t, id, rev, "market", "tr-1", "0.01", nil)
	r := want(t, e.Post("/api/trading/order", entry("tr-1", "market", "0.01", id, rev, token)), 200, "")
	if r["order"].(map[string]any)["state"] != "filled" {
		t.Fatalf("order %v", r)
	}
	stop := legOf(e.brackets(t)[0].(map[string]any), "stop")
	if stop["price"] != "59980.5" {
		t.Fatalf("stop %v", stop)
	}
	// The frame's revision, and the account's own last commit in the log.
	snap := want(t, e.Get("/api/account/snapshot"), 200, "")
	before, acct := snap["revision"].(float64), snap["accountId"].(string)
	committed := func() uint64 {
		seq, err := e.App.Log.LastSubjectSeq(context.Background(), evacct.Subject(acct))
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	last := committed()

	// A new high: the rule puts the stop 10 ticks (5) under it.
	e.quote("60100", "60100.5")
	apptest.WaitFor(t, 5*time.Second, func() error {
		if p := legOf(e.brackets(t)[0].(map[string]any), "stop")["price"]; p != "60095" {
			return errf("the bracket's stop at %v, want 60095", p)
		}
		return nil
	})
	me := want(t, e.Get("/api/account/managed-exits"), 200, "")["items"].([]any)[0].(map[string]any)
	if me["kind"] != "trailing" || me["state"] != "trailing" || me["stopPrice"] != "60095" || me["bestPrice"] != "60100" {
		t.Fatalf("managed exit %v", me)
	}
	found := false
	for _, o := range want(t, e.Get("/api/account/orders?state=open"), 200, "")["orders"].([]any) {
		if o := o.(map[string]any); o["orderType"] == "stop" {
			found = true
			if o["stopPrice"] != "60095" {
				t.Fatalf("the stop order rests at %v, want 60095", o["stopPrice"])
			}
		}
	}
	if !found {
		t.Fatal("no open stop order")
	}
	f := want(t, e.Get("/api/account/snapshot"), 200, "")
	if p := legOf(f["brackets"].([]any)[0].(map[string]any), "stop")["price"]; p != "60095" {
		t.Fatalf("the frame's stop at %v", p)
	}
	// The frame the mark changed is ahead of the one before (a client drops
	// a frame at or behind the revision it holds); the account committed nothing.
	if after := f["revision"].(float64); after <= before {
		t.Fatalf("the frame after the mark names revision %v, not ahead of %v", after, before)
	}
	if bs := want(t, e.Get("/api/account/brackets"), 200, ""); bs["revision"].(float64) <= before {
		t.Fatalf("the brackets' read after the mark names revision %v, not ahead of %v", bs["revision"], before)
	}
	if now := committed(); now != last {
		t.Fatalf("the account committed for the move: its last commit %d -> %d", last, now)
	}
	// A new subscriber is sent that frame, then the lock as of it: the
	// lock's id is the frame's revision, not the account's last commit
	// behind it (a stream's ids never go back).
	if got := streamIDs(t, e, 2); got[0].name != "account" || got[0].id != uint64(f["revision"].(float64)) ||
		got[1].name != "lock" || got[1].id < got[0].id {
		t.Fatalf("a new subscriber's first events %v, want the frame at %v, then the lock at an id not behind it (the account's last commit: %d)",
			got, f["revision"], last)
	}

	// A dip to the derived level fills the stop; the recorded one was 59980.5.
	e.quote("60095", "60095.5")
	apptest.WaitFor(t, 5*time.Second, func() error {
		if n := len(e.brackets(t)); n != 0 {
			return errf("%d brackets still active", n)
		}
		return nil
	})
	f = want(t, e.Get("/api/account/snapshot"), 200, "")
	if ps := f["positions"].([]any); len(ps) != 0 {
		t.Fatalf("positions %v", ps)
	}
}

// sseEvent is an event's name and id as a stream sent it.
type sseEvent struct {
	name string
	id   uint64
}

// streamIDs opens the account stream and returns its first n events' names
// and ids.
func streamIDs(t *testing.T, e env, n int) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/api/account/stream?broker=paper", nil)
	req.Header.Set("Authorization", "Bearer "+e.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []sseEvent
	name := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for len(out) < n && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			id, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("event %s: id %q", name, v)
			}
			out = append(out, sseEvent{name, id})
		}
	}
	if len(out) < n {
		t.Fatalf("the stream sent %d events (%v), want %d", len(out), out, n)
	}
	return out
}

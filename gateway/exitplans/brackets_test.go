package exitplans_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// ladder: stop 40 ticks, half at 20 ticks, a runner, breakeven at 20 ticks (+1), trailing 10 ticks from 30.
var ladder = map[string]any{
	"name":      "atm",
	"stop":      map[string]any{"ticks": 40},
	"targets":   []any{map[string]any{"distance": map[string]any{"ticks": 20}, "share": "0.5"}},
	"runner":    true,
	"breakeven": map[string]any{"trigger": map[string]any{"ticks": 20}, "plusTicks": 1},
	"trailing":  map[string]any{"activation": map[string]any{"ticks": 30}, "distance": map[string]any{"ticks": 10}},
}

type env struct {
	*apptest.Env
	now *atomic.Int64
}

func start(t *testing.T) env { return startOn(t, false) }

// startOn starts a service with read models in memory or in PostgreSQL.
func startOn(t *testing.T, postgres bool) env {
	now := new(atomic.Int64)
	now.Store(time.Now().UnixNano())
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Postgres: postgres, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	return env{e, now}
}

func (e env) quote(bid, ask string) {
	e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal(bid), Ask: events.MustDecimal(ask),
		Last: events.MustDecimal(bid), At: time.Unix(0, e.now.Load())})
}

func want(t *testing.T, r *apptest.Resp, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	m := r.Map(t)
	if code != "" && m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.Body)
	}
	return m
}

func (e env) plan(t *testing.T, spec map[string]any) (id, rev string) {
	p := want(t, e.Post("/api/exit-plans", spec), 201, "")["plan"].(map[string]any)
	return p["id"].(string), p["revision"].(string)
}

func (e env) preview(t *testing.T, id, rev, orderType, coid, qty string, limit any) string {
	body := map[string]any{"planId": id, "planRevision": rev, "instrument": "BTC-PERP", "side": "buy", "quantity": qty,
		"orderType": orderType, "clientOrderId": coid}
	if limit != nil {
		body["limitPrice"] = limit
	}
	return want(t, e.Post("/api/account/exit-plans/preview", body), 200, "")["preview"].(map[string]any)["token"].(string)
}

func entry(coid, orderType, qty, id, rev, token string) map[string]any {
	o := map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": "buy", "orderType": orderType, "quantity": qty,
		"exitPlan": map[string]any{"planId": id, "planRevision": rev, "previewToken": token}}
	if orderType == "limit" {
		o["limitPrice"] = "59000"
		o["timeInForce"] = "gtc"
	}
	return o
}

func (e env) brackets(t *testing.T) []any {
	return want(t, e.Get("/api/account/brackets"), 200, "")["items"].([]any)
}

func legOf(b map[string]any, kind string) map[string]any {
	for _, l := range b["legs"].([]any) {
		if l := l.(map[string]any); l["kind"] == kind {
			return l
		}
	}
	return nil
}

// The whole flow of a bracketed market entry: preview, placement by
// reference in one commit, the frame and the reads, one-cancels-other and
// breakeven on quotes, withdrawal keeping the position; with read models in
// memory and in PostgreSQL.
func TestBracketedMarketEntry(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "postgres"}[pg], func(t *testing.T) { bracketedMarketEntry(t, startOn(t, pg)) })
	}
}

func bracketedMarketEntry(t *testing.T, e env) {
	e.quote("60000", "60000.5")
	id, rev := e.plan(t, ladder)
	token := e.preview(t, id, rev, "market", "bk-1", "0.01", nil)

	// Bindings refused, nothing recorded: another quantity, a forged token.
	o := entry("bk-1", "market", "0.02", id, rev, token)
	m := want(t, e.Post("/api/trading/order", o), 409, "exit_plan_conflict")
	if m["params"].(map[string]any)["reason"] != "binding" || m["params"].(map[string]any)["field"] != "quantity" {
		t.Fatalf("binding refusal %v", m)
	}
	o = entry("bk-1", "market", "0.01", id, rev, token+"x")
	want(t, e.Post("/api/trading/order", o), 400, "invalid_request")

	r := want(t, e.Post("/api/trading/order", entry("bk-1", "market", "0.01", id, rev, token)), 200, "")
	if r["order"].(map[string]any)["state"] != "filled" || r["bracket"].(map[string]any)["state"] != "active" {
		t.Fatalf("order %v", r)
	}
	bid := r["bracket"].(map[string]any)["id"].(string)
	// The same submission again: the clientOrderId is spent, the token with it.
	want(t, e.Post("/api/trading/order", entry("bk-1", "market", "0.01", id, rev, token)), 409, "idempotency_conflict")

	bs := e.brackets(t)
	if len(bs) != 1 {
		t.Fatalf("brackets %v", bs)
	}
	b := bs[0].(map[string]any)
	stop, target := legOf(b, "stop"), legOf(b, "target")
	if stop["state"] != "working" || stop["price"] != "59980.5" || stop["quantity"] != "0.01" || stop["parentOrderId"] != nil {
		t.Fatalf("stop %v", stop)
	}
	if target["price"] != "60010.5" || target["quantity"] != "0.005" || legOf(b, "runner")["quantity"] != "0.005" {
		t.Fatalf("target %v", b)
	}
	f := want(t, e.Get("/api/account/snapshot"), 200, "")
	if len(f["brackets"].([]any)) != 1 || len(f["managedExits"].([]any)) != 2 ||
		len(f["capabilities"].(map[string]any)["exitPlanSupport"].([]any)) != 6 {
		t.Fatalf("frame %v", f)
	}

	// The target's price: it fills half, the stop shrinks to the rest and breakeven moves it.
	e.quote("60010.5", "60011")
	apptest.WaitFor(t, 5*time.Second, func() error {
		b = e.brackets(t)[0].(map[string]any)
		if legOf(b, "target")["state"] != "filled" || legOf(b, "stop")["quantity"] != "0.005" || legOf(b, "stop")["price"] != "60001" {
			return errf("bracket %v", b)
		}
		return nil
	})
	me := want(t, e.Get("/api/account/managed-exits"), 200, "")["items"].([]any)
	if be := me[0].(map[string]any); be["kind"] != "breakeven" || be["state"] != "done" {
		t.Fatalf("managed exits %v", me)
	}

	// Withdraw: the stop is canceled, the position stays.
	w := want(t, e.Do(apptest.Req{Method: http.MethodDelete, Path: "/api/trading/exits/" + bid}), 200, "")
	if w["bracket"].(map[string]any)["state"] != "ended" || w["stuck"].(float64) != 0 || w["refused"] != nil || w["entryOrderId"] != nil {
		t.Fatalf("withdrawal %v", w)
	}
	if len(e.brackets(t)) != 0 {
		t.Fatal("the bracket is still listed")
	}
	f = want(t, e.Get("/api/account/snapshot"), 200, "")
	if ps := f["positions"].([]any); len(ps) != 1 || ps[0].(map[string]any)["quantity"] != "0.005" {
		t.Fatalf("positions %v", ps)
	}
	want(t, e.Do(apptest.Req{Method: http.MethodDelete, Path: "/api/trading/exits/" + bid}), 404, "not_found")
}

// A resting entry holds its legs pre_armed; withdrawing leaves it resting
// under a new id; protection and change by reference; a hold refuses them.
func TestBracketOnARestingEntry(t *testing.T) {
	e := start(t)
	e.quote("60000", "60000.5")
	id, rev := e.plan(t, ladder)
	token := e.preview(t, id, rev, "limit", "rest-1", "0.01", "59000")

	// An edited plan refuses the placement with its current revision.
	id2, rev2 := e.plan(t, map[string]any{"name": "stop", "stop": map[string]any{"ticks": 10}})
	token2 := e.preview(t, id2, rev2, "market", "edited-1", "0.01", nil)
	cur := want(t, e.Do(apptest.Req{Method: http.MethodPut, Path: "/api/exit-plans/" + id2,
		Body: map[string]any{"revision": rev2, "name": "stop", "stop": map[string]any{"ticks": 12}}}), 200, "")["plan"].(map[string]any)["revision"]
	m := want(t, e.Post("/api/trading/order", entry("edited-1", "market", "0.01", id2, rev2, token2)), 409, "exit_plan_conflict")
	if p := m["params"].(map[string]any); p["reason"] != "plan_changed" || p["revision"] != cur {
		t.Fatalf("edited plan %v", m)
	}
	// An expired token.
	token3 := e.preview(t, id, rev, "market", "late-1", "0.01", nil)
	e.now.Add(int64(3 * time.Minute))
	m = want(t, e.Post("/api/trading/order", entry("late-1", "market", "0.01", id, rev, token3)), 409, "exit_plan_conflict")
	if m["params"].(map[string]any)["reason"] != "token_expired" {
		t.Fatalf("expired %v", m)
	}
	token = e.preview(t, id, rev, "limit", "rest-1", "0.01", "59000")

	r := want(t, e.Post("/api/trading/order", entry("rest-1", "limit", "0.01", id, rev, token)), 200, "")
	oid := r["order"].(map[string]any)["brokerOrderId"].(string)
	b := e.brackets(t)[0].(map[string]any)
	if b["entryOrderId"] != oid || legOf(b, "stop")["state"] != "pre_armed" || legOf(b, "stop")["parentOrderId"] != oid || legOf(b, "stop")["price"] != "58980" {
		t.Fatalf("pre-armed %v", b)
	}
	// Change the stop while it waits: the entry rests again under a new id.
	c := want(t, e.Do(apptest.Req{Method: http.MethodPatch, Path: "/api/trading/exits/" + b["id"].(string),
		Body: map[string]any{"legs": []any{map[string]any{"id": legOf(b, "stop")["id"], "price": "58900"}}}}), 200, "")
	moved := c["entryOrderId"].(string)
	if moved == oid || c["bracket"].(map[string]any)["state"] != "active" {
		t.Fatalf("change %v", c)
	}
	b = e.brackets(t)[0].(map[string]any)
	if b["entryOrderId"] != moved || legOf(b, "stop")["price"] != "58900" {
		t.Fatalf("changed %v", b)
	}
	// Withdraw: the entry rests once more, without the bracket.
	w := want(t, e.Do(apptest.Req{Method: http.MethodDelete, Path: "/api/trading/exits/" + b["id"].(string)}), 200, "")
	again := w["entryOrderId"].(string)
	orders := want(t, e.Get("/api/account/orders?state=open"), 200, "")["orders"].([]any)
	found := false
	for _, o := range orders {
		o := o.(map[string]any)
		if o["brokerOrderId"] == again && o["clientOrderId"] == "rest-1" && o["limitPrice"] == "59000" {
			found = true
		}
	}
	if !found || len(e.brackets(t)) != 0 {
		t.Fatalf("the entry does not rest as %s: %v", again, orders)
	}

	// Protect the resting entry by reference, then the position once it fills.
	p := want(t, e.Post("/api/trading/exits", map[string]any{"clientOrderId": "protect-1", "entryOrderId": again, "planId": id, "planRevision": rev}), 200, "")
	if p["entryOrderId"] == nil || p["entryOrderId"] == again {
		t.Fatalf("protect %v", p)
	}
	want(t, e.Post("/api/trading/exits", map[string]any{"clientOrderId": "protect-1", "entryOrderId": again, "planId": id, "planRevision": rev}), 409, "idempotency_conflict")
	e.quote("58999", "59000")
	apptest.WaitFor(t, 5*time.Second, func() error {
		bs := e.brackets(t)
		if len(bs) != 1 || legOf(bs[0].(map[string]any), "stop")["state"] != "working" {
			return errf("not armed: %v", bs)
		}
		return nil
	})
	// A daily loss limit fires on the way down (the stop or the risk flatten
	// ends the bracket, whichever the quote reaches first); the hold refuses a protection.
	want(t, e.Do(apptest.Req{Method: http.MethodPut, Path: "/api/risk?broker=paper", Body: map[string]any{"dailyLossEnabled": true, "dailyLossValue": 1}}), 200, "")
	e.quote("58000", "58000.5")
	apptest.WaitFor(t, 5*time.Second, func() error {
		if n := len(e.brackets(t)); n != 0 {
			return errf("%d brackets after the fall", n)
		}
		if l := want(t, e.Get("/api/risk?broker=paper"), 200, "")["lock"].(map[string]any); l["tradingLocked"] != true {
			return errf("not locked: %v", l)
		}
		return nil
	})
	want(t, e.Post("/api/trading/exits", map[string]any{"clientOrderId": "protect-2", "instrument": "BTC-PERP", "planId": id, "planRevision": rev}), 423, "risk_locked")
}

func errf(format string, a ...any) error { return fmt.Errorf(format, a...) }

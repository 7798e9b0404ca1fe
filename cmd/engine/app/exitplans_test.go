package app_test

import (
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

var ladder = map[string]any{
	"name": "two targets and a runner",
	"stop": map[string]any{"ticks": 40},
	"targets": []any{
		map[string]any{"distance": map[string]any{"ticks": 20}, "share": "0.5"},
		map[string]any{"distance": map[string]any{"offset": "50"}, "share": "0.25"},
	},
	"runner":    true,
	"breakeven": map[string]any{"trigger": map[string]any{"ticks": 20}, "plusTicks": 1},
	"trailing":  map[string]any{"activation": map[string]any{"ticks": 30}, "distance": map[string]any{"ticks": 10}},
}

// Saved exit plans: create (idempotent by Idempotency-Key), list, replace and
// delete conditionally on the revision read, and a preview priced at the tick.
func TestExitPlans(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	r := e.Do(apptest.Req{Method: "POST", Path: "/api/exit-plans", Body: ladder, Headers: map[string]string{"Idempotency-Key": "plan-1"}})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	p := r.Map(t)["plan"].(map[string]any)
	id, rev := p["id"].(string), p["revision"].(string)
	if n := len(p["requires"].([]any)); n != 6 {
		t.Fatalf("requires %v", p["requires"])
	}
	again := e.Do(apptest.Req{Method: "POST", Path: "/api/exit-plans", Body: ladder, Headers: map[string]string{"Idempotency-Key": "plan-1"}})
	if again.Status != 201 || again.Map(t)["plan"].(map[string]any)["id"] != id {
		t.Fatalf("a retry made another plan: %s", again.Body)
	}
	code(t, e.Post("/api/exit-plans", map[string]any{"name": "bad", "targets": []any{map[string]any{"distance": map[string]any{"ticks": 1}, "share": "0.5"}}}),
		400, "invalid_request")
	code(t, e.Post("/api/exit-plans", map[string]any{"name": "x", "stop": map[string]any{"ticks": 1}, "levels": 3}), 400, "invalid_request")

	// Replace with the revision read; a stale one is 409 with the current revision.
	edited := map[string]any{"revision": rev, "name": "stop only", "stop": map[string]any{"ticks": 30}}
	r = e.Do(apptest.Req{Method: "PUT", Path: "/api/exit-plans/" + id, Body: edited})
	if r.Status != 200 {
		t.Fatalf("replace: %d %s", r.Status, r.Body)
	}
	rev2 := r.Map(t)["plan"].(map[string]any)["revision"].(string)
	if rev2 == rev {
		t.Fatal("the revision did not change")
	}
	r = e.Do(apptest.Req{Method: "PUT", Path: "/api/exit-plans/" + id, Body: edited})
	code(t, r, 409, "exit_plan_conflict")
	if r.Map(t)["params"].(map[string]any)["revision"] != rev2 {
		t.Fatalf("the conflict does not name the current revision: %s", r.Body)
	}
	if r := e.Get("/api/exit-plans"); len(r.Map(t)["plans"].([]any)) != 1 {
		t.Fatalf("list: %s", r.Body)
	}

	// Preview a long market entry: stop 30 ticks (of 0.5) below the ask, one leg.
	r = e.Do(apptest.Req{Method: "PUT", Path: "/api/exit-plans/" + id, Body: func() map[string]any {
		m := map[string]any{"revision": rev2}
		for k, v := range ladder {
			m[k] = v
		}
		return m
	}()})
	rev3 := r.Map(t)["plan"].(map[string]any)["revision"].(string)
	preview := map[string]any{"planId": id, "planRevision": rev3, "instrument": "BTC-PERP", "side": "buy", "quantity": "0.01",
		"orderType": "limit", "limitPrice": "60000", "clientOrderId": "bracket-1"}
	r = e.Post("/api/account/exit-plans/preview", preview)
	if r.Status != 200 {
		t.Fatalf("preview: %d %s", r.Status, r.Body)
	}
	pv := r.Map(t)["preview"].(map[string]any)
	legs := pv["legs"].([]any)
	stop := legs[0].(map[string]any)
	if stop["kind"] != "stop" || stop["price"] != "59980" || stop["quantity"] != "0.01" || pv["token"] == "" {
		t.Fatalf("preview %s", r.Body)
	}
	if t1 := legs[1].(map[string]any); t1["price"] != "60010" || t1["quantity"] != "0.005" {
		t.Fatalf("first target %v", t1)
	}
	// A preview refuses what the order would: off the lot step, off the tick.
	off := map[string]any{}
	for k, v := range preview {
		off[k] = v
	}
	off["quantity"] = "0.0015"
	if r := e.Post("/api/account/exit-plans/preview", off); r.Status != 422 || r.Map(t)["params"].(map[string]any)["lotStep"] != "0.001" {
		t.Fatalf("off the lot step: %d %s", r.Status, r.Body)
	}
	off["quantity"], off["limitPrice"] = "0.01", "60000.25"
	code(t, e.Post("/api/account/exit-plans/preview", off), 422, "invalid_request")
	preview["planRevision"] = rev
	code(t, e.Post("/api/account/exit-plans/preview", preview), 409, "exit_plan_conflict")

	// Delete with the revision; a key of another user never sees the plan.
	code(t, e.Do(apptest.Req{Method: "DELETE", Path: "/api/exit-plans/" + id + "?revision=" + rev}), 409, "exit_plan_conflict")
	if r := e.Do(apptest.Req{Method: "DELETE", Path: "/api/exit-plans/" + id + "?revision=" + rev3}); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	code(t, e.Do(apptest.Req{Method: "DELETE", Path: "/api/exit-plans/" + id + "?revision=" + rev3}), 404, "not_found")

	// A signed-in session has plans of its own.
	cookie := e.SignIn("planner@example.com", "a long enough password")
	if r := e.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/exit-plans", Body: ladder}); r.Status != 201 {
		t.Fatalf("session create: %d %s", r.Status, r.Body)
	}
	if r := e.Get("/api/exit-plans"); len(r.Map(t)["plans"].([]any)) != 0 {
		t.Fatalf("the key sees the session's plan: %s", r.Body)
	}
}

package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// copierReq is a copier write with an Idempotency-Key (key "" sends none).
func copierReq(method, path, idemKey string, body any) apptest.Req {
	r := apptest.Req{Method: method, Path: path, Body: body, Headers: map[string]string{}}
	if idemKey != "" {
		r.Headers["Idempotency-Key"] = idemKey
	}
	return r
}

func wantCode(t *testing.T, r *apptest.Resp, status int, code string) map[string]any {
	t.Helper()
	m := r.Map(t)
	if r.Status != status || (code != "" && m["code"] != code) {
		t.Fatalf("answered %d %s, want %d %s", r.Status, r.Body, status, code)
	}
	return m
}

// The copier routes through the real handler, every answer checked against
// the OpenAPI document: a group made, read, listed, its followers put and
// removed; an Idempotency-Key's repeat and conflict; an account the caller
// does not hold refused as the trading routes refuse it, another's group
// not found; a session's own group; a leader order mirrored with its
// leaderOrderId on the follower's orders and frame, its outcomes readable.
func TestCopierRoutes(t *testing.T) {
	e := apptest.Start(t, apptest.Options{DemoAccounts: 4})
	L, F1, F2, F3 := e.Accounts[0].AccountID, e.Accounts[1].AccountID, e.Accounts[2].AccountID, e.Accounts[3].AccountID
	body := map[string]any{"leaderAccountId": L, "name": "desk", "followers": []any{
		map[string]any{"accountId": F1, "sizing": map[string]any{"mode": "multiplier", "value": 3}},
		map[string]any{"accountId": F2, "sizing": map[string]any{"mode": "fixed", "value": "0.005", "max": "1"}, "direction": "inverse",
			"instrumentMap": map[string]any{"ETH-PERP": "SOL-PERP"}},
	}}
	wantCode(t, e.Do(copierReq("POST", "/api/copier/groups", "", body)), 400, "idempotency_key_required")
	r := e.Do(copierReq("POST", "/api/copier/groups", "g-1", body))
	g := wantCode(t, r, 201, "")
	id := g["groupId"].(string)
	if g["leaderAccountId"] != L || len(g["followers"].([]any)) != 2 {
		t.Fatalf("group %v", g)
	}
	again := e.Do(copierReq("POST", "/api/copier/groups", "g-1", body))
	if again.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" || again.Map(t)["groupId"] != id {
		t.Fatalf("repeat: %d %s", again.Status, again.Body)
	}
	other := map[string]any{"leaderAccountId": L, "name": "other"}
	wantCode(t, e.Do(copierReq("POST", "/api/copier/groups", "g-1", other)), 409, "idempotency_conflict")

	// Bounded inputs: 4xx naming the field, nothing made.
	for _, bad := range []map[string]any{
		{"leaderAccountId": L, "followers": []any{map[string]any{"accountId": F1, "sizing": map[string]any{"mode": "double", "value": 1}}}},
		{"leaderAccountId": L, "followers": []any{map[string]any{"accountId": F1, "sizing": map[string]any{"mode": "multiplier", "value": 0}}}},
		{"leaderAccountId": L, "followers": []any{map[string]any{"accountId": F1, "sizing": map[string]any{"mode": "multiplier", "value": 5000}}}},
		{"leaderAccountId": L, "followers": []any{map[string]any{"accountId": F1, "direction": "sideways"}}},
		{"leaderAccountId": L, "followers": []any{map[string]any{"accountId": L}}},
		{"leaderAccountId": L, "followers": []any{map[string]any{"accountId": F1}, map[string]any{"accountId": F1}}},
		{"leaderAccountId": "", "followers": []any{}},
		{"leaderAccountId": L, "colour": "red"},
	} {
		r := e.Do(copierReq("POST", "/api/copier/groups", fmt.Sprintf("bad-%p", bad), bad))
		if r.Status != 400 && r.Status != 422 {
			t.Fatalf("%v answered %d %s", bad, r.Status, r.Body)
		}
	}

	// A follower put, changed, removed.
	fp := "/api/copier/groups/" + id + "/followers/" + F3
	wantCode(t, e.Do(copierReq("PUT", fp, "f-1", map[string]any{"sizing": map[string]any{"mode": "equity", "value": "1"}})), 201, "")
	wantCode(t, e.Do(copierReq("PUT", fp, "f-2", map[string]any{"enabled": false})), 200, "")
	gr := wantCode(t, e.Get("/api/copier/groups/"+id), 200, "")
	if fs := gr["followers"].([]any); len(fs) != 3 || fs[2].(map[string]any)["enabled"] != false {
		t.Fatalf("followers %v", fs)
	}
	wantCode(t, e.Do(copierReq("DELETE", fp, "f-3", nil)), 200, "")
	wantCode(t, e.Do(copierReq("DELETE", fp, "f-4", nil)), 404, "not_found")
	wantCode(t, e.Do(copierReq("PUT", "/api/copier/groups/"+id+"/followers/"+L, "f-5", map[string]any{})), 422, "invalid_request")
	wantCode(t, e.Get("/api/copier/groups/cg_nosuch"), 404, "not_found")
	if l := wantCode(t, e.Get("/api/copier/groups"), 200, ""); len(l["groups"].([]any)) != 1 {
		t.Fatalf("list %v", l)
	}

	// Another user: holds none of these accounts, nor reaches the group.
	cookie := e.SignIn("copier-other@example.com", "correct horse battery staple")
	var mine []string
	for i := range 2 {
		r := e.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/account/demo", Body: map[string]any{},
			Headers: map[string]string{"Idempotency-Key": fmt.Sprintf("demo-%d", i)}})
		a := wantCode(t, r, 201, "")["account"].(map[string]any)
		mine = append(mine, a["accountId"].(string))
	}
	m := wantCode(t, e.Do(copierReq("PUT", "/api/copier/groups/"+id+"/followers/"+mine[0], "f-6", map[string]any{})), 400, "invalid_request")
	if m["params"].(map[string]any)["field"] != "accountId" {
		t.Fatalf("params %v", m["params"])
	}
	wantCode(t, e.AsSession(cookie, apptest.Req{Method: "GET", Path: "/api/copier/groups/" + id}), 404, "not_found")
	r = e.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/copier/groups", Headers: map[string]string{"Idempotency-Key": "s-1"},
		Body: map[string]any{"leaderAccountId": mine[0], "followers": []any{map[string]any{"accountId": L}}}})
	if m := wantCode(t, r, 400, "invalid_request"); m["params"].(map[string]any)["field"] != "followers[0].accountId" {
		t.Fatalf("params %v", m["params"])
	}
	r = e.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/copier/groups", Headers: map[string]string{"Idempotency-Key": "s-2"},
		Body: map[string]any{"leaderAccountId": mine[0], "followers": []any{map[string]any{"accountId": mine[1]}}}})
	own := wantCode(t, r, 201, "")["groupId"].(string)
	wantCode(t, e.AsSession(cookie, apptest.Req{Method: "GET", Path: "/api/copier/groups/" + own}), 200, "")
	wantCode(t, e.Get("/api/copier/groups/"+own), 404, "not_found")

	// The group's stream: its state at once, and again after each of its commits.
	stream := e.Stream("/api/copier/groups/" + id + "/stream")
	if ev := apptest.Next(t, stream); ev.Name != "group" || ev.Data["group"].(map[string]any)["groupId"] != id {
		t.Fatalf("first event %+v", ev)
	}

	// A leader order, mirrored: leaderOrderId on the follower's order and frame.
	o := wantCode(t, e.Post("/api/trading/order?account="+L, map[string]any{"clientOrderId": "lead-1", "instrument": "BTC-PERP",
		"side": "buy", "orderType": "limit", "limitPrice": "1000.5", "quantity": "0.01"}), 200, "")
	lead := o["order"].(map[string]any)["brokerOrderId"].(string)
	var mirror map[string]any
	apptest.WaitFor(t, 5*time.Second, func() error {
		for _, x := range e.Get("/api/account/orders?account=" + F1).Map(t)["orders"].([]any) {
			if x.(map[string]any)["leaderOrderId"] == lead {
				mirror = x.(map[string]any)
				return nil
			}
		}
		return fmt.Errorf("no mirror of %s yet", lead)
	})
	if mirror["quantity"] != "0.03" || mirror["side"] != "buy" || !strings.HasPrefix(mirror["clientOrderId"].(string), "cp-") {
		t.Fatalf("mirror %v", mirror)
	}
	snap := e.Get("/api/account/snapshot?account=" + F1).Map(t)
	found := false
	for _, x := range snap["orders"].([]any) {
		found = found || x.(map[string]any)["leaderOrderId"] == lead
	}
	if !found {
		t.Fatalf("the follower's frame does not show the mirror's leaderOrderId: %v", snap["orders"])
	}
	var outs []any
	apptest.WaitFor(t, 5*time.Second, func() error {
		outs = wantCode(t, e.Get("/api/copier/groups/"+id+"/mirrors?leaderOrderId="+lead), 200, "")["mirrors"].([]any)
		if len(outs) == 0 {
			return fmt.Errorf("no outcomes yet")
		}
		return nil
	})
	apptest.WaitFor(t, 5*time.Second, func() error {
		ev := apptest.Next(t, stream)
		if ms, _ := ev.Data["mirrors"].([]any); len(ms) > 0 && ms[0].(map[string]any)["leaderOrderId"] == lead {
			return nil
		}
		return fmt.Errorf("the stream has not shown the mirrors of %s yet", lead)
	})
	fs := outs[0].(map[string]any)["followers"].([]any)
	if len(fs) != 2 || fs[0].(map[string]any)["status"] != "mirrored" || fs[1].(map[string]any)["quantity"] != "0.005" ||
		fs[1].(map[string]any)["side"] != "sell" {
		t.Fatalf("outcomes %v", fs)
	}
	wantCode(t, e.Get("/api/copier/groups/"+id+"/mirrors?limit=0"), 400, "invalid_request")
}

// FuzzCopierRoutes sends what the fuzzer makes through the real handler to
// the copier's routes: bodies of the writes, the follower path, the mirrors
// query. Every answer matches the OpenAPI document, no 5xx but a typed 503,
// and what is committed reads back.
func FuzzCopierRoutes(f *testing.F) {
	routes := []struct{ method, path string }{
		{"POST", "/api/copier/groups"}, {"PUT", "/api/copier/groups/%group/followers/%account"},
		{"DELETE", "/api/copier/groups/%group/followers/%account"}, {"GET", "/api/copier/groups/%group/mirrors"},
		{"GET", "/api/copier/groups/%group"},
	}
	seeds := []string{
		`{"leaderAccountId":"%leader","followers":[{"accountId":"%f","sizing":{"mode":"multiplier","value":"2"}}]}`,
		`{"leaderAccountId":"%leader","followers":[{"accountId":"%f","sizing":{"mode":"equity","value":1,"max":"3"},"direction":"inverse","instrumentMap":{"ES":"MES"}}]}`,
		`{"sizing":{"mode":"fixed","value":"0.001"},"enabled":false}`,
		`{"sizing":{"mode":"fixed","value":"1e-100000"}}`,
		`{"sizing":{"mode":"multiplier","value":"NaN"}}`,
		`{"instrumentMap":{"":"x"}}`,
		`{"instrumentMap":{"a":"\u202e"}}`,
		`{"leaderAccountId":"%leader","followers":[{"accountId":"%leader"}]}`,
		`{"leaderAccountId":"../x"}`,
		`{"leaderAccountId":"%leader","name":"` + strings.Repeat("n", 81) + `"}`,
		`{"direction":null,"enabled":"yes"}`,
		`leaderOrderId=x&limit=201`,
		`limit=-1`,
		`null`,
		"\xff\xfe",
	}
	for i, s := range seeds {
		f.Add(append([]byte{byte(i)}, s...))
	}
	fe := startFuzzEngine(f)
	leader, follower := fe.Accounts[0].AccountID, fe.Accounts[0].AccountID
	if len(fe.Accounts) > 1 {
		follower = fe.Accounts[1].AccountID
	}
	fill := func(s string) string {
		return strings.NewReplacer("%leader", leader, "%f", follower).Replace(s)
	}
	// A group to aim the other routes at.
	mk := httptest.NewRequest("POST", "/api/copier/groups", strings.NewReader(fill(`{"leaderAccountId":"%leader"}`)))
	mk.Header.Set("Content-Type", "application/json")
	mk.Header.Set("Authorization", "Bearer "+fe.Key)
	mk.Header.Set("Idempotency-Key", "fuzz-group")
	w := httptest.NewRecorder()
	fe.App.Handler.ServeHTTP(w, mk)
	group := "cg_none"
	if w.Code == http.StatusCreated {
		var g struct {
			GroupID string `json:"groupId"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &g)
		group = g.GroupID
	}
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		rt := routes[int(b[0])%len(routes)]
		n++
		target := strings.NewReplacer("%group", group, "%account", url.PathEscape(follower)).Replace(rt.path)
		body := []byte(fill(string(b[1:])))
		var r *http.Request
		if rt.method == http.MethodGet {
			target += "?" + string(b[1:])
			if _, err := url.ParseQuery(string(b[1:])); err != nil || !validTarget(target) {
				return
			}
			r = httptest.NewRequest(rt.method, target, nil)
		} else {
			r = httptest.NewRequest(rt.method, target, bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
		}
		r.Header.Set("Authorization", "Bearer "+fe.Key)
		r.Header.Set("Idempotency-Key", fmt.Sprintf("fz-%d", n-n%2)) // pairs share a key
		w := httptest.NewRecorder()
		fe.App.Handler.ServeHTTP(w, r)
		apptest.ValidateResponse(t, r, w.Code, w.Header(), w.Body.Bytes())
		fe.check(t, rt.method, target, body, w)
	})
}

// validTarget reports whether httptest.NewRequest takes the target.
func validTarget(target string) bool {
	_, err := url.ParseRequestURI(target)
	return err == nil && !strings.ContainsAny(target, " \t\r\n#")
}

// A leader's exit-plan entry is mirrored with an exit plan of each
// follower's own, through the HTTP routes: a follower at twice the size
// gets a bracket twice as big with its levels as far from its entry as the
// leader's, an inverse follower a short bracket (stop above, target
// below); the leader's legs are not mirrored as orders of their own, so
// when the leader closes, each follower's close ends its own bracket and
// nothing is closed twice.
func TestCopierExitPlans(t *testing.T) {
	e := apptest.Start(t, apptest.Options{DemoAccounts: 3})
	L, F1, F2 := e.Accounts[0].AccountID, e.Accounts[1].AccountID, e.Accounts[2].AccountID
	g := wantCode(t, e.Do(copierReq("POST", "/api/copier/groups", "g-x", map[string]any{"leaderAccountId": L, "followers": []any{
		map[string]any{"accountId": F1, "sizing": map[string]any{"mode": "multiplier", "value": "2"}},
		map[string]any{"accountId": F2, "direction": "inverse"},
	}})), 201, "")
	id := g["groupId"].(string)
	plan := wantCode(t, e.Do(apptest.Req{Method: "POST", Path: "/api/exit-plans", Headers: map[string]string{"Idempotency-Key": "plan-x"},
		Body: map[string]any{"name": "copied", "stop": map[string]any{"ticks": 40}, "runner": true,
			"targets":   []any{map[string]any{"distance": map[string]any{"ticks": 20}, "share": "0.5"}},
			"breakeven": map[string]any{"trigger": map[string]any{"ticks": 30}, "plusTicks": 1}}}), 201, "")["plan"].(map[string]any)
	planID, rev := plan["id"].(string), plan["revision"].(string)
	pv := wantCode(t, e.Post("/api/account/exit-plans/preview?account="+L, map[string]any{"planId": planID, "planRevision": rev,
		"instrument": "BTC-PERP", "side": "buy", "quantity": "0.01", "orderType": "market", "clientOrderId": "lead-x"}), 200, "")
	o := wantCode(t, e.Post("/api/trading/order?account="+L, map[string]any{"clientOrderId": "lead-x", "instrument": "BTC-PERP", "side": "buy",
		"orderType": "market", "quantity": "0.01", "exitPlan": map[string]any{"planId": planID, "planRevision": rev,
			"previewToken": pv["preview"].(map[string]any)["token"]}}), 200, "")
	lead := o["order"].(map[string]any)["brokerOrderId"].(string)

	type leg struct{ price, qty string }
	type bracket struct {
		side, planned, entry, planID string
		legs                         map[string]leg
	}
	bracketOf := func(acct string) (bracket, bool) {
		items := wantCode(t, e.Get("/api/account/brackets?account="+acct), 200, "")["items"].([]any)
		if len(items) != 1 {
			return bracket{}, false
		}
		b := items[0].(map[string]any)
		out := bracket{side: b["side"].(string), planned: b["plannedQuantity"].(string), entry: b["entryPrice"].(string), legs: map[string]leg{}}
		out.planID, _ = b["planId"].(string)
		for _, l := range b["legs"].([]any) {
			l := l.(map[string]any)
			p, _ := l["price"].(string)
			out.legs[l["kind"].(string)] = leg{p, l["quantity"].(string)}
		}
		return out, true
	}
	var lb, b1, b2 bracket
	apptest.WaitFor(t, 10*time.Second, func() error {
		var ok0, ok1, ok2 bool
		lb, ok0 = bracketOf(L)
		b1, ok1 = bracketOf(F1)
		b2, ok2 = bracketOf(F2)
		if !ok0 || !ok1 || !ok2 {
			return fmt.Errorf("brackets: leader %v, followers %v %v", ok0, ok1, ok2)
		}
		return nil
	})
	dist := func(b bracket, kind string) string { // the leg's distance from the entry, signed
		d := new(big.Rat)
		p, _ := new(big.Rat).SetString(b.legs[kind].price)
		en, _ := new(big.Rat).SetString(b.entry)
		return d.Sub(p, en).FloatString(2)
	}
	if lb.side != "long" || dist(lb, "stop") != "-20.00" || dist(lb, "target") != "10.00" {
		t.Fatalf("the leader's bracket %+v", lb)
	}
	if b1.side != "long" || b1.planned != "0.02" || b1.planID != planID || dist(b1, "stop") != "-20.00" || dist(b1, "target") != "10.00" ||
		b1.legs["target"].qty != "0.01" || b1.legs["runner"].qty != "0.01" || b1.legs["stop"].qty != "0.02" {
		t.Fatalf("the follower at twice the size: %+v (leader's %+v)", b1, lb)
	}
	if b2.side != "short" || b2.planned != "0.01" || dist(b2, "stop") != "20.00" || dist(b2, "target") != "-10.00" {
		t.Fatalf("the inverse follower: %+v (leader's %+v)", b2, lb)
	}
	// Each follower's breakeven is its own, at its own entry.
	for _, f := range []string{F1, F2} {
		if ms := wantCode(t, e.Get("/api/account/managed-exits?account="+f), 200, "")["items"].([]any); len(ms) != 1 ||
			ms[0].(map[string]any)["kind"] != "breakeven" {
			t.Fatalf("%s's managed exits %v", f, ms)
		}
	}

	// One action recorded, the entry's, followed on both; none for the
	// leader's legs, which rest on the followers as their own brackets' legs.
	var acts []any
	apptest.WaitFor(t, 5*time.Second, func() error {
		acts = wantCode(t, e.Get("/api/copier/groups/"+id+"/mirrors"), 200, "")["mirrors"].([]any)
		if len(acts) == 0 {
			return fmt.Errorf("nothing recorded yet")
		}
		return nil
	})
	if len(acts) != 1 || acts[0].(map[string]any)["leaderOrderId"] != lead {
		t.Fatalf("recorded %v", acts)
	}
	for _, f := range acts[0].(map[string]any)["followers"].([]any) {
		if f := f.(map[string]any); f["status"] != "mirrored" || f["exitPlan"] != "followed" {
			t.Fatalf("outcome %v", f)
		}
	}
	workingOf := func(acct string) []any {
		return wantCode(t, e.Get("/api/account/snapshot?account="+acct), 200, "")["orders"].([]any)
	}
	for _, f := range []string{F1, F2} {
		ws := workingOf(f)
		if len(ws) != 2 { // its bracket's stop and target
			t.Fatalf("%s works %v", f, ws)
		}
		for _, w := range ws {
			if w := w.(map[string]any); w["leaderOrderId"] != nil || w["reduceOnly"] != true {
				t.Fatalf("%s works an order that is not its bracket's leg: %v", f, w)
			}
		}
	}

	// The leader closes: each follower closes its own position once, and its
	// own bracket ends with it.
	wantCode(t, e.Post("/api/trading/close?account="+L, map[string]any{"instrument": "BTC-PERP"}), 200, "")
	apptest.WaitFor(t, 10*time.Second, func() error {
		for _, f := range []string{L, F1, F2} {
			snap := wantCode(t, e.Get("/api/account/snapshot?account="+f), 200, "")
			if n, m, b := len(snap["positions"].([]any)), len(snap["orders"].([]any)), len(snap["brackets"].([]any)); n+m+b != 0 {
				return fmt.Errorf("%s: %d positions, %d orders, %d brackets", f, n, m, b)
			}
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // a second close would land now
	for _, f := range []string{F1, F2} {
		if ps := wantCode(t, e.Get("/api/account/snapshot?account="+f), 200, "")["positions"].([]any); len(ps) != 0 {
			t.Fatalf("%s was closed twice: %v", f, ps)
		}
	}
}

// wantRefusal checks the trading routes' error shape: {error, code, params}
// with params.field naming the field at fault.
func wantRefusal(t *testing.T, r *apptest.Resp, status int, code, field string) {
	t.Helper()
	m := wantCode(t, r, status, code)
	msg, _ := m["error"].(string)
	params, _ := m["params"].(map[string]any)
	if msg == "" || (field != "" && (params == nil || params["field"] != field)) {
		t.Fatalf("refusal %v, want error, code %s and params.field %s", m, code, field)
	}
}

var frameOf = regexp.MustCompile(`data-frame="([^"]+)"`)

// connectPaper opens the Connect app's white-label paper for trader as the
// trader's browser would, and answers its accountId.
func connectPaper(t *testing.T, e *apptest.Env, appKey, trader string) string {
	t.Helper()
	m := wantCode(t, e.Do(apptest.Req{Method: "POST", Path: "/api/connect/links", Key: appKey, Body: map[string]string{"trader": trader},
		Headers: map[string]string{"Idempotency-Key": "link-" + trader}}), 201, "")
	u, err := url.Parse(m["hostedUrl"].(string))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(e.URL + u.RequestURI())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fm := frameOf.FindSubmatch(page)
	if fm == nil {
		t.Fatalf("hosted Connect: %d, no frame session", resp.StatusCode)
	}
	c := wantCode(t, e.Do(apptest.Req{Method: "POST", Path: "/api/connect/hosted/connect", Key: "-", Body: map[string]any{"whiteLabel": true},
		Headers: map[string]string{"Authorization": "Frame " + string(fm[1]), "Origin": e.URL}}), 200, "")
	return c["link"].(map[string]any)["result"].(map[string]any)["accountId"].(string)
}

// A venue key with trader:trade acting for a trader, and a Connect app key
// acting for its own trader, manage copier groups of the accounts that
// trader holds, and are refused, as the trading routes refuse it, for an
// account the trader does not hold: 400 invalid_request naming the field,
// a group led by another's account not found.
func TestCopierCredentials(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	venueID, venueKey := e.Creds["venueId"].(string), e.Creds["venueKey"].(string)
	for _, p := range []struct {
		kind, id string
		body     any
	}{
		{"instruments", "BTC-PERP", map[string]any{"active": true}},
		{"routes", "paper", map[string]any{"target": "paper"}},
		{"groups", "g1", map[string]any{"name": "G", "instruments": []any{"BTC-PERP"}, "routeId": "paper"}},
	} {
		r := e.Do(apptest.Req{Method: "PUT", Path: "/api/venues/" + venueID + "/" + p.kind + "/" + p.id, Key: venueKey,
			Headers: map[string]string{"Idempotency-Key": "v-" + p.kind}, Body: p.body})
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("put %s: %d %s", p.kind, r.Status, r.Body)
		}
	}
	issue := func(idem, email string) string {
		a := wantCode(t, e.Do(apptest.Req{Method: "POST", Path: "/api/venues/" + venueID + "/accounts", Key: venueKey,
			Headers: map[string]string{"Idempotency-Key": idem}, Body: map[string]any{"groupId": "g1", "email": email}}), 201, "")
		return a["account"].(map[string]any)["accountId"].(string)
	}
	ana1, ana2, bob := issue("i1", "ana@example.com"), issue("i2", "ana@example.com"), issue("i3", "bob@example.com")
	asTrader := func(key, trader string, r apptest.Req) *apptest.Resp {
		r.Key = key
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers["x-svc-trader"] = trader
		return e.Do(r)
	}

	t.Run("venue key with trader:trade", func(t *testing.T) {
		as := func(trader string, r apptest.Req) *apptest.Resp { return asTrader(venueKey, trader, r) }
		g := wantCode(t, as("ana@example.com", copierReq("POST", "/api/copier/groups", "vg-1", map[string]any{"leaderAccountId": ana1,
			"followers": []any{map[string]any{"accountId": ana2}}})), 201, "")
		id := g["groupId"].(string)
		wantCode(t, as("ana@example.com", copierReq("PUT", "/api/copier/groups/"+id+"/followers/"+ana2, "vg-2",
			map[string]any{"direction": "inverse"})), 200, "")
		if l := wantCode(t, as("ana@example.com", apptest.Req{Method: "GET", Path: "/api/copier/groups"}), 200, "")["groups"].([]any); len(l) != 1 {
			t.Fatalf("ana's groups %v", l)
		}
		wantRefusal(t, as("ana@example.com", copierReq("PUT", "/api/copier/groups/"+id+"/followers/"+bob, "vg-3", map[string]any{})),
			400, "invalid_request", "accountId")
		wantRefusal(t, as("ana@example.com", copierReq("POST", "/api/copier/groups", "vg-4", map[string]any{"leaderAccountId": bob})),
			400, "invalid_request", "leaderAccountId")
		wantRefusal(t, as("ana@example.com", copierReq("POST", "/api/copier/groups", "vg-5", map[string]any{"leaderAccountId": ana1,
			"followers": []any{map[string]any{"accountId": bob}}})), 400, "invalid_request", "followers[0].accountId")
		// Bob reaches none of ana's groups, and cannot change them.
		wantCode(t, as("bob@example.com", apptest.Req{Method: "GET", Path: "/api/copier/groups/" + id}), 404, "not_found")
		wantCode(t, as("bob@example.com", apptest.Req{Method: "GET", Path: "/api/copier/groups/" + id + "/mirrors"}), 404, "not_found")
		wantCode(t, as("bob@example.com", copierReq("DELETE", "/api/copier/groups/"+id+"/followers/"+ana2, "vg-6", nil)), 404, "not_found")
		if l := wantCode(t, as("bob@example.com", apptest.Req{Method: "GET", Path: "/api/copier/groups"}), 200, "")["groups"].([]any); len(l) != 0 {
			t.Fatalf("bob lists %v", l)
		}
		// The tenant's own key does not reach the venue's trader's group either.
		wantCode(t, e.Get("/api/copier/groups/"+id), 404, "not_found")
	})

	t.Run("Connect app key", func(t *testing.T) {
		appKey := e.Creds["connectKey"].(string)
		alice, carol := connectPaper(t, e, appKey, "alice"), connectPaper(t, e, appKey, "carol")
		as := func(trader string, r apptest.Req) *apptest.Resp { return asTrader(appKey, trader, r) }
		g := wantCode(t, as("alice", copierReq("POST", "/api/copier/groups", "cg-1", map[string]any{"leaderAccountId": alice, "name": "mine"})), 201, "")
		id := g["groupId"].(string)
		wantCode(t, as("alice", apptest.Req{Method: "GET", Path: "/api/copier/groups/" + id}), 200, "")
		wantRefusal(t, as("alice", copierReq("PUT", "/api/copier/groups/"+id+"/followers/"+carol, "cg-2", map[string]any{})),
			400, "invalid_request", "accountId")
		wantRefusal(t, as("alice", copierReq("PUT", "/api/copier/groups/"+id+"/followers/"+ana1, "cg-3", map[string]any{})),
			400, "invalid_request", "accountId")
		wantRefusal(t, as("alice", copierReq("POST", "/api/copier/groups", "cg-4", map[string]any{"leaderAccountId": carol})),
			400, "invalid_request", "leaderAccountId")
		wantCode(t, as("carol", apptest.Req{Method: "GET", Path: "/api/copier/groups/" + id}), 404, "not_found")
		wantCode(t, as("carol", copierReq("PUT", "/api/copier/groups/"+id+"/followers/"+carol, "cg-5", map[string]any{})), 404, "not_found")
		if v := wantCode(t, as("alice", apptest.Req{Method: "GET", Path: "/api/copier/groups/" + id}), 200, ""); len(v["followers"].([]any)) != 0 {
			t.Fatalf("a refused follower was added: %v", v)
		}
	})
}

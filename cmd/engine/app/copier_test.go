package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
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

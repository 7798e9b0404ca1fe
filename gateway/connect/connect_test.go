package connect_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	tenantcmd "github.com/svc/engine/commands/tenant"
)

// clock is a test's clock: real time plus an offset the test moves.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }
func want(t *testing.T, r *apptest.Resp, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if r.Header.Get("Content-Type") != "application/json" {
		return nil
	}
	m := r.Map(t)
	if code != "" && m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.Body)
	}
	return m
}

type env struct {
	*apptest.Env
	key, appID string
	clock      *clock
}

func start(t *testing.T) env { return startOn(t, false) }

// startOn starts the engine with its read models in PostgreSQL when postgres is set.
func startOn(t *testing.T, postgres bool) env {
	c := &clock{}
	e := apptest.Start(t, apptest.Options{Now: c.now, Postgres: postgres})
	return env{e, e.Creds["connectKey"].(string), e.Creds["connectAppId"].(string), c}
}

// app sends r with the app key as the app's server would: no cookie, no Origin.
func (e env) app(key, idem string, r apptest.Req) *apptest.Resp {
	e.T.Helper()
	r.Key = key
	h := map[string]string{}
	if idem != "" {
		h["Idempotency-Key"] = idem
	}
	for k, v := range r.Headers {
		h[k] = v
	}
	r.Headers = h
	return e.Do(r)
}

func (e env) createLink(key, idem, trader string) (link map[string]any, hosted string) {
	e.T.Helper()
	m := want(e.T.(*testing.T), e.app(key, idem, apptest.Req{Method: http.MethodPost, Path: "/api/connect/links", Body: map[string]string{"trader": trader}}), 201, "")
	return m["link"].(map[string]any), m["hostedUrl"].(string)
}

var frameAttr = regexp.MustCompile(`data-frame="([^"]+)"`)

// open opens hosted Connect on a hosted URL as the trader's browser would,
// and answers the page's status, its CSP and its frame session.
func (e env) open(hosted string) (status int, csp, frame string) {
	e.T.Helper()
	resp, err := http.Get(e.local(hosted))
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if m := frameAttr.FindStringSubmatch(b.String()); m != nil {
		frame = m[1]
	}
	return resp.StatusCode, resp.Header.Get("Content-Security-Policy"), frame
}

// local points a hosted URL (made of the engine's configured base URL) at the test's server.
func (e env) local(hosted string) string {
	u, err := url.Parse(hosted)
	if err != nil {
		e.T.Fatal(err)
	}
	return e.URL + u.RequestURI()
}

func (e env) hosted(frame string, method, path string, body any) *apptest.Resp {
	e.T.Helper()
	return e.Do(apptest.Req{Method: method, Path: path, Body: body, Key: "-", Headers: map[string]string{"Authorization": "Frame " + frame, "Origin": e.URL}})
}

func (e env) asTrader(trader string, r apptest.Req) *apptest.Resp {
	e.T.Helper()
	r.Key = e.key
	h := map[string]string{"x-svc-trader": trader}
	for k, v := range r.Headers {
		h[k] = v
	}
	r.Headers = h
	return e.Do(r)
}

// The link routes: every credential, the Idempotency-Key discipline, the
// spec's ConnectLink, paging, and closing exactly as the spec's endpoint says.
func TestLinks(t *testing.T) {
	e := start(t)
	post := func(key, idem string, body any, h map[string]string) *apptest.Resp {
		return e.app(key, idem, apptest.Req{Method: http.MethodPost, Path: "/api/connect/links", Body: body, Headers: h})
	}
	body := map[string]string{"trader": "trader-1"}
	want(t, post("-", "k1", body, nil), 401, "api_key_required")
	want(t, post("svc_ck_sandbox_"+strings.Repeat("0", 48), "k1", body, nil), 401, "invalid_key")
	want(t, post(e.Key, "k1", body, nil), 403, "permission_denied")
	want(t, post(e.Creds["venueKey"].(string), "k1", body, nil), 403, "permission_denied")
	want(t, post(e.key, "k1", body, map[string]string{"Origin": "https://app.example.com"}), 403, "origin_not_allowed")
	want(t, post(e.key, "k1", body, map[string]string{"Cookie": "a=b"}), 403, "origin_not_allowed")
	want(t, post(e.key, "", body, nil), 400, "idempotency_key_required")
	want(t, post(e.key, "k1", map[string]any{"trader": ""}, nil), 400, "invalid_request")
	want(t, post(e.key, "k1", map[string]any{"trader": "t", "colour": "red"}, nil), 400, "invalid_request")

	first := post(e.key, "k1", body, nil)
	m := want(t, first, 201, "")
	link := m["link"].(map[string]any)
	if link["state"] != "created" || link["trader"] != "trader-1" || link["result"] != nil || first.Header.Get("Cache-Control") != "no-store" ||
		!strings.HasPrefix(e.local(m["hostedUrl"].(string)), e.URL+"/connect/hosted/"+link["id"].(string)+"?token=") {
		t.Fatalf("link %s", first.Body)
	}
	if exp, _ := time.Parse(time.RFC3339, link["expiresAt"].(string)); exp.Sub(e.clock.now()) < 50*time.Minute {
		t.Fatalf("expires at %v", exp)
	}
	again := post(e.key, "k1", body, nil)
	if again.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" || again.Map(t)["hostedUrl"] != m["hostedUrl"] ||
		again.Map(t)["link"].(map[string]any)["id"] != link["id"] {
		t.Fatalf("replay %d %s", again.Status, again.Body)
	}
	want(t, post(e.key, "k1", map[string]string{"trader": "trader-2"}, nil), 409, "idempotency_conflict")

	id := link["id"].(string)
	got := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + id}), 200, "")
	if got["link"].(map[string]any)["id"] != id {
		t.Fatalf("get %v", got)
	}
	want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/00000000-0000-8000-8000-000000000000"}), 404, "not_found")

	// Paging, newest first, filtered by trader and state.
	for i := 2; i <= 4; i++ {
		e.createLink(e.key, fmt.Sprintf("k%d", i), "trader-2")
	}
	page := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?trader=trader-2&limit=2"}), 200, "")
	if len(page["links"].([]any)) != 2 || page["hasMore"] != true || page["nextCursor"] == nil {
		t.Fatalf("page %v", page)
	}
	rest := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?trader=trader-2&limit=2&cursor=" + url.QueryEscape(page["nextCursor"].(string))}), 200, "")
	if len(rest["links"].([]any)) != 1 || rest["hasMore"] != false {
		t.Fatalf("second page %v", rest)
	}
	// A trader's id that another's begins with, separator and all, names only its own links.
	e.createLink(e.key, "k5", "trader-2/x")
	if ls := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?trader=trader-2"}), 200, "")["links"].([]any); len(ls) != 3 {
		t.Fatalf("trader-2 has %d links, want 3", len(ls))
	}
	if ls := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?trader=" + url.QueryEscape("trader-2/x")}), 200, "")["links"].([]any); len(ls) != 1 {
		t.Fatalf("trader-2/x has %d links, want 1", len(ls))
	}
	if ls := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?state=created"}), 200, "")["links"].([]any); len(ls) != 5 {
		t.Fatalf("%d created links", len(ls))
	}
	want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?state=gone"}), 400, "invalid_request")
	want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?limit=0"}), 400, "invalid_request")
	// A query it cannot read, or a cursor it never gave, fails closed: never a first page instead.
	want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?cursor=%zz"}), 400, "invalid_request")
	want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?cursor=zzzz"}), 400, "invalid_request")
	want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links?cursor="}), 400, "invalid_request")

	// Close: {} exactly, a key required; closing twice changes nothing.
	del := func(idem string, body any) *apptest.Resp {
		return e.app(e.key, idem, apptest.Req{Method: http.MethodDelete, Path: "/api/connect/links/" + id, Body: body})
	}
	want(t, del("c1", map[string]any{"reason": "x"}), 400, "invalid_request")
	want(t, del("", map[string]any{}), 400, "idempotency_key_required")
	want(t, del("c1", "not json"), 400, "invalid_request")
	want(t, del("c1", "null"), 400, "invalid_request")
	want(t, del("c1", "[]"), 400, "invalid_request")
	want(t, e.app(e.key, "c1", apptest.Req{Method: http.MethodDelete, Path: "/api/connect/links/" + id, Headers: map[string]string{"Content-Type": "application/json"}}), 400, "invalid_request")
	closed := del("c1", map[string]any{})
	if l := want(t, closed, 200, "")["link"].(map[string]any); l["state"] != "closed" || l["result"].(map[string]any)["status"] != "closed" ||
		closed.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("closed %s", closed.Body)
	}
	if l := want(t, del("c2", map[string]any{}), 200, "")["link"].(map[string]any); l["state"] != "closed" {
		t.Fatalf("closed twice %v", l)
	}
	if r := del("c1", map[string]any{}); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed close %d", r.Status)
	}
	// The closed link's token opens hosted Connect no more.
	if status, _, frame := e.open(m["hostedUrl"].(string)); status != http.StatusGone || frame != "" {
		t.Fatalf("closed link's page: %d frame %q", status, frame)
	}
	// A forged token opens nothing.
	if status, _, _ := e.open(e.URL + "/connect/hosted/" + id + "?token=l1.e30.AAAA"); status != http.StatusNotFound {
		t.Fatalf("forged token: %d", status)
	}
}

// Hosted Connect without a browser: the page mounts the link and opens a
// frame session; the trader opens the white-label paper; the link is
// connected with the account GET /api/account/list gives the app key acting
// for that trader, and no other trader's; a close ends the frame session.
func TestHostedConnectAndActing(t *testing.T) {
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) { hostedConnectAndActing(t, startOn(t, store == "postgres")) })
	}
}

func hostedConnectAndActing(t *testing.T, e env) {
	link, hosted := e.createLink(e.key, "h1", "alice")
	status, csp, frame := e.open(hosted)
	if status != 200 || frame == "" || !strings.Contains(csp, "frame-ancestors http://localhost:3000") {
		t.Fatalf("page %d csp %q", status, csp)
	}
	id := link["id"].(string)
	got := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + id}), 200, "")["link"].(map[string]any)
	if got["state"] != "mounted" {
		t.Fatalf("after opening: %v", got)
	}
	s := want(t, e.hosted(frame, http.MethodGet, "/api/connect/hosted/session", nil), 200, "")
	if len(s["accounts"].([]any)) != 0 || s["whiteLabel"].(map[string]any)["opened"] != false || s["app"].(map[string]any)["name"] != "Sample App" {
		t.Fatalf("session %v", s)
	}
	want(t, e.hosted("f1.e30.AAAA", http.MethodGet, "/api/connect/hosted/session", nil), 401, "frame_session_required")
	want(t, e.hosted(frame, http.MethodPost, "/api/connect/hosted/connect", map[string]any{}), 400, "invalid_request")
	want(t, e.hosted(frame, http.MethodPost, "/api/connect/hosted/connect", map[string]any{"accountId": e.Accounts[0].AccountID}), 404, "not_found")
	c := want(t, e.hosted(frame, http.MethodPost, "/api/connect/hosted/connect", map[string]any{"whiteLabel": true}), 200, "")["link"].(map[string]any)
	acct := c["result"].(map[string]any)["accountId"].(string)
	if c["state"] != "connected" || c["result"].(map[string]any)["status"] != "connected" {
		t.Fatalf("connect %v", c)
	}
	got = want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + id}), 200, "")["link"].(map[string]any)
	if got["state"] != "connected" || got["result"].(map[string]any)["accountId"] != acct {
		t.Fatalf("link after connect %v", got)
	}
	list := want(t, e.asTrader("alice", apptest.Req{Method: http.MethodGet, Path: "/api/account/list"}), 200, "")["accounts"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["accountId"] != acct {
		t.Fatalf("alice's accounts %v, want %s", list, acct)
	}
	if other := want(t, e.asTrader("bob", apptest.Req{Method: http.MethodGet, Path: "/api/account/list"}), 200, "")["accounts"].([]any); len(other) != 0 {
		t.Fatalf("bob sees %v", other)
	}
	want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: e.key}), 400, "invalid_request")
	// The key acts for alice on the trading routes: an order, never placed twice for its clientOrderId.
	order := map[string]any{"instrument": "BTC-PERP", "side": "buy", "quantity": "1", "orderType": "market", "clientOrderId": "c-1"}
	o1 := e.asTrader("alice", apptest.Req{Method: http.MethodPost, Path: "/api/trading/order", Body: order})
	o2 := e.asTrader("alice", apptest.Req{Method: http.MethodPost, Path: "/api/trading/order", Body: order})
	if o1.Status != 200 || o2.Status != 409 || o1.Map(t)["order"].(map[string]any)["brokerOrderId"] != o2.Map(t)["params"].(map[string]any)["brokerOrderId"] {
		t.Fatalf("orders %d %s / %d %s", o1.Status, o1.Body, o2.Status, o2.Body)
	}
	if r := e.asTrader("bob", apptest.Req{Method: http.MethodPost, Path: "/api/trading/order", Body: order}); r.Status < 400 {
		t.Fatalf("bob has no account, yet %d %s", r.Status, r.Body)
	}
	// Another account of another tenant is out of reach by selector.
	want(t, e.asTrader("alice", apptest.Req{Method: http.MethodGet, Path: "/api/account/orders?account=" + e.Accounts[0].AccountNumber}), 400, "invalid_request")

	// A second link for alice: her connected account is offered, the paper is not offered twice.
	link2, hosted2 := e.createLink(e.key, "h2", "alice")
	_, _, frame2 := e.open(hosted2)
	s2 := want(t, e.hosted(frame2, http.MethodGet, "/api/connect/hosted/session", nil), 200, "")
	if len(s2["accounts"].([]any)) != 1 || s2["whiteLabel"].(map[string]any)["opened"] != true {
		t.Fatalf("second session %v", s2)
	}
	// The app closes it: the frame session on it ends, the trader's next step is refused.
	want(t, e.app(e.key, "x2", apptest.Req{Method: http.MethodDelete, Path: "/api/connect/links/" + link2["id"].(string), Body: map[string]any{}}), 200, "")
	want(t, e.hosted(frame2, http.MethodPost, "/api/connect/hosted/connect", map[string]any{"accountId": acct}), 410, "link_closed")
	want(t, e.hosted(frame2, http.MethodGet, "/api/connect/hosted/session", nil), 410, "link_closed")
	// Closing a connected link changes nothing.
	if l := want(t, e.app(e.key, "x1", apptest.Req{Method: http.MethodDelete, Path: "/api/connect/links/" + id, Body: map[string]any{}}), 200, "")["link"].(map[string]any); l["state"] != "connected" {
		t.Fatalf("closed a connected link: %v", l)
	}

	// A link left past its expiry reads failed; its page says so; a close records it.
	link3, hosted3 := e.createLink(e.key, "h3", "carol")
	e.clock.advance(2 * time.Hour)
	l3 := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + link3["id"].(string)}), 200, "")["link"].(map[string]any)
	if l3["state"] != "failed" || l3["result"].(map[string]any)["reason"] != "expired" {
		t.Fatalf("expired link %v", l3)
	}
	if status, _, _ := e.open(hosted3); status != http.StatusGone {
		t.Fatalf("expired link's page: %d", status)
	}
	if l := want(t, e.app(e.key, "x3", apptest.Req{Method: http.MethodDelete, Path: "/api/connect/links/" + link3["id"].(string), Body: map[string]any{}}), 200, "")["link"].(map[string]any); l["state"] != "failed" {
		t.Fatalf("closed an expired link: %v", l)
	}
	if n := len(e.Commits("evt.link." + link3["id"].(string))); n != 2 {
		t.Fatalf("%d commits of the expired link, want its creation and its failure", n)
	}
}

// dashboard signs a verified user in to the Connect dashboard and answers its cookie.
func (e env) dashboard(email string) (dash, trader string) {
	e.T.Helper()
	const pw = "correct horse battery"
	trader = e.SignIn(email, pw)
	r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/login", Key: "-", Headers: map[string]string{"Origin": e.URL},
		Body: map[string]string{"email": email, "password": pw}})
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "svc_connect" {
			return c.Value, trader
		}
	}
	e.T.Fatalf("dashboard login %s: %d %s", email, r.Status, r.Body)
	return "", ""
}

func (e env) board(cookie, idem string, r apptest.Req) *apptest.Resp {
	e.T.Helper()
	r.Key = "-"
	h := map[string]string{"Cookie": "svc_connect=" + cookie, "Origin": e.URL}
	if idem != "" {
		h["Idempotency-Key"] = idem
	}
	for k, v := range r.Headers {
		h[k] = v
	}
	r.Headers = h
	return e.Do(r)
}

// The dashboard: its own session (a trader's session and every key are
// refused there, and it reaches no trading route); apps and keys by verified
// owners; a key stops when revoked or when its creator stops being an owner.
func TestDashboard(t *testing.T) {
	e := start(t)
	dash, trader := e.dashboard("ana@example.com")
	apps := apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps"}
	want(t, e.AsSession(trader, apps), 403, "permission_denied")
	want(t, e.Do(apps), 403, "permission_denied")
	want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps", Key: "-"}), 401, "session_required")
	want(t, e.board(dash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps", Headers: map[string]string{"Origin": "https://evil.example"}}), 403, "origin_not_allowed")
	// The dashboard session reaches no trader route, even sent as the trader's cookie.
	for _, c := range []string{"svc_connect=" + dash, "svc_session=" + dash} {
		r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/account/demo", Key: "-", Headers: map[string]string{"Cookie": c, "Origin": e.URL}, Body: map[string]any{}})
		if r.Status != 401 {
			t.Fatalf("dashboard cookie %q on a trader route: %d %s", c[:12], r.Status, r.Body)
		}
	}
	if r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/login", Key: "-", Headers: map[string]string{"Origin": "https://evil.example"},
		Body: map[string]string{"email": "ana@example.com", "password": "correct horse battery"}}); r.Status != 403 {
		t.Fatalf("login from another origin: %d", r.Status)
	}

	org := want(t, e.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/organizations", Body: map[string]string{"name": "Ana Apps"}}), 201, "")["organization"].(map[string]any)["id"].(string)
	create := map[string]any{"orgId": org, "name": "Ana Trader", "websites": []string{"https://ana.example.com/", "http://127.0.0.1:5173"}}
	want(t, e.board(dash, "", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps", Body: create}), 400, "idempotency_key_required")
	want(t, e.board(dash, "a1", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps",
		Body: map[string]any{"orgId": org, "name": "X", "websites": []string{"http://ana.example.com"}}}), 400, "invalid_request")
	app := want(t, e.board(dash, "a1", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps", Body: create}), 201, "")["app"].(map[string]any)
	if ws := app["websites"].([]any); len(ws) != 2 || ws[0] != "https://ana.example.com" || app["environment"] != "sandbox" {
		t.Fatalf("app %v", app)
	}
	appID := app["id"].(string)
	if r := e.board(dash, "a1", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps", Body: create}); r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed create %d", r.Status)
	}
	upd := want(t, e.board(dash, "u1", apptest.Req{Method: http.MethodPatch, Path: "/api/connect/dashboard/apps/" + appID, Body: map[string]any{"name": "Ana Trader 2"}}), 200, "")["app"].(map[string]any)
	if upd["name"] != "Ana Trader 2" || len(upd["websites"].([]any)) != 2 {
		t.Fatalf("update %v", upd)
	}

	// Keys: the secret once; a second owner's key stops when they stop being an owner.
	exp := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	k := want(t, e.board(dash, "k1", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps/" + appID + "/keys", Body: map[string]any{"name": "server", "expiresAt": exp}}), 201, "")
	secret := k["secret"].(string)
	if !strings.HasPrefix(secret, "svc_ck_sandbox_") {
		t.Fatalf("key %v", k)
	}
	if r := e.board(dash, "k1", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps/" + appID + "/keys", Body: map[string]any{"name": "server", "expiresAt": exp}}); r.Map(t)["secret"] != nil {
		t.Fatalf("a replay shows the secret again: %s", r.Body)
	}
	keys := want(t, e.board(dash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps/" + appID + "/keys"}), 200, "")["keys"].([]any)
	if len(keys) != 1 || strings.Contains(fmt.Sprint(keys), secret) {
		t.Fatalf("keys %v", keys)
	}
	e.createLink(secret, "l1", "zed")
	// The sample app's key cannot read this app's links.
	l, _ := e.createLink(secret, "l2", "zed")
	want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + l["id"].(string)}), 404, "not_found")
	traders := want(t, e.board(dash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps/" + appID + "/traders"}), 200, "")["traders"].([]any)
	if len(traders) != 1 || traders[0].(map[string]any)["links"].(float64) != 2 {
		t.Fatalf("traders %v", traders)
	}
	e.createLink(secret, "l4", "amy")
	first := want(t, e.board(dash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps/" + appID + "/traders?limit=1"}), 200, "")
	if ts := first["traders"].([]any); len(ts) != 1 || ts[0].(map[string]any)["trader"] != "amy" || first["hasMore"] != true {
		t.Fatalf("first page of traders %v", first)
	}
	second := want(t, e.board(dash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps/" + appID + "/traders?limit=1&cursor=" + first["nextCursor"].(string)}), 200, "")
	if ts := second["traders"].([]any); len(ts) != 1 || ts[0].(map[string]any)["trader"] != "zed" || second["hasMore"] != false {
		t.Fatalf("second page of traders %v", second)
	}
	want(t, e.board(dash, "r1", apptest.Req{Method: http.MethodDelete, Path: "/api/connect/dashboard/apps/" + appID + "/keys/" + k["key"].(map[string]any)["id"].(string)}), 200, "")
	want(t, e.app(secret, "l3", apptest.Req{Method: http.MethodPost, Path: "/api/connect/links", Body: map[string]string{"trader": "zed"}}), 401, "invalid_key")

	// Ben, invited as an owner, makes a key; removed from the organization, his key stops.
	want(t, e.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/organizations/" + org + "/members", Body: map[string]string{"email": "ben@example.com", "role": "owner"}}), 201, "")
	benDash, benTrader := e.dashboard("ben@example.com")
	want(t, e.AsSession(benTrader, apptest.Req{Method: http.MethodPost, Path: "/api/organizations/" + org + "/invitations/accept"}), 200, "")
	bk := want(t, e.board(benDash, "bk", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps/" + appID + "/keys", Body: map[string]any{"name": "ben", "expiresAt": exp}}), 201, "")["secret"].(string)
	e.createLink(bk, "b1", "yan")
	want(t, e.AsSession(trader, apptest.Req{Method: http.MethodDelete, Path: "/api/organizations/" + org + "/members/" + tenantcmd.UserID("ben@example.com")}), 204, "")
	if m := want(t, e.app(bk, "b2", apptest.Req{Method: http.MethodPost, Path: "/api/connect/links", Body: map[string]string{"trader": "yan"}}), 403, "permission_denied"); m["params"].(map[string]any)["reason"] != "creator_not_owner" {
		t.Fatalf("a removed owner's key: %v", m)
	}
	// Ben, no longer a member, does not see the app.
	want(t, e.board(benDash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps/" + appID}), 404, "not_found")
	// Logout ends the dashboard session on the server.
	if r := e.board(dash, "", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/logout"}); r.Status != 204 {
		t.Fatalf("logout %d %s", r.Status, r.Body)
	}
	want(t, e.board(dash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps"}), 401, "session_required")
}

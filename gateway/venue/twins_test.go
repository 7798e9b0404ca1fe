package venue_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// twins is a test service with a webhook receiver the engine trusts, seen
// from the demo venue's side.
type twins struct {
	env
	partnerKey string
	hook       *httptest.Server
	pings      *atomic.Int64 // requests the receiver took
}

func startTwins(t *testing.T) twins {
	t.Helper()
	var pings atomic.Int64
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { pings.Add(1) }))
	t.Cleanup(hook.Close)
	e := apptest.Start(t, apptest.Options{Configure: func(c *app.Config) {
		pool := x509.NewCertPool()
		pool.AddCert(hook.Certificate())
		c.Firm.WebhookClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		c.Firm.WebhookAllowPrivate = true // the receiver is on 127.0.0.1
	}})
	return twins{env: env{e, e.Creds["venueId"].(string), e.Creds["venueKey"].(string), e.Creds["ownerSession"].(string)},
		partnerKey: e.Creds["partnerKey"].(string), hook: hook, pings: &pings}
}

// venueKey issues a key of the demo venue with scopes, through the owner's session.
func (e twins) venueKeyWith(t *testing.T, scopes ...string) string {
	t.Helper()
	r := e.AsSession(e.owner, apptest.Req{Method: http.MethodPost, Path: "/api/back-office/venues/" + e.venueID + "/keys",
		Headers: map[string]string{"Idempotency-Key": "key-" + strings.Join(scopes, ",")},
		Body:    map[string]any{"name": "scoped", "scopes": scopes, "expiresAt": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)}})
	return want(t, r, 201, "")["secret"].(string)
}

// account provisions an evaluation account of the demo firm through the partner route.
func (e twins) account(t *testing.T, ref string) (id, number string) {
	t.Helper()
	r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/accounts", Key: e.partnerKey,
		Body: map[string]any{"accounts": []any{map[string]any{"referenceId": ref, "email": ref + "@example.com"}}}})
	a := want(t, r, 200, "")["results"].([]any)[0].(map[string]any)["account"].(map[string]any)
	return a["accountId"].(string), a["accountNumber"].(string)
}

// call sends a request through the venue door with credential cred (a key, or
// the owner's session when owner), under Idempotency-Key idem ("" sends none).
func (e twins) call(cred string, owner bool, method, path, idem string, body any) *apptest.Resp {
	r := apptest.Req{Method: method, Path: path, Body: body}
	if idem != "" {
		r.Headers = map[string]string{"Idempotency-Key": idem}
	}
	if owner {
		return e.AsSession(cred, r)
	}
	r.Key = cred
	return e.Do(r)
}

// Every twin route: the venue key with the route's scope and the owner's
// session on the back-office twin are served; a venue key without the scope,
// a Trading API key and the partner key are 403; a write without an
// Idempotency-Key is 400.
func TestTwinRoutesAdmitTheirCredentials(t *testing.T) {
	e := startTwins(t)
	const manage, read, hooks = "account:manage", "account:read", "webhook:manage"
	type route struct {
		method, path, scope string
		body                func(n int) any // the body of the n-th call
		want                int
	}
	routes := func(base, accountID, number, webhookID, ref string) []route {
		return []route{
			{http.MethodPost, base + "/webhooks", hooks, func(n int) any { return map[string]any{"url": fmt.Sprintf("%s/h%d", e.hook.URL, n)} }, 200},
			{http.MethodGet, base + "/webhooks", hooks, nil, 200},
			{http.MethodPost, base + "/webhooks/test", hooks, func(int) any { return map[string]any{"webhookId": webhookID} }, 200},
			{http.MethodGet, base + "/webhooks/deliveries", hooks, nil, 200},
			{http.MethodDelete, base + "/webhooks/" + webhookID, hooks, nil, 200},
			{http.MethodPost, base + "/accounts/" + accountID + "/halt", manage, func(int) any { return map[string]any{} }, 200},
			{http.MethodPost, base + "/accounts/" + accountID + "/resume", manage, nil, 200},
			{http.MethodPost, base + "/balance-ops", manage, func(int) any { return map[string]any{"accountNumber": number, "op": "credit", "amount": "1"} }, 200},
			{http.MethodGet, base + "/balance-ops/" + ref, read, nil, 200},
			{http.MethodGet, base + "/usage", read, nil, 200},
			{http.MethodGet, base + "/usage/accounts", read, nil, 200},
		}
	}
	hook := func(cred string, owner bool, base, name string) string {
		r := e.call(cred, owner, http.MethodPost, base+"/webhooks", "hook-"+name, map[string]any{"url": e.hook.URL + "/" + name})
		return want(t, r, 200, "")["webhook"].(map[string]any)["id"].(string)
	}
	pv, bv := "/api/partner/venues/"+e.venueID, "/api/back-office/venues/"+e.venueID
	id, number := e.account(t, "routes-1")
	n := 0
	for _, fam := range []struct {
		name  string
		cred  string
		owner bool
		base  string
	}{{"venue-key", e.venueKey, false, pv}, {"owner-session", e.owner, true, bv}} {
		ref := "ref-" + fam.name
		want(t, e.call(fam.cred, fam.owner, http.MethodPost, fam.base+"/balance-ops", ref, map[string]any{"accountNumber": number, "op": "credit", "amount": "2"}), 200, "")
		for _, rt := range routes(fam.base, id, number, hook(fam.cred, fam.owner, fam.base, fam.name), ref) {
			n++
			var body any
			if rt.body != nil {
				body = rt.body(n)
			}
			idem := ""
			if rt.method != http.MethodGet {
				idem = fmt.Sprint("route-", n)
				want(t, e.call(fam.cred, fam.owner, rt.method, rt.path, "", body), 400, "idempotency_key_required")
			}
			if r := e.call(fam.cred, fam.owner, rt.method, rt.path, idem, body); r.Status != rt.want {
				t.Errorf("%s %s %s: %d %s", fam.name, rt.method, rt.path, r.Status, r.Body)
			}
		}
	}

	// Refused: the door answers before anything is read or written.
	allBut := func(scope string) string {
		var s []string
		for _, sc := range []string{"provider:manage", manage, read, hooks, "trader:trade"} {
			if sc != scope {
				s = append(s, sc)
			}
		}
		return e.venueKeyWith(t, s...)
	}
	// A receipt is read with account:read or account:manage: the key lacking read lacks both.
	lacking := map[string]string{manage: allBut(manage), read: e.venueKeyWith(t, "provider:manage", hooks, "trader:trade"), hooks: allBut(hooks)}
	for _, rt := range routes(pv, id, number, "w-1", "ref-1") {
		var body any
		if rt.body != nil {
			body = rt.body(0)
		}
		for name, cred := range map[string]string{"a key without " + rt.scope: lacking[rt.scope], "the Trading API key": e.Key, "the partner key": e.partnerKey} {
			n++
			if r := e.call(cred, false, rt.method, rt.path, fmt.Sprint("refused-", n), body); r.Status != 403 || r.Map(t)["error"] != "permission_denied" {
				t.Errorf("%s on %s %s: %d %s", name, rt.method, rt.path, r.Status, r.Body)
			}
		}
	}
	// A session is no key: the venue-key family refuses it.
	want(t, e.call(e.owner, true, http.MethodGet, pv+"/usage", "", nil), 401, "invalid_key")
}

// The halt through the venue door is the partner route's halt of the same
// account: the legacy resume clears it. The Idempotency-Key is recorded with
// the answer in the account: a repeat answers it again, another request 409.
func TestTwinHaltIsTheLegacyHalt(t *testing.T) {
	e := startTwins(t)
	id, number := e.account(t, "halt-1")
	pv := "/api/partner/venues/" + e.venueID
	halted := func() bool {
		r := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/partner/accounts", Key: e.partnerKey})
		for _, a := range want(t, r, 200, "")["accounts"].([]any) {
			if a := a.(map[string]any); a["accountId"] == id {
				return a["halted"].(bool)
			}
		}
		t.Fatalf("account %s not listed", id)
		return false
	}

	first := e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/halt", "halt-1", map[string]any{})
	if m := want(t, first, 200, ""); m["accountNumber"] != number || m["halted"] != true || !halted() {
		t.Fatalf("halt %s", first.Body)
	}
	again := e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/halt", "halt-1", map[string]any{})
	if again.Status != 200 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s (first %s)", again.Status, again.Body, first.Body)
	}
	// The same key with another request: an empty body, the resume.
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/halt", "halt-1", nil), 409, "idempotency_conflict")
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/resume", "halt-1", nil), 409, "idempotency_conflict")
	if !halted() {
		t.Fatal("a refused request changed the halt")
	}

	// The legacy resume clears the venue door's halt; the door's halt again, then its resume.
	want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/accounts/resume", Key: e.partnerKey, Body: map[string]any{"accountNumber": number}}), 200, "")
	if halted() {
		t.Fatal("the legacy resume left the halt on")
	}
	want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/accounts/halt", Key: e.partnerKey, Body: map[string]any{"accountNumber": number}}), 200, "")
	if m := want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/resume", "resume-1", nil), 200, ""); m["halted"] != false || halted() {
		t.Fatalf("resume through the door %v", m)
	}
	// The back office's twin, with the owner's session.
	if m := want(t, e.call(e.owner, true, http.MethodPost, "/api/back-office/venues/"+e.venueID+"/accounts/"+id+"/halt", "halt-bo", nil), 200, ""); m["halted"] != true || !halted() {
		t.Fatalf("back-office halt %v", m)
	}

	// Only the venue's accounts: another tenant's account and an unknown id are 404.
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+e.Accounts[0].AccountID+"/halt", "halt-2", nil), 404, "not_found")
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/nosuch/halt", "halt-3", nil), 404, "not_found")
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/halt", "halt-4", map[string]any{"accountNumber": number}), 400, "invalid_request")

	// The key's first answer survives a restart: the account replays its record.
	e.env.Env = e.Restart()
	if r := e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/halt", "halt-1", map[string]any{}); r.Status != 200 || string(r.Body) != string(first.Body) {
		t.Fatalf("after a restart: %d %s (first %s)", r.Status, r.Body, first.Body)
	}
}

// A balance operation through the venue door is the partner route's, with
// the Idempotency-Key as its referenceId; its receipt reads by that key, and
// the refusals come in the venue shape with the same params.
func TestTwinBalanceOps(t *testing.T) {
	e := startTwins(t)
	_, number := e.account(t, "bal-1")
	pv := "/api/partner/venues/" + e.venueID
	op := func(idem string, body map[string]any) *apptest.Resp {
		return e.call(e.venueKey, false, http.MethodPost, pv+"/balance-ops", idem, body)
	}
	credit := map[string]any{"accountNumber": number, "op": "credit", "amount": "10.50"}
	first := op("bo-1", credit)
	rc := want(t, first, 200, "")
	if rc["referenceId"] != "bo-1" || rc["accountNumber"] != number || rc["op"] != "credit" || rc["amount"] != "10.5" || rc["state"] != "applied" ||
		first.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("receipt %s %v", first.Body, first.Header)
	}
	if again := op("bo-1", credit); again.Status != 200 || string(again.Body) != string(first.Body) {
		t.Fatalf("repeat %d %s (first %s)", again.Status, again.Body, first.Body)
	}
	want(t, op("bo-1", map[string]any{"accountNumber": number, "op": "credit", "amount": "11"}), 409, "idempotency_conflict")
	want(t, op("bo-2", map[string]any{"accountNumber": number, "op": "credit", "amount": "1", "referenceId": "x"}), 400, "invalid_request")

	// The receipt by the key, through the venue key and the back office; the
	// partner route's reference is the same one.
	read := e.call(e.venueKey, false, http.MethodGet, pv+"/balance-ops/bo-1", "", nil)
	if got := want(t, read, 200, ""); got["referenceId"] != "bo-1" || got["amount"] != "10.5" || read.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("receipt read %s", read.Body)
	}
	want(t, e.call(e.owner, true, http.MethodGet, "/api/back-office/venues/"+e.venueID+"/balance-ops/bo-1", "", nil), 200, "")
	want(t, e.call(e.venueKey, false, http.MethodGet, pv+"/balance-ops/nosuch", "", nil), 404, "not_found")
	legacy := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/balance-op", Key: e.partnerKey,
		Body: map[string]any{"referenceId": "bo-1", "accountNumber": number, "op": "credit", "amount": "10.50"}})
	if m := want(t, legacy, 200, ""); m["referenceId"] != "bo-1" || m["appliedAt"] != rc["appliedAt"] {
		t.Fatalf("the partner route's view of the reference %s", legacy.Body)
	}

	// Refusals in the venue shape, the same params.
	for i, c := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
		params string
	}{
		{"too many decimals", map[string]any{"accountNumber": number, "op": "credit", "amount": "1.001"}, 400, "amount_precision_exceeded", "map[currency:USD decimals:2]"},
		{"a currency not issued", map[string]any{"accountNumber": number, "op": "credit", "amount": "1", "currency": "EUR"}, 400, "currency_not_issuable", "map[currency:EUR environment:sandbox]"},
		{"a debit beyond the balance", map[string]any{"accountNumber": number, "op": "debit", "amount": "1000000"}, 409, "balance_refused", "map[reason:insufficient_funds]"},
		{"an account not the venue's", map[string]any{"accountNumber": e.Accounts[0].AccountNumber, "op": "credit", "amount": "1"}, 404, "not_found", ""},
	} {
		m := want(t, op(fmt.Sprint("bad-", i), c.body), c.status, c.code)
		if c.params != "" && fmt.Sprint(m["params"]) != c.params {
			t.Errorf("%s: params %v, want %s", c.name, m["params"], c.params)
		}
	}
	hold := "/api/operator/venues/" + e.venueID + "/accounts/" + number + "/reconciliation-hold"
	if r := e.AsSession(e.Creds["operatorSession"].(string), apptest.Req{Method: http.MethodPost, Path: hold}); r.Status != 200 {
		t.Fatalf("hold %d %s", r.Status, r.Body)
	}
	want(t, op("bo-held", map[string]any{"accountNumber": number, "op": "credit", "amount": "1"}), 423, "reconciliation_hold")
	want(t, e.call(e.venueKey, false, http.MethodGet, pv+"/balance-ops/bo-held", "", nil), 404, "not_found") // nothing recorded
}

// Usage through the venue door answers what the partner route answers.
func TestTwinUsageIsThePartnerUsage(t *testing.T) {
	e := startTwins(t)
	for _, path := range []string{"/usage", "/usage/accounts", "/usage?month=2026-01"} {
		legacy := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/partner" + path, Key: e.partnerKey})
		twin := e.call(e.venueKey, false, http.MethodGet, "/api/partner/venues/"+e.venueID+path, "", nil)
		if legacy.Status != 200 || twin.Status != 200 || string(twin.Body) != string(legacy.Body) {
			t.Errorf("%s: twin %d %s, partner %d %s", path, twin.Status, twin.Body, legacy.Status, legacy.Body)
		}
	}
	want(t, e.call(e.venueKey, false, http.MethodGet, "/api/partner/venues/"+e.venueID+"/usage?month=2026-1", "", nil), 400, "invalid_request")
}

// Webhooks through the venue door are the firm's endpoints: the partner
// route sees them. Writes record their Idempotency-Key in the firm: a repeat
// answers the first answer (a test ping is not sent again), another request 409.
func TestTwinWebhooks(t *testing.T) {
	e := startTwins(t)
	pv := "/api/partner/venues/" + e.venueID
	call := func(method, path, idem string, body any) *apptest.Resp {
		return e.call(e.venueKey, false, method, pv+path, idem, body)
	}
	first := call(http.MethodPost, "/webhooks", "wh-1", map[string]any{"url": e.hook.URL + "/a", "eventTypes": []string{"risk.locked"}})
	wh := want(t, first, 200, "")["webhook"].(map[string]any)
	id, secret := wh["id"].(string), wh["secret"].(string)
	if secret == "" || wh["url"] != e.hook.URL+"/a" || first.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("registered %s", first.Body)
	}
	again := call(http.MethodPost, "/webhooks", "wh-1", map[string]any{"url": e.hook.URL + "/a", "eventTypes": []string{"risk.locked"}})
	if again.Status != 200 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s (first %s)", again.Status, again.Body, first.Body)
	}
	want(t, call(http.MethodPost, "/webhooks", "wh-1", map[string]any{"url": e.hook.URL + "/b"}), 409, "idempotency_conflict")
	want(t, call(http.MethodPost, "/webhooks", "wh-2", map[string]any{"url": e.hook.URL + "/a"}), 409, "webhook_exists")
	if m := want(t, call(http.MethodPost, "/webhooks", "wh-3", map[string]any{"url": "http://plain.example.test/h"}), 400, "invalid_request"); m["field"] != "url" {
		t.Fatalf("no field %v", m)
	}
	listed := func(r *apptest.Resp) []string {
		var ids []string
		for _, w := range want(t, r, 200, "")["webhooks"].([]any) {
			ids = append(ids, w.(map[string]any)["id"].(string))
		}
		return ids
	}
	if ids := listed(e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/partner/webhooks", Key: e.partnerKey})); !slices.Equal(ids, []string{id}) {
		t.Fatalf("the partner route lists %v", ids)
	}
	if ids := listed(call(http.MethodGet, "/webhooks", "", nil)); !slices.Equal(ids, []string{id}) {
		t.Fatalf("the twin lists %v", ids)
	}

	// A test ping: sent once, its outcome answered again for the same key.
	ping := call(http.MethodPost, "/webhooks/test", "ping-1", map[string]any{"webhookId": id})
	if m := want(t, ping, 200, ""); m["delivery"].(map[string]any)["status"] != "succeeded" || e.pings.Load() != 1 {
		t.Fatalf("ping %s, %d sent", ping.Body, e.pings.Load())
	}
	if again := call(http.MethodPost, "/webhooks/test", "ping-1", map[string]any{"webhookId": id}); string(again.Body) != string(ping.Body) || e.pings.Load() != 1 {
		t.Fatalf("ping replay %s (first %s), %d sent", again.Body, ping.Body, e.pings.Load())
	}
	want(t, call(http.MethodPost, "/webhooks/test", "ping-1", map[string]any{"webhookId": "other"}), 409, "idempotency_conflict")
	want(t, call(http.MethodPost, "/webhooks/test", "ping-2", map[string]any{"webhookId": "nosuch"}), 404, "not_found")
	if e.pings.Load() != 1 {
		t.Fatalf("%d pings sent", e.pings.Load())
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		if n := len(want(t, call(http.MethodGet, "/webhooks/deliveries", "", nil), 200, "")["deliveries"].([]any)); n != 1 {
			return fmt.Errorf("%d deliveries logged", n)
		}
		return nil
	})

	// Removal, once; the partner route no longer lists it.
	removed := call(http.MethodDelete, "/webhooks/"+id, "rm-1", nil)
	if m := want(t, removed, 200, ""); m["webhook"].(map[string]any)["id"] != id || m["webhook"].(map[string]any)["secret"] != nil {
		t.Fatalf("removed %s", removed.Body)
	}
	if again := call(http.MethodDelete, "/webhooks/"+id, "rm-1", nil); again.Status != 200 || string(again.Body) != string(removed.Body) {
		t.Fatalf("removal replay %d %s", again.Status, again.Body)
	}
	want(t, call(http.MethodDelete, "/webhooks/"+id, "rm-2", nil), 404, "not_found")
	if ids := listed(e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/partner/webhooks", Key: e.partnerKey})); len(ids) != 0 {
		t.Fatalf("still listed %v", ids)
	}
}

// A reset through the venue door is the partner route's, keyed by its Idempotency-Key.
func TestVenueResetIsTheFirmReset(t *testing.T) {
	e := startTwins(t)
	id, number := e.account(t, "reset-1")
	pv := "/api/partner/venues/" + e.venueID
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/balance-ops", "credit-1", map[string]any{"accountNumber": number, "op": "credit", "amount": "250"}), 200, "")
	r := want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/reset", "reset-k1", map[string]any{}), 200, "")
	a := r["account"].(map[string]any)
	if a["accountNumber"] != number || a["balance"] != a["startingBalance"] {
		t.Fatalf("reset %v", a)
	}
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/reset", "reset-k1", map[string]any{}), 200, "")
	want(t, e.call(e.venueKey, false, http.MethodPost, pv+"/accounts/"+id+"/reset", "", map[string]any{}), 400, "idempotency_key_required")
	want(t, e.call(e.Key, false, http.MethodPost, pv+"/accounts/"+id+"/reset", "reset-k2", map[string]any{}), 403, "permission_denied")
}

package venue_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

var manifest = map[string]any{
	"providerVersion": "1.4.0", "protocolVersion": "1", "schemaDigest": strings.Repeat("ab", 32),
	"capabilities": map[string]any{"accounts": true, "execution": true, "marketData": true, "generationFencing": true,
		"completeOrderBook": true, "executionHistory": true, "orderTypes": []any{"market", "limit"}, "timeInForce": []any{"day"},
		"positionModels": []any{"net"}, "replayRetentionSeconds": 604800},
}

type env struct {
	*apptest.Env
	venueID, venueKey, owner string
}

func start(t *testing.T) env {
	e := apptest.Start(t, apptest.Options{})
	return env{e, e.Creds["venueId"].(string), e.Creds["venueKey"].(string), e.Creds["ownerSession"].(string)}
}

func want(t *testing.T, r *apptest.Resp, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	m := r.Map(t)
	if code != "" && m["error"] != code {
		t.Fatalf("error %v, want %s: %s", m["error"], code, r.Body)
	}
	return m
}

// withKey sends r with a venue key and an Idempotency-Key (idem "" sends none).
func (e env) withKey(key, idem string, r apptest.Req) *apptest.Resp {
	r.Key = key
	if idem != "" {
		h := map[string]string{"Idempotency-Key": idem}
		for k, v := range r.Headers {
			h[k] = v
		}
		r.Headers = h
	}
	return e.Do(r)
}

func (e env) register(key, idem string, body any) *apptest.Resp {
	return e.withKey(key, idem, apptest.Req{Method: http.MethodPost, Path: "/api/partner/venues/" + e.venueID + "/providers", Body: body})
}

// Provider registration through the venue door: the Idempotency-Key
// discipline, strict manifests, every credential kind, and the reads.
func TestProviderRegistration(t *testing.T) {
	e := start(t)
	body := map[string]any{"name": "Acme Futures", "manifest": manifest}
	m := want(t, e.register(e.venueKey, "", body), 400, "idempotency_key_required")
	if m["field"] != "Idempotency-Key" {
		t.Fatalf("no field: %v", m)
	}
	want(t, e.register(e.venueKey, strings.Repeat("k", 129), body), 400, "idempotency_key_required")

	first := e.register(e.venueKey, "reg-1", body)
	p := want(t, first, 201, "")["provider"].(map[string]any)
	if p["state"] != "candidate" || p["creationKey"] != "reg-1" || len(p["manifestHash"].(string)) != 64 || p["venueId"] != e.venueID ||
		first.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("provider %v %v", p, first.Header)
	}
	again := e.register(e.venueKey, "reg-1", body)
	if again.Status != 201 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s (first %s)", again.Status, again.Body, first.Body)
	}
	other := map[string]any{"name": "Acme Futures 2", "manifest": manifest}
	want(t, e.register(e.venueKey, "reg-1", other), 409, "idempotency_conflict")

	// Strict manifests, field named; nothing recorded, the key stays free.
	bad := map[string]any{"name": "x", "manifest": map[string]any{"providerVersion": "1", "protocolVersion": "1",
		"schemaDigest": strings.Repeat("ab", 32), "capabilities": map[string]any{"marketData": true, "colour": "red"}}}
	if m := want(t, e.register(e.venueKey, "reg-2", bad), 400, "invalid_request"); m["field"] != "manifest.capabilities.colour" {
		t.Fatalf("unknown property %v", m)
	}
	noExec := map[string]any{"name": "x", "manifest": map[string]any{"providerVersion": "1", "protocolVersion": "1",
		"schemaDigest": strings.Repeat("ab", 32), "capabilities": map[string]any{"marketData": true, "nativeOco": true}}}
	want(t, e.register(e.venueKey, "reg-2", noExec), 400, "invalid_request")
	want(t, e.register(e.venueKey, "reg-2", map[string]any{"name": "Acme Data", "manifest": map[string]any{"providerVersion": "1",
		"protocolVersion": "1", "schemaDigest": strings.Repeat("cd", 32), "capabilities": map[string]any{"marketData": true}}}), 201, "")

	// Credentials: none, a Trading API key, the partner key; a venue key on a trading route.
	want(t, e.register("-", "reg-3", body), 401, "invalid_key")
	want(t, e.register(e.Key, "reg-3", body), 403, "permission_denied")
	want(t, e.register(e.Creds["partnerKey"].(string), "reg-3", body), 403, "permission_denied")
	// A venue key on a trading route acts only for a trader it names (TestAVenueKeyActsForItsTrader).
	if r := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: e.venueKey}); r.Status != 400 {
		t.Fatalf("a venue key on a trading route without x-svc-trader: %d %s", r.Status, r.Body)
	}
	// Another venue's path is not the key's: 404.
	r := e.withKey(e.venueKey, "reg-4", apptest.Req{Method: http.MethodPost, Path: "/api/partner/venues/00000000-0000-8000-8000-000000000000/providers", Body: body})
	want(t, r, 404, "not_found")

	// Reads, through both venue-key families and the back office.
	list := want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/providers"}), 200, "")
	if n := len(list["providers"].([]any)); n != 2 {
		t.Fatalf("%d providers", n)
	}
	one := want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: "/api/partner/venues/" + e.venueID + "/providers/" + p["id"].(string)}), 200, "")
	if one["provider"].(map[string]any)["manifestHash"] != p["manifestHash"] {
		t.Fatalf("get %v", one)
	}
	bo := want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodGet, Path: "/api/back-office/venues/" + e.venueID + "/providers"}), 200, "")
	if len(bo["providers"].([]any)) != 2 {
		t.Fatalf("back office %v", bo)
	}
}

// Venue keys: issued and revoked by an owner's session only, scoped, and
// dead once revoked or once their issuer stops being an owner.
func TestVenueKeys(t *testing.T) {
	e := start(t)
	keys := "/api/back-office/venues/" + e.venueID + "/keys"
	// One expiry for every request: a retry under the same Idempotency-Key
	// must send the same body (one made a second later is a conflict).
	expires := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	issue := func(cookie, idem string, scopes ...string) *apptest.Resp {
		return e.AsSession(cookie, apptest.Req{Method: http.MethodPost, Path: keys, Headers: map[string]string{"Idempotency-Key": idem},
			Body: map[string]any{"name": "ci", "scopes": scopes, "expiresAt": expires}})
	}
	r := issue(e.owner, "key-1", "account:read")
	k := want(t, r, 201, "")
	secret := k["secret"].(string)
	if !strings.HasPrefix(secret, "svc_vk_sandbox_") || k["key"].(map[string]any)["scopes"].([]any)[0] != "account:read" {
		t.Fatalf("issued %v", k)
	}
	// A retry answers the key again, without the secret the engine never kept.
	if again := want(t, issue(e.owner, "key-1", "account:read"), 201, ""); again["secret"] != nil || again["key"].(map[string]any)["id"] != k["key"].(map[string]any)["id"] {
		t.Fatalf("replay %v", again)
	}
	// The scope is enforced: account:read reads providers, cannot register one.
	body := map[string]any{"name": "x", "manifest": manifest}
	if m := want(t, e.register(secret, "reg-1", body), 403, "permission_denied"); m["params"] == nil {
		t.Fatalf("no params %v", m)
	}
	want(t, e.withKey(secret, "", apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/providers"}), 200, "")
	// Keys never manage keys; a key is refused on the back office.
	want(t, e.withKey(e.venueKey, "key-2", apptest.Req{Method: http.MethodPost, Path: keys, Body: map[string]any{"name": "x", "scopes": []any{"account:read"}}}), 403, "permission_denied")
	want(t, issue(e.owner, "key-3"), 400, "invalid_request")
	want(t, issue(e.owner, "key-3", "account:admin"), 400, "invalid_request")

	// Revoked: the next request is 401.
	id := k["key"].(map[string]any)["id"].(string)
	want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodDelete, Path: keys + "/" + id, Headers: map[string]string{"Idempotency-Key": "rev-1"}}), 200, "")
	want(t, e.withKey(secret, "", apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/providers"}), 401, "invalid_key")

	// A second owner issues a key; once removed from the organization, their key stops working.
	org := "org_demo"
	second := e.SignIn("second@example.com", "a long enough password")
	want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodPost, Path: "/api/organizations/" + org + "/members",
		Body: map[string]any{"email": "second@example.com", "role": "owner"}}), 201, "")
	if r := e.AsSession(second, apptest.Req{Method: http.MethodPost, Path: "/api/organizations/" + org + "/invitations/accept", Body: map[string]any{}}); r.Status != 200 {
		t.Fatalf("accept %d %s", r.Status, r.Body)
	}
	theirs := want(t, issue(second, "key-4", "provider:manage"), 201, "")["secret"].(string)
	want(t, e.register(theirs, "reg-2", body), 201, "")
	uid := want(t, e.AsSession(second, apptest.Req{Method: http.MethodGet, Path: "/api/auth/me"}), 200, "")["user"].(map[string]any)["id"].(string)
	if r := e.AsSession(e.owner, apptest.Req{Method: http.MethodDelete, Path: "/api/organizations/" + org + "/members/" + uid}); r.Status/100 != 2 {
		t.Fatalf("remove %d %s", r.Status, r.Body)
	}
	if m := want(t, e.register(theirs, "reg-3", body), 403, "permission_denied"); m["params"].(map[string]any)["reason"] != "creator_not_owner" {
		t.Fatalf("a removed owner's key: %v", m)
	}
	// A member who is not an owner cannot reach the back office's venue.
	want(t, e.AsSession(second, apptest.Req{Method: http.MethodGet, Path: "/api/back-office/venues/" + e.venueID}), 404, "not_found")
}

// Twenty identical writes racing make one provider version and one answer;
// after a restart the key still answers it.
func TestIdempotentWritesRaceAndSurviveARestart(t *testing.T) {
	e := start(t)
	body := map[string]any{"name": "Raced", "manifest": manifest}
	var wg sync.WaitGroup
	answers := make([]string, 20)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.register(e.venueKey, "race-1", body)
			answers[i] = fmt.Sprint(r.Status, " ", string(r.Body))
		}()
	}
	wg.Wait()
	for _, a := range answers[1:] {
		if a != answers[0] || !strings.HasPrefix(a, "201 ") {
			t.Fatalf("answers differ:\n%s\n%s", answers[0], a)
		}
	}
	list := want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/providers"}), 200, "")
	if n := len(list["providers"].([]any)); n != 1 {
		t.Fatalf("%d providers from 20 identical writes", n)
	}
	e2 := env{e.Restart(), e.venueID, e.venueKey, e.owner}
	r := e2.register(e.venueKey, "race-1", body)
	if fmt.Sprint(r.Status, " ", string(r.Body)) != answers[0] {
		t.Fatalf("after a restart: %d %s, first %s", r.Status, r.Body, answers[0])
	}
}

// The venue-key door and the back office reach the same venue and the same configuration.
func TestBothDoorsReachTheSameVenue(t *testing.T) {
	e := start(t)
	v := want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID}), 200, "")["venue"].(map[string]any)
	bo := want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodGet, Path: "/api/back-office/venues/" + e.venueID}), 200, "")["venue"].(map[string]any)
	if v["id"] != e.venueID || bo["id"] != v["id"] || bo["orgId"] != v["orgId"] {
		t.Fatalf("venue %v, back office %v", v, bo)
	}
	// A route made in the back office is read through the venue key, and the reverse.
	want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodPut, Path: "/api/back-office/venues/" + e.venueID + "/routes/paper",
		Headers: map[string]string{"Idempotency-Key": "r1"}, Body: map[string]any{"target": "paper"}}), 201, "")
	it := want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/routes/paper"}), 200, "")["item"].(map[string]any)
	if it["version"].(float64) != 1 {
		t.Fatalf("item %v", it)
	}
	want(t, e.withKey(e.venueKey, "r2", apptest.Req{Method: http.MethodPut, Path: "/api/venues/" + e.venueID + "/routes/paper",
		Headers: map[string]string{"If-Match": "1"}, Body: map[string]any{"target": "paper"}}), 200, "")
	list := want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodGet, Path: "/api/back-office/venues/" + e.venueID + "/routes"}), 200, "")["items"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["version"].(float64) != 2 {
		t.Fatalf("routes %v", list)
	}
}

package connect_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/gateway/connect/statement"
)

// Production signs a Connect account's statement; the sandbox, knowing only
// production's public key, exchanges it once for a dashboard session and
// the counterpart of each production app (found again on a later
// exchange). A forged, wrongly addressed, expired or replayed statement is
// refused; the environments share no credential.
func TestStatementExchange(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i + 7)
	}
	priv := statement.KeyFromSeed(seed)
	prod := env{Env: apptest.Start(t, apptest.Options{Configure: func(c *app.Config) {
		c.Env, c.Connect.StatementKey = "production", hex.EncodeToString(seed)
	}})}
	sand := env{Env: apptest.Start(t, apptest.Options{Configure: func(c *app.Config) {
		c.Connect.ProductionKey = statement.PublicKeyText(priv.Public().(ed25519.PublicKey))
	}})}

	// Production: a verified owner with an app asks for a statement.
	dash, trader := prod.dashboard("team@example.com")
	org := want(t, prod.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/organizations", Body: map[string]string{"name": "Team Co"}}), 201, "")["organization"].(map[string]any)["id"].(string)
	pa := want(t, prod.board(dash, "app", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps",
		Body: map[string]any{"orgId": org, "name": "Team Trader", "websites": []string{"https://team.example.com"}}}), 201, "")["app"].(map[string]any)
	if pa["environment"] != "production" {
		t.Fatalf("production app %v", pa)
	}
	want(t, prod.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/links", Key: "-", Body: map[string]string{"trader": "x"}}), 404, "not_found")
	ask := func() string {
		st := want(t, prod.board(dash, "", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/statement"}), 200, "")
		if len(st["apps"].([]any)) != 1 || st["audience"] != app.DefaultAudience {
			t.Fatalf("statement %v", st)
		}
		return st["statement"].(string)
	}
	tok := ask()
	want(t, sand.board(dash, "", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/statement"}), 401, "session_required")

	exchange := func(tok string) *apptest.Resp {
		return sand.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/exchange", Key: "-", Headers: map[string]string{"Origin": sand.URL},
			Body: map[string]string{"statement": tok}})
	}
	refused := func(r *apptest.Resp, reason string) {
		t.Helper()
		if m := want(t, r, 401, "invalid_statement"); m["params"].(map[string]any)["reason"] != reason {
			t.Fatalf("refusal %v, want reason %s", m, reason)
		}
	}
	// Production's own dashboard session is nothing to the sandbox.
	want(t, sand.board(dash, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps"}), 401, "session_required")
	if r := sand.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/exchange", Key: "-", Headers: map[string]string{"Origin": "https://evil.example"},
		Body: map[string]string{"statement": tok}}); r.Status != 403 {
		t.Fatalf("exchange from another origin: %d", r.Status)
	}

	r := exchange(tok)
	m := want(t, r, 200, "")
	apps := m["apps"].([]any)
	if len(apps) != 1 || apps[0].(map[string]any)["productionAppId"] != pa["id"] || apps[0].(map[string]any)["environment"] != "sandbox" {
		t.Fatalf("exchange %s", r.Body)
	}
	var cookie string
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "svc_connect" {
			cookie = c.Value
		}
	}
	listed := want(t, sand.board(cookie, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/dashboard/apps"}), 200, "")["apps"].([]any)
	if len(listed) != 1 || listed[0].(map[string]any)["id"] != apps[0].(map[string]any)["id"] {
		t.Fatalf("the sandbox dashboard lists %v", listed)
	}
	// The counterpart's owner makes a sandbox key of it.
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	k := want(t, sand.board(cookie, "k", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps/" + listed[0].(map[string]any)["id"].(string) + "/keys",
		Body: map[string]any{"name": "sandbox", "expiresAt": exp}}), 201, "")["secret"].(string)
	if !strings.HasPrefix(k, "svc_ck_sandbox_") {
		t.Fatalf("key %s", k)
	}
	// The session reaches no trader route.
	want(t, sand.Do(apptest.Req{Method: http.MethodGet, Path: "/api/keys", Key: "-", Headers: map[string]string{"Cookie": "svc_session=" + cookie, "Origin": sand.URL}}), 401, "session_required")

	refused(exchange(tok), "replayed")
	// A second statement finds the same counterpart app again.
	again := want(t, exchange(ask()), 200, "")["apps"].([]any)
	if again[0].(map[string]any)["id"] != apps[0].(map[string]any)["id"] {
		t.Fatalf("a second exchange made another counterpart: %v", again)
	}

	now := time.Now()
	other := statement.KeyFromSeed(make([]byte, ed25519.SeedSize))
	forged, _, err := statement.NewSigner(other, app.StatementIssuer).Sign("team@example.com", nil, app.DefaultAudience, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	refused(exchange(forged), "signature")
	elsewhere, _, _ := statement.NewSigner(priv, app.StatementIssuer).Sign("team@example.com", nil, "svc-elsewhere", now, time.Minute)
	refused(exchange(elsewhere), "audience")
	stale, _, _ := statement.NewSigner(priv, app.StatementIssuer).Sign("team@example.com", nil, app.DefaultAudience, now.Add(-20*time.Minute), 5*time.Minute)
	refused(exchange(stale), "expired")
	refused(exchange("not.a.statement"), "malformed")
}

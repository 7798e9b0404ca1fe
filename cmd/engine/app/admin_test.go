package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/gateway/connect/statement"
)

// sealKeys is an ENGINE_SEAL_KEYS setting for the production engines here.
var sealKeys = func() string {
	k, err := seal.NewKeySetting("k1")
	if err != nil {
		panic(err)
	}
	return k
}()

func admin(t *testing.T, dir string, args ...string) map[string]any {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "ENGINE_ENV":
			return "production"
		case "ENGINE_SEAL_KEYS": // production requires it
			return sealKeys
		case "ENGINE_DATA_DIR":
			return dir
		}
		return ""
	}
	if err := app.Admin(context.Background(), args, getenv, &out, &errOut); err != nil {
		t.Fatalf("engine admin %v: %v\n%s", args, err, errOut.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("engine admin %v printed %q", args, out.String())
	}
	return m
}

// Production starts from nothing: engine admin makes the first user and
// keys, and the engine then admits them.
func TestAdminMakesProductionUsable(t *testing.T) {
	dir := t.TempDir()
	u := admin(t, dir, "create-user", "-email", "Owner@Firm.example", "-verified")
	password, _ := u["password"].(string)
	if u["email"] != "owner@firm.example" || len(password) < 12 {
		t.Fatalf("create-user printed %v", u)
	}
	k := admin(t, dir, "issue-key", "-email", "owner@firm.example", "-name", "first")
	p := admin(t, dir, "issue-partner-key", "-firm", "Firm Ltd", "-email", "ops@firm.example")

	e := apptest.Start(t, apptest.Options{DataDir: dir, Configure: func(c *app.Config) { c.Env, c.Providers.SealKeys = "production", sealKeys }})
	key := k["tradingKey"].(string)
	if r := e.Do(apptest.Req{Method: "POST", Path: "/api/account/demo", Body: map[string]any{}, Key: key}); r.Status != 201 {
		t.Fatalf("demo account with the admin's key: %d %s", r.Status, r.Body)
	}
	if r := e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: key}); r.Status != 200 || len(r.Map(t)["accounts"].([]any)) != 1 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if r := e.Do(apptest.Req{Method: "GET", Path: "/api/partner/accounts", Key: p["partnerKey"].(string)}); r.Status != 200 {
		t.Fatalf("partner key: %d %s", r.Status, r.Body)
	}
	s := login(t, e, "owner@firm.example", password)
	// The production engine made no demo tenant.
	if e.Key != "" {
		t.Fatalf("production wrote a demo key")
	}

	// Production venues are the operator's to create; then their owners manage them.
	org := e.AsSession(s.cookie, apptest.Req{Method: "POST", Path: "/api/organizations", Body: map[string]any{"name": "Firm Ltd"}}).Map(t)["organization"].(map[string]any)["id"].(string)
	if r := e.AsSession(s.cookie, apptest.Req{Method: "POST", Path: "/api/back-office/venues", Headers: map[string]string{"Idempotency-Key": "v1"},
		Body: map[string]any{"orgId": org, "name": "Firm Venue"}}); r.Status != 403 {
		t.Fatalf("self-serve venue in production: %d %s", r.Status, r.Body)
	}
	e.Stop()
	v := admin(t, dir, "create-venue", "-email", "owner@firm.example", "-org", org, "-name", "Firm Venue")
	e = apptest.Start(t, apptest.Options{DataDir: dir, Configure: func(c *app.Config) { c.Env, c.Providers.SealKeys = "production", sealKeys }})
	s = login(t, e, "owner@firm.example", password)
	r := e.AsSession(s.cookie, apptest.Req{Method: "POST", Path: "/api/back-office/venues/" + v["venueId"].(string) + "/keys",
		Headers: map[string]string{"Idempotency-Key": "k1"}, Body: map[string]any{"name": "ci", "scopes": []string{"provider:manage"}, "expiresAt": time.Now().AddDate(0, 1, 0).UTC().Format(time.RFC3339)}})
	if r.Status != 201 || !strings.HasPrefix(r.Map(t)["secret"].(string), "svc_vk_production_") {
		t.Fatalf("a production venue key: %d %s", r.Status, r.Body)
	}
}

// engine admin connect-public-key prints the public half of the key
// production signs Connect account statements with: a sandbox given it
// verifies what that production signs, and nothing another key signed.
func TestAdminPrintsTheStatementPublicKey(t *testing.T) {
	dir := t.TempDir()
	pub := admin(t, dir, "connect-public-key")["publicKey"].(string)
	if again := admin(t, dir, "connect-public-key")["publicKey"].(string); again != pub {
		t.Fatalf("the key changed between runs: %s then %s", pub, again)
	}
	if _, err := statement.ParsePublicKey(pub); err != nil {
		t.Fatalf("the printed key is not one ENGINE_CONNECT_PRODUCTION_KEY takes: %v", err)
	}
	if other := admin(t, t.TempDir(), "connect-public-key")["publicKey"].(string); other == pub {
		t.Fatal("two data directories print the same statement key")
	}
}

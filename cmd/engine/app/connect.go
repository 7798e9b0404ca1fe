package app

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/projections"

	connectgw "github.com/svc/engine/gateway/connect"
	"github.com/svc/engine/gateway/connect/statement"
)

// StatementIssuer names production in the statements it signs.
const StatementIssuer = "svc-production"

// DefaultAudience is the sandbox's name in statements.
const DefaultAudience = "svc-sandbox"

// statementKey is production's statement signing key:
// ENGINE_CONNECT_STATEMENT_KEY, or one derived from the engine's secret key.
func statementKey(cfg Config) (ed25519.PrivateKey, error) {
	if cfg.Connect.StatementKey != "" {
		seed, err := hex.DecodeString(cfg.Connect.StatementKey)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("ENGINE_CONNECT_STATEMENT_KEY: not %d bytes of hex", ed25519.SeedSize)
		}
		return statement.KeyFromSeed(seed), nil
	}
	secret, err := secretKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	seed, err := statement.SeedFromSecret(derive(secret, "connect-statement"))
	if err != nil {
		return nil, err
	}
	return statement.KeyFromSeed(seed), nil
}

// connectConfig configures Connect: production signs statements, the sandbox
// exchanges them when it knows production's public key.
func connectConfig(a *App, cfg Config) (*connectgw.Config, error) {
	aud := cfg.Connect.Audience
	if aud == "" {
		aud = DefaultAudience
	}
	c := &connectgw.Config{BaseURL: cfg.BaseURL, Now: a.Now, Audience: aud}
	if cfg.Env == "production" {
		key, err := statementKey(cfg)
		if err != nil {
			return nil, err
		}
		c.Signer = statement.NewSigner(key, StatementIssuer)
		return c, nil
	}
	if cfg.Connect.ProductionKey != "" {
		pub, err := statement.ParsePublicKey(cfg.Connect.ProductionKey)
		if err != nil {
			return nil, fmt.Errorf("ENGINE_CONNECT_PRODUCTION_KEY: %w", err)
		}
		c.Verifier = statement.NewVerifier(pub, StatementIssuer, aud)
	}
	return c, nil
}

// SampleAppWebsite is the one website the sandbox's sample app lets embed hosted Connect.
const SampleAppWebsite = "http://localhost:3000"

// bootstrapConnect makes the sandbox's sample Connect app on first start, in
// the demo organization, with one allowed website and a sandbox app key,
// written to dev-credentials.json as connectAppId and connectKey. A restart
// keeps a key with a week or more to run.
func bootstrapConnect(ctx context.Context, d *api.Deps, creds *credentials) (bool, error) {
	var old string
	if raw, ok := creds.raw["connectKey"]; ok {
		_ = json.Unmarshal(raw, &old)
	}
	sys := events.Principal{System: "bootstrap"}
	uid := tenantcmd.UserID(DemoOwnerEmail)
	owner := connectcmd.Owner{UserID: uid, Verified: true, Owner: true}
	appID := SampleAppID
	tenant := "capp_" + strings.ReplaceAll(appID, "-", "")
	settle := settleOnce(ctx, d)
	keyed := func(key string, cmd commands.Command) commands.Envelope { return keyedEnvelope(d, sys, key, cmd) }
	if err := settle(d.Engine.Tenant(ctx, tenant, d.Engine.Envelope(sys, "", &tenantcmd.CreateTenant{Name: "Sample App", Kind: "firm"}))); err != nil {
		return false, err
	}
	settings := evconnect.Settings{Name: "Sample App", Websites: []string{SampleAppWebsite}, WhiteLabel: connectcmd.DefaultWhiteLabel()}
	if err := settle(d.Engine.App(ctx, appID, keyed("bootstrap-app", &connectcmd.CreateApp{OrgID: DemoOrg, Settings: settings,
		TenantID: tenant, Env: d.Env, By: owner}))); err != nil {
		return false, err
	}
	key, changed := old, false
	if key != "" {
		k, err := projections.GetInto[projections.Key](ctx, d.Store, projections.CollKey, auth.Digest(key))
		if err != nil || k.Kind != "connect" || k.AppID != appID || !k.Live(time.Now().Add(7*24*time.Hour)) {
			key = ""
		}
	}
	if key == "" {
		prefix := "svc_ck_" + d.Env + "_"
		key = auth.NewKey(prefix)
		now := time.Now().UTC()
		id := "ck_demo_" + auth.Digest(key)[:12]
		if err := settle(d.Engine.App(ctx, appID, keyed("bootstrap-key-"+id, &connectcmd.IssueKey{KeyID: id, Digest: auth.Digest(key),
			Prefix: key[:len(prefix)+4], Env: d.Env, Name: "demo", ExpiresAt: now.AddDate(1, 0, 0), Now: now, By: owner}))); err != nil {
			return false, err
		}
		changed = true
	}
	creds.Extra["connectKey"], creds.Extra["connectAppId"] = key, appID
	return changed, nil
}

// SampleAppID is the sandbox's sample Connect app.
const SampleAppID = "5a3b1e00-c0ec-4e5e-8a11-5a3b1e000001"

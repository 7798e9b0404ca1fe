package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/projections"
)

// DemoTenant is the id of the sandbox's demo tenant.
const DemoTenant = "demo"

// credentials is dev-credentials.json. Later areas add their own keys to Extra.
type credentials struct {
	BaseURL    string         `json:"baseUrl"`
	TradingKey string         `json:"tradingKey"`
	Accounts   []credAccount  `json:"accounts"`
	Extra      map[string]any `json:"-"`
	raw        map[string]json.RawMessage
}

type credAccount struct {
	Broker        string `json:"broker"`
	AccountNumber string `json:"accountNumber"`
	AccountID     string `json:"accountId"`
}

func credPath(cfg Config) string { return filepath.Join(cfg.DataDir, "dev-credentials.json") }

func readCredentials(path string) (credentials, error) {
	var c credentials
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, err
	}
	_ = json.Unmarshal(b, &c.raw)
	return c, nil
}

func writeCredentials(path string, c credentials) error {
	out := map[string]any{}
	for k, v := range c.raw {
		out[k] = v
	}
	for k, v := range c.Extra {
		out[k] = v
	}
	out["baseUrl"], out["tradingKey"], out["accounts"] = c.BaseURL, c.TradingKey, c.Accounts
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func demoAccountID(i int) string { return fmt.Sprintf("acct_%s_%04d", DemoTenant, i) }

// retrySafely runs f until it returns nil, an error that is not a refusal
// the catalogue calls safe to retry (commands.RetrySafe: nothing was
// recorded, such as no node owning the account while a cluster's nodes
// join), or until ctx ends or bound passes; then it returns the last error.
// bootstrap's commands are idempotent by their ids, so a retry of one that
// landed changes nothing.
func retrySafely(ctx context.Context, bound time.Duration, f func() error) error {
	deadline := time.Now().Add(bound)
	wait := 50 * time.Millisecond
	for {
		err := f()
		var r *commands.Refusal
		if err == nil || !errors.As(err, &r) || !commands.RetrySafe(r.Code) || time.Now().Add(wait).After(deadline) {
			return err
		}
		slog.Warn("start: a step was refused for now; retrying", "code", r.Code, "in", wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// bootstrap makes the sandbox's demo tenant on first start: a user, a Trading
// API key and ENGINE_DEMO_ACCOUNTS paper accounts, and writes their credentials.
// A restart keeps the tenant and its key.
func bootstrap(ctx context.Context, d *api.Deps, cfg Config) error {
	path := credPath(cfg)
	creds, err := readCredentials(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	sys := events.Principal{System: "bootstrap"}
	if _, err := d.Engine.Tenant(ctx, DemoTenant, d.Engine.Envelope(sys, "", &tenantcmd.CreateTenant{Name: "Demo", Kind: "user", Email: "demo@example.com"})); err != nil {
		return err
	}
	keyLive := false
	if creds.TradingKey != "" {
		k, err := projections.GetInto[projections.Key](ctx, d.Store, projections.CollKey, auth.Digest(creds.TradingKey))
		keyLive = err == nil && !k.Revoked && k.TenantID == DemoTenant
	}
	changed := false
	if !keyLive {
		key := auth.NewKey("svc_sk_")
		res, err := d.Engine.Tenant(ctx, DemoTenant, d.Engine.Envelope(sys, "", &tenantcmd.IssueKey{KeyID: ulid.Make().String(), Digest: auth.Digest(key), Kind: "trading", Prefix: key[:11]}))
		if err != nil {
			return err
		}
		if err := d.Settle(ctx, res); err != nil {
			return err
		}
		creds.TradingKey, changed = key, true
	}
	var accts []credAccount
	for i := 1; i <= cfg.DemoAccounts; i++ {
		id := demoAccountID(i)
		open := &tenantcmd.OpenAccount{TenantID: DemoTenant, Broker: api.DefaultBroker, AccountNumber: fmt.Sprintf("PA%06d", i),
			Label: fmt.Sprintf("Demo %d", i), Currency: "USD", StartingBalance: events.Int(50000), Kind: "demo"}
		res, err := d.Engine.Account(ctx, id, d.Engine.Envelope(sys, "", open))
		if err != nil {
			return err
		}
		if err := d.Settle(ctx, res); err != nil {
			return err
		}
		accts = append(accts, credAccount{Broker: open.Broker, AccountNumber: open.AccountNumber, AccountID: id})
	}
	if firmChanged, err := bootstrapFirm(ctx, d, cfg, &creds); err != nil {
		return fmt.Errorf("demo firm: %w", err)
	} else if firmChanged {
		changed = true
	}
	if venueChanged, err := bootstrapVenue(ctx, d, &creds); err != nil {
		return fmt.Errorf("demo venue: %w", err)
	} else if venueChanged {
		changed = true
	}
	if connectChanged, err := bootstrapConnect(ctx, d, &creds); err != nil {
		return fmt.Errorf("sample Connect app: %w", err)
	} else if connectChanged {
		changed = true
	}
	if err := bootstrapChallenges(ctx, d, cfg); err != nil {
		return fmt.Errorf("sample challenges: %w", err)
	}
	if len(accts) != len(creds.Accounts) || creds.BaseURL != cfg.BaseURL {
		changed = true
	}
	creds.Accounts, creds.BaseURL = accts, cfg.BaseURL
	if changed {
		if err := writeCredentials(path, creds); err != nil {
			return err
		}
	}
	slog.Info("demo tenant ready", "credentials", path, "accounts", len(accts))
	return nil
}

package app

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/webhook"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/identity"
	"github.com/svc/engine/gateway/operator"
	"github.com/svc/engine/projections"
)

// FirmConfig shapes the firm area. Tests inject the webhook
// client (to trust a test CA) and a short retry schedule.
type FirmConfig struct {
	UsagePrice    string // price of one account that traded in a month, in UsageCurrency
	UsageCurrency string
	// WebhookClient makes the deliveries; nil: system roots (SSL_CERT_FILE
	// honoured). Either way it goes through egress.Guard: every dial checked
	// unless WebhookAllowPrivate, no redirect followed.
	WebhookClient  *http.Client
	WebhookTimeout time.Duration   // per attempt; 0: 10 s
	WebhookBackoff []time.Duration // the 5 waits between the 6 attempts; nil: 9 hours in all
	// WebhookAllowPrivate lets webhooks (registration and delivery) and the
	// news image proxy reach private, loopback and link-local addresses:
	// local development and tests only (ENGINE_WEBHOOK_ALLOW_PRIVATE).
	WebhookAllowPrivate bool
}

// DemoFirm is the id of the sandbox's demo firm tenant.
const DemoFirm = "demo-firm"

type firmArea struct {
	key     []byte
	reactor *webhook.Reactor // the gateway's checks, secrets and pings; delivery runs its own
	tail    commitTail       // the projector's commits, for the delivering reactor
	stop    context.CancelFunc
	done    chan struct{}
}

// commitTail hands the commits the projector applies to the webhook reactors
// that listen (webhook.Config.Tail), so that delivery does not read every
// commit from the log a second time. The projector keeps its listeners for
// its life; a reactor listens from its Start to its Close (a leader starts
// one each term).
type commitTail struct {
	mu  sync.Mutex                      // serializes listen and stop
	fns atomic.Pointer[[]*commitTailFn] // read on every commit without a lock
}

type commitTailFn struct{ fn func(events.Committed) }

// hear passes c to every listener; the projector calls it (Listen).
func (t *commitTail) hear(c events.Committed) {
	if fns := t.fns.Load(); fns != nil {
		for _, f := range *fns {
			f.fn(c)
		}
	}
}

// listen adds fn until stop.
func (t *commitTail) listen(fn func(events.Committed)) (stop func()) {
	f := &commitTailFn{fn}
	t.mu.Lock()
	defer t.mu.Unlock()
	var fns []*commitTailFn
	if old := t.fns.Load(); old != nil {
		fns = append(fns, *old...)
	}
	fns = append(fns, f)
	t.fns.Store(&fns)
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		var left []*commitTailFn
		for _, g := range *t.fns.Load() {
			if g != f {
				left = append(left, g)
			}
		}
		t.fns.Store(&left)
	}
}

// secretKey is the engine's secret key: 32 random bytes made at first start
// in $ENGINE_DATA_DIR/secret.key (mode 0600). Operator sessions and webhook
// signing secrets are derived from it; it is never logged. Several nodes
// share it by sharing the file.
func secretKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, "secret.key")
	b, err := os.ReadFile(path)
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	if err == nil {
		return nil, fmt.Errorf("secret key %s: want 32 bytes, have %d", path, len(b))
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return b, os.Rename(tmp, path)
}

func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// startFirm loads the secret key and starts the webhook reactor.
func (a *App) startFirm(ctx context.Context, cfg Config) error {
	key, err := secretKey(cfg.DataDir)
	if err != nil {
		return err
	}
	if cfg.Firm.WebhookAllowPrivate {
		slog.Warn("ENGINE_WEBHOOK_ALLOW_PRIVATE is on: webhooks and the news image proxy may reach private, loopback and link-local addresses inside this network; never run production like this")
	}
	a.firm = &firmArea{key: key}
	a.Projector.Listen(a.firm.tail.hear)
	r, err := a.newWebhooks()
	if err != nil {
		return err
	}
	a.firm.reactor = r
	if cfg.Node != "" {
		return nil // on a node of several, the leader delivers (nodes.go)
	}
	// Delivery starts beside the service, not before it: its reactor reads
	// the whole log to find what is still due, and a restart over a long log
	// should not wait for that to answer traders. Nothing is missed meanwhile:
	// it delivers what the log holds up to its start, then what the projector
	// applies after it (webhook.Config.Tail).
	dctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.firm.stop, a.firm.done = stop, make(chan struct{})
	go func() {
		defer close(a.firm.done)
		a.deliverWebhooks(dctx)
	}()
	return nil
}

// newWebhooks is a webhook reactor of the firm area's settings. Once
// started it takes its commits from the projector (commitTail), reading the
// log itself only for those the projector has not given it.
func (a *App) newWebhooks() (*webhook.Reactor, error) {
	bc := a.Cfg.Firm
	return webhook.New(webhook.Config{Log: a.Log, Registry: engine.Registry(), Key: derive(a.firm.key, "webhook-secrets"),
		Client: bc.WebhookClient, AllowPrivate: bc.WebhookAllowPrivate, Timeout: bc.WebhookTimeout, Backoff: bc.WebhookBackoff, Now: a.Now,
		Tail: a.firm.tail.listen})
}

func (a *App) stopFirm() {
	if a.firm != nil && a.firm.stop != nil {
		a.firm.stop()
		<-a.firm.done
	}
	if a.firm != nil {
		a.firm.reactor.Close(2 * time.Second)
	}
}

// bootstrapFirm makes the sandbox's demo firm on first start: a firm tenant,
// its partner key and an operator session for its venue, written to
// dev-credentials.json as partnerKey, operatorSession (with sessionCookieName)
// and venueId. A restart keeps a live key and a session with a week to run.
func bootstrapFirm(ctx context.Context, d *api.Deps, cfg Config, creds *credentials) (bool, error) {
	sys := events.Principal{System: "bootstrap"}
	if _, err := d.Engine.Tenant(ctx, DemoFirm, d.Engine.Envelope(sys, "", &tenantcmd.CreateTenant{Name: "Demo Firm", Kind: "firm", Email: "firm@example.com"})); err != nil {
		return false, err
	}
	if creds.Extra == nil {
		creds.Extra = map[string]any{}
	}
	changed := false
	var old struct {
		PartnerKey      string `json:"partnerKey"`
		OperatorSession string `json:"operatorSession"`
	}
	if raw, ok := creds.raw["partnerKey"]; ok {
		_ = json.Unmarshal(raw, &old.PartnerKey)
	}
	if raw, ok := creds.raw["operatorSession"]; ok {
		_ = json.Unmarshal(raw, &old.OperatorSession)
	}
	key := old.PartnerKey
	live := false
	if key != "" {
		k, err := projections.GetInto[projections.Key](ctx, d.Store, projections.CollKey, auth.Digest(key))
		live = err == nil && !k.Revoked && k.TenantID == DemoFirm && k.Kind == "partner"
	}
	if !live {
		key = auth.NewKey("svc_sk_")
		res, err := d.Engine.Tenant(ctx, DemoFirm, d.Engine.Envelope(sys, "", &tenantcmd.IssueKey{KeyID: "partner-" + auth.Digest(key)[:16],
			Digest: auth.Digest(key), Kind: "partner", Prefix: key[:11]}))
		if err != nil {
			return false, err
		}
		if err := d.Settle(ctx, res); err != nil {
			return false, err
		}
		changed = true
	}
	venue := evfirm.VenueID(DemoFirm)
	session, opChanged, err := bootstrapOperator(ctx, d, venue, old.OperatorSession)
	if err != nil {
		return false, fmt.Errorf("demo operator: %w", err)
	}
	changed = changed || opChanged
	creds.Extra["partnerKey"], creds.Extra["operatorSession"] = key, session
	creds.Extra["sessionCookieName"], creds.Extra["venueId"] = operator.CookieName, venue
	return changed, nil
}

// DemoOperatorEmail is the sandbox operator's sign-in address.
const DemoOperatorEmail = "operator@example.com"

// bootstrapOperator makes the sandbox's operator a real user: signed up,
// verified, granted both scopes on the demo venue, with a live session whose
// cookie dev-credentials.json keeps as operatorSession. A restart keeps a
// cookie whose session still admits it.
func bootstrapOperator(ctx context.Context, d *api.Deps, venue, cookie string) (string, bool, error) {
	uid := tenantcmd.UserID(DemoOperatorEmail)
	g, err := projections.GetInto[projections.Operator](ctx, d.Store, projections.CollOperator, venue+"/"+uid)
	session, changed, err2 := demoUser(ctx, d, DemoOperatorEmail, cookie, func(exec func(commands.Command) error) error {
		if err != nil || len(g.Scopes) != 2 {
			return exec(&tenantcmd.GrantOperator{VenueID: venue, Scopes: []string{operator.ScopeAccountRead, operator.ScopeAccountWrite}})
		}
		return nil
	})
	return session, changed, err2
}

// demoUser makes a sandbox user real: signed up, verified, then then(exec)
// for its grants, and a live session whose cookie it answers. Nobody signs
// in with its password: the session is the way in. A cookie whose session
// still admits the user for a week is kept.
func demoUser(ctx context.Context, d *api.Deps, email, cookie string, then func(exec func(commands.Command) error) error) (string, bool, error) {
	sys := events.Principal{System: "bootstrap"}
	uid := tenantcmd.UserID(email)
	exec := func(cmd commands.Command) error {
		res, err := d.Engine.Tenant(ctx, uid, d.Engine.Envelope(sys, "", cmd))
		if err != nil {
			return err
		}
		return d.Settle(ctx, res)
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return "", false, err
	}
	if err := exec(&tenantcmd.SignUp{Email: email, PasswordHash: identity.HashPassword(identity.Argon2, hex.EncodeToString(secret)),
		VerifyDigest: auth.Digest(hex.EncodeToString(secret)), VerifyUntil: time.Now().Add(time.Hour)}); err != nil {
		return "", false, err
	}
	if err := exec(&tenantcmd.MarkVerified{}); err != nil {
		return "", false, err
	}
	if then != nil {
		if err := then(exec); err != nil {
			return "", false, err
		}
	}
	sessions := d.Auth.Sessions()
	if c, ok := sessions.Verify(cookie, time.Now()); ok && c.UserID == uid && time.Until(time.Unix(c.Expires, 0)) > 7*24*time.Hour {
		s, err := projections.GetInto[projections.Session](ctx, d.Store, projections.CollSession, c.SessionID)
		if err == nil && !s.Ended {
			return cookie, false, nil
		}
	}
	now := time.Now().UTC()
	c := auth.Claims{SessionID: "ses_" + ulid.Make().String(), UserID: uid, Start: now.Unix(), Seen: now.Unix(),
		Expires: now.Add(auth.SessionAbsolute).Unix()}
	if err := exec(&tenantcmd.StartSession{SessionID: c.SessionID, Until: time.Unix(c.Expires, 0).UTC()}); err != nil {
		return "", false, err
	}
	return sessions.Sign(c), true, nil
}

// Package connect serves Connect: the dashboard (a Connect dashboard
// session: apps, their API keys and traders, statements), the link routes an
// app's server calls with its app key, hosted Connect (the page a link opens
// and its frame session's routes), and a Connect app key acting for one of
// its traders on the account, market and trading routes.
package connect

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/connect/statement"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
)

// Fam is the error shape of Connect's routes: an English sentence and a code.
const Fam = httpx.Trading

// Config shapes the Connect area.
type Config struct {
	BaseURL string // hosted Connect's address starts here
	// Operator names who runs hosted Connect on its page; empty: BaseURL's host.
	Operator string
	Now      func() time.Time
	// Production signs Connect account statements with Signer for Audience;
	// the sandbox exchanges statements Verifier accepts. Either may be nil.
	Signer   *statement.Signer
	Audience string
	Verifier *statement.Verifier
	// NewUser finds or creates the verified sandbox user of an exchanged
	// statement's email; StartDashboard starts its dashboard session.
	NewUser        func(ctx context.Context, email string) (userID string, err error)
	StartDashboard func(w http.ResponseWriter, r *http.Request, userID string) error
}

// Handlers serve Connect; the route table is gateway/routes.go.
type Handlers struct {
	d      *api.Deps
	cfg    Config
	links  *auth.Sealer // a link's token, in its hosted URL
	frames *auth.Sealer // a frame session, in hosted Connect's page
}

// New makes the Connect handlers; sessions must be on (auth.Config.Sessions).
func New(d *api.Deps, cfg Config) *Handlers {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := d.Auth.Sessions()
	return &Handlers{d: d, cfg: cfg, links: s.Sealer("l1", "connect.link", 256), frames: s.Sealer("f1", "connect.frame", 512)}
}

func appNotFound() error {
	return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no Connect app of yours has that id")
}

func (h *Handlers) app(ctx context.Context, id string) (projections.App, error) {
	if len(id) > 64 {
		return projections.App{}, appNotFound()
	}
	a, err := projections.GetInto[projections.App](ctx, h.d.Store, projections.CollApp, id)
	if errors.Is(err, projections.ErrNotFound) {
		return a, appNotFound()
	}
	return a, err
}

// owner reads the signed-in user's standing in an organization: 404 when
// not a member, 403 when a member but not an owner.
func (h *Handlers) owner(r *http.Request, orgID string) (connectcmd.Owner, error) {
	p, _ := httpx.PrincipalOf(r)
	role, err := h.d.OrgRole(r.Context(), orgID, p.UserID)
	switch {
	case err != nil:
		return connectcmd.Owner{}, err
	case role == "":
		return connectcmd.Owner{}, appNotFound()
	case role != "owner":
		return connectcmd.Owner{}, httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "only an owner of the app's organization manages it")
	}
	u, err := projections.GetInto[projections.User](r.Context(), h.d.Store, projections.CollUser, p.UserID)
	if err != nil {
		return connectcmd.Owner{}, err
	}
	return connectcmd.Owner{UserID: p.UserID, Verified: u.EmailVerified, Owner: true}, nil
}

// execApp runs a keyed app command and waits for the read models.
func (h *Handlers) execApp(r *http.Request, appID string, cmd commands.Command) ([]events.Event, error) {
	return h.execAppEnv(r.Context(), appID, idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", cmd)))
}

// execAppEnv runs an app command in env and waits for the read models.
func (h *Handlers) execAppEnv(ctx context.Context, appID string, env commands.Envelope) ([]events.Event, error) {
	res, err := h.d.Engine.App(ctx, appID, env)
	if err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(ctx, res)
}

// derivedID is an id of prefix derived from parts: the same parts, the same id.
func derivedID(prefix string, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + fmt.Sprintf("%x", sum[:12])
}

// uuidOf renders a digest of parts as a uuid (version 8, custom).
func uuidOf(parts ...string) string {
	b := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	b[6] = (b[6] & 0x0f) | 0x80
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// settingsBody is an app's settings as a request states them.
type settingsBody struct {
	OrgID      string                `json:"orgId"`
	Name       *string               `json:"name"`
	LogoURL    *string               `json:"logoUrl"`
	Websites   []string              `json:"websites"`
	WhiteLabel *evconnect.WhiteLabel `json:"whiteLabel"`
}

// over lays the body's stated settings over s.
func (b settingsBody) over(s evconnect.Settings) evconnect.Settings {
	if b.Name != nil {
		s.Name = *b.Name
	}
	if b.LogoURL != nil {
		s.LogoURL = *b.LogoURL
	}
	if b.Websites != nil {
		s.Websites = append([]string(nil), b.Websites...)
	}
	if b.WhiteLabel != nil {
		s.WhiteLabel = *b.WhiteLabel
	}
	return s
}

// CreateApp makes an app of one of the caller's organizations (POST
// /api/connect/dashboard/apps): its id derives from the caller and the
// Idempotency-Key, so a retry reaches the same app and gets its first answer.
func (h *Handlers) CreateApp(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b settingsBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return nil, err
	}
	if err := commands.Key("orgId", b.OrgID, 64); err != nil {
		return nil, err
	}
	c := connectcmd.CreateApp{OrgID: b.OrgID, Settings: b.over(evconnect.Settings{WhiteLabel: connectcmd.DefaultWhiteLabel()}), Env: h.d.Env}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	by, err := h.owner(r, c.OrgID)
	if err != nil {
		return nil, err
	}
	p, _ := httpx.PrincipalOf(r)
	appID := uuidOf("app", p.UserID, idem.Key(r))
	c.By, c.TenantID = by, "capp_"+strings.ReplaceAll(appID, "-", "")
	return h.createApp(r.Context(), appID, idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", &c)))
}

// createApp makes the app's tenant (which holds its traders' accounts), then
// the app, by the keyed command in env.
func (h *Handlers) createApp(ctx context.Context, appID string, env commands.Envelope) ([]events.Event, error) {
	c := env.Cmd.(*connectcmd.CreateApp)
	if !c.By.Verified {
		return nil, httpx.Errorf(http.StatusForbidden, commands.CodeEmailUnverified, "verify your email before creating a Connect app")
	}
	sys := events.Principal{System: "connect", UserID: c.By.UserID}
	res, err := h.d.Engine.Tenant(ctx, c.TenantID, h.d.Engine.Envelope(sys, "", &tenantcmd.CreateTenant{Name: c.Settings.Name, Kind: "firm"}))
	if err != nil {
		return nil, err
	}
	if err := h.d.Settle(ctx, res); err != nil {
		return nil, err
	}
	return h.execAppEnv(ctx, appID, env)
}

// ListApps lists the apps of the organizations the caller belongs to.
func (h *Handlers) ListApps(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	out := []connectcmd.AppView{}
	err := h.d.Store.List(r.Context(), projections.CollUserOrg, projections.Query{Prefix: p.UserID + "/"}, func(key string, _ func(any) error) error {
		apps, err := h.orgApps(r.Context(), strings.TrimPrefix(key, p.UserID+"/"))
		for _, a := range apps {
			out = append(out, appView(a))
		}
		return err
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"apps": out})
	return nil
}

// orgApps reads the apps of an organization.
func (h *Handlers) orgApps(ctx context.Context, orgID string) ([]projections.App, error) {
	ids, err := projections.ListInto[string](ctx, h.d.Store, projections.CollOrgApp, projections.Query{Prefix: orgID + "/"})
	if err != nil {
		return nil, err
	}
	out := make([]projections.App, 0, len(ids))
	for _, id := range ids {
		a, err := h.app(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func appView(a projections.App) connectcmd.AppView {
	return connectcmd.ViewApp(a.AppID, evconnect.AppCreated{OrgID: a.OrgID, Env: a.Env, Counterpart: a.Counterpart, CreatedBy: a.CreatedBy, At: a.CreatedAt},
		a.Settings, a.UpdatedAt)
}

// member reads the path's app for a member of its organization (404 otherwise).
func (h *Handlers) member(r *http.Request) (projections.App, error) {
	a, err := h.app(r.Context(), mux.Vars(r)["appId"])
	if err != nil {
		return a, err
	}
	p, _ := httpx.PrincipalOf(r)
	role, err := h.d.OrgRole(r.Context(), a.OrgID, p.UserID)
	if err != nil {
		return a, err
	}
	if role == "" {
		return a, appNotFound()
	}
	return a, nil
}

// GetApp answers one app to a member of its organization.
func (h *Handlers) GetApp(w http.ResponseWriter, r *http.Request) error {
	a, err := h.member(r)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"app": appView(a)})
	return nil
}

// UpdateApp changes an app's settings (an owner): what the body states, the rest kept.
func (h *Handlers) UpdateApp(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	a, err := h.member(r)
	if err != nil {
		return nil, err
	}
	var b settingsBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return nil, err
	}
	if b.OrgID != "" {
		return nil, commands.BadField("orgId", nil, "an app stays in the organization that made it")
	}
	c := connectcmd.UpdateApp{Settings: b.over(a.Settings)}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.By, err = h.owner(r, a.OrgID); err != nil {
		return nil, err
	}
	return h.execApp(r, a.AppID, &c)
}

// ListTraders lists the app's traders: every trader a link named, with the accounts they connected.
func (h *Handlers) ListTraders(w http.ResponseWriter, r *http.Request) error {
	a, err := h.member(r)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return commands.BadRequest("the query string is malformed: %v", err)
	}
	limit := 100
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return commands.BadField("limit", map[string]any{"max": 500}, "limit is 1 to 500")
		}
		limit = n
	}
	query := projections.Query{Prefix: a.AppID + "/", Limit: limit + 1}
	if q.Has("cursor") {
		c := q.Get("cursor")
		if err := connectcmd.Trader("cursor", c); err != nil {
			return commands.BadField("cursor", nil, "cursor is not one this route gave: send back nextCursor as it came")
		}
		query.After = a.AppID + "/" + c
	}
	ts, err := projections.ListInto[projections.AppTrader](r.Context(), h.d.Store, projections.CollAppTrader, query)
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []projections.AppTrader{}
	}
	body := map[string]any{"traders": ts, "hasMore": false, "nextCursor": nil}
	if len(ts) > limit {
		body["traders"], body["hasMore"], body["nextCursor"] = ts[:limit], true, ts[limit-1].Trader
	}
	httpx.WriteJSON(w, http.StatusOK, body)
	return nil
}

// keyPrefix is the prefix of the environment's app keys.
func (h *Handlers) keyPrefix() string { return "svc_ck_" + h.d.Env + "_" }

// IssueKey issues an app API key (an owner). The first answer shows the
// secret, once; a retry with the same Idempotency-Key answers the key without it.
func (h *Handlers) IssueKey(w http.ResponseWriter, r *http.Request) error {
	a, err := h.member(r)
	if err != nil {
		return err
	}
	c := connectcmd.IssueKey{}
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	if c.By, err = h.owner(r, a.OrgID); err != nil {
		return err
	}
	secret := auth.NewKey(h.keyPrefix())
	c.Now, c.Env, c.KeyID, c.Digest, c.Prefix = h.cfg.Now(), h.d.Env, "ck_"+ulid.Make().String(), auth.Digest(secret), secret[:len(h.keyPrefix())+4]
	evs, err := h.execApp(r, a.AppID, &c)
	return idem.WriteAdding(w, evs, err, nil, map[string]any{"secret": secret})
}

// ListKeys lists the app's keys, live and revoked, never their secrets.
func (h *Handlers) ListKeys(w http.ResponseWriter, r *http.Request) error {
	a, err := h.member(r)
	if err != nil {
		return err
	}
	digests, err := projections.ListInto[string](r.Context(), h.d.Store, projections.CollAppKey, projections.Query{Prefix: a.AppID + "/"})
	if err != nil {
		return err
	}
	out := []connectcmd.KeyView{}
	for _, dg := range digests {
		k, err := projections.GetInto[projections.Key](r.Context(), h.d.Store, projections.CollKey, dg)
		if err != nil {
			return err
		}
		out = append(out, connectcmd.ViewKey(a.AppID, evconnect.KeyIssued{KeyID: k.KeyID, Name: k.Name, Prefix: k.Prefix, Env: k.Env,
			CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt, At: k.CreatedAt}, k.Revoked))
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"keys": out})
	return nil
}

// RevokeKey revokes an app key (an owner): its next request is 401.
func (h *Handlers) RevokeKey(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	a, err := h.member(r)
	if err != nil {
		return nil, err
	}
	by, err := h.owner(r, a.OrgID)
	if err != nil {
		return nil, err
	}
	return h.execApp(r, a.AppID, &connectcmd.RevokeKey{KeyID: mux.Vars(r)["keyId"], By: by})
}

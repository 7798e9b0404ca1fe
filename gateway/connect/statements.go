package connect

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	orgcmd "github.com/svc/engine/commands/org"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
	"github.com/svc/engine/gateway/connect/statement"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// StatementLife is how long a statement production signs stays good.
const StatementLife = 5 * time.Minute

// Statement signs a statement for the signed-in Connect account (POST
// /api/connect/dashboard/statement, production only): its verified email and
// the apps of the organizations it owns, for the sandbox's audience, good
// for five minutes and one exchange.
func (h *Handlers) Statement(w http.ResponseWriter, r *http.Request) error {
	if h.cfg.Signer == nil {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "statements are signed by production; the sandbox exchanges them (POST /api/connect/dashboard/exchange)")
	}
	_, u, err := h.d.Auth.DashboardUser(r)
	if err != nil {
		return err
	}
	if !u.EmailVerified {
		return httpx.Errorf(http.StatusForbidden, commands.CodeEmailUnverified, "verify your email before asking for a statement")
	}
	apps := []statement.App{}
	err = h.d.Store.List(r.Context(), projections.CollUserOrg, projections.Query{Prefix: u.UserID + "/"}, func(key string, get func(any) error) error {
		var role string
		if err := get(&role); err != nil || role != "owner" {
			return err
		}
		orgID := strings.TrimPrefix(key, u.UserID+"/")
		org, err := projections.GetInto[projections.Org](r.Context(), h.d.Store, projections.CollOrg, orgID)
		if err != nil {
			return err
		}
		owned, err := h.orgApps(r.Context(), orgID)
		if err != nil {
			return err
		}
		for _, a := range owned {
			if len(apps) < statement.MaxApps {
				apps = append(apps, statement.App{ID: a.AppID, Name: a.Settings.Name, OrgID: orgID, OrgName: org.Name})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	tok, c, err := h.cfg.Signer.Sign(u.Email, apps, h.cfg.Audience, h.cfg.Now(), StatementLife)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"statement": tok, "id": c.ID, "audience": c.Audience, "expiresAt": c.Expires.UTC(), "apps": apps})
	return nil
}

func isReplay(err error) bool {
	var rp *commands.Replay
	return errors.As(err, &rp)
}

// statementRefusal is the answer to a statement the sandbox does not accept.
func statementRefusal(err error) error {
	reason := "malformed"
	for r, e := range map[string]error{"signature": statement.ErrSignature, "issuer": statement.ErrIssuer, "audience": statement.ErrAudience,
		"expired": statement.ErrExpired, "not_yet_valid": statement.ErrNotYetValid, "email_unverified": statement.ErrUnverifiedEmail} {
		if errors.Is(err, e) {
			reason = r
		}
	}
	return &httpx.Error{Status: http.StatusUnauthorized, Code: commands.CodeInvalidStatement, Params: map[string]any{"reason": reason},
		Msg: "the statement is not one the sandbox accepts (" + strings.ReplaceAll(reason, "_", " ") + "); ask production for a new one"}
}

// Exchange trades a production statement for a sandbox dashboard session
// (POST /api/connect/dashboard/exchange, the sandbox, from the dashboard's
// origin): the statement's signature (production's public key only),
// issuer, audience and expiry are checked and its id is spent in the log, so
// it never works twice. The email's sandbox user is made on first exchange;
// each production app gets its counterpart sandbox app in the counterpart of
// its organization, made once and found again afterwards, the user an owner.
func (h *Handlers) Exchange(w http.ResponseWriter, r *http.Request) error {
	if h.cfg.Verifier == nil {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "this environment does not exchange statements: the sandbox does, with production's public key")
	}
	if !h.d.Auth.DashboardOriginAllowed(r) {
		return httpx.Errorf(http.StatusForbidden, commands.CodeOriginNotAllowed, "exchange statements from the Connect dashboard's own origin")
	}
	var b struct {
		Statement string `json:"statement"`
	}
	if err := httpx.Decode(r, &b, statement.MaxTokenSize+1024); err != nil {
		return err
	}
	if b.Statement == "" {
		return commands.BadField("statement", nil, "statement is required: the token production's POST /api/connect/dashboard/statement answered")
	}
	c, err := h.cfg.Verifier.Verify(b.Statement, h.cfg.Now())
	if err != nil {
		return statementRefusal(err)
	}
	email := strings.ToLower(c.Email)
	sys := events.Principal{System: "connect-exchange"}
	res, err := h.d.Engine.Statement(r.Context(), c.ID, h.d.Engine.Envelope(sys, "", &connectcmd.RedeemStatement{ID: c.ID, Email: email, Expires: c.Expires}))
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	uid, err := h.cfg.NewUser(r.Context(), email)
	if err != nil {
		return err
	}
	apps := []connectcmd.AppView{}
	for _, pa := range c.Apps {
		a, err := h.counterpart(r, uid, email, pa)
		if err != nil {
			return err
		}
		apps = append(apps, a)
	}
	if err := h.cfg.StartDashboard(w, r, uid); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"user": map[string]any{"id": uid, "email": email, "emailVerified": true}, "apps": apps})
	return nil
}

// counterpart finds or makes the sandbox app standing for a production app,
// in the counterpart of its organization, with the user among its owners.
func (h *Handlers) counterpart(r *http.Request, uid, email string, pa statement.App) (connectcmd.AppView, error) {
	ctx := r.Context()
	sys := events.Principal{System: "connect-exchange", UserID: uid}
	orgID := derivedID("org_", "connect-counterpart", pa.OrgID)
	name := pa.OrgName
	if commands.Identifier("name", name, commands.MaxName) != nil {
		name = "Organization " + pa.OrgID
	}
	for _, cmd := range []commands.Command{
		&orgcmd.Create{Name: name, By: orgcmd.Actor{UserID: uid, Email: email, Verified: true}, Digest: "counterpart"},
		&orgcmd.AdmitOwner{UserID: uid, Email: email},
	} {
		res, err := h.d.Engine.Org(ctx, orgID, h.d.Engine.Envelope(sys, "", cmd))
		if err != nil {
			return connectcmd.AppView{}, err
		}
		if err := h.d.Settle(ctx, res); err != nil {
			return connectcmd.AppView{}, err
		}
	}
	appID := uuidOf("counterpart", pa.ID)
	if a, err := h.app(ctx, appID); err == nil {
		return appView(a), nil
	}
	settings := evconnect.Settings{Name: pa.Name, Websites: []string{"http://localhost:3000"}, WhiteLabel: connectcmd.DefaultWhiteLabel()}
	if commands.Identifier("name", settings.Name, connectcmd.MaxName) != nil {
		settings.Name = "App " + pa.ID
	}
	c := &connectcmd.CreateApp{OrgID: orgID, Settings: settings, Env: h.d.Env, Counterpart: pa.ID,
		TenantID: "capp_" + strings.ReplaceAll(appID, "-", ""), By: connectcmd.Owner{UserID: uid, Verified: true, Owner: true}}
	env := h.d.Engine.Envelope(sys, "", c)
	env.Key, env.Digest = "counterpart", "counterpart:"+pa.ID // made once, by whichever exchange comes first
	if _, err := h.createApp(ctx, appID, env); err != nil && !isReplay(err) {
		return connectcmd.AppView{}, err
	}
	a, err := h.app(ctx, appID)
	if err != nil {
		return connectcmd.AppView{}, err
	}
	return appView(a), nil
}

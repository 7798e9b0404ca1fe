package firm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
	firmproj "github.com/svc/engine/projections/firm"
)

func (h *Handlers) firmExec(r *http.Request, tenant string, cmd fcmdCommand) error {
	_, err := h.execFirm(r, tenant, h.d.Engine.Envelope(api.Principal(r), "", cmd))
	return err
}

// ExecFirm runs cmd on the firm's aggregate, detached from the caller's
// connection, and waits for the read models. A request that came through
// idem.Require (the venue door's twins) runs it keyed: the firm records the
// Idempotency-Key with the answer, which the result's events carry, and a
// repeat answers it again (*commands.Replay).
func (h *Handlers) ExecFirm(r *http.Request, cmd fcmdCommand) (engine.Result, error) {
	return h.execFirm(r, tenantOf(r), idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", cmd)))
}

// AdviseFirm asks, without committing, what ExecFirm of cmd would meet: a
// refusal, the replay of an Idempotency-Key answered before, or nil.
func (h *Handlers) AdviseFirm(r *http.Request, cmd fcmdCommand) error {
	return h.d.Engine.AdviseFirm(r.Context(), tenantOf(r), idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", cmd)))
}

func (h *Handlers) execFirm(r *http.Request, tenant string, env commands.Envelope) (engine.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 15*time.Second)
	defer cancel()
	res, err := h.d.Engine.Firm(ctx, tenant, env)
	if err != nil {
		return res, err
	}
	return res, h.d.Settle(ctx, res)
}

type fcmdCommand interface{ Validate() error }

func (h *Handlers) registration(ctx context.Context, tenant, id string) (firmproj.Registration, error) {
	reg, err := projections.GetInto[firmproj.Registration](ctx, h.d.Store, firmproj.CollRegistration, tenant+"/"+id)
	if errors.Is(err, projections.ErrNotFound) {
		return reg, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "registration not found")
	}
	return reg.StatusAt(h.d.Engine.Now()), err
}

// createRegistration pre-registers a trader's provider account; sending the same
// email, provider and account number again refreshes its 30-day expiry. A body
// with handover is 400; no email is sent, and the answer says nothing of one.
func (h *Handlers) CreateRegistration(w http.ResponseWriter, r *http.Request) error {
	var raw map[string]json.RawMessage
	var body struct {
		Email         string `json:"email"`
		AccountNumber string `json:"accountNumber"`
		LoginName     string `json:"loginName"`
		Provider      string `json:"provider"`
	}
	if err := httpx.Decode(r, &raw, 0); err != nil {
		return err
	}
	if _, ok := raw["handover"]; ok {
		return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "handover is no longer accepted: the service sends no email")
	}
	b, _ := json.Marshal(raw)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "malformed body: email, accountNumber, loginName and provider are the fields")
	}
	tenant := tenantOf(r)
	cmd := &firmcmd.CreateRegistration{ID: ulid.Make().String(), Email: strings.TrimSpace(body.Email),
		AccountNumber: body.AccountNumber, LoginName: body.LoginName, Provider: body.Provider}
	if err := cmd.Validate(); err != nil {
		return err
	}
	if err := h.firmExec(r, tenant, cmd); err != nil {
		return err
	}
	id, err := projections.GetInto[string](r.Context(), h.d.Store, firmproj.CollRegKey, tenant+"/"+firmproj.RegKey(cmd.Email, cmd.Provider, cmd.AccountNumber))
	if err != nil {
		return err
	}
	reg, err := h.registration(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"registration": reg})
	return nil
}

// listRegistrations lists the firm's registrations, newest first.
func (h *Handlers) ListRegistrations(w http.ResponseWriter, r *http.Request) error {
	regs, err := projections.ListInto[firmproj.Registration](r.Context(), h.d.Store, firmproj.CollRegistration,
		projections.Query{Prefix: tenantOf(r) + "/", Reverse: true})
	if err != nil {
		return err
	}
	now := h.d.Engine.Now()
	out := make([]firmproj.Registration, 0, len(regs))
	for _, reg := range regs {
		out = append(out, reg.StatusAt(now))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"registrations": out})
	return nil
}

// revokeRegistration cancels an unused registration.
func (h *Handlers) RevokeRegistration(w http.ResponseWriter, r *http.Request) error {
	tenant, id := tenantOf(r), mux.Vars(r)["id"]
	if _, err := h.registration(r.Context(), tenant, id); err != nil {
		return err
	}
	if err := h.firmExec(r, tenant, &firmcmd.RevokeRegistration{ID: id}); err != nil {
		return err
	}
	reg, err := h.registration(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"registration": reg})
	return nil
}

// traderEmail is the email of the calling trader's tenant (the sandbox's
// stand-in for a signed-in trader's verified email).
func (h *Handlers) trader(r *http.Request) (projections.User, error) {
	u, err := projections.GetInto[projections.User](r.Context(), h.d.Store, projections.CollUser, tenantOf(r))
	if errors.Is(err, projections.ErrNotFound) {
		return u, httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "registrations are linked by a signed-in trader")
	}
	return u, err
}

// traderRegistrations lists the registrations whose email is the caller's:
// the ones shown to the signed-in trader (a verified session) as ready to link.
func (h *Handlers) TraderRegistrations(w http.ResponseWriter, r *http.Request) error {
	u, err := h.trader(r)
	if err != nil {
		return err
	}
	if !u.EmailVerified {
		return httpx.Errorf(http.StatusForbidden, commands.CodeEmailUnverified, "verify your email address first: a registration is matched on a verified address")
	}
	ids, err := projections.ListInto[string](r.Context(), h.d.Store, firmproj.CollRegEmail, projections.Query{Prefix: strings.ToLower(u.Email) + "/"})
	if err != nil {
		return err
	}
	now := h.d.Engine.Now()
	out := []firmproj.Registration{}
	for _, id := range ids {
		tenant, err := projections.GetInto[string](r.Context(), h.d.Store, firmproj.CollRegistrationI, id)
		if err != nil {
			return err
		}
		reg, err := projections.GetInto[firmproj.Registration](r.Context(), h.d.Store, firmproj.CollRegistration, tenant+"/"+id)
		if err != nil {
			return err
		}
		out = append(out, reg.StatusAt(now))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"registrations": out})
	return nil
}

// linkRegistration links a registration for the calling trader whose email
// verified email matches it: it sets linkedAt and emits registration.linked.
func (h *Handlers) LinkRegistration(w http.ResponseWriter, r *http.Request) error {
	u, err := h.trader(r)
	if err != nil {
		return err
	}
	id := mux.Vars(r)["id"]
	tenant, err := projections.GetInto[string](r.Context(), h.d.Store, firmproj.CollRegistrationI, id)
	if errors.Is(err, projections.ErrNotFound) {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "registration not found")
	} else if err != nil {
		return err
	}
	if err := h.confirmedLogin(r, tenant, id); err != nil {
		return err
	}
	if err := h.firmExec(r, tenant, &firmcmd.LinkRegistration{ID: id, Email: u.Email, Verified: u.EmailVerified, TraderID: tenantOf(r)}); err != nil {
		return err
	}
	reg, err := h.registration(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"registration": reg})
	return nil
}

// confirmedLogin refuses to link a pending registration for a provider
// signed in to with a login (a futures broker) unless the caller linked a
// login there that the provider confirmed and that the registration names
// (its login name and account, where named): 409 registration_unconfirmed.
// A registration for another provider, or none, is linked as before.
func (h *Handlers) confirmedLogin(r *http.Request, tenant, id string) error {
	reg, err := h.registration(r.Context(), tenant, id)
	if err != nil || reg.Status != "pending" || reg.Provider == nil || !h.d.Engine.IsLoginProvider(*reg.Provider) {
		return err // the firm's aggregate answers a registration no longer pending
	}
	for _, c := range h.d.Engine.ConfirmedLogins(tenantOf(r), *reg.Provider) {
		if c.Matches(deref(reg.LoginName), deref(reg.AccountNumber)) {
			return nil
		}
	}
	return commands.Refuse(commands.CodeRegistrationUnconfirmed,
		"the provider has not confirmed this registration's login: link that login with its password (POST /api/account/providers), which links the registration",
		map[string]any{"provider": *reg.Provider})
}

// LinkProviderRegistrations links, for the trader p (its tenant, as
// TraderRegistrations reads it) who has just linked an account at a provider, each of their registrations for that provider that
// still waits: the ones TraderRegistrations shows them as ready to link
// (their verified email, status pending). Each becomes linked and emits
// registration.linked to its venue, exactly as LinkRegistration does. A
// trader without a verified email, or with no such registration, links
// none; a registration the firm's aggregate refuses (linked by another
// trader meanwhile, revoked) is left as it stands.
func LinkProviderRegistrations(ctx context.Context, d *api.Deps, p events.Principal, provider string) error {
	return linkRegistrations(ctx, d, p, provider, func(firmproj.Registration) bool { return true })
}

// LinkLoginRegistrations links, for the trader p who has just linked the
// accounts of a login the provider confirmed (c), each of their
// registrations for that provider that still waits and names that login:
// its login name when it names one, and one of the login's linked
// accounts when it names an account number. Others stay pending.
func LinkLoginRegistrations(ctx context.Context, d *api.Deps, p events.Principal, c engine.ConfirmedLogin) error {
	return linkRegistrations(ctx, d, p, c.Provider, func(reg firmproj.Registration) bool {
		return c.Matches(deref(reg.LoginName), deref(reg.AccountNumber))
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// linkRegistrations links the trader's pending registrations for the
// provider that match.
func linkRegistrations(ctx context.Context, d *api.Deps, p events.Principal, provider string, match func(firmproj.Registration) bool) error {
	trader := p.TenantID
	u, err := projections.GetInto[projections.User](ctx, d.Store, projections.CollUser, trader)
	if errors.Is(err, projections.ErrNotFound) || (err == nil && !u.EmailVerified) {
		return nil
	} else if err != nil {
		return err
	}
	ids, err := projections.ListInto[string](ctx, d.Store, firmproj.CollRegEmail, projections.Query{Prefix: strings.ToLower(u.Email) + "/"})
	if err != nil {
		return err
	}
	now := d.Engine.Now()
	for _, id := range ids {
		tenant, err := projections.GetInto[string](ctx, d.Store, firmproj.CollRegistrationI, id)
		if err != nil {
			return err
		}
		reg, err := projections.GetInto[firmproj.Registration](ctx, d.Store, firmproj.CollRegistration, tenant+"/"+id)
		if err != nil {
			return err
		}
		if reg.StatusAt(now).Status != "pending" || reg.Provider == nil || !strings.EqualFold(*reg.Provider, provider) || !match(reg) {
			continue
		}
		env := d.Engine.Envelope(p, "", &firmcmd.LinkRegistration{ID: id, Email: u.Email, Verified: true, TraderID: trader})
		res, err := d.Engine.Firm(ctx, tenant, env)
		var ref *commands.Refusal
		if errors.As(err, &ref) {
			continue
		}
		if err != nil {
			return err
		}
		if err := d.Settle(ctx, res); err != nil {
			return err
		}
	}
	return nil
}

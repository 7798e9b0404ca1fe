// Package operator serves /api/operator/venues/{venueId}/: an authorized
// operator's reads of balance receipts and the reconciliation hold. The
// credential is a verified user's session whose operator grant on the venue
// carries the route's scope; API keys are refused, and writes need a
// trusted Origin.
package operator

import (
	"context"
	"errors"
	"github.com/svc/engine/commands"
	"net/http"
	"slices"
	"time"

	"github.com/gorilla/mux"

	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	firmgw "github.com/svc/engine/gateway/firm"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	firmproj "github.com/svc/engine/projections/firm"
)

// Config is what the operator routes need beyond the shared dependencies.
type Config struct {
	Now func() time.Time
}

// New makes the operator handlers; the route table is gateway/routes.go.
func New(d *api.Deps, cfg Config) *Handlers { return &Handlers{d: d, cfg: cfg} }

type Handlers struct {
	d   *api.Deps
	cfg Config
}

type sessionKey struct{}

type caller struct {
	user   projections.User
	tenant string
}

// serve admits an operator session with scope for the path's venue, then runs f.
func (h *Handlers) Serve(scope string, f httpx.Handler) http.Handler {
	return httpx.Serve(httpx.Trading, func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get("Authorization") != "" {
			return httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "API keys are refused on operator routes; sign in as an operator")
		}
		_, u, err := h.d.Auth.SessionUser(r)
		if err != nil {
			return err
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !h.d.Auth.Trusted(r) {
			return auth.ErrOriginNotAllowed("writes on operator routes need a trusted Origin")
		}
		if !u.EmailVerified {
			return httpx.Errorf(http.StatusForbidden, commands.CodeEmailUnverified, "an operator verifies their email address first")
		}
		venue := mux.Vars(r)["venueId"]
		grant, err := projections.GetInto[projections.Operator](r.Context(), h.d.Store, projections.CollOperator, venue+"/"+u.UserID)
		if errors.Is(err, projections.ErrNotFound) {
			return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no such venue for this operator")
		} else if err != nil {
			return err
		}
		if !slices.Contains(grant.Scopes, scope) {
			return httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "the operator lacks the scope %s", scope)
		}
		tenant, err := projections.GetInto[string](r.Context(), h.d.Store, firmproj.CollVenue, venue)
		if errors.Is(err, projections.ErrNotFound) {
			return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no such venue")
		} else if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		ctx := context.WithValue(r.Context(), sessionKey{}, caller{user: u, tenant: tenant})
		return f(w, r.WithContext(ctx))
	})
}

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(sessionKey{}).(caller)
	return c
}

// receipt answers a balance operation's receipt by its original reference, so
// a backend that lost an answer can settle it.
func (h *Handlers) Receipt(w http.ResponseWriter, r *http.Request) error {
	rc, err := firmgw.ReadReceipt(r.Context(), h.d.Store, callerOf(r).tenant, mux.Vars(r)["referenceId"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, rc)
	return nil
}

func (h *Handlers) account(r *http.Request) (projections.Account, error) {
	c := callerOf(r)
	number := mux.Vars(r)["accountNumber"]
	id, err := projections.GetInto[string](r.Context(), h.d.Store, projections.CollAccountNumber, api.DefaultBroker+"/"+number)
	if err == nil {
		a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, id)
		if err == nil && a.TenantID == c.tenant {
			return a, nil
		}
		if err != nil && !errors.Is(err, projections.ErrNotFound) {
			return a, err
		}
	} else if !errors.Is(err, projections.ErrNotFound) {
		return projections.Account{}, err
	}
	return projections.Account{}, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no account of the venue has that number")
}

func (h *Handlers) setHold(w http.ResponseWriter, r *http.Request, held bool) error {
	a, err := h.account(r)
	if err != nil {
		return err
	}
	var reason string
	if held && r.ContentLength != 0 {
		var body struct {
			Reason string `json:"reason"`
		}
		if err := httpx.Decode(r, &body, 0); err != nil {
			return err
		}
		reason = body.Reason
	}
	by := callerOf(r).user.Email
	var cmd interface{ Validate() error } = &firmcmd.ReleaseReconciliation{By: by}
	if held {
		cmd = &firmcmd.HoldForReconciliation{Reason: reason, By: by}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 15*time.Second)
	defer cancel()
	c := callerOf(r)
	env := h.d.Engine.Envelope(events.Principal{TenantID: c.tenant, UserID: callerOf(r).user.UserID}, "", cmd)
	res, err := h.d.Engine.Account(ctx, a.AccountID, env)
	if err != nil {
		return err
	}
	if err := h.d.Settle(ctx, res); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accountNumber": a.AccountNumber, "reconciliationHold": held})
	return nil
}

// hold places the reconciliation hold: no money moves and no exposure is added
// until release. Idempotent.
func (h *Handlers) Hold(w http.ResponseWriter, r *http.Request) error { return h.setHold(w, r, true) }

// release lifts the reconciliation hold. Idempotent.
func (h *Handlers) Release(w http.ResponseWriter, r *http.Request) error {
	return h.setHold(w, r, false)
}

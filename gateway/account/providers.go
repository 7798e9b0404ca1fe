package account

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/api"
	firmgw "github.com/svc/engine/gateway/firm"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
)

// LinkProvider links an account the trader holds at a provider
// (POST /api/account/providers, a signed-in session): the engine checks the
// key at the provider, seals it and opens the account (clock observation).
// An Idempotency-Key names the account, so a retry links none more.
func (h *Handlers) LinkProvider(w http.ResponseWriter, r *http.Request) error {
	b, err := api.DecodeProviderLink(r)
	if err != nil {
		return err
	}
	defer b.Wipe()
	isLogin := h.d.Engine.IsLoginProvider(b.Provider)
	if err := api.CheckProviderForm(b, isLogin); err != nil {
		return err
	}
	if isLogin {
		return h.linkLogin(w, r, b) // providerlogins.go
	}
	p, _ := httpx.PrincipalOf(r)
	kd := sha256.Sum256([]byte("provider-key\x00" + b.APIKey))
	id, _, err := api.IdempotentID(r, "", p.TenantID, map[string]string{"provider": b.Provider, "label": b.Label, "key": hex.EncodeToString(kd[:])})
	if err != nil {
		return err
	}
	accountID := "acct_" + strings.ToUpper(id)
	res, err := h.d.Engine.LinkProvider(r.Context(), engine.LinkRequest{AccountID: accountID, Provider: b.Provider, APIKey: b.APIKey,
		Secret: b.APISecret, Label: b.Label, TenantID: p.TenantID, Principal: p.Principal})
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	// The trader's pre-registrations for this provider are linked now (registration.linked).
	if err := firmgw.LinkProviderRegistrations(r.Context(), h.d, p.Principal, b.Provider); err != nil {
		return err
	}
	a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, accountID)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"account": ItemOf(a)})
	return nil
}

// UnlinkProvider ends the link of one of the caller's provider accounts
// (DELETE /api/account/providers/{accountId}): nothing is sent for it again
// and its sealed credential's data key is destroyed. Unlinking twice
// changes nothing.
func (h *Handlers) UnlinkProvider(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	id := mux.Vars(r)["accountId"]
	notFound := httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no provider account of yours has that id")
	if len(id) > 64 {
		return notFound
	}
	a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, id)
	if errors.Is(err, projections.ErrNotFound) || (err == nil && (a.TenantID != p.TenantID || a.Kind != frames.KindProvider)) {
		return notFound
	} else if err != nil {
		return err
	}
	res, err := h.d.Engine.UnlinkProvider(r.Context(), p.Principal, id)
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

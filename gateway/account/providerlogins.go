package account

import (
	"net/http"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/api"
	firmgw "github.com/svc/engine/gateway/firm"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// linkLogin links the accounts of a login at a provider signed in to with
// a login name and password (POST /api/account/providers with login and
// password): the engine signs in once and keeps only the login's tokens;
// each account of the login (or the one named by accountNumber) is opened
// with clock observation. The same login linked again by the same user
// reaches the same accounts and renews their tokens, so a retry links none
// more, Idempotency-Key or not. The trader's pre-registrations the
// provider's answer confirms (their login name and account, where named)
// are linked. The answer is the first account and every one linked.
func (h *Handlers) linkLogin(w http.ResponseWriter, r *http.Request, b api.ProviderLink) error {
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if err := commands.Identifier("Idempotency-Key", key, 128); err != nil {
			return err
		}
	}
	p, _ := httpx.PrincipalOf(r)
	linked, err := h.d.Engine.LinkLogin(r.Context(), engine.LoginLinkRequest{Provider: b.Provider, Login: b.Login, Password: b.Password,
		Environment: b.Environment, AccountNumber: b.AccountNumber, Label: b.Label, TenantID: p.TenantID, Scope: "session\x00" + p.TenantID,
		Principal: p.Principal})
	if err != nil {
		return err
	}
	for _, res := range linked.Results {
		if err := h.d.Settle(r.Context(), res); err != nil {
			return err
		}
	}
	if err := firmgw.LinkLoginRegistrations(r.Context(), h.d, p.Principal, linked.Confirmed); err != nil {
		return err
	}
	items := make([]Item, 0, len(linked.AccountIDs))
	for _, id := range linked.AccountIDs {
		a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, id)
		if err != nil {
			return err
		}
		items = append(items, ItemOf(a))
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"account": items[0], "accounts": items})
	return nil
}

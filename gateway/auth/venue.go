package auth

import (
	"errors"
	"net/http"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
)

// RequireVenueKey admits a live venue key (svc_vk_<environment>_...): no
// key is 401 invalid_key, a Trading API or partner key is 403 (they never
// authorize venue routes). The principal carries the key's grant: its venue,
// scopes and issuing owner; the venue door checks them against the route.
func (a *Auth) RequireVenueKey(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, err := a.resolve(r)
			if errors.Is(err, errNoKey) {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusUnauthorized, commands.CodeInvalidKey, "a live venue key is required: Authorization: Bearer svc_vk_..."))
				return
			}
			if err != nil {
				httpx.WriteError(w, r, fam, err)
				return
			}
			if k.Kind != "venue" {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "only a venue key authorizes venue routes"))
				return
			}
			a.admit(w, r, fam, httpx.Principal{Principal: events.Principal{TenantID: k.TenantID, KeyID: k.KeyID}, Kind: "venue",
				Venue: &httpx.VenueGrant{VenueID: k.VenueID, Scopes: k.Scopes, CreatedBy: k.CreatedBy}}, k.ExpiresAt, next)
		})
	}
}

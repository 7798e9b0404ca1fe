package market

import (
	"net/http"

	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/httpx"
)

// Admit admits market-data and news callers: a request from a registered
// browser origin (its Origin header present and allow-listed; rate limited
// and its streams bounded per origin), or one bearing a valid Trading API key
// (the same, per key). A signed-in session without a key, from no Origin, a
// registered one or the engine's own, is admitted as its user (the trader
// whose own futures feed serves them, which an origin alone has not).
// Anything else is 401. An unregistered Origin never reaches here: the open
// router answers it 403.
func Admit(d *api.Deps) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		keyed := d.Auth.Require(httpx.Trading, "trading", "connect")(next)
		origin := d.Auth.RequireOrigin(httpx.Trading)(next)
		session := d.Auth.RequireSession(httpx.Trading)(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fromOrigin := r.Header.Get("Origin") != "" && d.Auth.OriginAllowed(r)
			if r.Header.Get("Authorization") != "" {
				if _, ok := d.Auth.Resolve(r); ok || !fromOrigin {
					keyed.ServeHTTP(w, r)
					return
				}
			} else if signedIn(d, r) && (r.Header.Get("Origin") == "" || d.Auth.Trusted(r)) {
				session.ServeHTTP(w, r)
				return
			}
			if fromOrigin {
				origin.ServeHTTP(w, r)
				return
			}
			keyed.ServeHTTP(w, r)
		})
	}
}

// signedIn reports whether the request carries a live session cookie.
func signedIn(d *api.Deps, r *http.Request) bool {
	if _, err := r.Cookie(auth.SessionCookie); err != nil {
		return false
	}
	_, _, err := d.Auth.SessionUser(r)
	return err == nil
}

// AdmitWithSession admits what Admit does and, with neither a key nor an
// allowed Origin, a signed-in session (news and the calendar: the spec admits
// a licensed origin, a signed-in session or a key).
func AdmitWithSession(d *api.Deps) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		other := Admit(d)(next)
		session := d.Auth.RequireSession(httpx.Trading)(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := r.Cookie(auth.SessionCookie); err == nil && r.Header.Get("Authorization") == "" && r.Header.Get("Origin") == "" {
				session.ServeHTTP(w, r)
				return
			}
			other.ServeHTTP(w, r)
		})
	}
}

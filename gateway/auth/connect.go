package auth

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// DashboardCookie is the Connect dashboard session's cookie: a session of
// its own audience, which no trader route accepts, as the trader's
// svc_session is never accepted by the dashboard.
const DashboardCookie = "svc_connect"

// Session audiences: "" a trader's (first-party) session, AudDashboard a
// Connect dashboard session.
const AudDashboard = "connect"

// RequireConnectKey admits a live Connect app key (svc_ck_<environment>_...)
// on the link routes, which an app's server calls: a request carrying a
// cookie or a browser Origin is 403 however good its key; no key is 401
// api_key_required, an unknown, expired or revoked one 401 invalid_key, a key
// of another kind 403.
func (a *Auth) RequireConnectKey(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fail := func(err error) { httpx.WriteError(w, r, fam, err) }
			if r.Header.Get("Origin") != "" || r.Header.Get("Cookie") != "" {
				fail(ErrOriginNotAllowed("link routes are called from the app's server: a request carrying a browser Origin or a cookie is refused; keep the app key on the server"))
				return
			}
			h := r.Header.Get("Authorization")
			if h == "" {
				fail(httpx.Errorf(http.StatusUnauthorized, commands.CodeAPIKeyRequired, "a Connect app key is required: Authorization: Bearer svc_ck_..."))
				return
			}
			k, err := a.resolve(r)
			if errors.Is(err, errNoKey) {
				fail(httpx.Errorf(http.StatusUnauthorized, commands.CodeInvalidKey, "the key is unknown, expired or revoked: create a live one in the Connect dashboard"))
				return
			}
			if err != nil {
				fail(err)
				return
			}
			if k.Kind != "connect" {
				fail(httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "only a Connect app key (svc_ck_...) reaches the link routes"))
				return
			}
			a.admit(w, r, fam, httpx.Principal{Principal: events.Principal{TenantID: k.TenantID, KeyID: k.KeyID}, Kind: "connect",
				App: &httpx.AppGrant{AppID: k.AppID, CreatedBy: k.CreatedBy, Env: k.Env}}, k.ExpiresAt, next)
		})
	}
}

// DashboardCookie is the Set-Cookie of a Connect dashboard session:
// HttpOnly, SameSite=Strict, the dashboard routes' path only.
func (s *Sessions) DashboardCookie(c Claims) *http.Cookie {
	c.Aud = AudDashboard
	return &http.Cookie{Name: DashboardCookie, Value: s.Sign(c), Path: "/api/connect/dashboard", HttpOnly: true, Secure: s.Secure,
		SameSite: http.SameSiteStrictMode, Expires: time.Unix(c.Expires, 0)}
}

// ClearDashboardCookie ends the dashboard cookie in the browser.
func (s *Sessions) ClearDashboardCookie() *http.Cookie {
	return &http.Cookie{Name: DashboardCookie, Value: "", Path: "/api/connect/dashboard", HttpOnly: true, Secure: s.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1}
}

// Sealer makes a token sealer over the session keys, for tokens of another
// label (a Connect link's, a frame session's).
func (s *Sessions) Sealer(version, label string, max int) *Sealer {
	seal, _ := NewSealer(version, label, max, s.seal.keys...)
	return seal
}

// DashboardOriginAllowed reports whether a request comes from the Connect
// dashboard's origin (DashboardOrigin, or the engine's own when unset).
func (a *Auth) DashboardOriginAllowed(r *http.Request) bool {
	o := strings.TrimRight(r.Header.Get("Origin"), "/")
	if a.cfg.DashboardOrigin == "" {
		return a.ownOrigin(o)
	}
	return o == strings.TrimRight(a.cfg.DashboardOrigin, "/")
}

// RequireDashboard admits a Connect dashboard session: every key is 403, a
// trader's session 403, no dashboard session 401 session_required; a
// request with an Origin other than the dashboard's is 403, and a write must
// carry the dashboard's (CSRF).
func (a *Auth) RequireDashboard(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fail := func(err error) { httpx.WriteError(w, r, fam, err) }
			if r.Header.Get("Authorization") != "" {
				fail(httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "API keys are refused on the Connect dashboard; it needs a Connect dashboard session"))
				return
			}
			c, _, err := a.DashboardUser(r)
			if err != nil {
				if _, terr := r.Cookie(SessionCookie); terr == nil {
					err = httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied,
						"a trader's session does not reach the Connect dashboard: sign in to the dashboard (POST /api/connect/dashboard/login)")
				}
				fail(err)
				return
			}
			write := r.Method != http.MethodGet && r.Method != http.MethodHead
			if (write || r.Header.Get("Origin") != "") && !a.DashboardOriginAllowed(r) {
				fail(ErrOriginNotAllowed("the Connect dashboard's routes answer the dashboard's own origin only"))
				return
			}
			a.renewDashboard(w, c)
			a.admit(w, r, fam, httpx.Principal{Principal: events.Principal{TenantID: c.UserID, UserID: c.UserID}, Kind: "dashboard", Session: c.SessionID},
				time.Unix(c.Expires, 0), next)
		})
	}
}

// DashboardUser resolves the request's dashboard cookie to its live session and user.
func (a *Auth) DashboardUser(r *http.Request) (Claims, projections.User, error) {
	return a.sessionUser(r, DashboardCookie, AudDashboard)
}

func (a *Auth) renewDashboard(w http.ResponseWriter, c Claims) {
	now := time.Now()
	if now.Sub(time.Unix(c.Seen, 0)) < sessionRefresh {
		return
	}
	c.Seen = now.Unix()
	http.SetCookie(w, a.cfg.Sessions.DashboardCookie(c))
}

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

// SessionCookie is the name of the session cookie.
const SessionCookie = "svc_session"

// Session lifetimes: a session ends when unused for SessionIdle, and at the
// latest SessionAbsolute after sign-in.
const (
	SessionIdle     = 24 * time.Hour
	SessionAbsolute = 30 * 24 * time.Hour
	// sessionRefresh is how stale a cookie's last-seen stamp may get before
	// an answer carries a fresh cookie (the idle clock restarts).
	sessionRefresh = time.Minute
)

// Claims is what a session cookie states. The cookie is signed; the
// session's liveness (logout, a password reset) is read from the store on
// every request, so a revocation holds on every node that folds the log.
type Claims struct {
	SessionID string `json:"sid"`
	UserID    string `json:"uid"`
	Start     int64  `json:"iat"`           // unix seconds: sign-in
	Seen      int64  `json:"seen"`          // unix seconds: the cookie was last renewed
	Expires   int64  `json:"exp"`           // unix seconds: absolute end
	Aud       string `json:"aud,omitempty"` // "": a trader's session; AudDashboard: the Connect dashboard's
}

// Sessions signs and verifies session cookies. The first key signs; every key
// verifies, so a rotated-out key keeps its sessions until they end.
type Sessions struct {
	seal   *Sealer
	Secure bool // Secure cookies (off on a loopback sandbox)
}

// NewSessions makes a signer over keys (at least one, each at least 32 bytes).
func NewSessions(secure bool, keys ...[]byte) (*Sessions, error) {
	seal, err := NewSealer("s1", "session.v1", 1024, keys...)
	if err != nil {
		return nil, err
	}
	return &Sessions{seal: seal, Secure: secure}, nil
}

// Sign renders c as a cookie value.
func (s *Sessions) Sign(c Claims) string { return s.seal.Seal(c) }

// Verify checks a cookie value's signature (under any key), its absolute end
// and its idle time.
func (s *Sessions) Verify(value string, now time.Time) (Claims, bool) {
	var c Claims
	if !s.seal.Open(value, &c) || c.SessionID == "" || c.UserID == "" {
		return Claims{}, false
	}
	if now.Unix() >= c.Expires || now.Sub(time.Unix(c.Seen, 0)) > SessionIdle {
		return Claims{}, false
	}
	return c, true
}

// Cookie is the Set-Cookie of a session: HttpOnly, SameSite=Lax, Secure
// unless the engine serves a loopback sandbox.
func (s *Sessions) Cookie(c Claims) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: s.Sign(c), Path: "/", HttpOnly: true, Secure: s.Secure,
		SameSite: http.SameSiteLaxMode, Expires: time.Unix(c.Expires, 0)}
}

// ClearCookie ends the cookie in the browser.
func (s *Sessions) ClearCookie() *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: s.Secure,
		SameSite: http.SameSiteLaxMode, MaxAge: -1}
}

// Errors of session admission.
var (
	errNoSession         = httpx.Errorf(http.StatusUnauthorized, commands.CodeSessionRequired, "sign in first: this route needs a session cookie (POST /api/auth/login)")
	errKeyOnSessionRoute = httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "API keys are refused on this route; it needs a signed-in session")
)

// SessionUser resolves the request's session cookie to its live session and
// user: 401 session_required when there is none, it is forged, expired,
// idle too long or ended; 503 store_unavailable when the store cannot say.
func (a *Auth) SessionUser(r *http.Request) (Claims, projections.User, error) {
	return a.sessionUser(r, SessionCookie, "")
}

// sessionUser resolves the session in cookie name, which must be of audience aud.
func (a *Auth) sessionUser(r *http.Request, name, aud string) (Claims, projections.User, error) {
	if a.cfg.Sessions == nil {
		return Claims{}, projections.User{}, errNoSession
	}
	ck, err := r.Cookie(name)
	if err != nil {
		return Claims{}, projections.User{}, errNoSession
	}
	c, ok := a.cfg.Sessions.Verify(ck.Value, time.Now())
	if !ok || c.Aud != aud {
		return Claims{}, projections.User{}, errNoSession
	}
	s, err := projections.GetInto[projections.Session](r.Context(), a.store, projections.CollSession, c.SessionID)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return Claims{}, projections.User{}, errNoSession
	case err != nil:
		return Claims{}, projections.User{}, StoreUnavailable()
	case s.Ended || s.UserID != c.UserID || !time.Now().Before(s.ExpiresAt):
		return Claims{}, projections.User{}, errNoSession
	}
	u, err := projections.GetInto[projections.User](r.Context(), a.store, projections.CollUser, c.UserID)
	if errors.Is(err, projections.ErrNotFound) {
		return Claims{}, projections.User{}, errNoSession
	} else if err != nil {
		return Claims{}, projections.User{}, StoreUnavailable()
	}
	return c, u, nil
}

// Trusted reports whether a cookie-borne write comes from a trusted page: its
// Origin is registered or is the engine's own, its public base URL's (CSRF).
// The request's Host is not consulted: a client names it.
func (a *Auth) Trusted(r *http.Request) bool {
	o := strings.TrimRight(r.Header.Get("Origin"), "/")
	if o == "" {
		return false
	}
	return a.origins[o] || a.ownOrigin(o)
}

// RequireSession admits a signed-in session: no API key (403), a live
// session cookie (401 session_required), and for a write a trusted Origin
// (403 origin_not_allowed). A session close to idle gets a renewed cookie.
// The principal is the user, of kind session, rate limited like a key.
func (a *Auth) RequireSession(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				httpx.WriteError(w, r, fam, errKeyOnSessionRoute)
				return
			}
			c, _, err := a.SessionUser(r)
			if err != nil {
				httpx.WriteError(w, r, fam, err)
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead && !a.Trusted(r) {
				httpx.WriteError(w, r, fam, ErrOriginNotAllowed("a write with a session cookie needs a trusted Origin header"))
				return
			}
			a.renew(w, c)
			a.admit(w, r, fam, SessionPrincipal(c), time.Unix(c.Expires, 0), next)
		})
	}
}

// SessionPrincipal is the principal of a session's user.
func SessionPrincipal(c Claims) httpx.Principal {
	return httpx.Principal{Principal: events.Principal{TenantID: c.UserID, UserID: c.UserID}, Kind: "session", Session: c.SessionID}
}

// renew sets a fresh cookie when the last renewal is older than sessionRefresh.
func (a *Auth) renew(w http.ResponseWriter, c Claims) {
	now := time.Now()
	if now.Sub(time.Unix(c.Seen, 0)) < sessionRefresh {
		return
	}
	c.Seen = now.Unix()
	http.SetCookie(w, a.cfg.Sessions.Cookie(c))
}

// Sessions is the session signer (nil when sessions are off).
func (a *Auth) Sessions() *Sessions { return a.cfg.Sessions }

// touch records a key's use, at most once a second per key (lastUsedAt is
// shown to the second; a write per request would cost every order).
func (a *Auth) touch(digest string) {
	now := time.Now()
	if v, ok := a.used.Load(digest); ok && now.Sub(v.(time.Time)) < time.Second {
		return
	}
	a.used.Store(digest, now)
}

// LastUsed is when this node last admitted the key of digest since it started.
func (a *Auth) LastUsed(digest string) (time.Time, bool) {
	v, ok := a.used.Load(digest)
	if !ok {
		return time.Time{}, false
	}
	return v.(time.Time), true
}

// KeyOrSession admits a Trading API key (Authorization present) or else a
// signed-in session.
func (a *Auth) KeyOrSession(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		keyed, session := a.Require(fam, "trading")(next), a.RequireSession(fam)(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				keyed.ServeHTTP(w, r)
				return
			}
			session.ServeHTTP(w, r)
		})
	}
}

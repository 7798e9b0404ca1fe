// Package auth resolves credentials: API keys by their SHA-256 digest, the
// Origin allow-list, per-credential and per-tenant rate limits, stream bounds
// (a key or a registered browser origin is a credential), the end of a
// credential's streams when it ends (ends.go) and the drain gate.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// Digest is the hex SHA-256 of a key: the only form a key is stored in.
func Digest(key string) string {
	var in [128]byte // on the stack for a key as long as ours: a digest is taken per request
	sum := sha256.Sum256(append(in[:0], key...))
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// NewKey makes a random key with the given prefix ("svc_sk_").
func NewKey(prefix string) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b)
}

// Config shapes the middleware.
type Config struct {
	AllowedOrigins []string
	// PublicURL is the engine's public base URL: its origin (scheme, host and
	// port) is the engine's own, trusted as a registered origin is. The
	// request's Host is never trusted.
	PublicURL     string
	RatePerSecond float64 // per credential (a key, or a registered origin); 0: no limit
	Burst         int
	// TenantRatePerSecond and TenantBurst limit the requests of all a
	// tenant's credentials together (a tenant may hold many keys); 0: no limit.
	TenantRatePerSecond float64
	TenantBurst         int
	MaxStreams          int       // concurrent streams per credential; 0: DefaultMaxStreams
	Sessions            *Sessions // signs and verifies session cookies; nil: no session is admitted
	// DashboardOrigin is the Connect dashboard's origin: its session's
	// requests must come from it. "": the engine's own origin.
	DashboardOrigin string
}

// Limits of the credential middleware.
const (
	// DefaultMaxStreams bounds a credential's concurrent SSE streams; the next
	// answers 429 too_many_streams until one ends.
	DefaultMaxStreams = 50
	// StreamRetryAfter is the Retry-After, in seconds, of too_many_streams.
	StreamRetryAfter = 5
	// maxLimiters bounds the rate-limiter table (limiterLocked).
	maxLimiters = 4096
)

// Auth is the credential middleware set.
type Auth struct {
	cfg      Config
	store    projections.Store
	origins  map[string]bool
	own      string // the origin of cfg.PublicURL; "": none
	ends     ends
	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by credential; at most maxLimiters
	smu      sync.Mutex
	streams  map[string]int // open streams by credential; no zero entries
	draining atomic.Bool
	kmu      sync.RWMutex
	known    map[string]projections.Key // last read of each key digest, for a store outage
	used     sync.Map                   // key digest -> time.Time of its last admission here
}

// New makes the middleware over the key read model.
func New(cfg Config, store projections.Store) *Auth {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	a := &Auth{cfg: cfg, store: store, origins: map[string]bool{}, limiters: map[string]*rate.Limiter{}, streams: map[string]int{},
		known: map[string]projections.Key{}, own: originOf(cfg.PublicURL),
		ends: ends{by: map[string]map[*httpx.StreamEnd]struct{}{}, gone: map[string]gone{}}}
	for _, o := range cfg.AllowedOrigins {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			a.origins[o] = true
		}
	}
	return a
}

// Drain makes every write answer 503 engine_draining from now on.
func (a *Auth) Drain() { a.draining.Store(true) }

// Draining reports whether the engine drains.
func (a *Auth) Draining() bool { return a.draining.Load() }

// originOf is the origin of a URL as a browser sends it: lower-case scheme
// and host, the port unless it is the scheme's default; "" when u is not an
// http or https URL.
func originOf(u string) string {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil || p.Host == "" {
		return ""
	}
	scheme, host, port := strings.ToLower(p.Scheme), strings.ToLower(p.Hostname()), p.Port()
	if scheme != "http" && scheme != "https" {
		return ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" || (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		return scheme + "://" + host
	}
	return scheme + "://" + host + ":" + port
}

// OriginAllowed reports whether a request's Origin (if any) is registered.
func (a *Auth) OriginAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o == "" || a.origins[strings.TrimRight(o, "/")]
}

// ownOrigin reports whether o is the engine's own origin (Config.PublicURL's),
// scheme included.
func (a *Auth) ownOrigin(o string) bool { return o != "" && o == a.own }

// ErrOriginNotAllowed is the answer to a request from an origin that is
// neither registered nor the engine's own: 403 origin_not_allowed.
func ErrOriginNotAllowed(why string) *httpx.Error {
	return httpx.Errorf(http.StatusForbidden, commands.CodeOriginNotAllowed, "origin not allowed: %s", why)
}

// Origin refuses a request whose Origin header is neither registered nor the
// engine's own (a page it serves signing in): 403, even with a valid key.
func (a *Auth) Origin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.OriginAllowed(r) && !a.ownOrigin(strings.TrimRight(r.Header.Get("Origin"), "/")) {
			httpx.WriteError(w, r, httpx.Trading, ErrOriginNotAllowed("a request carrying an Origin header must come from a registered origin or the engine's own"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireOrigin admits a request from a registered browser origin (its Origin
// header present and allow-listed) as a principal of kind origin, rate limited
// and with its streams bounded per origin, as a key is; anything else is 401.
func (a *Auth) RequireOrigin(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o := strings.TrimRight(r.Header.Get("Origin"), "/")
			if o == "" || !a.origins[o] {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusUnauthorized, commands.CodeInvalidKey, "a registered browser origin or a valid API key is required"))
				return
			}
			a.admit(w, r, fam, httpx.Principal{Kind: "origin", Origin: o}, time.Time{}, next)
		})
	}
}

// Resolve finds the key of a bearer token, or false.
func (a *Auth) Resolve(r *http.Request) (projections.Key, bool) {
	k, err := a.resolve(r)
	return k, err == nil
}

// errNoKey: the request bears no live key.
var errNoKey = errors.New("auth: no live key")

// maxKnownKeys bounds the keys remembered for a store outage.
const maxKnownKeys = 100000

// resolve finds the live key of a bearer token: errNoKey when there is none,
// or a 503 store_unavailable when the key store cannot be read and the key
// was never seen live. A key read live before is admitted as last read while
// the store is down, so an outage of the read store does not lock out every
// client; a revocation takes effect as soon as the store answers again.
func (a *Auth) resolve(r *http.Request) (projections.Key, error) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || !strings.HasPrefix(tok, "svc_") || len(tok) < 16 || len(tok) > 256 {
		return projections.Key{}, errNoKey
	}
	digest := Digest(tok)
	k, err := projections.GetInto[projections.Key](r.Context(), a.store, projections.CollKey, digest)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		a.forget(digest)
		return projections.Key{}, errNoKey
	case err != nil:
		a.kmu.RLock()
		k, seen := a.known[digest]
		a.kmu.RUnlock()
		if seen && k.Live(time.Now()) {
			return k, nil
		}
		return projections.Key{}, StoreUnavailable()
	case !k.Live(time.Now()):
		a.forget(digest)
		return projections.Key{}, errNoKey
	}
	a.touch(digest)
	a.kmu.Lock()
	if _, seen := a.known[digest]; seen || len(a.known) < maxKnownKeys {
		a.known[digest] = k
	}
	a.kmu.Unlock()
	return k, nil
}

func (a *Auth) forget(digest string) {
	a.kmu.Lock()
	delete(a.known, digest)
	a.kmu.Unlock()
}

// StoreUnavailable is the answer when a credential cannot be checked because
// the store is unreachable: 503 store_unavailable with Retry-After, never 401.
func StoreUnavailable() *httpx.Error {
	return httpx.Unavailable(commands.CodeStoreUnavailable, "the credential store cannot be read right now; nothing was recorded; retry after the Retry-After seconds")
}

// Require admits requests bearing a live key of one of kinds; a key of another
// kind is 403, anything else 401. Then it applies the per-credential rate
// limit and stream bound (admit).
func (a *Auth) Require(fam httpx.Family, kinds ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, err := a.resolve(r)
			if errors.Is(err, errNoKey) {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusUnauthorized, commands.CodeInvalidKey, "a valid API key is required: Authorization: Bearer svc_sk_..."))
				return
			}
			if err != nil {
				httpx.WriteError(w, r, fam, err)
				return
			}
			allowed := false
			for _, kind := range kinds {
				allowed = allowed || k.Kind == kind
			}
			if !allowed {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "this key cannot be used on this route"))
				return
			}
			p := httpx.Principal{Principal: events.Principal{TenantID: k.TenantID, KeyID: k.KeyID}, Kind: k.Kind}
			switch k.Kind {
			case "venue":
				p.Venue = &httpx.VenueGrant{VenueID: k.VenueID, Scopes: k.Scopes, CreatedBy: k.CreatedBy}
			case "connect":
				p.App = &httpx.AppGrant{AppID: k.AppID, CreatedBy: k.CreatedBy, Env: k.Env}
			}
			a.admit(w, r, fam, p, k.ExpiresAt, next)
		})
	}
}

// credential names the rate limit and the stream bound a principal counts against.
func credential(p httpx.Principal) string { return p.Credential() }

// admit serves a resolved principal: the credential's rate limit and its
// tenant's (429 rate_limited), then next with the principal in the context
// and its stream, if it starts one, bounded (429 too_many_streams) and ended
// when the credential ends or at until (its expiry; zero: none).
func (a *Auth) admit(w http.ResponseWriter, r *http.Request, fam httpx.Family, p httpx.Principal, until time.Time, next http.Handler) {
	id := p.KeepCredential()
	if wait, ok := a.allow(id, a.cfg.RatePerSecond, a.cfg.Burst); !ok {
		httpx.WriteError(w, r, fam, &httpx.Error{Status: http.StatusTooManyRequests, Code: commands.CodeRateLimited, Msg: "rate limit exceeded; wait for Retry-After", RetryAfter: wait})
		return
	}
	if p.TenantID != "" && a.cfg.TenantRatePerSecond > 0 {
		if wait, ok := a.allow("tenant:"+p.TenantID, a.cfg.TenantRatePerSecond, a.cfg.TenantBurst); !ok {
			httpx.WriteError(w, r, fam, &httpx.Error{Status: http.StatusTooManyRequests, Code: commands.CodeRateLimited, RetryAfter: wait,
				Msg: "the rate limit of all your keys and sessions together is exceeded; wait for Retry-After"})
			return
		}
	}
	ref := endOf{p.Kind, p.Session, p.KeyID} // not p: the closure would move all of it to the heap
	httpx.GateStreams(w, httpx.SetPrincipal(r, p), next, func(end *httpx.StreamEnd) (func(), error) {
		release, err := a.openStream(id)
		if err != nil {
			return nil, err
		}
		stop := a.watch(ref.ref(), until, end)
		return func() { stop(); release() }, nil
	})
}

// openStream takes one of the credential's stream slots; release gives it back.
func (a *Auth) openStream(id string) (release func(), err error) {
	a.smu.Lock()
	defer a.smu.Unlock()
	if a.streams[id] >= a.cfg.MaxStreams {
		return nil, &httpx.Error{Status: http.StatusTooManyRequests, Code: commands.CodeTooManyStreams, RetryAfter: StreamRetryAfter,
			Msg:    fmt.Sprintf("at most %d streams may be open at once per credential; close one first", a.cfg.MaxStreams),
			Params: map[string]any{"limit": a.cfg.MaxStreams}}
	}
	a.streams[id]++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.smu.Lock()
			defer a.smu.Unlock()
			if a.streams[id]--; a.streams[id] <= 0 {
				delete(a.streams, id)
			}
		})
	}, nil
}

// Streams counts the open streams of p's credential.
func (a *Auth) Streams(p httpx.Principal) int {
	a.smu.Lock()
	defer a.smu.Unlock()
	return a.streams[credential(p)]
}

// allow takes a token of id's limiter (a credential's or a tenant's, of
// perSecond and burst), or reports the seconds to wait.
func (a *Auth) allow(id string, perSecond float64, burst int) (int, bool) {
	if perSecond <= 0 {
		return 0, true
	}
	now := time.Now()
	a.mu.Lock()
	l := a.limiterLocked(id, now, perSecond, burst)
	a.mu.Unlock()
	res := l.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d == 0 {
		return 0, true
	}
	res.CancelAt(now)
	return int(math.Ceil(math.Max(d.Seconds(), 1))), false
}

// limiterLocked returns the credential's limiter, made on first use. When the
// table is full it first drops the limiters back at full burst (no different
// from new ones); if that leaves it over three quarters full, arbitrary ones
// until half full, so a sweep is rare however many credentials call.
func (a *Auth) limiterLocked(id string, now time.Time, perSecond float64, burst int) *rate.Limiter {
	if l, ok := a.limiters[id]; ok {
		return l
	}
	if len(a.limiters) >= maxLimiters {
		for k, l := range a.limiters {
			if l.TokensAt(now) >= float64(l.Burst()) {
				delete(a.limiters, k)
			}
		}
		if len(a.limiters) > maxLimiters*3/4 {
			for k := range a.limiters {
				if len(a.limiters) <= maxLimiters/2 {
					break
				}
				delete(a.limiters, k)
			}
		}
	}
	if burst <= 0 {
		burst = int(math.Max(1, perSecond))
	}
	l := rate.NewLimiter(rate.Limit(perSecond), burst)
	a.limiters[id] = l
	return l
}

// Writes refuses writes with 503 engine_draining while the engine drains.
func (a *Auth) Writes(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a.Draining() && r.Method != http.MethodGet && r.Method != http.MethodHead {
				httpx.WriteError(w, r, fam, httpx.Unavailable(commands.CodeEngineDraining, "the engine is shutting down; retry with the same id"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Package auth resolves credentials: API keys by their SHA-256 digest, the
// Origin allow-list, per-credential rate limits and the drain gate.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// Digest is the hex SHA-256 of a key: the only form a key is stored in.
func Digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
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
	RatePerSecond  float64 // per credential; 0: no limit
	Burst          int
}

// Auth is the credential middleware set.
type Auth struct {
	cfg      Config
	store    projections.Store
	origins  map[string]bool
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	draining atomic.Bool
}

// New makes the middleware over the key read model.
func New(cfg Config, store projections.Store) *Auth {
	a := &Auth{cfg: cfg, store: store, origins: map[string]bool{}, limiters: map[string]*rate.Limiter{}}
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

// OriginAllowed reports whether a request's Origin (if any) is registered.
func (a *Auth) OriginAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o == "" || a.origins[strings.TrimRight(o, "/")]
}

// Origin refuses a request whose Origin header is not registered: 403, even with a valid key.
func (a *Auth) Origin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.OriginAllowed(r) {
			httpx.WriteJSON(w, http.StatusForbidden, map[string]string{"error": "origin not allowed"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Resolve finds the key of a bearer token, or false.
func (a *Auth) Resolve(r *http.Request) (projections.Key, bool) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || !strings.HasPrefix(tok, "svc_") || len(tok) < 16 || len(tok) > 256 {
		return projections.Key{}, false
	}
	k, err := projections.GetInto[projections.Key](r.Context(), a.store, projections.CollKey, Digest(tok))
	if err != nil || k.Revoked {
		return projections.Key{}, false
	}
	return k, true
}

// Require admits requests bearing a live key of one of kinds; a key of another
// kind is 403, anything else 401. Then it applies the per-credential rate limit.
func (a *Auth) Require(fam httpx.Family, kinds ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, ok := a.Resolve(r)
			if !ok {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusUnauthorized, "invalid_key", "a valid API key is required: Authorization: Bearer svc_sk_..."))
				return
			}
			allowed := false
			for _, kind := range kinds {
				allowed = allowed || k.Kind == kind
			}
			if !allowed {
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusForbidden, "permission_denied", "this key cannot be used on this route"))
				return
			}
			if wait, ok := a.allow(k.KeyID); !ok {
				w.Header().Set("Retry-After", strconv.Itoa(wait))
				httpx.WriteError(w, r, fam, httpx.Errorf(http.StatusTooManyRequests, "rate_limited", "rate limit exceeded; wait for Retry-After"))
				return
			}
			p := httpx.Principal{Principal: events.Principal{TenantID: k.TenantID, KeyID: k.KeyID}, Kind: k.Kind}
			next.ServeHTTP(w, r.WithContext(httpx.WithPrincipal(r.Context(), p)))
		})
	}
}

func (a *Auth) allow(id string) (int, bool) {
	if a.cfg.RatePerSecond <= 0 {
		return 0, true
	}
	a.mu.Lock()
	l, ok := a.limiters[id]
	if !ok {
		burst := a.cfg.Burst
		if burst <= 0 {
			burst = int(math.Max(1, a.cfg.RatePerSecond))
		}
		l = rate.NewLimiter(rate.Limit(a.cfg.RatePerSecond), burst)
		a.limiters[id] = l
	}
	a.mu.Unlock()
	res := l.Reserve()
	d := res.Delay()
	if d == 0 {
		return 0, true
	}
	res.Cancel()
	return int(math.Ceil(math.Max(d.Seconds(), float64(time.Second)/float64(time.Second)))), false
}

// Writes refuses writes with 503 engine_draining while the engine drains.
func (a *Auth) Writes(fam httpx.Family) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a.Draining() && r.Method != http.MethodGet && r.Method != http.MethodHead {
				httpx.WriteError(w, r, fam, httpx.Unavailable("engine_draining", "the engine is shutting down; retry with the same id"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

package identity

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/gateway/httpx"
)

// Throttles of the anonymous identity routes. Sign-ups, new verification
// links and password resets are bounded per client address (SourceBurst at
// once, then one every SourceEvery) and per address they mail (TargetBurst,
// then one every TargetEvery), whether or not the address has an account,
// so the answer says nothing of that. A request over either answers 429
// rate_limited with Retry-After and records and mails nothing.
const (
	SourceBurst = 20
	SourceEvery = time.Minute
	TargetBurst = 5
	TargetEvery = 10 * time.Minute
)

// bucket is a token bucket's level at a time.
type bucket struct {
	tokens float64
	at     time.Time
}

// buckets are token buckets by name: size tokens each, one more every per.
// A name not held is a full bucket; at most maxTracked are held.
type buckets struct {
	mu   sync.Mutex
	size float64
	per  time.Duration
	m    map[string]*bucket
}

func newBuckets(size int, per time.Duration) *buckets {
	return &buckets{size: float64(size), per: per, m: map[string]*bucket{}}
}

// level is b's level at now, refilled.
func (bs *buckets) level(b *bucket, now time.Time) float64 {
	return min(bs.size, b.tokens+float64(now.Sub(b.at))/float64(bs.per))
}

// take takes a token of name at now: 0, or how long until one is there
// (nothing is taken then).
func (bs *buckets) take(now time.Time, name string) time.Duration {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b, ok := bs.m[name]
	if !ok {
		if len(bs.m) >= maxTracked {
			for k, x := range bs.m {
				if bs.level(x, now) >= bs.size || len(bs.m) > maxTracked*3/4 {
					delete(bs.m, k)
				}
			}
		}
		b = &bucket{tokens: bs.size, at: now}
		bs.m[name] = b
	}
	b.tokens, b.at = bs.level(b, now), now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(bs.per))
}

// throttle takes a token of the request's client address and of the
// address it mails, or answers why not.
func (h *Handlers) throttle(r *http.Request, email string) error {
	now := time.Now() // the wall clock, as the sign-in back-off
	if wait := h.sources.take(now, clientAddr(r)); wait > 0 {
		return rateLimited(wait, "too many sign-ups, verification links and password resets from your address; wait for Retry-After")
	}
	if wait := h.targets.take(now, email); wait > 0 {
		return rateLimited(wait, "too many mails to this address; wait for Retry-After")
	}
	return nil
}

func rateLimited(wait time.Duration, msg string) error {
	return &httpx.Error{Status: http.StatusTooManyRequests, Code: commands.CodeRateLimited, RetryAfter: int(wait/time.Second) + 1, Msg: msg}
}

// Password hashing is bounded: at most HashSlots() argon2id hashes run at
// once (each takes 19 MiB and a core for tens of milliseconds), so sign-ins
// leave the other cores to trading; a request waits up to HashWait for a
// slot and is answered 503 engine_overloaded with Retry-After: 1 after it,
// having recorded nothing.
const HashWait = 2 * time.Second

// HashSlots is half the cores the engine runs on, at least one.
func HashSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

var errHashBusy = httpx.Unavailable(commands.CodeEngineOverloaded, "too many sign-ins at once; nothing was recorded; retry after the Retry-After seconds")

// hashGate holds the slots of the password hashes running.
type hashGate struct {
	slots chan struct{}
	wait  time.Duration
}

func newHashGate(n int, wait time.Duration) hashGate {
	return hashGate{slots: make(chan struct{}, n), wait: wait}
}

// run runs f, which hashes a password, in a slot: errHashBusy when none
// is free within the gate's wait, ctx's error when ctx ends first.
func (g hashGate) run(ctx context.Context, f func()) error {
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
	case <-t.C:
		return errHashBusy
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.slots }()
	f()
	return nil
}

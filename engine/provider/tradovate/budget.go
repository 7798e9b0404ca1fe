package tradovate

import (
	"context"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
	"github.com/svc/engine/events"
)

// Limits are the API's request budgets, per login. The zero value takes
// the published limits: 1000 requests a second, 5000 a minute and 5000 an
// hour on the general endpoints. The access token request comes before any
// login: the provider limits it per caller address (its endpoint limit
// counts only failed requests; its penalties hold every login's requests
// from that address) under the anonymous user-level limits, 100 a second
// and 1000 a minute and an hour, which AnonPerSecond, AnonPerMinute and
// AnonPerHour take as the engine-wide cap of one environment; each login
// name has a budget of its own within it, LoginsPerMinute (10, burst 3),
// so one login's retries never slow another's sign-in.
type Limits struct {
	PerSecond, PerMinute, PerHour             int
	LoginsPerMinute                           int
	AnonPerSecond, AnonPerMinute, AnonPerHour int
	// LockOut is how long a 429 (or a penalty demanding a captcha) stops
	// every call of the login when the answer gives no Retry-After: the
	// documentation says an hour.
	LockOut time.Duration
	// MaxPenaltyWait is the longest p-time a read waits out before it sends
	// again with the ticket; a longer one is *provider.RateLimited at once.
	// Writes never wait: they answer *provider.RateLimited. 10 s when zero.
	MaxPenaltyWait time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.PerSecond <= 0 {
		l.PerSecond = 1000
	}
	if l.PerMinute <= 0 {
		l.PerMinute = 5000
	}
	if l.PerHour <= 0 {
		l.PerHour = 5000
	}
	if l.LoginsPerMinute <= 0 {
		l.LoginsPerMinute = 10
	}
	if l.AnonPerSecond <= 0 {
		l.AnonPerSecond = 100
	}
	if l.AnonPerMinute <= 0 {
		l.AnonPerMinute = 1000
	}
	if l.AnonPerHour <= 0 {
		l.AnonPerHour = 1000
	}
	if l.LockOut <= 0 {
		l.LockOut = time.Hour
	}
	if l.MaxPenaltyWait <= 0 {
		l.MaxPenaltyWait = 10 * time.Second
	}
	return l
}

// budget is one login's share of the API: token buckets for each window,
// the lock-out after a 429, the back-off after a 423, and the penalty
// tickets (p-ticket, p-time) per endpoint: an endpoint under penalty gets
// nothing until its p-time has passed, and its next request carries the
// ticket. A budget is shared by every session of its login and by nothing
// else, so one trader's burst never spends another's. Safe for concurrent use.
type budget struct {
	limits  Limits
	windows []*rate.Limiter
	now     func() time.Time

	// shared, when set, is the budget of the caller's address this one
	// spends within: it is admitted first, and holds the penalties and
	// lock-outs the provider gives the address (a login's token requests).
	shared *budget

	mu          sync.Mutex
	lockedUntil time.Time // 429 or a captcha: nothing is sent before it
	backoff     time.Time // 423: nothing is sent before it
	pens        map[string]pen
	spent       time.Time // the last request admitted through the windows
}

// windowSpan is the longest span of any budget's windows (an hour): a
// budget none of whose windows was spent for it is full again.
const windowSpan = time.Hour

// spend waits for every window to allow one request and notes when.
func (b *budget) spend(ctx context.Context) error {
	for _, w := range b.windows {
		if err := w.Wait(ctx); err != nil {
			return &provider.RateLimited{RetryAfter: time.Second}
		}
	}
	b.mu.Lock()
	b.spent = b.now()
	b.mu.Unlock()
	return nil
}

// pen is an endpoint's penalty: its ticket and the end of its wait.
type pen struct {
	ticket string
	until  time.Time
}

func newBudget(l Limits, now func() time.Time) *budget {
	l = l.withDefaults()
	return &budget{limits: l, now: now, pens: map[string]pen{},
		windows: []*rate.Limiter{
			rate.NewLimiter(adapterkit.Every(l.PerSecond, time.Second), max(l.PerSecond/10, 10)),
			rate.NewLimiter(adapterkit.Every(l.PerMinute, time.Minute), max(l.PerMinute/10, 10)),
			rate.NewLimiter(adapterkit.Every(l.PerHour, time.Hour), max(l.PerHour/10, 10)),
		}}
}

// newAddressBudget is the engine-wide budget of the token requests of one
// environment: the anonymous user-level limits of the engine's address,
// and the penalties and lock-outs the provider gives that address.
func newAddressBudget(l Limits, now func() time.Time) *budget {
	l = l.withDefaults()
	return &budget{limits: l, now: now, pens: map[string]pen{},
		windows: []*rate.Limiter{
			rate.NewLimiter(adapterkit.Every(l.AnonPerSecond, time.Second), max(l.AnonPerSecond/10, 1)),
			rate.NewLimiter(adapterkit.Every(l.AnonPerMinute, time.Minute), max(l.AnonPerMinute/10, 1)),
			rate.NewLimiter(adapterkit.Every(l.AnonPerHour, time.Hour), max(l.AnonPerHour/10, 1)),
		}}
}

// newLoginBudget is one login name's budget of token requests, within
// the address's (shared).
func newLoginBudget(l Limits, now func() time.Time, shared *budget) *budget {
	l = l.withDefaults()
	return &budget{limits: l, now: now, pens: map[string]pen{}, shared: shared,
		windows: []*rate.Limiter{rate.NewLimiter(adapterkit.Every(l.LoginsPerMinute, time.Minute), max(l.LoginsPerMinute/3, 1))}}
}

// idle reports whether the budget is as a new one would be: no request
// through its windows for windowSpan (every window full again) and nothing
// held, so it can be dropped.
func (b *budget) idle() bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Sub(b.spent) >= windowSpan && len(b.pens) == 0 && !now.Before(b.lockedUntil) && !now.Before(b.backoff)
}

// admit waits for the budget to allow one request to endpoint and returns
// the penalty ticket the request must carry ("" for none). It refuses at
// once, sending nothing, while the login is locked out or backing off;
// an endpoint under penalty is waited out when wait is set and its p-time
// ends within MaxPenaltyWait, else refused.
func (b *budget) admit(ctx context.Context, endpoint string, wait bool) (string, error) {
	if b.shared != nil {
		ticket, err := b.shared.admit(ctx, endpoint, wait)
		if err != nil {
			return "", err
		}
		if err := b.spend(ctx); err != nil {
			return "", err
		}
		return ticket, nil
	}
	b.mu.Lock()
	now := b.now()
	locked, backoff, p := b.lockedUntil, b.backoff, b.pens[endpoint]
	b.mu.Unlock()
	if now.Before(locked) {
		return "", &provider.Banned{Until: locked}
	}
	if now.Before(backoff) {
		return "", &provider.RateLimited{RetryAfter: backoff.Sub(now)}
	}
	if d := p.until.Sub(now); d > 0 {
		if !wait || d > b.limits.MaxPenaltyWait {
			return "", &provider.RateLimited{RetryAfter: d}
		}
		if !adapterkit.Sleep(ctx, nil, d) {
			return "", &provider.RateLimited{RetryAfter: d}
		}
	}
	if err := b.spend(ctx); err != nil {
		return "", err
	}
	return p.ticket, nil
}

// observe reads an answer's status and headers: 429 locks the login out
// (Retry-After, else LockOut), 423 (the warning before a 429) backs off
// (Retry-After, else a minute). It returns their typed error, else nil.
func (b *budget) observe(status int, h http.Header) error {
	if b.shared != nil {
		return b.shared.observe(status, h)
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch status {
	case http.StatusTooManyRequests:
		b.lockedUntil = adapterkit.Later(b.lockedUntil, now.Add(adapterkit.RetryAfter(h, b.limits.LockOut)))
		return &provider.Banned{Until: b.lockedUntil}
	case http.StatusLocked:
		ra := adapterkit.RetryAfter(h, time.Minute)
		b.backoff = adapterkit.Later(b.backoff, now.Add(ra))
		return &provider.RateLimited{RetryAfter: ra}
	}
	return nil
}

// penalize records a penalty answer of endpoint: a captcha locks the login
// out (it cannot be answered from a server); a ticket holds the endpoint
// for its p-time. It returns the typed error.
func (b *budget) penalize(endpoint string, p penalty) error {
	if b.shared != nil {
		return b.shared.penalize(endpoint, p)
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.Captcha {
		b.lockedUntil = adapterkit.Later(b.lockedUntil, now.Add(b.limits.LockOut))
		return &provider.Banned{Until: b.lockedUntil}
	}
	d := seconds(p.Time)
	b.pens[endpoint] = pen{ticket: p.Ticket, until: now.Add(d)}
	return &provider.RateLimited{RetryAfter: d}
}

// served records that endpoint answered without a penalty: its ticket,
// if any, was taken.
func (b *budget) served(endpoint string) {
	if b.shared != nil {
		b.shared.served(endpoint)
		return
	}
	b.mu.Lock()
	delete(b.pens, endpoint)
	b.mu.Unlock()
}

// seconds is a p-time (seconds, possibly fractional) as a duration; at
// least one second, at most a day.
func seconds(n num) time.Duration {
	ms, err := n.dec().Mul(events.Int(1000)).Int64()
	if err != nil || ms < 1000 {
		return time.Second
	}
	return min(time.Duration(ms)*time.Millisecond, 24*time.Hour)
}

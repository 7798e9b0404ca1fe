package tradovate

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
	"github.com/svc/engine/events"
)

// Limits are the API's request limits, per login, and how long a write
// may wait for them. The zero value takes the published limits: 1000
// requests a second, 5000 a minute and 5000 an hour on the general
// endpoints. The access token request comes before any login: the provider
// limits it per caller address (its endpoint limit counts only failed
// requests; its penalties hold every login's requests from that address)
// under the anonymous user-level limits, 100 a second and 1000 a minute
// and an hour, which AnonPerSecond, AnonPerMinute and AnonPerHour take as
// the engine-wide cap of one environment; each login name has a budget of
// its own within it, LoginsPerMinute (10), so one login's retries never
// slow another's sign-in.
//
// The engine models each as a rolling window at its number (any second,
// minute or hour holds at most that many), so the engine sends none the
// provider would refuse, whether the provider's windows roll or are fixed
// to the clock: a rolling window is never looser than either. A login's
// writes take all but a twentieth of each window (readReserve), which
// stays for the reads that settle and reconcile them.
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
	// Writes never wait out a penalty: they answer *provider.RateLimited.
	// 10 s when zero.
	MaxPenaltyWait time.Duration
	// MaxWriteWait is the longest a write (a place, change or cancel) waits
	// for the windows; one that would wait longer is refused at once,
	// unsent, with *provider.RateLimited and the real wait, so a market
	// order never sits in the engine. 250 ms when zero.
	MaxWriteWait time.Duration
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
	if l.MaxWriteWait <= 0 {
		l.MaxWriteWait = 250 * time.Millisecond
	}
	return l
}

// budget is one login's share of the API: a rolling window for each of
// its limits, the lock-out after a 429, the back-off after a 423, and the
// penalty tickets (p-ticket, p-time) per endpoint: an endpoint under
// penalty gets nothing until its p-time has passed, and its next request
// carries the ticket. A read waits for the windows within its context; a
// write waits at most MaxWriteWait. A budget is shared by every session of
// its login and by nothing else, so one trader's burst never spends
// another's. Safe for concurrent use.
type budget struct {
	limits Limits
	now    func() time.Time

	// shared, when set, is the budget of the caller's address this one
	// spends within: a request is admitted by both windows or neither, and
	// shared holds the penalties and lock-outs the provider gives the
	// address (a login's token requests). Its mutex is taken after this
	// one's, never before.
	shared *budget

	mu          sync.Mutex
	windows     []*adapterkit.Window
	lockedUntil time.Time // 429 or a captcha: nothing is sent before it
	backoff     time.Time // 423: nothing is sent before it
	pens        map[string]pen
}

// pen is an endpoint's penalty: its ticket and the end of its wait.
type pen struct {
	ticket string
	until  time.Time
}

func newBudget(l Limits, now func() time.Time) *budget {
	l = l.withDefaults()
	return &budget{limits: l, now: now, pens: map[string]pen{},
		windows: []*adapterkit.Window{
			adapterkit.NewWindow(l.PerSecond, time.Second),
			adapterkit.NewWindow(l.PerMinute, time.Minute),
			adapterkit.NewWindow(l.PerHour, time.Hour),
		}}
}

// newAddressBudget is the engine-wide budget of the token requests of one
// environment: the anonymous user-level limits of the engine's address,
// and the penalties and lock-outs the provider gives that address.
func newAddressBudget(l Limits, now func() time.Time) *budget {
	l = l.withDefaults()
	return &budget{limits: l, now: now, pens: map[string]pen{},
		windows: []*adapterkit.Window{
			adapterkit.NewWindow(l.AnonPerSecond, time.Second),
			adapterkit.NewWindow(l.AnonPerMinute, time.Minute),
			adapterkit.NewWindow(l.AnonPerHour, time.Hour),
		}}
}

// newLoginBudget is one login name's budget of token requests, within
// the address's (shared).
func newLoginBudget(l Limits, now func() time.Time, shared *budget) *budget {
	l = l.withDefaults()
	return &budget{limits: l, now: now, pens: map[string]pen{}, shared: shared,
		windows: []*adapterkit.Window{adapterkit.NewWindow(l.LoginsPerMinute, time.Minute)}}
}

// idle reports whether the budget is as a new one would be: nothing left
// in its windows and nothing held, so it can be dropped.
func (b *budget) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for _, w := range b.windows {
		if !w.Empty(now) {
			return false
		}
	}
	return len(b.pens) == 0 && !now.Before(b.lockedUntil) && !now.Before(b.backoff)
}

// admit admits one request to endpoint once the budget allows it, counting
// it, and returns the penalty ticket the request must carry ("" for none).
// It refuses at once, sending nothing, while the login is locked out or
// backing off. An endpoint under penalty is waited out by a read whose
// p-time ends within MaxPenaltyWait, else refused. A write that would wait
// for the windows more than MaxWriteWait, or a request whose context ends
// before its wait, is *provider.RateLimited with that wait.
func (b *budget) admit(ctx context.Context, endpoint string, write bool) (string, error) {
	maxWait := time.Duration(-1)
	if write {
		maxWait = b.limits.MaxWriteWait
	}
	var ticket string
	err := adapterkit.Admit(ctx, maxWait, func() (wait time.Duration, err error) {
		ticket, wait, err = b.take(endpoint, write)
		return wait, err
	})
	if err != nil {
		return "", err
	}
	return ticket, nil
}

// take counts a request to endpoint now if the budget allows it (a zero
// wait, and its ticket), else returns how long it must wait, or the
// error that refuses it.
func (b *budget) take(endpoint string, write bool) (string, time.Duration, error) {
	h := b // holds the lock-outs and penalties
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shared != nil {
		h = b.shared
		h.mu.Lock()
		defer h.mu.Unlock()
	}
	now := b.now()
	p := h.pens[endpoint]
	switch d := p.until.Sub(now); {
	case now.Before(h.lockedUntil):
		return "", 0, &provider.Banned{Until: h.lockedUntil}
	case now.Before(h.backoff):
		return "", 0, &provider.RateLimited{RetryAfter: h.backoff.Sub(now)}
	case d > 0 && (write || d > b.limits.MaxPenaltyWait):
		return "", 0, &provider.RateLimited{RetryAfter: d}
	case d > 0:
		return "", d, nil
	}
	if write {
		if wait := b.keepReserve(now); wait > 0 {
			return "", wait, nil
		}
	}
	needs := make([]adapterkit.Need, 0, 4)
	for _, w := range b.windows {
		needs = append(needs, adapterkit.Need{W: w, N: 1})
	}
	if h != b {
		for _, w := range h.windows {
			needs = append(needs, adapterkit.Need{W: w, N: 1})
		}
	}
	if wait, ok := adapterkit.Take(now, needs...); !ok {
		return "", wait, nil
	}
	return p.ticket, 0, nil
}

// readReserve is the share of each of a login's windows that writes leave
// to reads (1/20): the provider counts every request of a user together,
// and a trader whose orders spent an hour's 5,000 would otherwise leave the
// engine unable, for the rest of that hour, to look up an order whose
// answer was lost, to reconcile the account or to read its snapshot.
const readReserve = 20

// keepReserve is how long a write must wait so that every window of the
// login keeps its reads' reserve after it (0: it may go now).
func (b *budget) keepReserve(now time.Time) time.Duration {
	var wait time.Duration
	for _, w := range b.windows {
		wait = max(wait, w.Wait(now, 1+w.Limit()/readReserve))
	}
	return wait
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

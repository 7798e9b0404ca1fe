package identity

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in back-off: after freeFailures failed sign-ins of an email or from a
// client address, each further one locks that name out for a period that
// doubles from firstLockout up to maxLockout; a success clears the email's
// count. The table holds at most maxTracked names (the oldest are dropped).
const (
	freeFailures = 5
	firstLockout = time.Second
	maxLockout   = 15 * time.Minute
	maxTracked   = 100000
	forgetAfter  = time.Hour
)

type failures struct {
	n     int
	until time.Time // locked out until
	last  time.Time
}

type limiter struct {
	mu sync.Mutex
	m  map[string]*failures
}

func newLimiter() *limiter { return &limiter{m: map[string]*failures{}} }

// wait is how long the longest lockout of names still runs.
func (l *limiter) wait(now time.Time, names ...string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d time.Duration
	for _, n := range names {
		if f, ok := l.m[n]; ok && f.until.After(now) && f.until.Sub(now) > d {
			d = f.until.Sub(now)
		}
	}
	return d
}

// fail counts a failed sign-in against every name.
func (l *limiter) fail(now time.Time, names ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) >= maxTracked {
		for k, f := range l.m {
			if now.Sub(f.last) > forgetAfter || len(l.m) > maxTracked*3/4 {
				delete(l.m, k)
			}
		}
	}
	for _, n := range names {
		f, ok := l.m[n]
		if !ok || now.Sub(f.last) > forgetAfter {
			f = &failures{}
			l.m[n] = f
		}
		f.n++
		f.last = now
		if over := f.n - freeFailures; over > 0 {
			d := firstLockout << min(over-1, 20)
			f.until = now.Add(min(d, maxLockout))
		}
	}
}

// succeed clears the email's count (the address keeps its own).
func (l *limiter) succeed(email, _ string) {
	l.mu.Lock()
	delete(l.m, email)
	l.mu.Unlock()
}

// clientAddr is the request's client address without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

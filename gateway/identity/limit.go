package identity

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in back-off. Failed sign-ins are counted per account and client
// address together, and per client address alone: after freeFailures
// failures of one account from one address, or addrFreeFailures failures of
// any accounts from one address, each further one locks that pair, or that
// address, out for a period that doubles from firstLockout up to maxLockout.
// A success clears its pair's count; an address keeps its own. No count is
// kept per account alone, so failures from one address never lock the
// account's owner out at another, and a few failures of other people at an
// address never lock out a correct password there. The table holds at most
// maxTracked names (the oldest are dropped).
const (
	freeFailures     = 5
	addrFreeFailures = 20
	firstLockout     = time.Second
	maxLockout       = 15 * time.Minute
	maxTracked       = 100000
	forgetAfter      = time.Hour
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

// pairName and addrName are the names a sign-in's failures count against.
func pairName(email, addr string) string { return "pair:" + email + "\x00" + addr }
func addrName(addr string) string        { return "addr:" + addr }

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

// fail counts a failed sign-in of email from addr.
func (l *limiter) fail(now time.Time, email, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) >= maxTracked {
		for k, f := range l.m {
			if now.Sub(f.last) > forgetAfter || len(l.m) > maxTracked*3/4 {
				delete(l.m, k)
			}
		}
	}
	l.count(now, pairName(email, addr), freeFailures)
	l.count(now, addrName(addr), addrFreeFailures)
}

func (l *limiter) count(now time.Time, name string, free int) {
	f, ok := l.m[name]
	if !ok || now.Sub(f.last) > forgetAfter {
		f = &failures{}
		l.m[name] = f
	}
	f.n++
	f.last = now
	if over := f.n - free; over > 0 {
		d := firstLockout << min(over-1, 20)
		f.until = now.Add(min(d, maxLockout))
	}
}

// succeed clears the count of email from addr (the address keeps its own).
func (l *limiter) succeed(email, addr string) {
	l.mu.Lock()
	delete(l.m, pairName(email, addr))
	l.mu.Unlock()
}

// clientAddr is the request's client address without its port: the TCP
// peer (RemoteAddr). X-Forwarded-For is not read: behind a proxy every
// request counts against the proxy's address.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

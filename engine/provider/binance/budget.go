package binance

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// Limits are the exchange's request limits, per credential (and one more
// set for the unsigned public reads), and how long a write may wait for
// them. The zero value takes the exchange's published USDⓈ-M limits.
//
// The engine models each as a rolling window at the published number (any
// span of the window's length holds at most that many), so a trader gets
// every request the exchange would take and none it would refuse: the
// exchange counts in windows fixed to the clock, and a rolling window is
// never looser than a fixed one (every fixed window is one of its spans).
type Limits struct {
	WeightPerMinute int // request weight in any minute: 2400
	OrdersPerMinute int // new and changed orders in any minute: 1200
	OrdersPer10s    int // in any ten seconds: 300
	// MaxWriteWait is the longest a write (a place, change or cancel) waits
	// for the limits; one that would wait longer is refused at once,
	// unsent, with *provider.RateLimited and the real wait, so a market
	// order never sits in the engine. 250 ms when zero.
	MaxWriteWait time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.WeightPerMinute <= 0 {
		l.WeightPerMinute = 2400
	}
	if l.OrdersPerMinute <= 0 {
		l.OrdersPerMinute = 1200
	}
	if l.OrdersPer10s <= 0 {
		l.OrdersPer10s = 300
	}
	if l.MaxWriteWait <= 0 {
		l.MaxWriteWait = 250 * time.Millisecond
	}
	return l
}

// budget is one credential's share of the exchange: rolling windows of its
// weight and orders at the published limits, the exchange's own count from
// the answer headers (a count at a limit pauses every call to the end of
// the exchange's window), a back-off after 429 and a stop after 418. A read
// waits for the budget within its context; a write waits at most
// MaxWriteWait. A budget is shared by every session of its credential and
// by nothing else, so one trader's burst never spends another's limits.
// Safe for concurrent use.
type budget struct {
	limits Limits
	now    func() time.Time

	mu          sync.Mutex
	weight      *adapterkit.Window
	orders1m    *adapterkit.Window
	orders10s   *adapterkit.Window
	backoff     time.Time // 429: nothing is sent before it
	bannedUntil time.Time // 418: nothing is sent before it
	pauseUntil  time.Time // the exchange's weight count reached its limit: every call waits for its window
	orderPause  time.Time // its order count reached a limit: orders wait for that window, reads go on
	sent        atomic.Int64
}

func newBudget(l Limits, now func() time.Time) *budget {
	l = l.withDefaults()
	return &budget{
		limits:    l,
		weight:    adapterkit.NewWindow(l.WeightPerMinute, time.Minute),
		orders1m:  adapterkit.NewWindow(l.OrdersPerMinute, time.Minute),
		orders10s: adapterkit.NewWindow(l.OrdersPer10s, 10*time.Second),
		now:       now,
	}
}

// admit admits a call of weight w (and one order when order) once the
// budget allows it, counting it. It refuses at once, sending nothing,
// while the credential is banned or backing off; a write that would wait
// more than MaxWriteWait, or a call whose context ends before its wait,
// is *provider.RateLimited with that wait.
func (b *budget) admit(ctx context.Context, w int, order, write bool) error {
	maxWait := time.Duration(-1)
	if write {
		maxWait = b.limits.MaxWriteWait
	}
	return adapterkit.Admit(ctx, maxWait, func() (time.Duration, error) { return b.take(w, order) })
}

// take counts a call now if the budget allows it (0), else returns how long
// it must wait (the longest of the exchange's pause and the windows), or
// the ban's or back-off's error.
func (b *budget) take(w int, order bool) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	switch {
	case now.Before(b.bannedUntil):
		return 0, &provider.Banned{Until: b.bannedUntil}
	case now.Before(b.backoff):
		return 0, &provider.RateLimited{RetryAfter: b.backoff.Sub(now)}
	}
	all := [...]adapterkit.Need{{W: b.weight, N: w}, {W: b.orders1m, N: 1}, {W: b.orders10s, N: 1}}
	needs := all[:1]
	if order {
		needs = all[:]
	}
	pause := b.pauseUntil
	if order {
		pause = adapterkit.Later(pause, b.orderPause)
	}
	if now.Before(pause) {
		wait := pause.Sub(now)
		for _, n := range needs {
			wait = max(wait, n.W.Wait(now, n.N))
		}
		return wait, nil
	}
	if wait, ok := adapterkit.Take(now, needs...); !ok {
		return wait, nil
	}
	b.sent.Add(1)
	return 0, nil
}

// observe reads an answer's headers: the exchange's count of used weight
// and orders (a count at its limit pauses the calls it counts to the
// window's end: the weight every call, an order count the orders),
// and 429/418 with Retry-After. It returns the typed error for 429 and 418.
func (b *budget) observe(status int, h http.Header) error {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if used, ok := adapterkit.HeaderInt(h, "X-Mbx-Used-Weight-1m"); ok && used >= b.limits.WeightPerMinute {
		b.pauseUntil = adapterkit.Later(b.pauseUntil, now.Truncate(time.Minute).Add(time.Minute))
	}
	// The order counts hold orders only: the lookups that settle an order
	// whose answer was lost, and the reconciliations, go on meanwhile.
	if n, ok := adapterkit.HeaderInt(h, "X-Mbx-Order-Count-1m"); ok && n >= b.limits.OrdersPerMinute {
		b.orderPause = adapterkit.Later(b.orderPause, now.Truncate(time.Minute).Add(time.Minute))
	}
	if n, ok := adapterkit.HeaderInt(h, "X-Mbx-Order-Count-10s"); ok && n >= b.limits.OrdersPer10s {
		b.orderPause = adapterkit.Later(b.orderPause, now.Truncate(10*time.Second).Add(10*time.Second))
	}
	switch status {
	case http.StatusTooManyRequests:
		ra := adapterkit.RetryAfter(h, time.Second)
		b.backoff = adapterkit.Later(b.backoff, now.Add(ra))
		return &provider.RateLimited{RetryAfter: ra}
	case http.StatusTeapot:
		until := now.Add(adapterkit.RetryAfter(h, 2*time.Minute))
		b.bannedUntil = adapterkit.Later(b.bannedUntil, until)
		return &provider.Banned{Until: b.bannedUntil}
	}
	return nil
}

// isWrite reports whether a call places, changes or cancels orders: it
// waits at most Limits.MaxWriteWait for the budget.
func isWrite(method, path string) bool {
	if method == http.MethodGet {
		return false
	}
	switch path {
	case "/fapi/v1/order", "/fapi/v1/algoOrder", "/fapi/v1/batchOrders",
		"/fapi/v1/allOpenOrders", "/fapi/v1/algoOpenOrders":
		return true
	}
	return false
}

// weightOf is the exchange's request weight of a call and whether it counts
// as an order. Unlisted calls weigh 1.
func weightOf(method, path string, q string) (int, bool) {
	switch path {
	case "/fapi/v1/order", "/fapi/v1/algoOrder":
		return 1, method == http.MethodPost || method == http.MethodPut
	case "/fapi/v1/openAlgoOrders":
		if strings.Contains(q, "symbol=") {
			return 1, false
		}
		return 40, false
	case "/fapi/v1/allAlgoOrders":
		return 5, false
	case "/fapi/v1/openOrders":
		if strings.Contains(q, "symbol=") {
			return 1, false
		}
		return 40, false
	case "/fapi/v2/account", "/fapi/v3/account", "/fapi/v2/balance", "/fapi/v3/balance",
		"/fapi/v2/positionRisk", "/fapi/v3/positionRisk", "/fapi/v1/userTrades", "/fapi/v1/accountConfig":
		return 5, false
	case "/fapi/v1/positionSide/dual", "/fapi/v1/multiAssetsMargin":
		return 30, false
	}
	return 1, false
}

// transport is the HTTP transport of one budget: every call of the library
// goes through it, so the budget sees every request and every answer.
type transport struct {
	b    *budget
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	w, order := weightOf(req.Method, req.URL.Path, req.URL.RawQuery)
	write := isWrite(req.Method, req.URL.Path)
	err := t.b.admit(req.Context(), w, order, write)
	if err == nil && write && provider.SendByPassed(req.Context(), t.b.now()) != nil {
		// Checked here, after the library signed the request and the
		// budget let it go: past this point the exchange's receive window
		// (its timestamp plus recvWindow) bounds when it can be carried out.
		err = &adapterkit.SendError{Provider: "binance", Err: provider.ErrSendByPassed}
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	req, wrote := adapterkit.TraceWrite(req)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, &adapterkit.SendError{Provider: "binance", Sent: wrote.Load(), Err: err}
	}
	if err := t.b.observe(resp.StatusCode, resp.Header); err != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode >= 500 {
		// The exchange's 5xx may carry a code ({"code":-1007}) or not;
		// either way the library would hand us its text. Say only the
		// status and, when present, the code.
		code := readCode(resp.Body)
		_ = resp.Body.Close()
		return nil, &serverError{status: resp.StatusCode, code: code}
	}
	return resp, nil
}

// serverError is an exchange 5xx: the call may or may not have been carried
// out (for a write, its status is unknown).
type serverError struct {
	status int
	code   int64
}

func (e *serverError) Error() string { return "binance: HTTP " + strconv.Itoa(e.status) }

// readCode reads the code of an error body {"code":-1007,"msg":"..."},
// keeping nothing else.
func readCode(r io.Reader) int64 {
	b, _ := io.ReadAll(io.LimitReader(r, 4096))
	s := string(b)
	i := strings.Index(s, `"code"`)
	if i < 0 {
		return 0
	}
	s = strings.TrimLeft(s[i+len(`"code"`):], " :")
	j := 0
	for j < len(s) && (s[j] == '-' || s[j] >= '0' && s[j] <= '9') {
		j++
	}
	n, _ := strconv.ParseInt(s[:j], 10, 64)
	return n
}

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

	"golang.org/x/time/rate"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// Limits are the exchange's request budgets, per credential (and one more
// for the unsigned public reads). The zero value takes the exchange's
// published USDⓈ-M limits.
type Limits struct {
	WeightPerMinute int // request weight per minute: 2400
	OrdersPerMinute int // new and changed orders per minute: 1200
	OrdersPer10s    int // per ten seconds: 300
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
	return l
}

// budget is one credential's share of the exchange: its own queue (token
// buckets) for weight and orders, the exchange's own count from the answer
// headers, a back-off after 429 and a stop after 418. A budget is shared by
// every session of its credential and by nothing else, so one trader's
// burst never spends another's limits. Safe for concurrent use.
type budget struct {
	limits Limits
	weight *rate.Limiter
	orders *rate.Limiter
	now    func() time.Time

	mu          sync.Mutex
	backoff     time.Time // 429: nothing is sent before it
	bannedUntil time.Time // 418: nothing is sent before it
	pauseUntil  time.Time // the exchange's count reached a limit: wait for its window
	sent        atomic.Int64
}

func newBudget(l Limits, now func() time.Time) *budget {
	l = l.withDefaults() // every limit positive, as adapterkit.Every needs
	return &budget{
		limits: l,
		// Bursts of a tenth of the minute's budget; the exchange's own
		// count (the headers) is the final word.
		weight: rate.NewLimiter(adapterkit.Every(l.WeightPerMinute, time.Minute), max(l.WeightPerMinute/10, 50)),
		orders: rate.NewLimiter(min(adapterkit.Every(l.OrdersPerMinute, time.Minute), adapterkit.Every(l.OrdersPer10s, 10*time.Second)), max(l.OrdersPer10s/3, 10)),
		now:    now,
	}
}

// admit waits for the budget to allow a call of weight w (and one order
// when order) and refuses at once, sending nothing, while the credential is
// banned or backing off.
func (b *budget) admit(ctx context.Context, w int, order bool) error {
	b.mu.Lock()
	now := b.now()
	banned, backoff, pause := b.bannedUntil, b.backoff, b.pauseUntil
	b.mu.Unlock()
	if now.Before(banned) {
		return &provider.Banned{Until: banned}
	}
	if now.Before(backoff) {
		return &provider.RateLimited{RetryAfter: backoff.Sub(now)}
	}
	if now.Before(pause) {
		t := time.NewTimer(pause.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if err := b.weight.WaitN(ctx, min(w, b.weight.Burst())); err != nil {
		return &provider.RateLimited{RetryAfter: time.Second}
	}
	if order {
		if err := b.orders.Wait(ctx); err != nil {
			return &provider.RateLimited{RetryAfter: time.Second}
		}
	}
	b.sent.Add(1)
	return nil
}

// observe reads an answer's headers: the exchange's count of used weight
// and orders (a count at its limit pauses the queue to the window's end),
// and 429/418 with Retry-After. It returns the typed error for 429 and 418.
func (b *budget) observe(status int, h http.Header) error {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if used, ok := adapterkit.HeaderInt(h, "X-Mbx-Used-Weight-1m"); ok && used >= b.limits.WeightPerMinute {
		b.pauseUntil = adapterkit.Later(b.pauseUntil, now.Truncate(time.Minute).Add(time.Minute))
	}
	if n, ok := adapterkit.HeaderInt(h, "X-Mbx-Order-Count-1m"); ok && n >= b.limits.OrdersPerMinute {
		b.pauseUntil = adapterkit.Later(b.pauseUntil, now.Truncate(time.Minute).Add(time.Minute))
	}
	if n, ok := adapterkit.HeaderInt(h, "X-Mbx-Order-Count-10s"); ok && n >= b.limits.OrdersPer10s {
		b.pauseUntil = adapterkit.Later(b.pauseUntil, now.Truncate(10*time.Second).Add(10*time.Second))
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
	if err := t.b.admit(req.Context(), w, order); err != nil {
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

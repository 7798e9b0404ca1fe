package adapterkit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/provider"
)

// maxRetryAfter bounds a provider's Retry-After: Binance's bans grow to
// three days; a larger or overflowing number is read as this, the longest
// wait a settlement records (providercmd.MaxRetryAfter).
const maxRetryAfter = providercmd.MaxRetryAfter * time.Second

// RetryAfter reads Retry-After in seconds (at most maxRetryAfter), or def.
func RetryAfter(h http.Header, def time.Duration) time.Duration {
	if s, ok := HeaderInt(h, "Retry-After"); ok && s >= 0 {
		return time.Duration(min(int64(s), int64(maxRetryAfter/time.Second))) * time.Second
	}
	return def
}

// HeaderInt reads a whole-number header case-insensitively (a provider may
// send X-MBX-USED-WEIGHT-1M; Go canonicalizes the name).
func HeaderInt(h http.Header, name string) (int, bool) {
	v := h.Get(name)
	if v == "" {
		for k, vs := range h {
			if strings.EqualFold(k, name) && len(vs) > 0 {
				v = vs[0]
				break
			}
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	return n, err == nil
}

// Later is the later of a and b.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TraceWrite returns req traced, and the flag the trace sets once the
// request was written in full: from then on the provider may act on it.
func TraceWrite(req *http.Request) (*http.Request, *atomic.Bool) {
	wrote := new(atomic.Bool)
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace)), wrote
}

// Dial opens a WebSocket at u through transport, reading frames of at most
// maxFrame bytes. A failure is *provider.Unavailable.
func Dial(ctx context.Context, u string, transport http.RoundTripper, maxFrame int64) (*websocket.Conn, error) {
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		return nil, provider.NewUnavailable(0, 0, CleanCause(err))
	}
	c.SetReadLimit(maxFrame)
	return c, nil
}

// CheckHTTP is nil for an empty u or an http(s) address, else the error
// "<provider>: <field> must be an http(s) address".
func CheckHTTP(provider, field, u string) error {
	return checkScheme(provider, field, u, "an http(s)", "http://", "https://")
}

// CheckWS is nil for an empty u or a ws(s) address, else the error
// "<provider>: <field> must be a ws(s) address".
func CheckWS(provider, field, u string) error {
	return checkScheme(provider, field, u, "a ws(s)", "ws://", "wss://")
}

func checkScheme(provider, field, u, kind string, schemes ...string) error {
	if u == "" {
		return nil
	}
	for _, s := range schemes {
		if strings.HasPrefix(u, s) {
			return nil
		}
	}
	return fmt.Errorf("%s: %s must be %s address", provider, field, kind)
}

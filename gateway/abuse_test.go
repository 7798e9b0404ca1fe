package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway"
	"github.com/svc/engine/gateway/auth"
	marketgw "github.com/svc/engine/gateway/market"
)

const (
	originA = "https://a.example.test"
	originB = "https://b.example.test"
)

func start(t *testing.T, configure func(*app.Config)) *apptest.Env {
	t.Helper()
	return apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		c.AllowedOrigins = originA + "," + originB
		if configure != nil {
			configure(c)
		}
	}})
}

// open sends a GET to base+path with the key (none when "") and the headers;
// the caller closes the body.
func open(t *testing.T, base, path, key string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// stream opens an SSE route and fails unless it streams; closed at cleanup.
func stream(t *testing.T, base, path, key string, headers ...string) *http.Response {
	t.Helper()
	resp := open(t, base, path, key, headers...)
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, b)
	}
	return resp
}

// refused reads an error answer and checks its status, code and Retry-After
// against the OpenAPI document.
func refused(t *testing.T, resp *http.Response, status int, code string) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d (%s)", resp.Request.URL.Path, resp.StatusCode, status, resp.Header.Get("Content-Type"))
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	apptest.ValidateResponse(t, resp.Request, resp.StatusCode, resp.Header, b)
	r := &apptest.Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
	m := r.Map(t)
	if m["code"] != code || m["error"] == "" {
		t.Fatalf("%s: %s, want code %s", resp.Request.URL.Path, b, code)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); status == http.StatusTooManyRequests && (err != nil || n < 1) {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	return m
}

// issueKey issues another Trading API key to the demo tenant.
func issueKey(t *testing.T, e *apptest.Env) string {
	t.Helper()
	key := auth.NewKey("svc_sk_")
	eng := e.App.Engine
	res, err := eng.Tenant(context.Background(), app.DemoTenant, eng.Envelope(events.Principal{System: "test"}, "",
		&tenantcmd.IssueKey{KeyID: ulid.Make().String(), Digest: auth.Digest(key), Kind: "trading", Prefix: key[:11]}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.App.Deps.Settle(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	return key
}

func quote(e *apptest.Env, bid, ask string) {
	e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal(bid), Ask: events.MustDecimal(ask), Last: events.MustDecimal(bid), At: time.Now()})
}

func TestOrderBodiesAreCheckedBeforeDecoding(t *testing.T) {
	e := start(t, nil)
	quote(e, "100", "101")
	order := func(id string) []byte {
		return []byte(`{"clientOrderId":"` + id + `","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"1"}`)
	}
	want := func(r *apptest.Resp, status int, code, msg string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
		}
		if m := r.Map(t); m["code"] != code || !strings.Contains(m["error"].(string), msg) {
			t.Fatalf("%s, want %s %q", r.Body, code, msg)
		}
	}

	// Invalid UTF-8 anywhere is refused, where encoding/json would have made it U+FFFD.
	want(e.Post("/api/trading/order", order("bad-1\xff\xfe")), 400, "invalid_request", "not valid UTF-8")
	want(e.Post("/api/trading/order", order("bad-2\xed\xa0\x80")), 400, "invalid_request", "not valid UTF-8")

	// Deep nesting is refused before the decoder runs, and fast.
	for _, body := range [][]byte{
		[]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)),
		[]byte(`{"clientOrderId":` + strings.Repeat(`{"a":`, 10000)),
	} {
		began := time.Now()
		want(e.Post("/api/trading/order", body), 400, "invalid_request", "more than 32 deep")
		if d := time.Since(began); d > time.Second {
			t.Fatalf("a deep body took %v", d)
		}
	}

	// Nothing was placed; the same order in valid UTF-8 is.
	if r := e.Post("/api/trading/order", order("good-1")); r.Status != 200 {
		t.Fatalf("valid order: %d %s", r.Status, r.Body)
	}
	orders := e.Get("/api/account/orders").Map(t)["orders"].([]any)
	if len(orders) != 1 || orders[0].(map[string]any)["clientOrderId"] != "good-1" {
		t.Fatalf("orders %v", orders)
	}
}

func TestConcurrentStreamsArePerCredential(t *testing.T) {
	e := start(t, nil)
	for i := 0; i < 5; i++ {
		e.App.Sim.Step()
	}
	e.App.Market.Bars.Live.Flush()
	paths := []string{
		"/api/account/stream",
		"/api/market/stream?instrument=BTC-PERP&tf=1m",
		"/api/market/streams?subs=BTC-PERP~1m,ETH-PERP~5m",
		"/api/news/stream",
		"/api/calendar/stream",
	}
	var first *http.Response
	for i := 0; i < auth.DefaultMaxStreams; i++ {
		resp := stream(t, e.URL, paths[i%len(paths)], e.Key)
		if i == 0 {
			first = resp
		}
	}
	// Every stream route refuses the next one of this key, before it streams.
	for _, p := range paths {
		m := refused(t, open(t, e.URL, p, e.Key), http.StatusTooManyRequests, "too_many_streams")
		if m["params"].(map[string]any)["limit"] != float64(auth.DefaultMaxStreams) {
			t.Fatalf("params %v", m["params"])
		}
	}
	// Other requests of the key are served.
	if r := e.Get("/api/account/list"); r.Status != 200 {
		t.Fatalf("a plain request at the stream limit: %d", r.Status)
	}
	// Another key streams, and so does a browser origin.
	other := issueKey(t, e)
	stream(t, e.URL, "/api/account/stream", other)
	stream(t, e.URL, "/api/market/stream?instrument=BTC-PERP&tf=1m", "", "Origin", originA)

	// Closing one (a detached account stream) frees its slot, and only one.
	first.Body.Close()
	var reopened atomic.Pointer[http.Response]
	apptest.WaitFor(t, 5*time.Second, func() error {
		resp := open(t, e.URL, "/api/market/stream?instrument=BTC-PERP&tf=1m", e.Key)
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		reopened.Store(resp)
		return nil
	})
	t.Cleanup(func() { reopened.Load().Body.Close() })
	refused(t, open(t, e.URL, "/api/news/stream", e.Key), http.StatusTooManyRequests, "too_many_streams")
}

// ENGINE_STREAMS_PER_KEY sets the bound: the stream after it is refused,
// naming it.
func TestStreamsPerKeyIsASetting(t *testing.T) {
	e := start(t, func(c *app.Config) { c.StreamsPerKey = 2 })
	stream(t, e.URL, "/api/account/stream", e.Key)
	stream(t, e.URL, "/api/news/stream", e.Key)
	m := refused(t, open(t, e.URL, "/api/account/stream", e.Key), http.StatusTooManyRequests, "too_many_streams")
	if m["params"].(map[string]any)["limit"] != float64(2) {
		t.Fatalf("params %v", m["params"])
	}
}

func TestBrowserOriginsAreRateLimitedPerOrigin(t *testing.T) {
	const burst = 5
	e := start(t, func(c *app.Config) { c.RateLimit, c.RateBurst = 1, burst })
	served, limited := 0, 0
	for i := 0; i < 3*burst; i++ {
		path := "/api/market/time"
		if i%2 == 1 {
			path = "/api/news"
		}
		resp := open(t, e.URL, path, "", "Origin", originA)
		switch resp.StatusCode {
		case http.StatusOK:
			served++
			resp.Body.Close()
		case http.StatusTooManyRequests:
			limited++
			refused(t, resp, http.StatusTooManyRequests, "rate_limited")
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if served < burst || served > burst+2 || limited == 0 {
		t.Fatalf("served %d, limited %d of %d from one origin, burst %d", served, limited, 3*burst, burst)
	}
	// The same origin written with a trailing slash is the same credential.
	refused(t, open(t, e.URL, "/api/market/time", "", "Origin", originA+"/"), http.StatusTooManyRequests, "rate_limited")
	// Another origin, and a key, are served meanwhile.
	for _, r := range []*http.Response{
		open(t, e.URL, "/api/market/time", "", "Origin", originB),
		open(t, e.URL, "/api/news", "", "Origin", originB),
		open(t, e.URL, "/api/market/time", e.Key),
	} {
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", r.Request.Header.Get("Origin"), r.Request.URL.Path, r.StatusCode)
		}
	}
}

// serveShort serves the app's deps with short write and read timeouts, the
// market routes and /test/flood, which writes until a write fails and sends
// the failure on flooded.
func serveShort(t *testing.T, e *apptest.Env, timeout time.Duration, flooded chan<- error) string {
	t.Helper()
	a := e.App
	areas := gateway.Areas{Market: &marketgw.Market{Catalog: a.Engine.Catalog(), Products: market.Products(), Feed: a.Market.Feed,
		Bars: a.Market.Bars, Futures: a.Market.Futures, Now: a.Now, Done: a.Hub.Done()}}
	flood := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				flooded <- err
				return
			}
		}
	})
	outer := http.NewServeMux()
	outer.Handle("/", gateway.Handler(a.Deps, gateway.Options{WriteTimeout: timeout, Areas: areas}))
	outer.Handle("/test/flood", gateway.BoundWrites(timeout, flood))
	srv := app.NewServer(outer)
	srv.ReadTimeout = timeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestWriteDeadlineSparesStreams(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := start(t, nil)
	flooded := make(chan error, 1)
	addr := serveShort(t, e, timeout, flooded)

	// A client that never reads its answer holds the handler no longer than the write timeout.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /test/flood HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-flooded:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the write failed with %v, not the deadline", err)
		}
	case <-time.After(10 * time.Second):
		c.Close()
		t.Fatal("a response to a client that does not read was still writing after 10 s")
	}

	// A stream outlives the write timeout (and the read timeout).
	for i := 0; i < 5; i++ {
		e.App.Sim.Step()
	}
	e.App.Market.Bars.Live.Flush()
	opened := time.Now()
	resp := stream(t, "http://"+addr, "/api/market/stream?instrument=BTC-PERP&tf=1m", e.Key)
	bars := make(chan time.Time, 1024)
	go func() {
		defer close(bars)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: bar" {
				bars <- time.Now()
			}
		}
	}()
	apptest.WaitFor(t, 10*time.Second, func() error {
		e.App.Sim.Step()
		e.App.Market.Bars.Live.Flush()
		for {
			select {
			case at, ok := <-bars:
				if !ok {
					return errors.New("the stream ended")
				}
				if at.Sub(opened) > 4*timeout {
					return nil
				}
			default:
				return fmt.Errorf("no bar yet %v after the stream opened", time.Since(opened))
			}
		}
	})
}

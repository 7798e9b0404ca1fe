package account_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/projections"
)

func buy(e *apptest.Env, t *testing.T, id string) {
	t.Helper()
	r := e.Post("/api/trading/order", map[string]any{"clientOrderId": id, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.1"})
	if r.Status != 200 {
		t.Fatalf("order %d %s", r.Status, r.Body)
	}
}

func TestAccountReads(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	list := e.Get("/api/account/list").Map(t)["accounts"].([]any)
	a := list[0].(map[string]any)
	if len(list) != 1 || a["accountId"] != e.Accounts[0].AccountID || a["clock"] != "engine" || a["positionModel"] != "net" || a["currency"] != "USD" {
		t.Fatalf("list %v", list)
	}
	buy(e, t, "a1")
	buy(e, t, "a2")
	snap := e.Get("/api/account/snapshot").Map(t)
	sum := snap["summary"].(map[string]any)
	if snap["clock"] != "engine" || sum["balance"] != "50000" || len(snap["positions"].([]any)) != 1 {
		t.Fatalf("snapshot %v", snap)
	}
	if p := snap["positions"].([]any)[0].(map[string]any); p["quantity"] != "0.2" || p["side"] != "long" {
		t.Fatalf("position %v", p)
	}
	if pnl := e.Get("/api/account/pnl-history").Map(t); len(pnl["days"].([]any)) != 1 {
		t.Fatalf("pnl %v", pnl)
	}
	ins := e.Get("/api/account/instruments").Map(t)
	syms := ins["symbols"].([]any)
	var sim, fut bool
	for _, s := range syms {
		m := s.(map[string]any)
		sim = sim || (m["symbol"] == "BTC-PERP" && m["simulated"] == true && m["tradable"] == true && m["notTradableReason"] == nil)
		// Futures are listed, not tradable without a source of the trader's own, and say what connects one.
		fut = fut || (m["symbol"] == "ES" && m["type"] == "future" && m["tradable"] == false &&
			strings.Contains(m["notTradableReason"].(string), "Connect"))
	}
	if !sim || !fut || ins["account"] != e.Accounts[0].AccountNumber {
		t.Fatalf("instruments %v", ins)
	}
	if r := e.Get("/api/account/orders?limit=0"); r.Status != 400 {
		t.Fatalf("limit=0 answered %d", r.Status)
	}
	if r := e.Get("/api/account/orders?state=weird"); r.Status != 400 {
		t.Fatalf("state=weird answered %d", r.Status)
	}
	if r := e.Get("/api/account/fills?limit=1"); len(r.Map(t)["fills"].([]any)) != 1 {
		t.Fatalf("fills limit %s", r.Body)
	}
}

func TestCredentials(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) { c.AllowedOrigins = "https://app.example.com" }})
	for name, key := range map[string]string{
		"missing":   "-",
		"malformed": "not-a-key",
		"unknown":   "svc_sk_" + strings.Repeat("0", 48),
	} {
		if r := e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: key}); r.Status != 401 || r.Map(t)["error"] == nil {
			t.Fatalf("%s key: %d %s", name, r.Status, r.Body)
		}
	}
	r := e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Headers: map[string]string{"Origin": "https://evil.example"}})
	if m := r.Map(t); r.Status != 403 || len(m) != 3 || m["code"] != "origin_not_allowed" || !strings.HasPrefix(m["error"].(string), "origin not allowed") ||
		m["requestId"] != r.Header.Get("X-Request-Id") {
		t.Fatalf("bad origin: %d %s", r.Status, r.Body)
	}
	if r := e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Headers: map[string]string{"Origin": "https://app.example.com"}}); r.Status != 200 {
		t.Fatalf("allowed origin: %d %s", r.Status, r.Body)
	}
	// A revoked key stops working at once and stays revoked across a restart.
	k, err := projections.GetInto[projections.Key](context.Background(), e.App.Store, projections.CollKey, auth.Digest(e.Key))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.App.Engine.Tenant(context.Background(), k.TenantID, e.App.Engine.Envelope(events.Principal{System: "test"}, "", &tenantcmd.RevokeKey{KeyID: k.KeyID}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.App.Deps.Settle(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	if r := e.Get("/api/account/list"); r.Status != 401 {
		t.Fatalf("revoked key: %d", r.Status)
	}
}

func TestRateLimitAndDrain(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) { c.RateLimit, c.RateBurst = 1, 2 }})
	var limited *apptest.Resp
	for i := 0; i < 5 && limited == nil; i++ {
		if r := e.Get("/api/account/list"); r.Status == 429 {
			limited = r
		}
	}
	if limited == nil || limited.Header.Get("Retry-After") == "" {
		t.Fatalf("no 429 with Retry-After")
	}
	e2 := apptest.Start(t, apptest.Options{ManualFeed: true})
	e2.App.Deps.Auth.Drain()
	r := e2.Post("/api/trading/order", map[string]any{"clientOrderId": "d1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "1"})
	if r.Status != 503 || r.Map(t)["code"] != "engine_draining" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("draining write: %d %s", r.Status, r.Body)
	}
	if r := e2.Get("/api/account/list"); r.Status != 200 {
		t.Fatalf("draining read: %d", r.Status)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	buy(e, t, "m1")
	if r := e.Do(apptest.Req{Method: "GET", Path: "/healthz", Key: "-"}); r.Status != 200 {
		t.Fatalf("healthz %d", r.Status)
	}
	if r := e.Do(apptest.Req{Method: "GET", Path: "/readyz", Key: "-"}); r.Status != 200 {
		t.Fatalf("readyz %d", r.Status)
	}
	r := e.Do(apptest.Req{Method: "GET", Path: "/metrics", Key: "-"})
	for _, m := range []string{"engine_commit_latency_seconds_bucket", `engine_commands_total{aggregate="account",outcome="committed"}`, "engine_sse_subscribers", "engine_projection_lag"} {
		if !strings.Contains(string(r.Body), m) {
			t.Fatalf("metrics lack %s", m)
		}
	}
}

type frame struct {
	event string
	id    string
	data  map[string]any
}

// readFrames reads SSE events from the stream until n events arrived.
func readFrames(t *testing.T, sc *bufio.Scanner, n int) []frame {
	t.Helper()
	var out []frame
	var cur frame
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatal(err)
			}
		case line == "" && cur.event == "account":
			out = append(out, cur)
			cur = frame{}
		case line == "":
			cur = frame{} // other event names (lock) are not frames
		}
	}
	return out
}

func TestStreamSendsRevisionedFrames(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	req, _ := http.NewRequest("GET", e.URL+"/api/account/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	apptest.ValidateResponse(t, req, resp.StatusCode, resp.Header, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %s", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	first := readFrames(t, sc, 1)[0]
	if first.event != "account" || first.id != fmt.Sprint(first.data["revision"]) {
		t.Fatalf("first frame %+v", first)
	}
	last, _ := strconv.Atoi(first.id)
	for i := 0; i < 3; i++ {
		buy(e, t, fmt.Sprintf("s%d", i))
		f := readFrames(t, sc, 1)[0]
		rev, _ := strconv.Atoi(f.id)
		if f.event != "account" || rev <= last {
			t.Fatalf("frame %d: event %s revision %d after %d", i, f.event, rev, last)
		}
		if got := f.data["positions"].([]any)[0].(map[string]any)["quantity"]; got != fmt.Sprintf("0.%d", i+1) {
			t.Fatalf("frame %d shows quantity %v", i, got)
		}
		last = rev
	}
}

func TestSlowSubscriberGetsNewestFrameOnly(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	id := e.Accounts[0].AccountID
	sub, cancel, err := e.App.Hub.Subscribe(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	for i := 0; i < 10; i++ {
		buy(e, t, fmt.Sprintf("c%d", i))
	}
	snap := e.Get("/api/account/snapshot").Map(t)
	want := fmt.Sprint(snap["revision"])
	var got []string
	apptest.WaitFor(t, 5*time.Second, func() error {
		for _, p := range sub.Take() {
			if p.Name == "account" {
				got = append(got, p.ID)
			}
		}
		if len(got) == 0 || got[len(got)-1] != want {
			return fmt.Errorf("frames %v, want last %s", got, want)
		}
		return nil
	})
	if len(got) > 3 {
		t.Fatalf("a subscriber that did not read got a backlog of %d frames", len(got))
	}
}

// Orders and fills page newest first through nextCursor: the pages together
// are the whole listing once each, the last page says so, and a cursor the
// listing did not give is refused; over memory and PostgreSQL read models.
func TestOrdersAndFillsPageThroughCursors(t *testing.T) {
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			pagesThroughCursors(t, apptest.Start(t, apptest.Options{ManualFeed: true, Postgres: store == "postgres"}))
		})
	}
}

func pagesThroughCursors(t *testing.T, e *apptest.Env) {
	for i := range 5 {
		buy(e, t, fmt.Sprintf("m%d", i))
	}
	for i := range 3 {
		r := e.Post("/api/trading/order", map[string]any{"clientOrderId": fmt.Sprintf("l%d", i), "instrument": "BTC-PERP", "side": "buy",
			"orderType": "limit", "limitPrice": "1000", "quantity": "0.1", "timeInForce": "gtc"})
		if r.Status != 200 {
			t.Fatalf("limit order %d %s", r.Status, r.Body)
		}
	}
	type page struct {
		Orders []struct {
			ClientOrderID string `json:"clientOrderId"`
			State         string `json:"state"`
		} `json:"orders"`
		Fills []struct {
			FillID string `json:"fillId"`
		} `json:"fills"`
		NextCursor *string `json:"nextCursor"`
	}
	// walk reads every page of path at limit n and returns the ids in order and the page sizes.
	walk := func(path string, n int) (ids, sizes []string) {
		t.Helper()
		cursor := ""
		for range 20 {
			u := fmt.Sprintf("%s%slimit=%d", path, map[bool]string{true: "&", false: "?"}[strings.Contains(path, "?")], n)
			if cursor != "" {
				u += "&cursor=" + cursor
			}
			r := e.Get(u)
			var p page
			r.JSON(t, &p)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", u, r.Status, r.Body)
			}
			for _, o := range p.Orders {
				ids = append(ids, o.ClientOrderID+":"+o.State)
			}
			for _, f := range p.Fills {
				ids = append(ids, f.FillID)
			}
			sizes = append(sizes, strconv.Itoa(len(p.Orders)+len(p.Fills)))
			if p.NextCursor == nil {
				return ids, sizes
			}
			cursor = *p.NextCursor
		}
		t.Fatalf("%s: no last page in 20", path)
		return nil, nil
	}
	whole, _ := walk("/api/account/orders", 500)
	want := []string{"l2:working", "l1:working", "l0:working", "m4:filled", "m3:filled", "m2:filled", "m1:filled", "m0:filled"}
	if strings.Join(whole, " ") != strings.Join(want, " ") {
		t.Fatalf("all orders, newest first: %v, want %v", whole, want)
	}
	if ids, sizes := walk("/api/account/orders", 3); strings.Join(ids, " ") != strings.Join(want, " ") || strings.Join(sizes, ",") != "3,3,2" {
		t.Fatalf("orders by 3: %v in pages %v", ids, sizes)
	}
	if ids, sizes := walk("/api/account/orders?state=open", 2); strings.Join(ids, " ") != strings.Join(want[:3], " ") || strings.Join(sizes, ",") != "2,1" {
		t.Fatalf("open orders by 2: %v in pages %v", ids, sizes)
	}
	// A page that ends exactly at the listing's end says it is the last.
	if ids, sizes := walk("/api/account/orders?state=closed", 5); len(ids) != 5 || strings.Join(sizes, ",") != "5" {
		t.Fatalf("closed orders by 5: %v in pages %v", ids, sizes)
	}
	fills, _ := walk("/api/account/fills", 1000)
	paged, sizes := walk("/api/account/fills", 2)
	if len(fills) != 5 || strings.Join(paged, " ") != strings.Join(fills, " ") || strings.Join(sizes, ",") != "2,2,1" {
		t.Fatalf("fills by 2: %v in pages %v, want %v", paged, sizes, fills)
	}

	var first page
	e.Get("/api/account/fills?limit=1").JSON(t, &first)
	for _, c := range []string{*first.NextCursor, "zzzz", "", "%00", strings.Repeat("A", 400)} {
		r := e.Get("/api/account/orders?cursor=" + c)
		m := r.Map(t)
		params, _ := m["params"].(map[string]any)
		if r.Status != 400 || m["code"] != "invalid_cursor" || params["field"] != "cursor" {
			t.Fatalf("orders with cursor %q: %d %s", c, r.Status, r.Body)
		}
	}
}

package trading_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

func order(id, side, typ, qty string, extra ...any) map[string]any {
	m := map[string]any{"clientOrderId": id, "instrument": "BTC-PERP", "side": side, "orderType": typ, "quantity": qty}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func orderOf(t *testing.T, r *apptest.Resp) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return r.Map(t)["order"].(map[string]any)
}

func wantError(t *testing.T, r *apptest.Resp, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	m := r.Map(t)
	if m["error"] == nil || m["error"] == "" {
		t.Fatalf("no error sentence: %s", r.Body)
	}
	if code != "" && m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.Body)
	}
	return m
}

// quote publishes a touch for BTC-PERP into the simulated feed.
func quote(e *apptest.Env, bid, ask string) {
	e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal(bid), Ask: events.MustDecimal(ask), Last: events.MustDecimal(bid), At: time.Now()})
}

func TestOrderLifecycle(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	quote(e, "100", "101")

	o := orderOf(t, e.Post("/api/trading/order", order("m1", "buy", "market", "2")))
	if o["state"] != "filled" || o["avgFillPrice"] != "101" || o["filledQuantity"] != "2" || o["timeInForce"] != "day" {
		t.Fatalf("market order %v", o)
	}
	// Numbers are accepted exactly, never through a float.
	o = orderOf(t, e.Post("/api/trading/order", map[string]any{"clientOrderId": "l1", "instrument": "BTC-PERP", "side": "sell", "orderType": "limit", "quantity": 0.1, "limitPrice": "120.5", "timeInForce": "gtc"}))
	if o["state"] != "working" || o["quantity"] != "0.1" || o["limitPrice"] != "120.5" {
		t.Fatalf("limit order %v", o)
	}
	limitID := o["brokerOrderId"].(string)

	// The touch crosses: the reactor fills the resting order at the bid.
	quote(e, "121", "122")
	apptest.WaitFor(t, 5*time.Second, func() error {
		os := e.Get("/api/account/orders?state=closed").Map(t)["orders"].([]any)
		for _, x := range os {
			if x.(map[string]any)["brokerOrderId"] == limitID && x.(map[string]any)["state"] == "filled" {
				return nil
			}
		}
		return fmt.Errorf("limit not filled yet")
	})
	fills := e.Get("/api/account/fills").Map(t)["fills"].([]any)
	if len(fills) != 2 || fills[0].(map[string]any)["price"] != "121" {
		t.Fatalf("fills %v", fills)
	}

	// Replace and cancel a resting order.
	o = orderOf(t, e.Post("/api/trading/order", order("l2", "buy", "limit", "1", "limitPrice", "90")))
	id := o["brokerOrderId"].(string)
	o = orderOf(t, e.Post("/api/trading/replace", map[string]any{"brokerOrderId": id, "limitPrice": "95", "quantity": "3"}))
	if o["limitPrice"] != "95" || o["quantity"] != "3" || o["state"] != "working" {
		t.Fatalf("replaced %v", o)
	}
	o = orderOf(t, e.Post("/api/trading/cancel", map[string]any{"brokerOrderId": id}))
	if o["state"] != "canceled" {
		t.Fatalf("canceled %v", o)
	}
	wantError(t, e.Post("/api/trading/cancel", map[string]any{"brokerOrderId": id}), 404, "not_found")

	// Close part, reverse, flatten.
	o = orderOf(t, e.Post("/api/trading/close", map[string]any{"instrument": "BTC-PERP", "quantity": "0.9"}))
	if o["reduceOnly"] != true || o["state"] != "filled" || o["side"] != "sell" {
		t.Fatalf("close %v", o)
	}
	o = orderOf(t, e.Post("/api/trading/reverse", map[string]any{"instrument": "BTC-PERP", "clientOrderId": "rv1"}))
	if o["quantity"] != "2" || o["side"] != "sell" {
		t.Fatalf("reverse %v", o)
	}
	wantError(t, e.Post("/api/trading/reverse", map[string]any{"instrument": "BTC-PERP", "clientOrderId": "rv1"}), 409, "idempotency_conflict")
	orderOf(t, e.Post("/api/trading/order", order("l3", "buy", "limit", "1", "limitPrice", "50")))
	r := e.Post("/api/trading/flatten", nil)
	if r.Status != 200 {
		t.Fatalf("flatten %d %s", r.Status, r.Body)
	}
	fl := r.Map(t)
	if len(fl["canceled"].([]any)) != 1 || len(fl["orders"].([]any)) != 1 || len(fl["unclosed"].([]any)) != 0 {
		t.Fatalf("flatten %v", fl)
	}
	snap := e.Get("/api/account/snapshot").Map(t)
	if len(snap["positions"].([]any)) != 0 || len(snap["orders"].([]any)) != 0 {
		t.Fatalf("after flatten %v", snap)
	}
	wantError(t, e.Post("/api/trading/close", map[string]any{"instrument": "BTC-PERP"}), 422, "position_not_closable")
}

func TestRepeatedClientOrderIDNeverPlacesTwice(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	first := orderOf(t, e.Post("/api/trading/order", order("dup", "buy", "market", "1")))
	for i := 0; i < 3; i++ {
		m := wantError(t, e.Post("/api/trading/order", order("dup", "buy", "market", "1")), 409, "idempotency_conflict")
		if m["params"].(map[string]any)["brokerOrderId"] != first["brokerOrderId"] {
			t.Fatalf("conflict names %v", m)
		}
	}
	e = e.Restart()
	wantError(t, e.Post("/api/trading/order", order("dup", "sell", "market", "5")), 409, "idempotency_conflict")
	if os := e.Get("/api/account/orders").Map(t)["orders"].([]any); len(os) != 1 {
		t.Fatalf("orders after repeats %v", os)
	}
}

func TestRefusalsRecordNothing(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	cases := []struct {
		name   string
		body   any
		ctype  string
		status int
		code   string
	}{
		{"malformed JSON", `{"clientOrderId":`, "application/json", 400, "invalid_request"},
		{"unknown field", `{"clientOrderId":"x","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"1","leverage":5}`, "application/json", 400, "invalid_request"},
		{"quantity not a decimal", `{"clientOrderId":"x","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"1e"}`, "application/json", 400, "invalid_request"},
		{"wrong content type", `{}`, "text/plain", 415, ""},
		{"body too large", `{"clientOrderId":"` + strings.Repeat("x", 70000) + `"}`, "application/json", 413, ""},
		{"bad side", order("x1", "long", "market", "1"), "", 422, "invalid_request"},
		{"bad type", order("x2", "buy", "iceberg", "1"), "", 422, "invalid_request"},
		{"limit without price", order("x3", "buy", "limit", "1"), "", 422, "invalid_request"},
		{"instrument not permitted", map[string]any{"clientOrderId": "x4", "instrument": "DOGE-PERP", "side": "buy", "orderType": "market", "quantity": "1"}, "", 422, "instrument_not_permitted"},
		{"quantity above limit", order("x5", "buy", "market", "1000"), "", 422, "order_quantity_above_limit"},
		{"futures without a source", map[string]any{"clientOrderId": "x6", "instrument": "ES", "side": "buy", "orderType": "market", "quantity": "1"}, "", 503, "feed_requires_connection"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := apptest.Req{Method: "POST", Path: "/api/trading/order", Body: tc.body}
			if tc.ctype != "" {
				req.Headers = map[string]string{"Content-Type": tc.ctype}
			}
			r := e.Do(req)
			m := wantError(t, r, tc.status, tc.code)
			if safe := commands.RetrySafe(commands.Code(tc.code)); tc.code != "" && (r.Header.Get("Retry-After") != "") != safe {
				t.Fatalf("%d %s with Retry-After %q: the catalogue says retry-safe is %v", tc.status, tc.code, r.Header.Get("Retry-After"), safe)
			}
			if tc.code == "order_quantity_above_limit" && m["params"].(map[string]any)["limit"] != "100" {
				t.Fatalf("params %v", m["params"])
			}
		})
	}
	if os := e.Get("/api/account/orders").Map(t)["orders"].([]any); len(os) != 0 {
		t.Fatalf("refusals recorded orders: %v", os)
	}
}

func TestSelectors(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true, DemoAccounts: 2})
	second := e.Accounts[1].AccountNumber
	orderOf(t, e.Post("/api/trading/order?broker=paper&account="+second, order("s1", "buy", "market", "1")))
	if os := e.Get("/api/account/orders?account=" + second).Map(t)["orders"].([]any); len(os) != 1 {
		t.Fatalf("second account orders %v", os)
	}
	if os := e.Get("/api/account/orders").Map(t)["orders"].([]any); len(os) != 0 {
		t.Fatalf("default account got the order: %v", os)
	}
	wantError(t, e.Post("/api/trading/order?broker=nope", order("s2", "buy", "market", "1")), 400, "")
	wantError(t, e.Post("/api/trading/order?account=PA999999", order("s3", "buy", "market", "1")), 400, "")
	wantError(t, e.Get("/api/account/orders?broker="), 400, "")
}

func TestActionsAdvise(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	r := e.Get("/api/trading/actions?instrument=BTC-PERP&side=buy&orderType=market&quantity=1")
	if m := r.Map(t); m["allowed"] != true || len(m["refusals"].([]any)) != 0 {
		t.Fatalf("actions %s", r.Body)
	}
	r = e.Get("/api/trading/actions?instrument=BTC-PERP&side=buy&orderType=market&quantity=500")
	m := r.Map(t)
	refs := m["refusals"].([]any)
	if m["allowed"] != false || len(refs) != 1 || refs[0].(map[string]any)["code"] != "order_quantity_above_limit" {
		t.Fatalf("actions %s", r.Body)
	}
	if os := e.Get("/api/account/orders").Map(t)["orders"].([]any); len(os) != 0 {
		t.Fatalf("advice placed an order: %v", os)
	}
}

func TestDayOrdersExpireAfterMidnightUTC(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 2, 23, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Now: clock})
	quote(e, "100", "101")
	day := orderOf(t, e.Post("/api/trading/order", order("d1", "buy", "limit", "1", "limitPrice", "90")))
	gtc := orderOf(t, e.Post("/api/trading/order", order("g1", "buy", "limit", "1", "limitPrice", "90", "timeInForce", "gtc")))
	e.App.Engine.ExpireDayOrders(context.Background())
	if os := e.Get("/api/account/orders?state=open").Map(t)["orders"].([]any); len(os) != 2 {
		t.Fatalf("before midnight %v", os)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	e.App.Engine.ExpireDayOrders(context.Background())
	apptest.WaitFor(t, 5*time.Second, func() error {
		os := e.Get("/api/account/orders?state=open").Map(t)["orders"].([]any)
		if len(os) != 1 || os[0].(map[string]any)["brokerOrderId"] != gtc["brokerOrderId"] {
			return fmt.Errorf("open after midnight %v", os)
		}
		return nil
	})
	closed := e.Get("/api/account/orders?state=closed").Map(t)["orders"].([]any)
	if len(closed) != 1 || closed[0].(map[string]any)["brokerOrderId"] != day["brokerOrderId"] || closed[0].(map[string]any)["state"] != "canceled" {
		t.Fatalf("closed %v", closed)
	}
}

func TestBoundsNameTheField(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	quote(e, "100", "101")
	params := func(m map[string]any) map[string]any { return m["params"].(map[string]any) }

	for name, coid := range map[string]string{"NUL": "a\u0000b", "ESC": "a\u001b[31m", "bidi override": "a\u202eb", "65 characters": strings.Repeat("x", 65), "space": "a b"} {
		t.Run("clientOrderId "+name, func(t *testing.T) {
			m := wantError(t, e.Post("/api/trading/order", order(coid, "buy", "market", "1")), 400, "invalid_request")
			if params(m)["field"] != "clientOrderId" {
				t.Fatalf("params %v", m["params"])
			}
		})
	}
	m := wantError(t, e.Post("/api/trading/order", order("t1", "buy", "limit", "1", "limitPrice", "100.25")), 422, "invalid_request")
	if p := params(m); p["field"] != "limitPrice" || p["tickSize"] != "0.5" {
		t.Fatalf("off-tick params %v", p)
	}
	m = wantError(t, e.Post("/api/trading/order", order("t2", "buy", "market", "0.0005")), 422, "invalid_request")
	if p := params(m); p["field"] != "quantity" || p["lotStep"] != "0.001" || p["minQuantity"] != "0.001" {
		t.Fatalf("off-lot params %v", p)
	}
	if os := e.Get("/api/account/orders").Map(t)["orders"].([]any); len(os) != 0 {
		t.Fatalf("refusals recorded orders: %v", os)
	}

	info := e.Get("/api/market/symbol-info?symbol=BTC-PERP").Map(t)
	if info["lotStep"] != "0.001" || info["minQuantity"] != "0.001" || info["priceFormat"].(map[string]any)["tickSize"] != "0.5" {
		t.Fatalf("symbol-info %v", info)
	}
}

func TestCloseAndFlattenTakeAClientOrderID(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	quote(e, "100", "101")
	orderOf(t, e.Post("/api/trading/order", order("b1", "buy", "market", "2")))

	o := orderOf(t, e.Post("/api/trading/close", map[string]any{"instrument": "BTC-PERP", "quantity": "0.5", "clientOrderId": "close-1"}))
	if o["clientOrderId"] != "close-1" || o["state"] != "filled" || o["reduceOnly"] != true {
		t.Fatalf("close %v", o)
	}
	for i := 0; i < 2; i++ { // repeating the key keeps answering 409; the position stays
		m := wantError(t, e.Post("/api/trading/close", map[string]any{"instrument": "BTC-PERP", "quantity": "0.5", "clientOrderId": "close-1"}), 409, "idempotency_conflict")
		if m["params"].(map[string]any)["brokerOrderId"] != o["brokerOrderId"] {
			t.Fatalf("conflict names %v", m)
		}
	}
	wantError(t, e.Post("/api/trading/order", order("close-1", "sell", "market", "1")), 409, "idempotency_conflict")
	wantError(t, e.Post("/api/trading/close", map[string]any{"instrument": "BTC-PERP", "clientOrderId": "bad\u0000"}), 400, "invalid_request")
	wantError(t, e.Post("/api/trading/close", map[string]any{"instrument": "BTC-PERP", "quantity": "0.0001"}), 422, "invalid_request")

	r := e.Post("/api/trading/flatten", map[string]any{"clientOrderId": "flat-1"})
	if r.Status != 200 {
		t.Fatalf("flatten %d %s", r.Status, r.Body)
	}
	fl := r.Map(t)
	if os := fl["orders"].([]any); len(os) != 1 || os[0].(map[string]any)["clientOrderId"] != "flat-1" {
		t.Fatalf("flatten %v", fl)
	}
	orderOf(t, e.Post("/api/trading/order", order("b2", "buy", "market", "1")))
	wantError(t, e.Post("/api/trading/flatten", map[string]any{"clientOrderId": "flat-1"}), 409, "idempotency_conflict")
	snap := e.Get("/api/account/snapshot").Map(t)
	if len(snap["positions"].([]any)) != 1 {
		t.Fatalf("a repeated flatten closed a position: %v", snap)
	}
}

// A resting stop that a quote trades through fills even when the next quote
// comes back above it before the paper book's wake has decided: whichever of
// the two quotes the wake decides on, the stop triggers (the reactor names
// it as traded through when the wake comes after the recovery).
func TestAStopTradedThroughFillsThoughThePriceCameBack(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	quote(e, "100", "101")
	orderOf(t, e.Post("/api/trading/order", order("m1", "buy", "market", "1")))
	for i := range 5 {
		o := orderOf(t, e.Post("/api/trading/order", order(fmt.Sprint("s", i), "sell", "stop", "0.2", "stopPrice", "95", "timeInForce", "gtc")))
		id := o["brokerOrderId"].(string)
		quote(e, "94", "95")  // through the stop
		quote(e, "99", "100") // and back at once
		apptest.WaitFor(t, 5*time.Second, func() error {
			for _, x := range e.Get("/api/account/orders?state=closed").Map(t)["orders"].([]any) {
				if x.(map[string]any)["brokerOrderId"] == id && x.(map[string]any)["state"] == "filled" {
					return nil
				}
			}
			return fmt.Errorf("stop %d not filled", i)
		})
	}
	snap := e.Get("/api/account/snapshot").Map(t)
	if ps := snap["positions"].([]any); len(ps) != 0 {
		t.Fatalf("positions after five stops closed the long: %v", ps)
	}
}

package main_test

import (
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/sim/binance"
)

// TestProviderRoutesThroughTheBinary: on a linked Binance futures account
// (the simulator) the replace, reverse and flatten routes take the paper
// requests and answer the paper shapes. A resting limit is changed in place
// at the exchange (one modify, the same order); a long is reversed by one
// order of twice its size, sent once (its retry answers that order); flatten cancels the working order and
// closes the position at the exchange, each sent once, and its clientOrderId
// is used once.
func TestProviderRoutesThroughTheBinary(t *testing.T) {
	sim := startSim(t, binance.Account{APIKey: simKey, Secret: simSecret})
	if err := sim.SetPrice("BTCUSDT", "60000"); err != nil {
		t.Fatal(err)
	}
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim)...)
	b, key := signedIn(t, p, dir, "routes@example.com")
	do := caller(t, p, key)
	accountID, q := linkBinance(t, p, b, simKey, simSecret)
	orderOf := func(m map[string]any) map[string]any { o, _ := m["order"].(map[string]any); return o }
	positions := func() []any {
		_, f := do("GET", "/api/account/snapshot"+q, nil)
		ps, _ := f["positions"].([]any)
		return ps
	}
	sent := func(coid string) int { return sim.OrdersByClientID(simKey, provider.ClientOrderID(accountID, coid)) }

	// Replace: a resting limit changes in place at the exchange.
	st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "l-1", "instrument": "BTCUSDT", "side": "buy",
		"orderType": "limit", "quantity": "0.01", "limitPrice": "50000"})
	if st != 200 || orderOf(m)["state"] != "working" {
		t.Fatalf("limit: %d %v", st, m)
	}
	oid := orderOf(m)["brokerOrderId"].(string)
	if st, m := do("POST", "/api/trading/replace"+q, map[string]any{"brokerOrderId": oid, "stopPrice": "49000"}); st != 422 {
		t.Fatalf("a stop price on a limit: %d %v", st, m)
	}
	st, m = do("POST", "/api/trading/replace"+q, map[string]any{"brokerOrderId": oid, "quantity": "0.02", "limitPrice": "50500"})
	if o := orderOf(m); st != 200 || o["brokerOrderId"] != oid || o["state"] != "working" || o["quantity"] != "0.02" || o["limitPrice"] != "50500" {
		t.Fatalf("replace: %d %v\n%s", st, m, p.out)
	}
	if n := sim.RequestCount("PUT /fapi/v1/order"); n != 1 {
		t.Fatalf("the exchange had %d modify requests, want 1", n)
	}
	// The exchange changes the order and the answer is lost: the lookup
	// settles it, the change is never sent again.
	if err := sim.AddFault(binance.Fault{Route: "PUT /fapi/v1/order", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	st, m = do("POST", "/api/trading/replace"+q, map[string]any{"brokerOrderId": oid, "limitPrice": "50400"})
	if o := orderOf(m); st != 200 || o["brokerOrderId"] != oid || o["quantity"] != "0.02" || o["limitPrice"] != "50400" {
		t.Fatalf("a replace whose answer was lost: %d %v\n%s", st, m, p.out)
	}
	if n := sim.RequestCount("PUT /fapi/v1/order"); n != 2 {
		t.Fatalf("the exchange had %d modify requests, want 2", n)
	}
	// A replace that changes nothing answers the order as it rests; nothing is sent.
	if st, m := do("POST", "/api/trading/replace"+q, map[string]any{"brokerOrderId": oid, "limitPrice": "50400"}); st != 200 ||
		orderOf(m)["limitPrice"] != "50400" || sim.RequestCount("PUT /fapi/v1/order") != 2 {
		t.Fatalf("an empty replace: %d %v", st, m)
	}
	if n := sent("l-1"); n != 1 {
		t.Fatalf("the exchange took %d orders of l-1, want the one changed in place", n)
	}

	// Reverse: a long of 0.01 turns into a short of 0.01 with one order of 0.02.
	if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "m-1", "instrument": "BTCUSDT", "side": "buy",
		"orderType": "market", "quantity": "0.01"}); st != 200 {
		t.Fatalf("market: %d %v", st, m)
	}
	waitUntil(t, 5*time.Second, func() bool { ps := positions(); return len(ps) == 1 && ps[0].(map[string]any)["quantity"] == "0.01" },
		func() any { return positions() })
	// The answer is the order filled even when the user stream tells of
	// it before the exchange's answer to the request comes back; once the
	// stream told of its fill, nothing the exchange answers can change it,
	// so the answer does not wait (up to a second) for the exchange's late
	// answer: it comes 3 s after the request here.
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Times: 1, AnswerDelay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	st, m = do("POST", "/api/trading/reverse"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "r-1"})
	took := time.Since(began)
	if o := orderOf(m); st != 200 || o["side"] != "sell" || o["quantity"] != "0.02" || o["state"] != "filled" || o["filledQuantity"] != "0.02" {
		t.Fatalf("reverse: %d %v\n%s", st, m, p.out)
	}
	if took >= time.Second {
		t.Fatalf("the reverse's answer took %s: it waited for the exchange's late answer after the stream told of the fill", took)
	}
	waitUntil(t, 5*time.Second, func() bool {
		ps := positions()
		return len(ps) == 1 && ps[0].(map[string]any)["quantity"] == "0.01" &&
			ps[0].(map[string]any)["side"] == "short"
	},
		func() any { return positions() })
	reversed := orderOf(m)["brokerOrderId"]
	if st, again := do("POST", "/api/trading/reverse"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "r-1"}); st != 409 ||
		again["code"] != "idempotency_conflict" || again["params"].(map[string]any)["brokerOrderId"] != reversed {
		t.Fatalf("the reverse again with r-1: want 409 idempotency_conflict naming the order it placed, got %d %v", st, again)
	}
	if n := sent("r-1"); n != 1 {
		t.Fatalf("the exchange took %d orders of r-1, want 1", n)
	}
	if st, m := do("POST", "/api/trading/reverse"+q, map[string]any{"instrument": "ETHUSDT", "clientOrderId": "r-2"}); st != 422 ||
		m["code"] != "position_not_closable" {
		t.Fatalf("a reverse with no position: %d %v", st, m)
	}

	// Flatten: the working limit is canceled and the short closed at the exchange.
	st, m = do("POST", "/api/trading/flatten"+q, map[string]any{"clientOrderId": "f-1"})
	if st != 200 {
		t.Fatalf("flatten: %d %v\n%s", st, m, p.out)
	}
	canceled, _ := m["canceled"].([]any)
	orders, _ := m["orders"].([]any)
	unclosed, _ := m["unclosed"].([]any)
	if len(canceled) != 1 || canceled[0] != oid || len(orders) != 1 || unclosed == nil || len(unclosed) != 0 {
		t.Fatalf("flatten answered %v", m)
	}
	if o := orders[0].(map[string]any); o["clientOrderId"] != "f-1" || o["side"] != "buy" || o["quantity"] != "0.01" || o["state"] != "filled" {
		t.Fatalf("flatten's close %v", o)
	}
	if len(positions()) != 0 {
		t.Fatalf("positions after flatten %v", positions())
	}
	if n := sent("f-1"); n != 1 {
		t.Fatalf("the exchange took %d orders of f-1, want 1", n)
	}
	if n := sim.RequestCount("DELETE /fapi/v1/order"); n != 1 {
		t.Fatalf("the exchange had %d cancel requests, want 1", n)
	}
	// The clientOrderId is used once; a flatten of nothing answers empty lists.
	if st, m := do("POST", "/api/trading/flatten"+q, map[string]any{"clientOrderId": "f-1"}); st != 409 {
		t.Fatalf("flatten again with f-1: %d %v", st, m)
	}
	if n := sent("f-1"); n != 1 {
		t.Fatalf("the exchange took %d orders of f-1 after the repeat, want 1", n)
	}
	st, m = do("POST", "/api/trading/flatten"+q, map[string]any{})
	if c, _ := m["canceled"].([]any); st != 200 || len(c) != 0 || len(m["orders"].([]any)) != 0 {
		t.Fatalf("flatten of nothing: %d %v", st, m)
	}
	// A flatten of one position alone (one order to place) answers that order once.
	if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "m-2", "instrument": "BTCUSDT", "side": "buy",
		"orderType": "market", "quantity": "0.01"}); st != 200 {
		t.Fatalf("market: %d %v", st, m)
	}
	st, m = do("POST", "/api/trading/flatten"+q, map[string]any{"clientOrderId": "f-2"})
	if c, _ := m["canceled"].([]any); st != 200 || len(c) != 0 || len(m["orders"].([]any)) != 1 ||
		m["orders"].([]any)[0].(map[string]any)["clientOrderId"] != "f-2" {
		t.Fatalf("a flatten of one position: %d %v", st, m)
	}
}

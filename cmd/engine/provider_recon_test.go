package main_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/sim/binance"
)

// linkedSim starts the simulator with one account, the binary against it
// (extra settings after), signs a trader up and links the account. It
// answers the binary, the trader's key, the account's query and its id.
func linkedSim(t *testing.T, apiKey, secret string, extra ...string) (*binance.Sim, *proc, string, string, string, string) {
	t.Helper()
	sim := startSim(t, binance.Account{APIKey: apiKey, Secret: secret})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim, extra...)...)
	b, key := signedIn(t, p, dir, "trader@example.com")
	accountID, q := linkBinance(t, p, b, apiKey, secret)
	return sim, p, key, q, accountID, dir
}

func doJSON(t *testing.T, base, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	st, raw, err := call(base, key, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return st, m
}

// cutStream cuts the account's stream and keeps it cut for about d: the
// exchange restarts (listen keys invalid) and the next listen key is
// answered late.
func cutStream(t *testing.T, sim *binance.Sim, d time.Duration) {
	t.Helper()
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/listenKey", Times: 1, Latency: d}); err != nil {
		t.Fatal(err)
	}
	sim.Restart()
}

// The stream is cut; meanwhile the trader places an order on the exchange
// directly and the engine's resting limit fills. The frames go on, and the
// reconciliation after the gap adopts the order placed elsewhere and
// records the fill; nothing holds the account.
func TestProviderStreamCutReconciles(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	const k, s = "reconKEY0001streamcut", "reconSECRET0001streamcut"
	sim, p, key, q, _, _ := linkedSim(t, k, s, "ENGINE_PROVIDER_RECONCILE_EVERY=1h")
	st, m := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "l-1", "instrument": "BTCUSDT",
		"side": "buy", "orderType": "limit", "quantity": "0.01", "limitPrice": "50000"})
	if st != 200 {
		t.Fatalf("limit: %d %v", st, m)
	}
	cutStream(t, sim, 2*time.Second)
	if _, err := sim.PlaceOutside(k, map[string]string{"symbol": "BTCUSDT", "side": "SELL", "type": "LIMIT", "quantity": "0.02",
		"price": "200000", "timeInForce": "GTC"}); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetPrice("BTCUSDT", "49000"); err != nil {
		t.Fatal(err)
	}
	frame := func() map[string]any { _, f := doJSON(t, p.base, key, "GET", "/api/account/snapshot"+q, nil); return f }
	waitUntil(t, 15*time.Second, func() bool {
		f := frame()
		ps, _ := f["positions"].([]any)
		ws, _ := f["orders"].([]any)
		return len(ps) == 1 && ps[0].(map[string]any)["quantity"] == "0.01" && len(ws) == 1
	}, func() any { return frame() })
	f := frame()
	if w := f["orders"].([]any)[0].(map[string]any); w["side"] != "sell" || w["quantity"] != "0.02" || w["state"] != "working" {
		t.Fatalf("adopted %v", w)
	}
	if st, m := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "m-2", "instrument": "BTCUSDT",
		"side": "buy", "orderType": "market", "quantity": "0.01"}); st != 200 {
		t.Fatalf("an order after the cut: %d %v", st, m)
	}
}

// A position appears at the exchange that no order the engine can see
// explains (a market order placed elsewhere while the stream is cut): the
// next reconciliation puts the account on reconciliation_hold, shown in
// the frame's holds; an addition is 423 reconciliation_hold, a cancel
// still goes out.
func TestProviderContradictionHolds(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	const k, s = "reconKEY0002contradict", "reconSECRET0002contradict"
	sim, p, key, q, _, _ := linkedSim(t, k, s, "ENGINE_PROVIDER_RECONCILE_EVERY=1s")
	st, m := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "l-1", "instrument": "BTCUSDT",
		"side": "buy", "orderType": "limit", "quantity": "0.01", "limitPrice": "50000"})
	if st != 200 {
		t.Fatalf("limit: %d %v", st, m)
	}
	oid := m["order"].(map[string]any)["brokerOrderId"].(string)
	cutStream(t, sim, 2*time.Second)
	if _, err := sim.PlaceOutside(k, map[string]string{"symbol": "BTCUSDT", "side": "BUY", "type": "MARKET", "quantity": "0.03"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	waitUntil(t, 15*time.Second, func() bool {
		n++
		st, m = doJSON(t, p.base, key, "POST", "/api/trading/order"+q, map[string]any{"clientOrderId": fmt.Sprintf("probe-%d", n),
			"instrument": "BTCUSDT", "side": "buy", "orderType": "limit", "quantity": "0.01", "limitPrice": "1000"})
		return st == 423
	}, func() any { return m })
	if m["code"] != "reconciliation_hold" {
		t.Fatalf("an addition under the hold: %d %v", st, m)
	}
	if st, m := doJSON(t, p.base, key, "POST", "/api/trading/cancel"+q, map[string]any{"brokerOrderId": oid}); st != 200 ||
		m["order"].(map[string]any)["state"] != "canceled" {
		t.Fatalf("a cancel under the hold: %d %v", st, m)
	}
}

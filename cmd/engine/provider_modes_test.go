package main_test

import (
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/sim/binance"
)

// A linked Binance account through the binary with live trading off by
// default (as in production): the order and reverse routes answer 403
// feature_disabled on the provider account, reducing orders included,
// while the paper account trades and the close stays available; the
// trader switches it on with the password again and off with the session.
// Then the account modes: hedge mode switched on at the exchange (no
// stream event there) is read at the next reconciliation and the order is
// refused with hedge_position_mode and its params; switched off, the order
// goes through; multi-assets mode likewise with multi_assets_mode.
func TestProviderLiveSwitchAndModesThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	sim := startSim(t, binance.Account{APIKey: simKey, Secret: simSecret})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim,
		"ENGINE_LIVE_TRADING_DEFAULT=off", "ENGINE_PROVIDER_RECONCILE_EVERY=1s")...)
	b, key := signedIn(t, p, dir, "switch@example.com")
	do := caller(t, p, key)
	live := func(m map[string]any) map[string]any {
		lt, _ := m["liveTrading"].(map[string]any)
		return lt
	}

	_, q := linkBinance(t, p, b, simKey, simSecret)
	st, m := do("POST", "/api/account/demo", map[string]any{})
	if st != 201 {
		t.Fatalf("demo: %d %v", st, m)
	}
	paper := "?broker=paper&account=" + m["account"].(map[string]any)["accountNumber"].(string)

	// Off by default: the read says so, the order route refuses.
	if st, m := do("GET", "/api/account/live-trading", nil); st != 200 || live(m)["enabled"] != false || live(m)["source"] != "default" {
		t.Fatalf("the switch before any setting: %d %v", st, m)
	}
	buy := func(id string, extra ...string) (int, map[string]any) {
		body := map[string]any{"clientOrderId": id, "instrument": "BTCUSDT", "side": "buy", "orderType": "market", "quantity": "0.01"}
		if slices.Contains(extra, "sell") {
			body["side"] = "sell"
		}
		if slices.Contains(extra, "reduceOnly") {
			body["reduceOnly"] = true
		}
		return do("POST", "/api/trading/order"+q, body)
	}
	disabled := func(what string, st int, m map[string]any) {
		t.Helper()
		if params, _ := m["params"].(map[string]any); st != 403 || m["code"] != "feature_disabled" || params["feature"] != "live_trading" {
			t.Fatalf("%s with live trading off: %d %v", what, st, m)
		}
	}
	st, m = buy("off-1")
	disabled("an order", st, m)
	if st, m := do("POST", "/api/trading/order"+paper, map[string]any{"clientOrderId": "p-1", "instrument": "BTC-PERP", "side": "buy",
		"orderType": "market", "quantity": "0.01"}); st != 200 {
		t.Fatalf("paper is never affected: %d %v", st, m)
	}

	// On with the password again: none, a wrong one, the right one.
	if st, m := b.do("POST", "/api/account/live-trading", map[string]any{"enabled": true}); st != 400 {
		t.Fatalf("on without the password: %d %v", st, m)
	}
	if st, m := b.do("POST", "/api/account/live-trading", map[string]any{"enabled": true, "password": "not the password"}); st != 401 || m["code"] != "invalid_credentials" {
		t.Fatalf("on with a wrong password: %d %v", st, m)
	}
	if st, m := do("GET", "/api/account/live-trading", nil); live(m)["enabled"] != false {
		t.Fatalf("a refused switch changed it: %d %v", st, m)
	}
	st, m = b.do("POST", "/api/account/live-trading", map[string]any{"enabled": true, "password": "an e2e password"})
	if st != 200 || live(m)["enabled"] != true || live(m)["source"] != "user" || live(m)["changedAt"] == nil {
		t.Fatalf("on with the password: %d %v", st, m)
	}
	if st, m := buy("on-1"); st != 200 {
		t.Fatalf("an order with live trading on: %d %v\n%s", st, m, p.out)
	}

	// Off with the session alone: a reducing order and the reverse are refused, the close is not.
	if st, m := b.do("POST", "/api/account/live-trading", map[string]any{"enabled": false}); st != 200 || live(m)["enabled"] != false {
		t.Fatalf("off: %d %v", st, m)
	}
	st, m = buy("off-2", "sell", "reduceOnly")
	disabled("a reduce-only order", st, m)
	st, m = do("POST", "/api/trading/reverse"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "rev-1"})
	disabled("a reverse", st, m)
	if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "x-1"}); st != 200 {
		t.Fatalf("the close with live trading off: %d %v", st, m)
	}
	if st, m := b.do("POST", "/api/account/live-trading", map[string]any{"enabled": true, "password": "an e2e password"}); st != 200 {
		t.Fatalf("on again: %d %v", st, m)
	}

	// Hedge mode at the exchange: read at the next reconciliation.
	if err := sim.SetHedgeMode(simKey, true); err != nil {
		t.Fatal(err)
	}
	n := 0
	var last map[string]any
	waitUntil(t, 15*time.Second, func() bool {
		n++
		var st int
		st, last = buy("h-" + string(rune('a'+n%26)) + time.Now().Format("150405.000"))
		return st == 422 && last["code"] == "hedge_position_mode"
	}, func() any { return last })
	params := last["params"].(map[string]any)
	if params["provider"] != "binance-futures" || params["instrument"] != "BTCUSDT" || params["setting"] != "hedge_mode" ||
		params["reported"] != "hedge" || len(toStrings(params["supported"])) != 1 || toStrings(params["supported"])[0] != "one_way" {
		t.Fatalf("hedge_position_mode params: %v", params)
	}
	if err := sim.SetHedgeMode(simKey, false); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, func() bool {
		n++
		var st int
		st, last = buy("h-" + string(rune('a'+n%26)) + time.Now().Format("150405.000"))
		return st == 200
	}, func() any { return last })

	// Multi-assets mode: the exchange says so on its stream.
	if err := sim.SetMultiAssetsMode(simKey, true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, func() bool {
		n++
		var st int
		st, last = buy("m-" + string(rune('a'+n%26)) + time.Now().Format("150405.000"))
		return st == 422 && last["code"] == "multi_assets_mode"
	}, func() any { return last })
	if err := sim.SetMultiAssetsMode(simKey, false); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, func() bool {
		n++
		var st int
		st, last = buy("m-" + string(rune('a'+n%26)) + time.Now().Format("150405.000"))
		return st == 200
	}, func() any { return last })
}

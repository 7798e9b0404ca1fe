package main_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/sim/binance"
)

// TestProviderExitsThroughTheBinary: exit plans and brackets on a linked
// Binance futures account (the simulator), through one engine binary.
// The frame says what the exchange serves; a bracketed market entry fills
// and both legs rest at the exchange as its own reduce-only stop and take
// profit on the mark, each sent once; the price through the target fills
// it and the engine cancels the stop (the exchange holds nothing after),
// the bracket ends and the position is flat. A protection whose stop the
// exchange rejects (the price is already through it) answers refused with
// the target resting; a change moves the target at the exchange; the
// withdrawal cancels what rests and ends the bracket, the position staying.
// A resting entry's legs go out when it fills, and a leg whose answer the
// exchange drops is settled by lookup, never sent twice. A withdrawal whose
// cancels the exchange does not take leaves the bracket active (stuck).
func TestProviderExitsThroughTheBinary(t *testing.T) {
	sim := startSim(t, binance.Account{APIKey: simKey, Secret: simSecret})
	if err := sim.SetPrice("BTCUSDT", "60000"); err != nil {
		t.Fatal(err)
	}
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim)...)
	b, key := signedIn(t, p, dir, "exits@example.com")
	do := caller(t, p, key)
	accountID, q := linkBinance(t, p, b, simKey, simSecret)
	snapshot := func() map[string]any {
		t.Helper()
		_, f := do("GET", "/api/account/snapshot"+q, nil)
		return f
	}
	brackets := func() []any {
		t.Helper()
		_, r := do("GET", "/api/account/brackets"+q, nil)
		items, _ := r["items"].([]any)
		return items
	}
	legOf := func(b any, kind string) map[string]any {
		for _, l := range b.(map[string]any)["legs"].([]any) {
			if l := l.(map[string]any); l["kind"] == kind {
				return l
			}
		}
		return nil
	}
	open := func() []string { // what rests at the exchange: type@trigger
		var out []string
		for _, o := range sim.OpenOrders(simKey, "BTCUSDT") {
			out = append(out, fmt.Sprintf("%s@%s", o.Type, o.StopPrice))
		}
		slices.Sort(out)
		return out
	}
	sentOnce := func(b any) {
		t.Helper()
		for _, l := range b.(map[string]any)["legs"].([]any) {
			id := l.(map[string]any)["id"].(string)
			if n := sim.OrdersByClientID(simKey, provider.ClientOrderID(accountID, id)); n != 1 {
				t.Fatalf("the exchange took %d orders of leg %s, want 1", n, id)
			}
		}
	}

	// The exchange's feed reaches the engine (a market entry's preview prices at its touch).
	waitUntil(t, 10*time.Second, func() bool {
		if err := sim.SetPrice("BTCUSDT", "60000"); err != nil {
			t.Fatal(err)
		}
		st, _ := do("GET", "/api/market/quotes?instruments=BTCUSDT", nil)
		return st == 200
	}, func() any { _, m := do("GET", "/api/market/quotes?instruments=BTCUSDT", nil); return m })

	// The frame says what the exchange serves: no breakeven, no trailing stop.
	caps := snapshot()["capabilities"].(map[string]any)
	if got := fmt.Sprint(caps["exitPlanSupport"]); got != "[stop_loss take_profit multiple_targets runner_leg]" {
		t.Fatalf("exitPlanSupport %s", got)
	}
	plan := func(spec map[string]any) (string, string) {
		t.Helper()
		st, m := do("POST", "/api/exit-plans", spec)
		if st != 201 {
			t.Fatalf("plan: %d %v", st, m)
		}
		pl := m["plan"].(map[string]any)
		return pl["id"].(string), pl["revision"].(string)
	}
	// A stop 100 ticks (10 USDT) away, one target 200 ticks away.
	id, rev := plan(map[string]any{"name": "one", "stop": map[string]any{"ticks": 100},
		"targets": []any{map[string]any{"distance": map[string]any{"ticks": 200}, "share": "1"}}})
	trailID, trailRev := plan(map[string]any{"name": "trail", "stop": map[string]any{"ticks": 100},
		"trailing": map[string]any{"activation": map[string]any{"ticks": 50}, "distance": map[string]any{"ticks": 50}}})
	bracketed := func(coid, planID, planRev string) (int, map[string]any) {
		t.Helper()
		st, pv := do("POST", "/api/account/exit-plans/preview"+q, map[string]any{"planId": planID, "planRevision": planRev, "instrument": "BTCUSDT",
			"side": "buy", "quantity": "0.01", "orderType": "market", "clientOrderId": coid})
		if st != 200 {
			t.Fatalf("preview: %d %v", st, pv)
		}
		return do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": coid, "instrument": "BTCUSDT", "side": "buy",
			"orderType": "market", "quantity": "0.01", "exitPlan": map[string]any{"planId": planID, "planRevision": planRev,
				"previewToken": pv["preview"].(map[string]any)["token"]}})
	}
	if st, m := bracketed("bx-trail", trailID, trailRev); st != 422 || m["code"] != "invalid_request" {
		t.Fatalf("a trailing plan on a provider account: %d %v", st, m)
	}
	if n := sim.OrdersByClientID(simKey, provider.ClientOrderID(accountID, "bx-trail")); n != 0 {
		t.Fatalf("the refused entry reached the exchange %d times", n)
	}

	// A bracketed market entry: both legs rest at the exchange once it fills.
	st, m := bracketed("bx-1", id, rev)
	if st != 200 || m["bracket"].(map[string]any)["state"] != "active" || m["order"].(map[string]any)["clientOrderId"] != "bx-1" {
		t.Fatalf("bracketed entry: %d %v\n%s", st, m, p.out)
	}
	waitUntil(t, 5*time.Second, func() bool {
		bs := brackets()
		return len(bs) == 1 && legOf(bs[0], "stop")["state"] == "working" && slices.Equal(open(), []string{"STOP_MARKET@59990.00", "TAKE_PROFIT_MARKET@60020.00"})
	}, func() any { return fmt.Sprint(brackets(), open()) })
	for _, o := range sim.OpenOrders(simKey, "BTCUSDT") {
		if !o.ReduceOnly || o.WorkingType != "MARK_PRICE" || o.Side != "SELL" || o.Quantity != "0.010" {
			t.Fatalf("a leg at the exchange: %+v", o)
		}
	}
	sentOnce(brackets()[0])
	waitUntil(t, 5*time.Second, func() bool { // the legs in the frame's orders once the exchange's answers are recorded
		f := snapshot()
		return len(f["orders"].([]any)) == 2 && len(f["brackets"].([]any)) == 1
	}, func() any { return snapshot() })

	// The price through the target: it fills; the engine cancels the stop; the bracket ends.
	if err := sim.SetPrice("BTCUSDT", "60021"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, func() bool {
		f := snapshot()
		return len(open()) == 0 && len(f["brackets"].([]any)) == 0 && len(f["positions"].([]any)) == 0 && len(f["orders"].([]any)) == 0
	}, func() any { return fmt.Sprint(snapshot(), open()) })
	if n := sim.RequestCount("DELETE /fapi/v1/algoOrder"); n != 1 {
		t.Fatalf("the exchange had %d cancels, want the stop's", n)
	}

	// A position whose stop the price has gone through already: the
	// protection's stop is the exchange's rejection, its target rests.
	if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "m-2", "instrument": "BTCUSDT", "side": "buy",
		"orderType": "market", "quantity": "0.01"}); st != 200 {
		t.Fatalf("market: %d %v", st, m)
	}
	waitUntil(t, 5*time.Second, func() bool { return len(snapshot()["positions"].([]any)) == 1 }, func() any { return snapshot() })
	if err := sim.SetPrice("BTCUSDT", "60005"); err != nil { // the stop at 60011 (the entry 60021 less 10) would trigger at once
		t.Fatal(err)
	}
	st, m = do("POST", "/api/trading/exits"+q, map[string]any{"clientOrderId": "pr-1", "instrument": "BTCUSDT", "planId": id, "planRevision": rev})
	if st != 200 || m["refused"] != "order_rejected" || m["stuck"].(float64) != 0 || m["bracket"].(map[string]any)["state"] != "active" {
		t.Fatalf("a protection with a stop through the price: %d %v\n%s", st, m, p.out)
	}
	bid := m["bracket"].(map[string]any)["id"].(string)
	bs := brackets()
	if len(bs) != 1 || legOf(bs[0], "stop")["state"] != "canceled" || legOf(bs[0], "target")["state"] != "working" ||
		!slices.Equal(open(), []string{"TAKE_PROFIT_MARKET@60041.00"}) {
		t.Fatalf("after the refusal: %v, at the exchange %v", bs, open())
	}

	// A change moves the target at the exchange: the new one rests, the old one goes.
	target := legOf(bs[0], "target")["id"].(string)
	st, m = do("PATCH", "/api/trading/exits/"+bid+q, map[string]any{"legs": []any{map[string]any{"id": target, "price": "60050"}}})
	if st != 200 || m["refused"] != nil || m["bracket"].(map[string]any)["state"] != "active" {
		t.Fatalf("change: %d %v", st, m)
	}
	waitUntil(t, 5*time.Second, func() bool { return slices.Equal(open(), []string{"TAKE_PROFIT_MARKET@60050.00"}) }, func() any { return open() })

	// The withdrawal cancels what rests and ends the bracket; the position stays.
	st, m = do(http.MethodDelete, "/api/trading/exits/"+bid+q, nil)
	if st != 200 || m["bracket"].(map[string]any)["state"] != "ended" || m["stuck"].(float64) != 0 || m["refused"] != nil {
		t.Fatalf("withdraw: %d %v", st, m)
	}
	if f := snapshot(); len(open()) != 0 || len(f["brackets"].([]any)) != 0 || len(f["positions"].([]any)) != 1 {
		t.Fatalf("after the withdrawal: %v, at the exchange %v", f, open())
	}
	if st, m := do(http.MethodDelete, "/api/trading/exits/"+bid+q, nil); st != 404 {
		t.Fatalf("a withdrawal of an ended bracket: %d %v", st, m)
	}

	// A resting entry's legs go out when it fills; the exchange's answer to
	// one is lost: the lookup settles it, the leg is never sent twice.
	st, pv := do("POST", "/api/account/exit-plans/preview"+q, map[string]any{"planId": id, "planRevision": rev, "instrument": "BTCUSDT",
		"side": "buy", "quantity": "0.01", "orderType": "limit", "limitPrice": "59900", "clientOrderId": "bx-2"})
	if st != 200 {
		t.Fatalf("preview: %d %v", st, pv)
	}
	st, m = do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "bx-2", "instrument": "BTCUSDT", "side": "buy",
		"orderType": "limit", "limitPrice": "59900", "timeInForce": "gtc", "quantity": "0.01", "exitPlan": map[string]any{"planId": id,
			"planRevision": rev, "previewToken": pv["preview"].(map[string]any)["token"]}})
	if st != 200 || m["order"].(map[string]any)["state"] != "working" || len(open()) != 1 {
		t.Fatalf("a bracketed limit entry: %d %v, at the exchange %v", st, m, open())
	}
	lookups := sim.RequestCount("GET /fapi/v1/algoOrder")
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/algoOrder", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetPrice("BTCUSDT", "59900"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, func() bool {
		bs := brackets()
		return len(bs) == 1 && legOf(bs[0], "stop")["state"] == "working" && len(snapshot()["orders"].([]any)) == 2 &&
			slices.Equal(open(), []string{"STOP_MARKET@59890.00", "TAKE_PROFIT_MARKET@59920.00"})
	}, func() any { return fmt.Sprint(brackets(), open()) })
	sentOnce(brackets()[0])
	if sim.RequestCount("GET /fapi/v1/algoOrder") == lookups {
		t.Fatal("no lookup settled the leg whose answer was dropped")
	}

	// The exchange throttles the key: the withdrawal's cancels are not
	// sent, the orders still rest, the bracket stays active with them
	// (stuck); withdrawn again once the throttle is over, it ends.
	bid = brackets()[0].(map[string]any)["id"].(string)
	if err := sim.AddFault(binance.Fault{Route: "DELETE /fapi/v1/algoOrder", Times: 1, Throttle: time.Second}); err != nil {
		t.Fatal(err)
	}
	st, m = do(http.MethodDelete, "/api/trading/exits/"+bid+q, nil)
	if st != 200 || m["bracket"].(map[string]any)["state"] != "active" || m["stuck"].(float64) != 2 || len(open()) != 2 || len(brackets()) != 1 {
		t.Fatalf("a withdrawal whose cancels were not sent: %d %v, at the exchange %v", st, m, open())
	}
	waitUntil(t, 5*time.Second, func() bool { // withdrawn again until the exchange's Retry-After is over
		st, m = do(http.MethodDelete, "/api/trading/exits/"+bid+q, nil)
		return st == 200 && m["bracket"].(map[string]any)["state"] == "ended"
	}, func() any { return m })
	if f := snapshot(); len(open()) != 0 || len(f["brackets"].([]any)) != 0 || m["stuck"].(float64) != 0 {
		t.Fatalf("withdrawn again: %v, at the exchange %v", m, open())
	}

	// The exchange throttles the key as a protection's legs go out: nothing
	// rests for them, yet they stay working, each with the time it is
	// placed again (retryAt, the exchange's Retry-After); then both rest,
	// once each, and the bracket protects the position.
	pos := snapshot()["positions"].([]any)
	if len(pos) != 1 {
		t.Fatalf("positions %v", pos)
	}
	if err := sim.SetPrice("BTCUSDT", pos[0].(map[string]any)["avgPrice"].(string)); err != nil { // the legs' basis: neither triggers
		t.Fatal(err)
	}
	placed := sim.RequestCount("POST /fapi/v1/algoOrder")
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/algoOrder", Times: 1, Throttle: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	st, m = do("POST", "/api/trading/exits"+q, map[string]any{"clientOrderId": "pr-3", "instrument": "BTCUSDT", "planId": id, "planRevision": rev})
	if st != 200 || m["bracket"].(map[string]any)["state"] != "active" || len(open()) != 0 {
		t.Fatalf("a protection while the exchange throttles: %d %v, at the exchange %v\n%s", st, m, open(), p.out)
	}
	bs = brackets()
	for _, kind := range []string{"stop", "target"} {
		if lg := legOf(bs[0], kind); len(bs) != 1 || lg["state"] != "working" || lg["retryAt"] == nil {
			t.Fatalf("the %s leg while throttled: %v", kind, bs)
		}
	}
	waitUntil(t, 10*time.Second, func() bool {
		bs := brackets()
		return len(bs) == 1 && len(open()) == 2 && legOf(bs[0], "stop")["retryAt"] == nil && legOf(bs[0], "target")["retryAt"] == nil &&
			legOf(bs[0], "stop")["state"] == "working" && legOf(bs[0], "target")["state"] == "working"
	}, func() any { return fmt.Sprint(brackets(), open()) })
	if n := sim.RequestCount("POST /fapi/v1/algoOrder") - placed; n < 3 || n > 4 {
		t.Fatalf("the exchange had %d leg placements, want the throttled ones and one more each", n)
	}
}

package main_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/sim/binance"
)

// TestCopierProviderFollower: a paper leader mirrored on a Binance futures
// account (the simulator; BTC-PERP mapped to BTCUSDT, a fixed size) and on
// a paper account. The exchange takes every mirror 400 ms after it is sent
// and the engine is killed with SIGKILL while they are on their way: after
// the restart every leader order is at the exchange exactly once under its
// derived client order id (the engine settles what it sent by lookup, and
// the copier's retry answers 409), a leader cancel takes the exchange's
// order off, and the outcomes name the provider follower's orders.
func TestCopierProviderFollower(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	const apiKey, secret = "copierKEY0001follower", "copierSECRET0001follower"
	sim := startSim(t, binance.Account{APIKey: apiKey, Secret: secret})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	env := providerEnv(t, sim)
	p := start(t, bin, dir, addr, env...)
	b, key := signedIn(t, p, dir, "copier@example.com")
	follower, fq := linkBinance(t, p, b, apiKey, secret)
	var demo []string
	for i := range 2 {
		st, m, err := copierCall(p.base, key, fmt.Sprintf("demo-%d", i), "POST", "/api/account/demo", map[string]any{})
		if err != nil || st != 201 {
			t.Fatalf("demo: %d %v %v", st, m, err)
		}
		demo = append(demo, m["account"].(map[string]any)["accountId"].(string))
	}
	leader, paper := demo[0], demo[1]
	st, g, err := copierCall(p.base, key, "grp-p", "POST", "/api/copier/groups", map[string]any{"leaderAccountId": leader, "followers": []any{
		map[string]any{"accountId": follower, "sizing": map[string]any{"mode": "fixed", "value": "0.002"}, "instrumentMap": map[string]any{"BTC-PERP": "BTCUSDT"}},
		map[string]any{"accountId": paper},
	}})
	if err != nil || st != 201 {
		t.Fatalf("group: %d %v %v", st, g, err)
	}
	groupID := g["groupId"].(string)
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Latency: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	var leads []string
	for i := range 4 {
		body := map[string]any{"clientOrderId": fmt.Sprintf("lead-%d", i), "instrument": "BTC-PERP", "side": "buy", "orderType": "limit",
			"limitPrice": "55000", "quantity": "0.01", "timeInForce": "gtc"}
		if i == 3 {
			body = map[string]any{"clientOrderId": "lead-3", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}
		}
		st, m := doJSON(t, p.base, key, "POST", "/api/trading/order?account="+leader, body)
		if st != 200 {
			t.Fatalf("leader order: %d %v", st, m)
		}
		leads = append(leads, m["order"].(map[string]any)["brokerOrderId"].(string))
	}
	time.Sleep(150 * time.Millisecond) // mirrors on their way to the exchange
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	p = start(t, bin, dir, addr, env...)

	pcoid := func(lead string) string {
		return provider.ClientOrderID(follower, copier.ClientOrderID(leader, lead, follower))
	}
	waitUntil(t, 30*time.Second, func() bool {
		for _, l := range leads {
			if sim.OrdersByClientID(apiKey, pcoid(l)) != 1 {
				return false
			}
		}
		return len(sim.OpenOrders(apiKey, "BTCUSDT")) == 3
	}, func() any {
		var n []int
		for _, l := range leads {
			n = append(n, sim.OrdersByClientID(apiKey, pcoid(l)))
		}
		return fmt.Sprintf("placements by id %v, open %v\n%s", n, sim.OpenOrders(apiKey, "BTCUSDT"), p.out)
	})
	for _, o := range sim.OpenOrders(apiKey, "BTCUSDT") {
		if o.Quantity != "0.002" || o.Side != "BUY" || strings.TrimRight(strings.TrimRight(o.Price, "0"), ".") != "55000" {
			t.Fatalf("the exchange holds %+v", o)
		}
	}

	// The leader's cancel takes the exchange's mirror off, after it.
	if st, m := doJSON(t, p.base, key, "POST", "/api/trading/cancel?account="+leader, map[string]any{"brokerOrderId": leads[0]}); st != 200 {
		t.Fatalf("cancel: %d %v", st, m)
	}
	waitUntil(t, 20*time.Second, func() bool {
		for _, o := range sim.OpenOrders(apiKey, "BTCUSDT") {
			if o.ClientOrderID == pcoid(leads[0]) {
				return false
			}
		}
		return true
	}, func() any { return sim.OpenOrders(apiKey, "BTCUSDT") })
	for _, l := range leads {
		if n := sim.OrdersByClientID(apiKey, pcoid(l)); n != 1 {
			t.Fatalf("leader order %s placed %d times at the exchange", l, n)
		}
	}

	// The outcomes: mirrored on both followers, the provider's with its order id.
	var outs []any
	waitUntil(t, 10*time.Second, func() bool {
		_, m, _ := copierCall(p.base, key, "", "GET", "/api/copier/groups/"+groupID+"/mirrors?leaderOrderId="+leads[1], nil)
		outs, _ = m["mirrors"].([]any)
		return len(outs) == 1
	}, func() any { return outs })
	for _, o := range outs[0].(map[string]any)["followers"].([]any) {
		o := o.(map[string]any)
		if o["status"] != "mirrored" || o["brokerOrderId"] == "" {
			t.Fatalf("outcome %v", o)
		}
		if o["accountId"] == follower && (o["instrument"] != "BTCUSDT" || o["quantity"] != "0.002") {
			t.Fatalf("the provider follower's outcome %v", o)
		}
	}
	// The provider follower's orders list the mirrors.
	st, raw, err := call(p.base, key, "GET", "/api/account/orders"+fq+"&limit=50", nil)
	if err != nil || st != 200 || strings.Count(string(raw), `"clientOrderId":"cp-`) != len(leads) {
		t.Fatalf("the provider follower's orders: %d %s %v", st, raw, err)
	}
	for _, l := range leads {
		if !strings.Contains(string(raw), `"leaderOrderId":"`+l+`"`) {
			t.Fatalf("the provider follower's orders do not name leader order %s: %s", l, raw)
		}
	}
	// Its frame shows each working mirror with the leader's order id.
	_, snap := doJSON(t, p.base, key, "GET", "/api/account/snapshot"+fq, nil)
	shown := map[string]bool{}
	for _, x := range snap["orders"].([]any) {
		shown[fmt.Sprint(x.(map[string]any)["leaderOrderId"])] = true
	}
	for _, l := range leads[1:3] { // the two limit mirrors still resting
		if !shown[l] {
			t.Fatalf("the provider follower's frame does not show leader order %s's mirror with leaderOrderId: %v", l, snap["orders"])
		}
	}
}

// TestCopierProviderFollowerExitPlan: a paper leader's limit entry with an
// exit plan (a stop, a target and a breakeven rule) mirrored on a Binance
// futures follower. The provider account serves no breakeven rule, so the
// mirror carries the stop and target alone (exitPlan partial, the plan's
// refusal's code named); when the follower's entry fills at the exchange
// its own legs go out there, as far from its entry as the leader's are
// from the leader's, once each, reduce-only, at the follower's size.
func TestCopierProviderFollowerExitPlan(t *testing.T) {
	t.Parallel()
	const apiKey, secret = "copierKEY0002exits", "copierSECRET0002exits"
	sim := startSim(t, binance.Account{APIKey: apiKey, Secret: secret})
	if err := sim.SetPrice("BTCUSDT", "60000"); err != nil {
		t.Fatal(err)
	}
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim)...)
	b, key := signedIn(t, p, dir, "copier-exits@example.com")
	follower, fq := linkBinance(t, p, b, apiKey, secret)
	st, m, err := copierCall(p.base, key, "demo-x", "POST", "/api/account/demo", map[string]any{})
	if err != nil || st != 201 {
		t.Fatalf("demo: %d %v %v", st, m, err)
	}
	leader := m["account"].(map[string]any)["accountId"].(string)
	st, g, err := copierCall(p.base, key, "grp-x", "POST", "/api/copier/groups", map[string]any{"leaderAccountId": leader, "followers": []any{
		map[string]any{"accountId": follower, "sizing": map[string]any{"mode": "fixed", "value": "0.002"}, "instrumentMap": map[string]any{"BTC-PERP": "BTCUSDT"}},
	}})
	if err != nil || st != 201 {
		t.Fatalf("group: %d %v %v", st, g, err)
	}
	groupID := g["groupId"].(string)
	// Stop 100 ticks and target 200 ticks of the leader's BTC-PERP (0.5): 50 and 100 from its entry.
	st, pl := doJSON(t, p.base, key, "POST", "/api/exit-plans", map[string]any{"name": "be", "stop": map[string]any{"ticks": 100},
		"targets":   []any{map[string]any{"distance": map[string]any{"ticks": 200}, "share": "1"}},
		"breakeven": map[string]any{"trigger": map[string]any{"ticks": 120}, "plusTicks": 1}})
	if st != 201 {
		t.Fatalf("plan: %d %v", st, pl)
	}
	planID, rev := pl["plan"].(map[string]any)["id"].(string), pl["plan"].(map[string]any)["revision"].(string)
	order := map[string]any{"clientOrderId": "lead-x", "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "limitPrice": "55000",
		"quantity": "0.01", "timeInForce": "gtc"}
	o := placeWithPlan(t, p.base, key, leader, planID, rev, order)
	lead := o["order"].(map[string]any)["brokerOrderId"].(string)

	var outs []any
	waitUntil(t, 20*time.Second, func() bool {
		_, m, _ := copierCall(p.base, key, "", "GET", "/api/copier/groups/"+groupID+"/mirrors?leaderOrderId="+lead, nil)
		outs, _ = m["mirrors"].([]any)
		return len(outs) == 1
	}, func() any { return fmt.Sprint(outs, "\n", p.out) })
	f := outs[0].(map[string]any)["followers"].([]any)[0].(map[string]any)
	if f["status"] != "mirrored" || f["exitPlan"] != "partial" || f["exitPlanCode"] != "invalid_request" || f["quantity"] != "0.002" {
		t.Fatalf("the provider follower's outcome %v", f)
	}
	st, br := doJSON(t, p.base, key, "GET", "/api/account/brackets"+fq, nil)
	items, _ := br["items"].([]any)
	if st != 200 || len(items) != 1 || items[0].(map[string]any)["plannedQuantity"] != "0.002" {
		t.Fatalf("the follower's brackets: %d %v", st, br)
	}
	if _, ms := doJSON(t, p.base, key, "GET", "/api/account/managed-exits"+fq, nil); len(ms["items"].([]any)) != 0 {
		t.Fatalf("a provider account manages %v", ms["items"])
	}

	// The follower's entry fills at the exchange: its own legs go out there.
	if err := sim.SetPrice("BTCUSDT", "54990"); err != nil {
		t.Fatal(err)
	}
	open := func() []string {
		var out []string
		for _, o := range sim.OpenOrders(apiKey, "BTCUSDT") {
			out = append(out, fmt.Sprintf("%s %s %s@%s reduceOnly=%v", o.Side, o.Quantity, o.Type, o.StopPrice, o.ReduceOnly))
		}
		slices.Sort(out)
		return out
	}
	want := []string{"SELL 0.002 STOP_MARKET@54950.00 reduceOnly=true", "SELL 0.002 TAKE_PROFIT_MARKET@55100.00 reduceOnly=true"}
	waitUntil(t, 20*time.Second, func() bool { return slices.Equal(open(), want) }, func() any { return fmt.Sprint(open(), "\n", p.out) })
	_, br = doJSON(t, p.base, key, "GET", "/api/account/brackets"+fq, nil)
	for _, l := range br["items"].([]any)[0].(map[string]any)["legs"].([]any) {
		id := l.(map[string]any)["id"].(string)
		if n := sim.OrdersByClientID(apiKey, provider.ClientOrderID(follower, id)); l.(map[string]any)["kind"] != "runner" && n != 1 {
			t.Fatalf("the exchange took %d orders of leg %s, want 1", n, id)
		}
	}
}

// placeWithPlan places order on account with the exit plan planID at rev,
// previewed first (the preview takes the order's fields but its time in
// force), and answers the placement's answer.
// A provider follower whose exchange limits the key for a minute: the
// mirror is refused at once with provider_rate_limited, the outcome says
// so, and the copier does not send it again for the 30 s of its retries
// (each a refusal the limit answers too).
func TestCopierProviderFollowerRateLimited(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	const apiKey, secret = "copierKEY0002limited", "copierSECRET0002limited"
	sim := startSim(t, binance.Account{APIKey: apiKey, Secret: secret})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim)...)
	b, key := signedIn(t, p, dir, "limited@example.com")
	follower, _ := linkBinance(t, p, b, apiKey, secret)
	st, m, err := copierCall(p.base, key, "demo-l", "POST", "/api/account/demo", map[string]any{})
	if err != nil || st != 201 {
		t.Fatalf("demo: %d %v %v", st, m, err)
	}
	leader := m["account"].(map[string]any)["accountId"].(string)
	st, g, err := copierCall(p.base, key, "grp-l", "POST", "/api/copier/groups", map[string]any{"leaderAccountId": leader, "followers": []any{
		map[string]any{"accountId": follower, "sizing": map[string]any{"mode": "fixed", "value": "0.002"}, "instrumentMap": map[string]any{"BTC-PERP": "BTCUSDT"}},
	}})
	if err != nil || st != 201 {
		t.Fatalf("group: %d %v %v", st, g, err)
	}
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Times: 1, Throttle: time.Minute}); err != nil {
		t.Fatal(err)
	}
	before := sim.RequestCount("POST /fapi/v1/order")
	st, o := doJSON(t, p.base, key, "POST", "/api/trading/order?account="+leader, map[string]any{"clientOrderId": "lead-l",
		"instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "limitPrice": "55000", "quantity": "0.01", "timeInForce": "gtc"})
	if st != 200 {
		t.Fatalf("leader order: %d %v", st, o)
	}
	lead := o["order"].(map[string]any)["brokerOrderId"].(string)
	var out map[string]any
	waitUntil(t, 10*time.Second, func() bool {
		_, m, _ := copierCall(p.base, key, "", "GET", "/api/copier/groups/"+g["groupId"].(string)+"/mirrors?leaderOrderId="+lead, nil)
		if ms, _ := m["mirrors"].([]any); len(ms) == 1 {
			if fs, _ := ms[0].(map[string]any)["followers"].([]any); len(fs) == 1 {
				out = fs[0].(map[string]any)
				return out["status"] != nil && out["status"] != "pending"
			}
		}
		return false
	}, func() any { return out })
	if out["status"] != "refused" || out["code"] != "provider_rate_limited" {
		t.Fatalf("the mirror's outcome under the exchange's limit: %v", out)
	}
	if n := sim.RequestCount("POST /fapi/v1/order") - before; n != 1 {
		t.Fatalf("the exchange saw %d placements of the mirror, want the one it limited", n)
	}
}

func placeWithPlan(t *testing.T, base, key, account, planID, rev string, order map[string]any) map[string]any {
	t.Helper()
	pv := map[string]any{"planId": planID, "planRevision": rev}
	for k, v := range order {
		if k != "timeInForce" {
			pv[k] = v
		}
	}
	st, prev := doJSON(t, base, key, "POST", "/api/account/exit-plans/preview?account="+account, pv)
	if st != 200 {
		t.Fatalf("preview: %d %v", st, prev)
	}
	order["exitPlan"] = map[string]any{"planId": planID, "planRevision": rev, "previewToken": prev["preview"].(map[string]any)["token"]}
	st, o := doJSON(t, base, key, "POST", "/api/trading/order?account="+account, order)
	if st != 200 {
		t.Fatalf("order with the plan: %d %v", st, o)
	}
	return o
}

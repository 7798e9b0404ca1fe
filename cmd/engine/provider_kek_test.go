package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/seal"
)

// A KEK rotation through the binary, as docs/secrets.md tells an operator
// to do it: the account is linked under k1; the engine is started with a
// new k2 first and k1 after it, and re-wraps the link's data key at start;
// started again with k2 alone, it still opens the sealed secret and the
// account trades. Started with a setting that lacks the KEK its data key is
// under, the engine serves, names the missing KEK by id (never a key), and
// refuses that account's order before committing it (503
// provider_unavailable): nothing in the orders read, nothing sent.
func TestProviderKEKRotationThroughTheBinary(t *testing.T) {
	t.Parallel()
	const k, s = "kekKEY0001rotation", "kekSECRET0001rotation"
	k1, err := seal.NewKeySetting("k1")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := seal.NewKeySetting("k2")
	if err != nil {
		t.Fatal(err)
	}
	k3, err := seal.NewKeySetting("k3")
	if err != nil {
		t.Fatal(err)
	}
	sim, p, key, q, accountID, dir := linkedSim(t, k, s, "ENGINE_SEAL_KEYS="+k1)
	addr := strings.TrimPrefix(p.base, "http://")
	order := func(p *proc, id string) (int, map[string]any) {
		return doJSON(t, p.base, key, "POST", "/api/trading/order"+q, map[string]any{"clientOrderId": id, "instrument": "BTCUSDT",
			"side": "buy", "orderType": "limit", "quantity": "0.002", "limitPrice": "55000"})
	}
	sent := func(id string) int { return sim.OrdersByClientID(k, provider.ClientOrderID(accountID, id)) }
	restart := func(p *proc, keys string) *proc {
		_ = p.cmd.Process.Kill()
		_, _ = p.cmd.Process.Wait()
		return start(t, build(t), dir, addr, providerEnv(t, sim, "ENGINE_SEAL_KEYS="+keys, "ENGINE_LOG_LEVEL=info")...)
	}
	if st, m := order(p, "kek-1"); st != 200 || sent("kek-1") != 1 {
		t.Fatalf("an order under k1: %d %v, at the exchange %d", st, m, sent("kek-1"))
	}

	// k2 first, k1 after it: the start re-wraps the data key under k2.
	p = restart(p, k2+","+k1)
	waitUntil(t, 10*time.Second, func() bool { return strings.Contains(p.out.String(), "re-wrapped") }, func() any { return p.out.String() })
	if st, m := order(p, "kek-2"); st != 200 || sent("kek-2") != 1 {
		t.Fatalf("an order with k2 first: %d %v, at the exchange %d\n%s", st, m, sent("kek-2"), p.out)
	}

	// k2 alone: the sealed secret still opens.
	p = restart(p, k2)
	if st, m := order(p, "kek-3"); st != 200 || sent("kek-3") != 1 {
		t.Fatalf("an order with k2 alone: %d %v, at the exchange %d\n%s", st, m, sent("kek-3"), p.out)
	}

	// A setting without k2: the data key cannot be opened. The order is
	// refused before it is committed: 503 provider_unavailable with
	// Retry-After, nothing in the orders read, nothing at the exchange. A
	// retry of an order placed before answers as it stood. The engine names
	// k2 and nothing of any key.
	placed := sim.RequestCount("POST /fapi/v1/order")
	p = restart(p, k3)
	req, _ := http.NewRequest("POST", p.base+"/api/trading/order"+q, strings.NewReader(
		`{"clientOrderId":"kek-4","instrument":"BTCUSDT","side":"buy","orderType":"limit","quantity":"0.002","limitPrice":"55000"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	st := resp.StatusCode
	if params, _ := m["params"].(map[string]any); st != 503 || m["code"] != "provider_unavailable" || resp.Header.Get("Retry-After") != "1" ||
		params["provider"] != "binance-futures" || len(params) != 1 {
		t.Fatalf("an order with the data key's KEK missing: %d %s (Retry-After %q)", st, raw, resp.Header.Get("Retry-After"))
	}
	if st, m := order(p, "kek-3"); st != 409 || m["code"] != "idempotency_conflict" {
		t.Fatalf("a retry of an order placed before, with the KEK missing: %d %v", st, m)
	}
	st2, ordersRaw, err := call(p.base, key, "GET", "/api/account/orders"+q+"&state=all&limit=500", nil)
	if err != nil || st2 != 200 {
		t.Fatalf("orders: %d %s %v", st2, ordersRaw, err)
	}
	var page struct {
		Orders []struct {
			ClientOrderID string `json:"clientOrderId"`
		} `json:"orders"`
	}
	if err := json.Unmarshal(ordersRaw, &page); err != nil {
		t.Fatal(err)
	}
	for _, o := range page.Orders {
		if o.ClientOrderID == "kek-4" {
			t.Fatalf("the refused order was committed: %s", ordersRaw)
		}
	}
	if len(page.Orders) != 3 {
		t.Fatalf("the orders read lists %d orders, want the 3 placed before: %s", len(page.Orders), ordersRaw)
	}
	if sent("kek-4") != 0 || sim.RequestCount("POST /fapi/v1/order") != placed {
		t.Fatalf("the exchange saw the order: %d (%d placements, were %d)", sent("kek-4"), sim.RequestCount("POST /fapi/v1/order"), placed)
	}
	waitUntil(t, 10*time.Second, func() bool { return strings.Contains(p.out.String(), "k2") }, func() any { return p.out.String() })
	for _, setting := range []string{k1, k2, k3} {
		secret := setting[strings.IndexByte(setting, ':')+1:]
		if strings.Contains(p.out.String(), secret) {
			t.Fatalf("the engine printed a KEK")
		}
	}
	t.Logf("with the KEK missing the order answered %d %v", st, m["code"])
}

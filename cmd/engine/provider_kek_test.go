package main_test

import (
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
// sends nothing for that account.
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

	// A setting without k2: the data key cannot be opened. The engine names
	// k2 and nothing of any key, and the order reaches no exchange.
	p = restart(p, k3)
	st, m := order(p, "kek-4")
	if st != 503 || sent("kek-4") != 0 {
		t.Fatalf("an order with the data key's KEK missing: %d %v, at the exchange %d", st, m, sent("kek-4"))
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

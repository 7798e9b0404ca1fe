package main_test

import (
	"fmt"
	"testing"

	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/sim/binance"
)

// startSim starts an exchange simulator on 127.0.0.1 holding the accounts;
// it closes with the test.
func startSim(t *testing.T, accounts ...binance.Account) *binance.Sim {
	t.Helper()
	sim := binance.New(binance.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, a := range accounts {
		if err := sim.AddAccount(a); err != nil {
			t.Fatal(err)
		}
	}
	return sim
}

// providerEnv is the engine's settings for trading at sim: its addresses,
// private addresses allowed (the simulator is on loopback) and a sealing key
// of the test's own, then extra.
func providerEnv(t *testing.T, sim *binance.Sim, extra ...string) []string {
	t.Helper()
	keys, err := seal.NewKeySetting("k1")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"ENGINE_BINANCE_REST_URL=" + sim.URL(), "ENGINE_BINANCE_WS_URL=" + sim.WSURL(),
		"ENGINE_BINANCE_SPOT_URL=" + sim.URL(), "ENGINE_PROVIDER_ALLOW_PRIVATE=1", "ENGINE_SEAL_KEYS=" + keys}, extra...)
}

// linkProvider links a provider account for b's trader with body (the
// link request); fatal unless it is linked (201). It answers the account's
// id and the query naming it on the account and trading routes.
func linkProvider(t *testing.T, p *proc, b *browser, body map[string]any) (accountID, q string) {
	t.Helper()
	st, m := b.do("POST", "/api/account/providers", body)
	if st != 201 {
		t.Fatalf("link: %d %v\n%s", st, m, p.out)
	}
	a := m["account"].(map[string]any)
	return a["accountId"].(string), fmt.Sprintf("?broker=%s&account=%s", a["broker"], a["accountNumber"])
}

// linkBinance links the Binance futures account of apiKey and secret (the
// simulator's) for b's trader, as linkProvider.
func linkBinance(t *testing.T, p *proc, b *browser, apiKey, secret string) (accountID, q string) {
	t.Helper()
	return linkProvider(t, p, b, map[string]any{"provider": "binance-futures", "apiKey": apiKey, "apiSecret": secret})
}

// caller calls the engine at p's address (a restart on the same address
// keeps it) with the trader's key and answers the status and the answer
// decoded (empty when it is not a JSON object).
func caller(t *testing.T, p *proc, key string) func(method, path string, body any) (int, map[string]any) {
	return func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		return doJSON(t, p.base, key, method, path, body)
	}
}

package main_test

import (
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

package main_test

import (
	"strings"
	"testing"

	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// A linked futures login's account lists the contracts it trades: the
// month its provider trades now of each product the catalog and the
// provider share, from the provider's own contract library, tradable, with
// the fields every instrument has; no crypto perpetual and no paper symbol.
func TestTradovateAccountInstruments(t *testing.T) {
	sim, p, _, key, q, _, _, _ := linkedTradovate(t, tradovatesim.Options{})
	do := caller(t, p, key)
	st, m := do("GET", "/api/account/instruments"+q, nil)
	if st != 200 {
		t.Fatalf("instruments: %d %v", st, m)
	}
	syms, _ := m["symbols"].([]any)
	got := map[string]map[string]any{}
	for _, s := range syms {
		it := s.(map[string]any)
		got[it["symbol"].(string)] = it
		if it["type"] != "future" || it["tradable"] != true || it["name"] == "" || it["exchange"] == "" {
			t.Errorf("instrument %v: want a tradable future with a name and an exchange", it)
		}
	}
	for _, root := range []string{"ES", "NQ", "ZN"} {
		front := sim.FrontContract(root)
		it, ok := got[front]
		if !ok {
			t.Errorf("%s (%s) not listed: %v", front, root, syms)
			continue
		}
		if root == "ZN" && it["exchange"] != "CBOT" || root != "ZN" && it["exchange"] != "CME" {
			t.Errorf("%s exchange %v", front, it["exchange"])
		}
	}
	if acct, _ := m["account"].(string); acct == "" || !strings.Contains(q, "account="+acct) {
		t.Errorf("account %v, want the one asked for (%s)", m["account"], q)
	}
}

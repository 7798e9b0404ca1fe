package main_test

import (
	"testing"
	"time"

	"github.com/svc/engine/events"
	"github.com/svc/engine/sim/binance"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// summaryOf reads the account's snapshot summary figure name as a decimal
// (zero when absent).
func summaryOf(frame map[string]any, name string) events.Decimal {
	s, _ := frame["summary"].(map[string]any)
	v, _ := s[name].(string)
	d, _ := events.ParseDecimal(v)
	return d
}

// A provider that sends the balance a fill moved before the fill itself
// (the simulators' balanceFirst) leaves the account's balance at the
// provider's: a close's realized PnL and fees are counted once, not again
// when the fill arrives after the balance that holds it.
func TestProviderBalanceReportedBeforeItsFill(t *testing.T) {
	t.Run("binance", func(t *testing.T) {
		sim := startSim(t, binance.Account{APIKey: simKey, Secret: simSecret, Balances: map[string]string{"USDT": "10000"}})
		sim.SetStreamFaults(binance.StreamFaults{BalanceFirst: true})
		if err := sim.SetPrice("BTCUSDT", "50000"); err != nil {
			t.Fatal(err)
		}
		bin, dir, addr := build(t), t.TempDir(), freePort(t)
		p := start(t, bin, dir, addr, providerEnv(t, sim)...)
		b, key := signedIn(t, p, dir, "balance@example.com")
		_, q := linkBinance(t, p, b, simKey, simSecret)
		do := caller(t, p, key)
		frame := func() map[string]any {
			_, f := do("GET", "/api/account/snapshot"+q, nil)
			return f
		}
		if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "bf-1", "instrument": "BTCUSDT", "side": "buy",
			"orderType": "market", "quantity": "0.01"}); st != 200 {
			t.Fatalf("market order: %d %v\n%s", st, m, p.out)
		}
		waitUntil(t, 20*time.Second, func() bool { ps, _ := frame()["positions"].([]any); return len(ps) == 1 }, func() any { return frame() })
		if err := sim.SetPrice("BTCUSDT", "50100"); err != nil {
			t.Fatal(err)
		}
		if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "bf-x"}); st != 200 {
			t.Fatalf("close: %d %v", st, m)
		}
		// 10000, less 0.2 (0.04% of 500) to open, plus 1 realized less
		// 0.2004 (0.04% of 501) to close: what the exchange's wallet holds.
		want := events.MustDecimal("10000.5996")
		waitUntil(t, 20*time.Second, func() bool {
			f := frame()
			ps, _ := f["positions"].([]any)
			return len(ps) == 0 && summaryOf(f, "realizedPnl").Cmp(events.Int(1)) == 0
		}, func() any { return frame() })
		// The exchange's answer to the close may record its fill before the
		// stream does; the balance is the exchange's once its report is in,
		// and stays so when the fill's own report comes after it.
		waitUntil(t, 20*time.Second, func() bool { return summaryOf(frame(), "balance").Cmp(want) == 0 }, func() any { return frame()["summary"] })
		time.Sleep(time.Second) // nothing the exchange still sends may move it
		if got := summaryOf(frame(), "balance"); got.Cmp(want) != 0 {
			t.Fatalf("balance %s after the close, want the exchange's %s (the close's money once)", got, want)
		}
	})
	t.Run("tradovate", func(t *testing.T) {
		sim, p, _, key, q, _, _, _ := linkedTradovate(t, tradovatesim.Options{})
		do := caller(t, p, key)
		es := sim.FrontContract("ES")
		frame := func() map[string]any {
			_, f := do("GET", "/api/account/snapshot"+q, nil)
			return f
		}
		if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "bf-1", "instrument": es, "side": "buy",
			"orderType": "market", "quantity": "2"}); st != 200 {
			t.Fatalf("market order: %d %v\n%s", st, m, p.out)
		}
		var avg events.Decimal
		waitUntil(t, 20*time.Second, func() bool {
			ps, _ := frame()["positions"].([]any)
			if len(ps) != 1 {
				return false
			}
			a, err := events.ParseDecimal(ps[0].(map[string]any)["avgPrice"].(string))
			avg = a
			return err == nil
		}, func() any { return frame() })
		if err := sim.SetPrice(es, avg.Add(events.Int(1)).String()); err != nil {
			t.Fatal(err)
		}
		// The fault is the close's: an opening fill moves no cash, and the
		// simulator holds a fill back until the cash balance it moved.
		sim.SetStreamFaults(tradovatesim.StreamFaults{BalanceFirst: true})
		if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": es, "clientOrderId": "bf-x"}); st != 200 {
			t.Fatalf("close: %d %v", st, m)
		}
		waitUntil(t, 20*time.Second, func() bool {
			f := frame()
			ps, _ := f["positions"].([]any)
			return len(ps) == 0 && summaryOf(f, "realizedPnl").Cmp(events.Int(100)) == 0
		}, func() any { return frame() })
		// The demo login's 50,000 and the close of 2 ES one point up (50 a point).
		if got := summaryOf(frame(), "balance"); got.Cmp(events.Int(50100)) != 0 {
			t.Fatalf("balance %s after the close, want the provider's cash 50100 (the close's money once)", got)
		}
	})
}

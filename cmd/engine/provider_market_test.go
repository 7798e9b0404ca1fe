package main_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/svc/engine/sim/binance"
)

// TestProviderMarketDataThroughTheBinary: with a Binance address set, the
// engine serves the exchange's perpetuals from its public feed (the in-process
// simulator): quotes and history of BTCUSDT at the simulator's prices, the
// exchange's filters in symbol info, a linked account's instruments are the
// provider's perpetuals (a paper account's are not), and the frame's mark and
// unrealized PnL of the linked account's position follow the simulator's price.
func TestProviderMarketDataThroughTheBinary(t *testing.T) {
	sim := startSim(t, binance.Account{APIKey: simKey, Secret: simSecret})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim)...)
	b, key := signedIn(t, p, dir, "feed@example.com")
	get := func(path string) (int, map[string]any) {
		t.Helper()
		st, raw, err := call(p.base, key, "GET", path, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return st, m
	}
	num := func(v any) float64 {
		f, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
		return f
	}

	// The feed connects after the start; the simulator's price reaches the quote route.
	var quote map[string]any
	waitUntil(t, 10*time.Second, func() bool {
		if err := sim.SetPrice("BTCUSDT", "61000.5"); err != nil {
			t.Fatal(err)
		}
		st, m := get("/api/market/quotes?instruments=BTCUSDT")
		if st != 200 {
			quote = m
			return false
		}
		quote = m["quotes"].([]any)[0].(map[string]any)
		return num(quote["bid"]) == 61000.5 && num(quote["ask"]) == 61000.5
	}, func() any { return quote })
	if num(quote["mid"]) != 61000.5 {
		t.Fatalf("quote %v", quote)
	}

	st, info := get("/api/market/symbol-info?symbol=BTCUSDT")
	if st != 200 {
		t.Fatalf("symbol info: %d %v", st, info)
	}
	if info["exchange"] != "BINANCE" || info["lotStep"] != "0.001" || info["minQuantity"] != "0.001" || num(info["priceFormat"].(map[string]any)["tickSize"]) != 0.1 {
		t.Fatalf("symbol info does not carry the exchange's filters: %v", info)
	}

	st, hist := get("/api/market/history?instrument=BTCUSDT&tf=1m&countBack=5")
	bars, _ := hist["bars"].([]any)
	if st != 200 || len(bars) == 0 {
		t.Fatalf("history: %d %v", st, hist)
	}
	if last := bars[len(bars)-1].(map[string]any); num(last["close"]) != 61000.5 {
		t.Fatalf("the newest bar does not close at the simulator's price: %v", last)
	}

	// A linked account lists the exchange's perpetuals, not the paper book's instruments.
	_, q := linkBinance(t, p, b, simKey, simSecret)
	st, listed := get("/api/account/instruments" + q)
	if got := symbolsOf(listed); st != 200 || len(got) != 3 || !got["BTCUSDT"] || !got["ETHUSDT"] || !got["SOLUSDT"] || got["BTC-PERP"] {
		t.Fatalf("provider instruments: %d %v", st, listed)
	}

	// A long 0.01 BTCUSDT at 61000.5; the price moves, the frame's mark and unrealized PnL follow.
	if st, m := b2(t, p.base, key, "/api/trading/order"+q, map[string]any{"clientOrderId": "feed-1", "instrument": "BTCUSDT",
		"side": "buy", "orderType": "market", "quantity": "0.01"}); st != 200 {
		t.Fatalf("order: %d %v", st, m)
	}
	position := func() map[string]any {
		_, f := get("/api/account/snapshot" + q)
		for _, x := range asList(f["positions"]) {
			if x := x.(map[string]any); x["instrument"] == "BTCUSDT" {
				return x
			}
		}
		return nil
	}
	var pos map[string]any
	waitUntil(t, 10*time.Second, func() bool {
		_ = sim.SetPrice("BTCUSDT", "62000.5")
		pos = position()
		return pos != nil && num(pos["markPrice"]) == 62000.5 && num(pos["unrealizedPnl"]) == 10
	}, func() any { return pos })
	waitUntil(t, 10*time.Second, func() bool {
		_ = sim.SetPrice("BTCUSDT", "60000.5")
		pos = position()
		return pos != nil && num(pos["markPrice"]) == 60000.5 && num(pos["unrealizedPnl"]) == -10
	}, func() any { return pos })
	sse := streamFrame(t, p.base, key, "/api/account/stream"+q)
	for _, x := range asList(sse["positions"]) {
		if x := x.(map[string]any); x["instrument"] == "BTCUSDT" && num(x["unrealizedPnl"]) != -10 {
			t.Fatalf("stream frame position %v", x)
		}
	}
}

func symbolsOf(m map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, x := range asList(m["symbols"]) {
		out[x.(map[string]any)["symbol"].(string)] = true
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func b2(t *testing.T, base, key, path string, body any) (int, map[string]any) {
	t.Helper()
	st, raw, err := call(base, key, "POST", path, body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return st, m
}

package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc/engine/sim/binance"
)

const (
	holdKey    = "vhKEYzz81VqXlinkedBinanceAPIkey00001"
	holdSecret = "vhSECRETqq42nnNeverInTheLogOrOutput1"
)

// venueCall sends a venue-platform request with the venue key (and an
// Idempotency-Key when idem is not empty).
func venueCall(t *testing.T, base, key, idem, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// A venue holds live trading off for the trader it pre-registered, through
// the binary and the exchange simulator, with live trading off by default
// as in production: the trader links their account, switches live trading
// on with the password and trades; the venue's hold (its venue key) then
// refuses the order and the reverse with 403 feature_disabled held by the
// venue, reducing orders included, while the close and the paper account
// still trade; the trader reads the hold on their switch and switching on
// again does not pass it; the hold outlives a restart of the engine; the
// venue releases it and the trader trades again; the simulator saw no
// order while the hold stood.
func TestVenueHoldThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	sim := startSim(t, binance.Account{APIKey: holdKey, Secret: holdSecret})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	env := providerEnv(t, sim, "ENGINE_LIVE_TRADING_DEFAULT=off")
	p := start(t, bin, dir, addr, env...)
	raw, err := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cr struct {
		VenueID    string `json:"venueId"`
		VenueKey   string `json:"venueKey"`
		PartnerKey string `json:"partnerKey"`
	}
	if err := json.Unmarshal(raw, &cr); err != nil || cr.VenueKey == "" || cr.PartnerKey == "" {
		t.Fatalf("credentials: %v", err)
	}
	vv := "/api/venues/" + cr.VenueID

	// The venue pre-registers the trader, who links their account: the venue's trader.
	if st, raw, err := call(p.base, cr.PartnerKey, "POST", "/api/partner/connect/accounts",
		map[string]any{"email": "venue.trader@example.com", "provider": "binance-futures"}); err != nil || st != 200 {
		t.Fatalf("registration: %d %s %v", st, raw, err)
	}
	b, key := signedIn(t, p, dir, "venue.trader@example.com")
	accountID, q := linkBinance(t, p, b, holdKey, holdSecret)
	do := caller(t, p, key)
	st, m := do("POST", "/api/account/demo", map[string]any{})
	if st != 201 {
		t.Fatalf("demo: %d %v", st, m)
	}
	paper := "?broker=paper&account=" + m["account"].(map[string]any)["accountNumber"].(string)
	order := func(id string, reduce bool) (int, map[string]any) {
		body := map[string]any{"clientOrderId": id, "instrument": "BTCUSDT", "side": "buy", "orderType": "market", "quantity": "0.01"}
		if reduce {
			body["side"], body["reduceOnly"] = "sell", true
		}
		return do("POST", "/api/trading/order"+q, body)
	}
	heldByVenue := func(what string, st int, m map[string]any) {
		t.Helper()
		p, _ := m["params"].(map[string]any)
		if st != 403 || m["code"] != "feature_disabled" || p["feature"] != "live_trading" || p["heldBy"] != "venue" || len(p) != 2 {
			t.Fatalf("%s with the venue's hold: %d %v", what, st, m)
		}
	}
	switchOn := func() map[string]any {
		t.Helper()
		st, m := b.do("POST", "/api/account/live-trading", map[string]any{"enabled": true, "password": "an e2e password"})
		if st != 200 {
			t.Fatalf("switch on: %d %v", st, m)
		}
		return m["liveTrading"].(map[string]any)
	}
	if st, m := order("before-off", false); st != 403 || m["params"].(map[string]any)["heldBy"] != "user" {
		t.Fatalf("off by default: %d %v", st, m)
	}
	switchOn()
	if st, m := order("before-1", false); st != 200 {
		t.Fatalf("an order before the hold: %d %v\n%s", st, m, p.out)
	}
	placed := sim.RequestCount("POST /fapi/v1/order")

	// The venue holds its whole venue with its key.
	if st, m := venueCall(t, p.base, cr.VenueKey, "hold-1", "POST", vv+"/live-trading/hold", map[string]any{"reason": "exchange incident"}); st != 200 ||
		m["liveTrading"].(map[string]any)["held"] != true {
		t.Fatalf("hold: %d %v", st, m)
	}
	st, m = order("held-1", false)
	heldByVenue("an order", st, m)
	st, m = order("held-2", true)
	heldByVenue("a reduce-only order", st, m)
	st, m = do("POST", "/api/trading/reverse"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "held-r"})
	heldByVenue("a reverse", st, m)
	if st, m := do("POST", "/api/trading/order"+paper, map[string]any{"clientOrderId": "p-1", "instrument": "BTC-PERP", "side": "buy",
		"orderType": "market", "quantity": "0.01"}); st != 200 {
		t.Fatalf("paper with the venue's hold: %d %v", st, m)
	}
	lt := switchOn()
	hs, _ := lt["holds"].([]any)
	if len(hs) != 1 || hs[0].(map[string]any)["accountId"] != accountID || hs[0].(map[string]any)["scope"] != "venue" || strings.Contains(string(mustJSON(lt)), "exchange incident") {
		t.Fatalf("the trader reads %v", lt)
	}
	st, m = order("held-3", false)
	heldByVenue("an order after switching on again", st, m)

	// The hold outlives a restart.
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	p = start(t, bin, dir, addr, env...)
	st, m = order("held-4", false)
	heldByVenue("an order after a restart", st, m)
	if st, m := venueCall(t, p.base, cr.VenueKey, "", "GET", vv+"/live-trading", nil); st != 200 || m["liveTrading"].(map[string]any)["held"] != true {
		t.Fatalf("the venue reads after a restart: %d %v", st, m)
	}
	if n := sim.RequestCount("POST /fapi/v1/order"); n != placed {
		t.Fatalf("the exchange saw %d orders while the hold stood, %d before", n, placed)
	}
	// The close stays available.
	if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "held-close"}); st != 200 {
		t.Fatalf("the close with the venue's hold: %d %v\n%s", st, m, p.out)
	}

	// Released: the trader trades again.
	if st, m := venueCall(t, p.base, cr.VenueKey, "release-1", "POST", vv+"/live-trading/release", map[string]any{}); st != 200 ||
		m["liveTrading"].(map[string]any)["held"] != false {
		t.Fatalf("release: %d %v", st, m)
	}
	if st, m := order("after-1", false); st != 200 {
		t.Fatalf("an order after the release: %d %v\n%s", st, m, p.out)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

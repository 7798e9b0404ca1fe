package trading_test

import (
	"net/http"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

func TestMarketOrderFillsAtTheTouch(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	r := e.Post("/api/trading/order", map[string]any{"clientOrderId": "c1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	o := r.Map(t)["order"].(map[string]any)
	if o["state"] != "filled" || o["avgFillPrice"] != "65000.5" {
		t.Fatalf("order %v", o)
	}
}

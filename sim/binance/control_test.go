package binance_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/sim/binance"
)

func post(t *testing.T, sim *binance.Sim, path, body string) (int, map[string]any) {
	t.Helper()
	res, err := http.Post(sim.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func TestControlAPI(t *testing.T) {
	sim, _ := newSim(t, binance.Options{})
	ctx := context.Background()
	if code, out := post(t, sim, "/_sim/accounts", `{"apiKey":"ctl-key","secret":"ctl-secret","balances":{"USDT":"500"}}`); code != 200 {
		t.Fatalf("account: %d %v", code, out)
	}
	c := futures.NewClient("ctl-key", "ctl-secret")
	c.BaseURL = sim.URL()
	if code, out := post(t, sim, "/_sim/price", `{"symbol":"SOLUSDT","price":"100"}`); code != 200 {
		t.Fatalf("price: %d %v", code, out)
	}
	if code, out := post(t, sim, "/_sim/accounts/ctl-key/orders", `{"symbol":"SOLUSDT","side":"BUY","type":"MARKET","quantity":"2","newClientOrderId":"phone-1"}`); code != 200 {
		t.Fatalf("outside order: %d %v", code, out)
	}
	pos, err := c.NewGetPositionRiskService().Symbol("SOLUSDT").Do(ctx)
	if err != nil || pos[0].PositionAmt != "2" || pos[0].MarkPrice != "100.00000000" {
		t.Fatalf("position = %+v, %v", pos, err)
	}
	if code, out := post(t, sim, "/_sim/faults", `{"route":"GET /fapi/v2/balance","times":1,"status":502}`); code != 200 {
		t.Fatalf("fault: %d %v", code, out)
	}
	// The library reads /fapi/v3/balance: a fault on v2 leaves it alone.
	if _, err := c.NewGetBalanceService().Do(ctx); err != nil {
		t.Fatalf("v3 balance: %v", err)
	}
	if code, _ := post(t, sim, "/_sim/faults", `{"drop":true,"status":503}`); code != 400 {
		t.Fatalf("a fault with two effects was accepted: %d", code)
	}
	if code, out := post(t, sim, "/_sim/accounts/ctl-key/multiassets", `{"on":true}`); code != 200 {
		t.Fatalf("multiassets: %d %v", code, out)
	}
	res, err := http.Get(sim.URL() + "/_sim/counters")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var counters struct {
		Requests         map[string]int
		OrdersByClientID map[string]map[string]int `json:"ordersByClientId"`
	}
	if err := json.NewDecoder(res.Body).Decode(&counters); err != nil {
		t.Fatal(err)
	}
	if counters.OrdersByClientID["ctl-key"]["phone-1"] != 1 || counters.Requests["GET /fapi/v3/balance"] != 1 {
		t.Fatalf("counters = %+v", counters)
	}
}

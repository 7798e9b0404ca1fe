package trading_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// An order is answered from its decision, not from the read models: the
// answer is the order the read models show once they fold its commit, and
// the caller's next read shows it (read-your-writes), on both stores.
func TestAnOrderAnsweredFromItsDecisionIsTheOrderTheReadModelsShow(t *testing.T) {
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			e := apptest.Start(t, apptest.Options{Postgres: store == "postgres"})
			orders := []map[string]any{
				{"instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.02"},
				{"instrument": "BTC-PERP", "side": "sell", "orderType": "limit", "quantity": "0.01", "limitPrice": "90000"},
				{"instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "0.01", "limitPrice": "1000", "timeInForce": "ioc"},
				{"instrument": "ETH-PERP", "side": "sell", "orderType": "stop", "quantity": "0.5", "stopPrice": "100"},
			}
			for i, body := range orders {
				body["clientOrderId"] = fmt.Sprintf("dec-%d", i)
				r := e.Post("/api/trading/order", body)
				if r.Status != http.StatusOK {
					t.Fatalf("order %d: %d %s", i, r.Status, r.Body)
				}
				var answer struct {
					Order json.RawMessage `json:"order"`
				}
				r.JSON(t, &answer)
				// Read right away: the read waits for the read models to show the write.
				list := e.Get("/api/account/orders?state=all&limit=500")
				var page struct {
					Orders []json.RawMessage `json:"orders"`
				}
				list.JSON(t, &page)
				found := false
				for _, o := range page.Orders {
					var id struct {
						ClientOrderID string `json:"clientOrderId"`
					}
					_ = json.Unmarshal(o, &id)
					if id.ClientOrderID == body["clientOrderId"] {
						found = true
						if !sameJSON(t, o, answer.Order) {
							t.Fatalf("order %d answered %s, the read model shows %s", i, answer.Order, o)
						}
					}
				}
				if !found {
					t.Fatalf("order %d answered %s is not in the caller's next read", i, answer.Order)
				}
			}
		})
	}
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

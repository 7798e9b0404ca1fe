package trading_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// A resting limit that a quote touches fills at its limit even when the next
// quote comes back before the paper book's wake has decided (the touch
// rule): whichever of the two quotes the wake decides on, it fills at 95
// (the reactor names it as touched when the wake comes after the recovery).
func TestALimitTouchedFillsThoughThePriceCameBack(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	quote(e, "100", "101")
	for i := range 5 {
		o := orderOf(t, e.Post("/api/trading/order", order(fmt.Sprint("l", i), "buy", "limit", "0.1", "limitPrice", "95", "timeInForce", "gtc")))
		id := o["brokerOrderId"].(string)
		quote(e, "94", "95")   // touches the limit
		quote(e, "100", "101") // and back at once
		apptest.WaitFor(t, 5*time.Second, func() error {
			for _, x := range e.Get("/api/account/orders?state=closed").Map(t)["orders"].([]any) {
				if o := x.(map[string]any); o["brokerOrderId"] == id && o["state"] == "filled" {
					if o["avgFillPrice"] != "95" {
						t.Fatalf("limit %d filled at %v, want 95", i, o["avgFillPrice"])
					}
					return nil
				}
			}
			return fmt.Errorf("limit %d not filled", i)
		})
	}
}

package trading_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// Without a futures source every futures symbol (a root, a contract, a
// continuous symbol) answers one thing wherever it is asked: 503
// feed_requires_connection with params.instrument and no Retry-After (the
// code is not retry-safe: only connecting a source changes the answer), and
// an order records nothing.
func TestFuturesWithoutASourceAnswerOneWay(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	for i, sym := range []string{"ES", "ESZ6", "ES1!", "nqh7"} {
		info := e.Get("/api/market/symbol-info?instrument=" + url.QueryEscape(sym))
		order := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order",
			Body: map[string]any{"clientOrderId": fmt.Sprintf("fut-%d", i), "instrument": sym, "side": "buy", "orderType": "market", "quantity": "1"}})
		for where, r := range map[string]*apptest.Resp{"symbol-info": info, "order": order} {
			m := wantError(t, r, http.StatusServiceUnavailable, "feed_requires_connection")
			if ra := r.Header.Get("Retry-After"); ra != "" {
				t.Errorf("%s %s: Retry-After %q", where, sym, ra)
			}
			if p, _ := m["params"].(map[string]any); p["instrument"] == nil {
				t.Errorf("%s %s: params %v", where, sym, m["params"])
			}
		}
	}
	if os := e.Get("/api/account/orders").Map(t)["orders"].([]any); len(os) != 0 {
		t.Fatalf("futures orders recorded: %v", os)
	}
}

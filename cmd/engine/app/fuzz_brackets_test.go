package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// FuzzBrackets sends fuzzed bodies to the bracket routes: orders with an
// exitPlan (a real token previewed for each attempt stands in for %tok),
// protections, changes of a live bracket's legs and withdrawals. The first
// byte picks the route; %coid, %plan, %rev, %tok, %entry, %bracket and %leg
// are replaced by live values.
func FuzzBrackets(f *testing.F) {
	routes := []struct{ method, path string }{{"POST", "/api/trading/order"}, {"POST", "/api/trading/exits"},
		{"PATCH", "/api/trading/exits/%bracket"}, {"DELETE", "/api/trading/exits/%path"}}
	seeds := []string{
		`{"clientOrderId":"%coid","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"0.01","exitPlan":{"planId":"%plan","planRevision":"%rev","previewToken":"%tok"}}`,
		`{"clientOrderId":"%coid","instrument":"BTC-PERP","planId":"%plan","planRevision":"%rev"}`,
		`{"legs":[{"id":"%leg","price":"59000"}]}`,
		`%bracket`,
		`{"clientOrderId":"%coid","instrument":"BTC-PERP","side":"buy","orderType":"limit","quantity":"0.01","limitPrice":"1e-70","exitPlan":{"planId":"%plan","planRevision":"%rev","previewToken":"%tok"}}`,
		`{"clientOrderId":"%coid","entryOrderId":"%entry","planId":"%plan","planRevision":"%rev"}`,
		`{"legs":[{"id":"%leg","price":"59000"},{"id":"%leg","price":"1"}]}`,
		`{"clientOrderId":"%coid","instrument":"BTC-PERP","side":"buy","orderType":"stop","quantity":"0.01","stopPrice":"1","exitPlan":{"planId":"%plan","planRevision":"%rev","previewToken":"%tok"}}`,
	}
	for i, s := range seeds {
		f.Add(append([]byte{byte(i % len(routes))}, s...))
	}
	for i, v := range hostile {
		f.Add(append([]byte{2}, strings.ReplaceAll(`{"legs":[{"id":"%leg","price":%v}]}`, "%v", v)...))
		f.Add(append([]byte{0}, strings.ReplaceAll(`{"clientOrderId":"%coid","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":%v,"exitPlan":{"planId":"%plan","planRevision":"%rev","previewToken":"%tok"}}`, "%v", v)...))
		_ = i
	}
	fe := startFuzzEngine(f)
	fe.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal("60000"), Ask: events.MustDecimal("60000.5"),
		Last: events.MustDecimal("60000"), At: time.Now()})
	plan := fe.Post("/api/exit-plans", ladder).Map(f)["plan"].(map[string]any)
	planID, rev := plan["id"].(string), plan["revision"].(string)
	// do sends through fe.send: inside the fuzz target only t may be used.
	do := func(t testing.TB, method, path string, body any) (int, map[string]any) {
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		w := fe.send(t, method, path, fe.Key, b)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, m
	}
	preview := func(t testing.TB, coid, orderType string) string {
		body := map[string]any{"planId": planID, "planRevision": rev, "instrument": "BTC-PERP", "side": "buy", "quantity": "0.01",
			"orderType": orderType, "clientOrderId": coid}
		if orderType == "limit" {
			body["limitPrice"] = "59000"
		}
		code, m := do(t, "POST", "/api/account/exit-plans/preview", body)
		if code != http.StatusOK {
			t.Fatalf("preview: %d %v", code, m)
		}
		return m["preview"].(map[string]any)["token"].(string)
	}
	n := 0
	// live is a resting bracketed entry, placed again when the fuzzer has ended the last one.
	live := func(t testing.TB) (bracket, leg, entry string) {
		_, m := do(t, "GET", "/api/account/brackets", nil)
		items := m["items"].([]any)
		if len(items) == 0 {
			n++
			coid := fmt.Sprintf("fz-rest-%d", n)
			o := map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "0.01",
				"limitPrice": "59000", "timeInForce": "gtc", "exitPlan": map[string]any{"planId": planID, "planRevision": rev, "previewToken": preview(t, coid, "limit")}}
			if code, m := do(t, "POST", "/api/trading/order", o); code != http.StatusOK {
				t.Fatalf("entry: %d %v", code, m)
			}
			_, m = do(t, "GET", "/api/account/brackets", nil)
			items = m["items"].([]any)
		}
		b := items[0].(map[string]any)
		entry, _ = b["entryOrderId"].(string)
		return b["id"].(string), b["legs"].([]any)[0].(map[string]any)["id"].(string), entry
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		r := routes[int(b[0])%len(routes)]
		n++
		coid := fmt.Sprintf("fz-%d", n)
		bracket, leg, entry := live(t)
		body := string(b[1:])
		tok := ""
		if strings.Contains(body, "%tok") {
			tok = preview(t, coid, "market")
		}
		body = strings.NewReplacer("%coid", coid, "%plan", planID, "%rev", rev, "%tok", tok, "%entry", entry,
			"%bracket", bracket, "%leg", leg).Replace(body)
		path := strings.NewReplacer("%bracket", bracket, "%path", pathSegment(body)).Replace(r.path)
		var send []byte
		if r.method != "DELETE" {
			send = []byte(body)
		}
		w := fe.send(t, r.method, path, fe.Key, send)
		if w.Code == http.StatusOK && r.path == "/api/trading/order" {
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			if _, ok := m["order"]; !ok {
				t.Fatalf("an order answer without its order: %s", w.Body)
			}
		}
	})
}

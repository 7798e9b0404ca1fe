package tradovate_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/sim/tradovate"
)

// control calls the control API and decodes its answer.
func (e *env) control(method, path, body string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.sim.ControlURL()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
	return res.StatusCode, m
}

func (e *env) controlOK(method, path, body string) map[string]any {
	e.t.Helper()
	st, m := e.control(method, path, body)
	if st != http.StatusOK {
		e.t.Fatalf("%s %s: %d %v", method, path, st, m)
	}
	return m
}

func TestControlAPI(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	ans := e.controlOK("POST", "/logins", `{"name":"ctl","password":"pw-ctl","kind":"live","marketData":["ES"],"accounts":[{"name":"CTL1","balance":"25000"}]}`)
	if ans["accounts"].(map[string]any)["CTL1"] == nil {
		t.Fatalf("logins = %v", ans)
	}
	if st, m := e.control("POST", "/logins", `{"name":"bad","password":"x","kind":"paper"}`); st != 400 || m["error"] == nil {
		t.Fatalf("bad login: %d %v", st, m)
	}
	e.controlOK("POST", "/price", `{"symbol":"ESZ6","price":"5012.5"}`)
	if got := e.sim.Price("ESZ6"); got != "5012.5" {
		t.Fatalf("price = %s", got)
	}
	if st, _ := e.control("POST", "/price", `{"symbol":"ESZ6","price":"5012.3"}`); st != 400 {
		t.Fatal("an off-tick price was accepted")
	}
	e.controlOK("POST", "/logins/ctl/marketdata", `{"products":["ES","NQ"]}`)

	tok := e.token(liveLogin)
	id := e.controlOK("POST", "/accounts/"+liveAcct+"/orders", `{"action":"Buy","symbol":"ESZ6","orderQty":1,"orderType":"Limit","price":4000.25}`)["orderId"]
	if e.orderStatus(tok, id) != "Working" {
		t.Fatal("outside order not working")
	}
	e.controlOK("POST", "/accounts/"+liveAcct+"/reject", `{"reason":"TradingLocked","text":"locked"}`)
	if rej := e.place(tok, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", nil)); e.orderStatus(tok, rej["orderId"]) != "Rejected" {
		t.Fatal("queued rejection not applied")
	}
	e.controlOK("POST", "/session", `{"open":false}`)
	if r := e.place(tok, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", nil)); r["failureReason"] != "SessionClosed" {
		t.Fatalf("closed session: %v", r)
	}
	e.controlOK("POST", "/session", `{"open":true}`)
	e.controlOK("POST", "/endofday", "")
	if e.orderStatus(tok, id) != "Expired" {
		t.Fatal("end of day kept a Day order")
	}

	e.controlOK("POST", "/faults", `{"endpoint":"order/placeorder","times":1,"status":503}`)
	if st, _ := e.call(tok, "order/placeorder", order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", nil)); st != 503 {
		t.Fatalf("fault: %d", st)
	}
	e.controlOK("POST", "/faults", `{"endpoint":"account/list","lockout":"1m"}`)
	e.controlOK("DELETE", "/faults", "")
	if st, _ := e.call(tok, "account/list", nil); st != 200 {
		t.Fatalf("after clearing: %d", st)
	}
	if st, _ := e.control("POST", "/faults", `{"latency":"soon"}`); st != 400 {
		t.Fatal("a bad duration was accepted")
	}

	s, _ := e.userSocket(tok)
	e.controlOK("POST", "/sockets/faults", `{"duplicate":true}`)
	e.place(tok, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4000}))
	waitFor(t, 5*time.Second, func() bool { ev := s.props(); return len(ev) >= 2 && string(ev[0].Entity) == string(ev[1].Entity) })
	e.controlOK("POST", "/sockets/faults", `{}`)
	e.controlOK("POST", "/sockets/disconnect", "")
	<-s.closed

	e.controlOK("POST", "/tokens/lifetime", `{"lifetime":"1m"}`)
	short := e.login(liveLogin)
	if exp, _ := time.Parse(time.RFC3339, short["expirationTime"].(string)); !exp.Equal(start.Add(time.Minute)) {
		t.Fatalf("lifetime not applied: %v", short["expirationTime"])
	}
	e.controlOK("POST", "/tokens/expire", "")
	if st, _ := e.call(short["accessToken"].(string), "account/list", nil); st != 401 {
		t.Fatalf("after expire: %d", st)
	}
	e.controlOK("POST", "/restart", "")

	e.controlOK("POST", "/roll", `{"contract":"ESZ6","rollDate":"now"}`)
	contracts := e.controlOK("GET", "/contracts", "")
	if es := contracts["ES"].(map[string]any); es["front"] != "ESH7" {
		t.Fatalf("contracts = %v", contracts)
	}
	if st, _ := e.control("POST", "/roll", `{"contract":"ESX9","rollDate":"now"}`); st != 400 {
		t.Fatal("rolled an unknown contract")
	}

	counters := e.controlOK("GET", "/counters", "")
	req := counters["requests"].(map[string]any)
	if req["order/placeorder"] == nil || req["auth/accesstokenrequest"] == nil {
		t.Fatalf("counters = %v", counters)
	}
	for _, k := range []string{"ordersByClOrdId", "ordersByText", "ordersByCustomTag50"} {
		if _, ok := counters[k]; !ok {
			t.Fatalf("counters without %s: %v", k, counters)
		}
	}
}

package tradovate_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/sim/tradovate"
)

func TestLatency(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "account/list", Times: 1, Latency: 200 * time.Millisecond}))
	t0 := time.Now()
	e.list(tok, "account/list")
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Fatalf("answered in %s", d)
	}
	t0 = time.Now()
	e.list(tok, "account/list")
	if d := time.Since(t0); d > 150*time.Millisecond {
		t.Fatalf("latency outlived its times: %s", d)
	}
}

func TestAcceptThenDropOverREST(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "order/placeorder", Times: 1, Drop: true}))
	b, _ := json.Marshal(order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900, "clOrdId": "lost-1"}))
	req, _ := http.NewRequest(http.MethodPost, e.sim.URL()+"/order/placeorder", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+tok)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the client saw an answer: %d", res.StatusCode)
	}
	// The order was placed all the same, once; reading finds it by its clOrdId.
	if n := e.sim.OrdersByClOrdID(liveAcct, "lost-1"); n != 1 {
		t.Fatalf("accepted %d times", n)
	}
	cmds := e.list(tok, "command/list")
	if len(cmds) != 1 || cmds[0]["clOrdId"] != "lost-1" || e.orderStatus(tok, cmds[0]["orderId"]) != "Working" {
		t.Fatalf("commands = %v", cmds)
	}
}

func TestAcceptThenDropOverTheSocket(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	s := dial(t, e.sim.WSURL())
	if r := s.request("authorize", "", tok); r.S != 200 {
		t.Fatal(r)
	}
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "order/placeorder", Times: 1, Drop: true}))
	b, _ := json.Marshal(order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", map[string]any{"clOrdId": "ws-lost"}))
	s.write("order/placeorder\n7\n\n" + string(b))
	select {
	case <-s.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("socket not cut")
	}
	for _, m := range s.messages() {
		if m.I == 7 {
			t.Fatalf("answered: %+v", m)
		}
	}
	if n := e.sim.OrdersByClOrdID(liveAcct, "ws-lost"); n != 1 {
		t.Fatalf("accepted %d times", n)
	}
}

func TestServerErrorIsNotHandled(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "order/placeorder", Times: 1, Status: 503}))
	st, b := e.call(tok, "order/placeorder", order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", map[string]any{"clOrdId": "x"}))
	if st != 503 || !strings.Contains(string(b), "Internal Server Error") {
		t.Fatalf("%d %s", st, b)
	}
	if n := e.sim.OrdersByClOrdID(liveAcct, "x"); n != 0 {
		t.Fatal("a 5xx placed the order")
	}
	if ans := e.place(tok, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", nil)); ans["orderId"] == nil {
		t.Fatalf("after the fault: %v", ans)
	}
}

func TestLockoutAnswers429ToTheUser(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok, other := e.token(liveLogin), e.token(plainLogin)
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "account/list", Times: 1, Lockout: time.Minute}))
	st, b := e.call(tok, "account/list", nil)
	if st != http.StatusTooManyRequests || len(b) != 0 {
		t.Fatalf("%d %q", st, b)
	}
	if st, _ := e.call(tok, "position/list", nil); st != http.StatusTooManyRequests {
		t.Fatalf("locked-out user got %d", st)
	}
	s := dial(t, e.sim.WSURL())
	s.request("authorize", "", tok)
	if r := s.request("position/list", "", nil); r.S != 429 || len(r.D) != 0 {
		t.Fatalf("socket while locked out: %+v", r)
	}
	if st, _ := e.call(other, "account/list", nil); st != http.StatusOK {
		t.Fatalf("another user got %d", st)
	}
	e.clock.Advance(61 * time.Second)
	if st, _ := e.call(tok, "account/list", nil); st != http.StatusOK {
		t.Fatalf("after the lockout: %d", st)
	}
}

func TestPenaltyTicketThenRedeemed(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "order/placeorder", Times: 1, Penalty: 5 * time.Second}))
	body := order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", map[string]any{"clOrdId": "pen-1"})
	ans := e.place(tok, body)
	tik, _ := ans["p-ticket"].(string)
	if tik == "" || ans["p-time"] != float64(5) || ans["orderId"] != nil {
		t.Fatalf("penalty = %v", ans)
	}
	if n := e.sim.OrdersByClOrdID(liveAcct, "pen-1"); n != 0 {
		t.Fatal("a penalized request was handled")
	}
	body["p-ticket"] = tik
	e.clock.Advance(2 * time.Second)
	if early := e.place(tok, body); early["p-ticket"] != tik || early["p-time"] != float64(3) {
		t.Fatalf("early retry = %v", early)
	}
	e.clock.Advance(3 * time.Second)
	if ans := e.place(tok, body); ans["orderId"] == nil {
		t.Fatalf("redeemed retry = %v", ans)
	}
	if n := e.sim.OrdersByClOrdID(liveAcct, "pen-1"); n != 1 {
		t.Fatalf("placed %d times", n)
	}
}

func TestCaptchaPenaltyAndOneShot429(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "order/modifyorder", Times: 1, Captcha: true}))
	ans := e.ok(tok, "order/modifyorder", map[string]any{"orderId": 1, "orderQty": 1, "orderType": "Market"})
	if ans["p-captcha"] != true || ans["p-time"] != float64(3600) {
		t.Fatalf("captcha = %v", ans)
	}
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "account/list", Times: 1, Status: 429}))
	if st, _ := e.call(tok, "account/list", nil); st != 429 {
		t.Fatalf("status %d", st)
	}
	if st, _ := e.call(tok, "account/list", nil); st != 200 {
		t.Fatalf("a one-shot 429 locked out: %d", st)
	}
}

func TestRequestRateLimit(t *testing.T) {
	e := newEnv(t, tradovate.Options{RequestsPerMinute: 3, LockoutFor: 2 * time.Minute})
	tok := e.token(liveLogin)
	for i := 0; i < 3; i++ {
		e.list(tok, "account/list")
	}
	if st, _ := e.call(tok, "account/list", nil); st != 429 {
		t.Fatalf("fourth request: %d", st)
	}
	e.clock.Advance(time.Minute + time.Second)
	if st, _ := e.call(tok, "account/list", nil); st != 429 {
		t.Fatalf("lockout ended with the window: %d", st)
	}
	e.clock.Advance(time.Minute)
	if st, _ := e.call(tok, "account/list", nil); st != 200 {
		t.Fatalf("after the lockout: %d", st)
	}
	if n := e.sim.RequestCount("account/list"); n != 6 {
		t.Fatalf("RequestCount = %d", n)
	}
}

// The user-level limits hold in any second and any hour too, not only a minute: the provider
// documents 1000 a second and 5000 an hour for an authenticated user.
func TestRequestRateLimitEverySpan(t *testing.T) {
	for _, c := range []struct {
		name string
		opts tradovate.Options
		gap  time.Duration // between requests: the fourth would be within the minute limit
	}{
		{"second", tradovate.Options{RequestsPerSecond: 3, LockoutFor: time.Minute}, 100 * time.Millisecond},
		{"hour", tradovate.Options{RequestsPerHour: 3, LockoutFor: time.Minute}, 10 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.opts)
			tok := e.token(liveLogin)
			for i := 0; i < 3; i++ {
				e.list(tok, "account/list")
				e.clock.Advance(c.gap)
			}
			if st, _ := e.call(tok, "account/list", nil); st != 429 {
				t.Fatalf("fourth request within the %s: %d", c.name, st)
			}
		})
	}
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	for i := 0; i < 3; i++ {
		e.list(tok, "account/list")
		e.clock.Advance(10 * time.Minute)
	}
	if st, _ := e.call(tok, "account/list", nil); st != 200 {
		t.Fatalf("the published limits refused four requests in 30 minutes: %d", st)
	}
}

func TestFaultValidation(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	for _, f := range []tradovate.Fault{{}, {Status: 404}, {Drop: true, Status: 500}, {Times: -1, Drop: true}} {
		if err := e.sim.AddFault(f); err == nil {
			t.Errorf("accepted %+v", f)
		}
	}
}

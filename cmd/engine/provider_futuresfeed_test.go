package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/seal"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// ffPassword is the futures-feed test's logins' password: never in what
// the engine prints or answers.
const ffPassword = "ffPASSWORDqq42nnNeverInTheLogOrAnswer3"

// Futures prices come from each trader's own Tradovate login, through the
// binary and one simulator: alice linked a live login subscribed to ES, bob
// a live login with no subscription, dora a demo login. Alice gets quotes
// and a live bar stream from her login, and her paper account fills a
// market order at her touch and a resting limit when her price reaches
// it; bob is refused every futures price (quotes, history, a spread, the
// multiplexed bar stream) and his paper futures order, with the reason
// no_subscription; dora with demo_login. No answer or output holds the
// password.
func TestFuturesPricesFromTheTradersOwnLoginThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	sim, err := tradovatesim.New(tradovatesim.Options{HistoryBars: 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, l := range []tradovatesim.Login{
		{Name: "ff-alice", Kind: "live", MarketData: []string{"ES"}},
		{Name: "ff-bob", Kind: "live"},
		{Name: "ff-dora", Kind: "demo"},
	} {
		l.Password = ffPassword
		if _, _, err := sim.AddLogin(l); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := seal.NewKeySetting("k1")
	if err != nil {
		t.Fatal(err)
	}
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, "ENGINE_TRADOVATE_ENV=live,demo",
		"ENGINE_TRADOVATE_REST_URL="+sim.URL(), "ENGINE_TRADOVATE_WS_URL="+sim.WSURL(), "ENGINE_TRADOVATE_MD_URL="+sim.MDURL(),
		"ENGINE_TRADOVATE_DEMO_REST_URL="+sim.URL(), "ENGINE_TRADOVATE_DEMO_WS_URL="+sim.WSURL(), "ENGINE_TRADOVATE_DEMO_MD_URL="+sim.MDURL(),
		"ENGINE_TRADOVATE_CID=8", "ENGINE_TRADOVATE_SEC=app-secret-never-logged", "ENGINE_PROVIDER_ALLOW_PRIVATE=1", "ENGINE_SEAL_KEYS="+keys)
	var answers strings.Builder
	type trader struct{ key, paper string }
	join := func(email, login, env string) trader {
		t.Helper()
		b, key := signedIn(t, p, dir, email)
		linkProvider(t, p, b, map[string]any{"provider": "tradovate", "login": login, "password": ffPassword, "environment": env})
		st, raw, err := call(p.base, key, "POST", "/api/account/demo", map[string]any{})
		if err != nil || st != 201 {
			t.Fatalf("paper account: %d %s %v", st, raw, err)
		}
		var d struct {
			Account struct{ Broker, AccountNumber string } `json:"account"`
		}
		_ = json.Unmarshal(raw, &d)
		return trader{key: key, paper: "?broker=" + d.Account.Broker + "&account=" + d.Account.AccountNumber}
	}
	alice, bob, dora := join("ff-alice@example.com", "ff-alice", "live"), join("ff-bob@example.com", "ff-bob", "live"), join("ff-dora@example.com", "ff-dora", "demo")
	do := func(tr trader, method, path string, body any) (int, map[string]any) {
		t.Helper()
		st, raw, err := call(p.base, tr.key, method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		answers.Write(raw)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return st, m
	}
	refused := func(tr trader, path, reason string) {
		t.Helper()
		st, m := do(tr, "GET", path, nil)
		if pm, _ := m["params"].(map[string]any); st != 503 || m["code"] != "feed_requires_connection" || pm["reason"] != reason {
			t.Fatalf("%s: %d %v, want 503 feed_requires_connection %s", path, st, m, reason)
		}
	}
	es := sim.FrontContract("ES")
	if err := sim.SetPrice(es, "5010"); err != nil {
		t.Fatal(err)
	}

	// alice: her own quotes and bars
	st, m := do(alice, "GET", "/api/market/quotes?instruments=ES", nil)
	if qs, _ := m["quotes"].([]any); st != 200 || len(qs) != 1 || qs[0].(map[string]any)["last"] != "5010" || qs[0].(map[string]any)["contract"] != es {
		t.Fatalf("alice's quotes: %d %v", st, m)
	}
	bars := openSSE(t, p.base, "/api/market/stream?tf=1m&instrument=ES", alice.key)

	// bob and dora: every futures price refused, with the reason
	for _, path := range []string{"/api/market/quotes?instruments=ES", "/api/market/history?tf=1m&instrument=ES",
		"/api/market/history?tf=5m&instrument=ES-NQ", "/api/market/symbol-info?instrument=" + es, "/api/market/stream?tf=1m&instrument=ES"} {
		refused(bob, path, "no_subscription")
		refused(dora, path, "demo_login")
	}
	mux := openSSE(t, p.base, "/api/market/streams?subs=BTC-PERP~1m,ES~1m", bob.key)
	if ev := <-mux; ev.name != "error" || ev.data["code"] != "feed_requires_connection" || ev.data["params"].(map[string]any)["reason"] != "no_subscription" {
		t.Fatalf("bob's multiplexed stream: %v", ev)
	}

	// paper futures: alice's orders fill at her own prices; bob's are refused
	order := func(tr trader, coid, typ, limit string) (int, map[string]any) {
		o := map[string]any{"clientOrderId": coid, "instrument": "ES", "side": "buy", "orderType": typ, "quantity": "1"}
		if limit != "" {
			o["limitPrice"], o["timeInForce"] = limit, "gtc"
		}
		return do(tr, "POST", "/api/trading/order"+tr.paper, o)
	}
	if st, m := order(alice, "ff-a-1", "market", ""); st != 200 {
		t.Fatalf("alice's paper market order: %d %v\n%s", st, m, p.out)
	}
	if st, m := order(bob, "ff-b-1", "market", ""); st != 503 || m["code"] != "feed_requires_connection" || m["params"].(map[string]any)["reason"] != "no_subscription" {
		t.Fatalf("bob's paper market order: %d %v", st, m)
	}
	if st, m := order(alice, "ff-a-2", "limit", "5000"); st != 200 {
		t.Fatalf("alice's paper limit: %d %v", st, m)
	}
	position := func() string {
		_, f := do(alice, "GET", "/api/account/snapshot"+alice.paper, nil)
		ps, _ := f["positions"].([]any)
		for _, x := range ps {
			if x := x.(map[string]any); x["instrument"] == "ES" {
				q, _ := x["quantity"].(string)
				return q
			}
		}
		return "0"
	}
	waitUntil(t, 5*time.Second, func() bool { return position() == "1" }, func() any { return position() })
	// her price reaches her limit: it fills; her bar stream follows her quotes
	deadline, seen := time.Now().Add(10*time.Second), false
	for seen = sawClose(bars, "4999.75"); position() != "2" || !seen; seen = seen || sawClose(bars, "4999.75") {
		if time.Now().After(deadline) {
			t.Fatalf("after her price reached her limit alice holds %s ES (a bar at it: %v)", position(), seen)
		}
		if err := sim.SetPrice(es, "4999.75"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(p.out.String(), ffPassword) || strings.Contains(answers.String(), ffPassword) {
		t.Fatal("the engine's output or answers hold the password")
	}
}

// sawClose drains the bar events come so far and reports whether one closed at price.
func sawClose(ch <-chan sseEvent, price string) bool {
	for {
		select {
		case ev := <-ch:
			if b, _ := ev.data["bar"].(map[string]any); ev.name == "bar" && b["close"] == price {
				return true
			}
		default:
			return false
		}
	}
}

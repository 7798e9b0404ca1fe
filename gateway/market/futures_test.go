package market_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

const loginPassword = "futures-pa$$word-7"

// trader is a signed-in user with a Trading API key of their own.
type trader struct {
	cookie, key string
}

func (tr trader) get(e *apptest.Env, path string) *apptest.Resp {
	return e.Do(apptest.Req{Method: http.MethodGet, Path: path, Key: tr.key})
}

// futuresEnv starts the service with its Tradovate provider pointed at a
// simulator, and two traders: alice, who links a live login subscribed to
// ES and NQ market data, and bob, who links a live login with no
// subscription.
func futuresEnv(t *testing.T) (*apptest.Env, *tradovatesim.Sim, trader, trader) {
	t.Helper()
	sim, err := tradovatesim.New(tradovatesim.Options{HistoryBars: 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, l := range []tradovatesim.Login{
		{Name: "alice-live", Password: loginPassword, Kind: "live", MarketData: []string{"ES", "NQ"}},
		{Name: "bob-live", Password: loginPassword, Kind: "live"},
	} {
		if _, _, err := sim.AddLogin(l); err != nil {
			t.Fatal(err)
		}
	}
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		c.AllowedOrigins = origin
		tv := &c.Providers.Tradovate
		tv.Envs = "live,demo"
		tv.REST, tv.WS, tv.MD = sim.URL(), sim.WSURL(), sim.MDURL()
		tv.DemoREST, tv.DemoWS, tv.DemoMD = sim.URL(), sim.WSURL(), sim.MDURL()
		c.Providers.AllowPrivate = true
	}})
	sign := func(email, login string) trader {
		cookie := e.SignIn(email, "the trader's password")
		r := e.AsSession(cookie, apptest.Req{Method: http.MethodPost, Path: "/api/account/providers",
			Body: map[string]any{"provider": "tradovate", "login": login, "password": loginPassword, "environment": "live"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("link %s: %d %s", login, r.Status, r.Body)
		}
		r = e.AsSession(cookie, apptest.Req{Method: http.MethodPost, Path: "/api/keys", Body: map[string]any{"name": "charts"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("key: %d %s", r.Status, r.Body)
		}
		return trader{cookie: cookie, key: r.Map(t)["secret"].(string)}
	}
	return e, sim, sign("alice@example.com", "alice-live"), sign("bob@example.com", "bob-live")
}

// refused checks a 503 feed_requires_connection with its reason.
func refused(t *testing.T, r *apptest.Resp, reason string) {
	t.Helper()
	m := wantError(t, r, http.StatusServiceUnavailable, "feed_requires_connection")
	p, _ := m["params"].(map[string]any)
	if p["reason"] != reason || p["instrument"] == nil {
		t.Fatalf("params %v, want reason %s: %s", p, reason, r.Body)
	}
	if strings.Contains(string(r.Body), loginPassword) {
		t.Fatalf("the answer holds the password: %s", r.Body)
	}
}

// streamAs opens an SSE route with a trader's key and delivers its events.
func streamAs(t *testing.T, e *apptest.Env, key, path string) <-chan apptest.Event {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	apptest.ValidateResponse(t, req, resp.StatusCode, resp.Header, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream %s: %d", path, resp.StatusCode)
	}
	ch := make(chan apptest.Event, 256)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev apptest.Event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.Data)
			case line == "" && ev.Name != "":
				ch <- ev
				ev = apptest.Event{}
			}
		}
	}()
	return ch
}

// Two traders linked live logins; only alice's subscribes to ES and NQ
// market data. Alice gets every futures price from her own login: quotes,
// symbol-info, history, spreads over futures legs, bar streams and a
// search listing her products. Bob is refused every futures price with the
// reason no_subscription (also through spreads and bar streams, even
// while alice's stream of the same contract runs), his search lists no
// futures, and a caller who linked nothing is refused login_required.
func TestFuturesPricesOnlyFromTheTradersOwnLogin(t *testing.T) {
	e, sim, alice, bob := futuresEnv(t)
	es := sim.FrontContract("ES")
	if err := sim.SetPrice(es, "5012.25"); err != nil {
		t.Fatal(err)
	}

	// alice: quotes from her own login
	var quotes struct {
		Quotes []struct{ Symbol, Bid, Ask, Last, Contract string } `json:"quotes"`
	}
	r := alice.get(e, "/api/market/quotes?instruments=ES,"+es+",BTC-PERP")
	if r.Status != http.StatusOK {
		t.Fatalf("alice's quotes: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &quotes)
	if len(quotes.Quotes) != 3 || quotes.Quotes[0].Symbol != "ES" || quotes.Quotes[0].Contract != es || quotes.Quotes[0].Last != "5012.25" ||
		quotes.Quotes[1].Symbol != es || quotes.Quotes[1].Contract != "" {
		t.Fatalf("alice's quotes: %s", r.Body)
	}
	// symbol-info: the month the root stands for, as the provider lists it
	r = alice.get(e, "/api/market/symbol-info?instrument=ES")
	if r.Status != http.StatusOK {
		t.Fatalf("alice's symbol-info: %d %s", r.Status, r.Body)
	}
	info := r.Map(t)
	if info["contract"] != es || info["type"] != "future" || info["assetClass"] != "futures" || info["timezone"] != "America/Chicago" ||
		info["priceFormat"].(map[string]any)["tickSize"] != "0.25" || info["multiplier"] != "50" || info["expiration"] == nil || info["priceFraction"] != nil {
		t.Fatalf("alice's symbol-info: %s", r.Body)
	}
	// history and a spread over two futures legs
	var hist struct {
		Bars []struct{ Time int64 } `json:"bars"`
	}
	for _, inst := range []string{"ES", "ES-NQ", "ES/NQ*1000"} {
		r = alice.get(e, "/api/market/history?tf=1m&countBack=5&instrument="+q(inst))
		if r.Status != http.StatusOK {
			t.Fatalf("alice's history of %s: %d %s", inst, r.Status, r.Body)
		}
		r.JSON(t, &hist)
		if len(hist.Bars) == 0 || len(hist.Bars) > 5 {
			t.Fatalf("alice's history of %s: %s", inst, r.Body)
		}
	}
	// search lists her products' months, never another product's
	r = alice.get(e, "/api/market/search?query=")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"symbol":"`+es+`"`) || strings.Contains(string(r.Body), `"symbol":"ZN`) {
		t.Fatalf("alice's search: %d %s", r.Status, r.Body)
	}
	r = alice.get(e, "/api/market/config")
	if c := r.Map(t); !strings.Contains(fmt.Sprint(c["assetClasses"]), "futures") || c["futures"].(map[string]any)["served"] != true {
		t.Fatalf("alice's config: %s", r.Body)
	}
	// a product outside her subscription
	refused(t, alice.get(e, "/api/market/quotes?instruments=ZN"), "no_subscription")
	// her bar stream of ES, while bob asks for the same contract
	bars := streamAs(t, e, alice.key, "/api/market/stream?tf=1m&instrument=ES")

	// bob: every futures price refused, with the reason
	for _, path := range []string{
		"/api/market/quotes?instruments=ES",
		"/api/market/quotes?instruments=BTC-PERP," + es,
		"/api/market/symbol-info?instrument=ES",
		"/api/market/history?tf=1m&instrument=ES",
		"/api/market/history?tf=1m&instrument=" + q("ES-NQ"),
		"/api/market/history?tf=1m&instrument=" + q("BTC-PERP/ES"),
		"/api/market/symbol-info?instrument=" + q("ES-NQ"),
		"/api/market/stream?tf=1m&instrument=ES",
		"/api/market/stream?tf=1m&instrument=" + q("ES-NQ"),
	} {
		t.Run("bob "+path, func(t *testing.T) { refused(t, bob.get(e, path), "no_subscription") })
	}
	mux := streamAs(t, e, bob.key, "/api/market/streams?subs="+q("BTC-PERP~1m,ES~1m,ES-NQ~5m"))
	for _, sub := range []string{"ES~1m", "ES-NQ~5m"} { // the refusals come first, the crypto subscription streams
		ev := apptest.Next(t, mux)
		if p, _ := ev.Data["params"].(map[string]any); ev.Name != "error" || ev.Data["sub"] != sub || ev.Data["code"] != "feed_requires_connection" || p["reason"] != "no_subscription" {
			t.Fatalf("bob's multiplexed stream: %s %v", ev.Name, ev.Data)
		}
	}
	r = bob.get(e, "/api/market/search?query=ES")
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), `"assetClass":"futures"`) {
		t.Fatalf("bob's search: %d %s", r.Status, r.Body)
	}
	// a caller who linked nothing: login_required
	refused(t, e.Get("/api/market/quotes?instruments=ES"), "login_required")
	refused(t, e.Get("/api/market/history?tf=1m&instrument="+q("ES-NQ")), "login_required")
	if c := e.Get("/api/market/config").Map(t); c["futures"].(map[string]any)["served"] != false ||
		c["futures"].(map[string]any)["reason"] != "login_required" || strings.Contains(fmt.Sprint(c["assetClasses"]), "futures") {
		t.Fatalf("config without a login: %v", c)
	}

	// alice's bar stream follows her own quotes
	apptest.WaitFor(t, 10*time.Second, func() error {
		if err := sim.SetPrice(es, "5019.5"); err != nil {
			return err
		}
		select {
		case ev := <-bars:
			if b, _ := ev.Data["bar"].(map[string]any); ev.Name == "bar" && ev.Data["instrument"] == "ES" && b["close"] == "5019.5" {
				return nil
			}
			return fmt.Errorf("event %v", ev)
		case <-time.After(200 * time.Millisecond):
			return fmt.Errorf("no bar")
		}
	})
	// and her signed-in session reads her own prices too (the first-party app)
	r = e.AsSession(alice.cookie, apptest.Req{Method: http.MethodGet, Path: "/api/market/quotes?instruments=ES"})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"last":"5019.5"`) {
		t.Fatalf("alice's session: %d %s", r.Status, r.Body)
	}
	r = e.AsSession(bob.cookie, apptest.Req{Method: http.MethodGet, Path: "/api/market/quotes?instruments=ES"})
	refused(t, r, "no_subscription")
}

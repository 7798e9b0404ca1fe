package connect_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/sim/binance"
)

const (
	consentKey    = "consentKEYq81VqXlinkedBinanceAPIkey1"
	consentSecret = "consentSECRETqq42nnNeverInThePage01"
	otherKey      = "consentKEYq81VqXlinkedBinanceAPIkey2"
	otherSecret   = "consentSECRETqq42nnNeverInThePage02"
)

// liveOffEnv is the engine with its Binance provider on an in-process
// simulator and live trading off by default, as in production.
type liveOffEnv struct {
	env
	sim *binance.Sim
}

func startLiveOff(t *testing.T) liveOffEnv {
	t.Helper()
	sim := binance.New(binance.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, a := range [][2]string{{consentKey, consentSecret}, {otherKey, otherSecret}} {
		if err := sim.AddAccount(binance.Account{APIKey: a[0], Secret: a[1]}); err != nil {
			t.Fatal(err)
		}
	}
	c := &clock{}
	e := apptest.Start(t, apptest.Options{Now: c.now, Configure: func(cfg *app.Config) {
		cfg.Providers.BinanceREST, cfg.Providers.BinanceWS, cfg.Providers.BinanceSpot = sim.URL(), sim.WSURL(), sim.URL()
		cfg.Providers.AllowPrivate = true
		cfg.LiveTrading = "off"
	}})
	return liveOffEnv{env{e, e.Creds["connectKey"].(string), e.Creds["connectAppId"].(string), c}, sim}
}

// frameFor opens a new link of the demo app for trader in hosted Connect
// and answers its frame session.
func (e liveOffEnv) frameFor(t *testing.T, idem, trader string) string {
	t.Helper()
	_, hosted := e.createLink(e.key, idem, trader)
	status, _, frame := e.open(hosted)
	if status != 200 || frame == "" {
		t.Fatalf("hosted Connect for %s: %d", trader, status)
	}
	return frame
}

// link links the simulator's account (key, secret) on the frame with the
// trader's word (nil: the body does not say) and answers the account.
func (e liveOffEnv) link(t *testing.T, frame, key, secret string, consent *bool) string {
	t.Helper()
	body := map[string]any{"provider": "binance-futures", "apiKey": key, "apiSecret": secret}
	if consent != nil {
		body["liveConsent"] = *consent
	}
	r := e.hosted(frame, http.MethodPost, "/api/connect/hosted/providers", body)
	l := want(t, r, 200, "")["link"].(map[string]any)
	if l["state"] != "connected" || strings.Contains(string(r.Body), secret) {
		t.Fatalf("link %s", r.Body)
	}
	return l["result"].(map[string]any)["accountId"].(string)
}

// selector is the query naming the trader's account on the trading routes.
func (e liveOffEnv) selector(t *testing.T, trader, accountID string) string {
	t.Helper()
	for _, a := range want(t, e.asTrader(trader, apptest.Req{Method: http.MethodGet, Path: "/api/account/list"}), 200, "")["accounts"].([]any) {
		if a := a.(map[string]any); a["accountId"] == accountID {
			return "?broker=" + a["broker"].(string) + "&account=" + a["accountNumber"].(string)
		}
	}
	t.Fatalf("%s does not list %s", trader, accountID)
	return ""
}

func (e liveOffEnv) order(trader, q, coid string) *apptest.Resp {
	return e.asTrader(trader, apptest.Req{Method: http.MethodPost, Path: "/api/trading/order" + q,
		Body: map[string]any{"clientOrderId": coid, "instrument": "BTCUSDT", "side": "buy", "orderType": "market", "quantity": "0.01"}})
}

// placed is how many orders reached the simulator.
func (e liveOffEnv) placed() int { return e.sim.RequestCount("POST /fapi/v1/order") }

func heldBy(t *testing.T, what string, r *apptest.Resp, who string) {
	t.Helper()
	m := want(t, r, http.StatusForbidden, "feature_disabled")
	p, _ := m["params"].(map[string]any)
	if p["feature"] != "live_trading" || p["heldBy"] != who || len(p) != 2 {
		t.Fatalf("%s: %s, want held by %s", what, r.Body, who)
	}
}

// With live trading off by default, as in production, an account a trader
// links through hosted Connect trades live only on the trader's consent,
// given on the link form: linked with the box unchecked (or a body that
// does not say), the app's orders are 403 feature_disabled held by the
// trader and nothing reaches the exchange; linked again with it checked
// (the same account), they are placed; a venue's hold still refuses them;
// the trader withdraws it on the page, and a disconnect ends it (connecting
// the account again does not bring it back); the app's paper is never
// affected. The session route takes no liveConsent.
func TestHostedConnectLiveConsent(t *testing.T) {
	e := startLiveOff(t)
	no, yes := false, true

	// The page asks: a box per provider form, unchecked.
	_, hosted := e.createLink(e.key, "page", "trader-page")
	resp, err := http.Get(e.local(hosted))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	box := regexp.MustCompile(`<form class="provider" data-provider="binance-futures"[\s\S]*?<input type="checkbox" name="liveConsent">[\s\S]*?real orders[\s\S]*?your money[\s\S]*?refused[\s\S]*?</form>`)
	if !box.Match(page) || strings.Contains(string(page), `name="liveConsent" checked`) {
		t.Fatalf("the Binance form has no unchecked live trading box:\n%s", page)
	}

	// Linked with the box unchecked: linked, but the app's orders are refused.
	frame := e.frameFor(t, "a1", "trader-a")
	acct := e.link(t, frame, consentKey, consentSecret, &no)
	q := e.selector(t, "trader-a", acct)
	r := e.order("trader-a", q, "no-1")
	heldBy(t, "an order without consent", r, "trader")
	if msg := r.Map(t)["error"].(string); !strings.Contains(msg, "hosted Connect") || !strings.Contains(msg, "linking the account again") {
		t.Fatalf("the refusal does not say how to grant it: %q", msg)
	}
	heldBy(t, "a reverse without consent", e.asTrader("trader-a", apptest.Req{Method: http.MethodPost, Path: "/api/trading/reverse" + q,
		Body: map[string]any{"instrument": "BTCUSDT", "clientOrderId": "no-r"}}), "trader")
	// A body that does not say: the default, off.
	frameB := e.frameFor(t, "b1", "trader-b")
	acctB := e.link(t, frameB, otherKey, otherSecret, nil)
	heldBy(t, "an order, the consent never said", e.order("trader-b", e.selector(t, "trader-b", acctB), "b-1"), "trader")
	if n := e.placed(); n != 0 {
		t.Fatalf("the exchange saw %d orders without consent", n)
	}
	s := want(t, e.hosted(frame, http.MethodGet, "/api/connect/hosted/session", nil), 200, "")
	if c := s["liveConsent"].([]any); len(c) != 1 || c[0].(map[string]any)["accountId"] != acct || c[0].(map[string]any)["granted"] != false ||
		c[0].(map[string]any)["at"] == nil {
		t.Fatalf("the session's consent %v", s["liveConsent"])
	}

	// Linked again with the box checked: the same account, its orders placed.
	frame2 := e.frameFor(t, "a2", "trader-a")
	if again := e.link(t, frame2, consentKey, consentSecret, &yes); again != acct {
		t.Fatalf("linking again reached %s, want %s", again, acct)
	}
	want(t, e.order("trader-a", q, "yes-1"), 200, "")
	if n := e.placed(); n != 1 {
		t.Fatalf("the exchange saw %d orders, want 1", n)
	}

	// A venue's hold comes before the consent.
	venue, venueKey := e.Creds["venueId"].(string), e.Creds["venueKey"].(string)
	vv := "/api/venues/" + venue + "/live-trading"
	want(t, e.app(venueKey, "hold-c", apptest.Req{Method: http.MethodPost, Path: vv + "/hold", Body: map[string]any{"reason": "incident"}}), 200, "")
	heldBy(t, "an order under the venue's hold", e.order("trader-a", q, "held-1"), "venue")
	want(t, e.app(venueKey, "release-c", apptest.Req{Method: http.MethodPost, Path: vv + "/release", Body: map[string]any{}}), 200, "")
	if n := e.placed(); n != 1 {
		t.Fatalf("the exchange saw %d orders under the hold, want 1", n)
	}

	// The page shows it granted; the trader withdraws it there.
	frame3 := e.frameFor(t, "a3", "trader-a")
	s = want(t, e.hosted(frame3, http.MethodGet, "/api/connect/hosted/session", nil), 200, "")
	if c := s["liveConsent"].([]any); len(c) != 1 || c[0].(map[string]any)["granted"] != true {
		t.Fatalf("the session's consent after granting %v", s["liveConsent"])
	}
	want(t, e.hosted(frame3, http.MethodPost, "/api/connect/hosted/live-consent/withdraw", map[string]any{"accountId": acctB}), 404, "not_found")
	w := want(t, e.hosted(frame3, http.MethodPost, "/api/connect/hosted/live-consent/withdraw", map[string]any{"accountId": acct}), 200, "")
	if w["accountId"] != acct || w["granted"] != false {
		t.Fatalf("withdraw answered %v", w)
	}
	want(t, e.hosted(frame3, http.MethodPost, "/api/connect/hosted/live-consent/withdraw", map[string]any{"accountId": acct}), 200, "")
	heldBy(t, "an order after the withdrawal", e.order("trader-a", q, "w-1"), "trader")

	// Granted again, then the trader disconnects the app: connected again, the consent is gone.
	e.link(t, e.frameFor(t, "a4", "trader-a"), consentKey, consentSecret, &yes)
	want(t, e.order("trader-a", q, "yes-2"), 200, "")
	frame5 := e.frameFor(t, "a5", "trader-a")
	want(t, e.hosted(frame5, http.MethodPost, "/api/connect/hosted/disconnect", map[string]any{"accountId": acct}), 200, "")
	want(t, e.order("trader-a", q, "gone-1"), 403, "app_disconnected")
	want(t, e.hosted(e.frameFor(t, "a6", "trader-a"), http.MethodPost, "/api/connect/hosted/connect", map[string]any{"accountId": acct}), 200, "")
	heldBy(t, "an order after a disconnect", e.order("trader-a", q, "gone-2"), "trader")
	if n := e.placed(); n != 2 {
		t.Fatalf("the exchange saw %d orders, want 2", n)
	}

	// The app's paper for the trader is never held.
	c := want(t, e.hosted(e.frameFor(t, "a7", "trader-a"), http.MethodPost, "/api/connect/hosted/connect", map[string]any{"whiteLabel": true}), 200, "")
	paper := e.selector(t, "trader-a", c["link"].(map[string]any)["result"].(map[string]any)["accountId"].(string))
	want(t, e.asTrader("trader-a", apptest.Req{Method: http.MethodPost, Path: "/api/trading/order" + paper,
		Body: map[string]any{"clientOrderId": "paper-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}}), 200, "")

	// The session route's links follow the user's own switch: it takes no liveConsent.
	sess := e.SignIn("consent.user@example.com", "a consent password")
	r = e.AsSession(sess, apptest.Req{Method: http.MethodPost, Path: "/api/account/providers",
		Body: map[string]any{"provider": "binance-futures", "apiKey": otherKey, "apiSecret": otherSecret, "liveConsent": true}})
	if m := want(t, r, 422, "invalid_request"); m["params"].(map[string]any)["field"] != "liveConsent" {
		t.Fatalf("the session route with liveConsent: %s", r.Body)
	}
}

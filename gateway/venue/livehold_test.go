package venue_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/sim/binance"
)

// The simulator's accounts: a trader the venue pre-registered, a trader of
// the demo organization's Connect app, and a trader of nobody's.
const (
	regKey, regSecret   = "holdREGq81VqXlinkedBinanceAPIkey0001", "holdREGsecretqq42nnNeverInTheAnswer1"
	appKey, appSecret   = "holdAPPq81VqXlinkedBinanceAPIkey0002", "holdAPPsecretqq42nnNeverInTheAnswer2"
	soloKey, soloSecret = "holdSOLOq81VqXlinkedBinanceAPIkey003", "holdSOLOsecretqq42nnNeverInTheAnswr3"
	traderPassword      = "the trader's password"
)

// hooks records the webhook deliveries the engine makes to it.
type hooks struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []map[string]any
}

func newHooks(t *testing.T) *hooks {
	h := &hooks{}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if json.Unmarshal(b, &m) == nil && r.Header.Get("svc-signature") != "" {
			h.mu.Lock()
			h.got = append(h.got, m)
			h.mu.Unlock()
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hooks) deliveries() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.got...)
}

// holdEnv is the sandbox with its Binance provider on the simulator, seen
// from the demo venue (its key of every scope and its owner's session).
type holdEnv struct {
	env
	hooks      *hooks
	partnerKey string
	connectKey string
}

func startHolds(t *testing.T) holdEnv {
	t.Helper()
	sim := binance.New(binance.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, a := range [][2]string{{regKey, regSecret}, {appKey, appSecret}, {soloKey, soloSecret}} {
		if err := sim.AddAccount(binance.Account{APIKey: a[0], Secret: a[1]}); err != nil {
			t.Fatal(err)
		}
	}
	hk := newHooks(t)
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		pool := x509.NewCertPool()
		pool.AddCert(hk.srv.Certificate())
		c.Firm.WebhookClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		c.Firm.WebhookAllowPrivate = true
		c.Providers.BinanceREST, c.Providers.BinanceWS, c.Providers.BinanceSpot = sim.URL(), sim.WSURL(), sim.URL()
		c.Providers.AllowPrivate = true
	}})
	return holdEnv{env: env{e, e.Creds["venueId"].(string), e.Creds["venueKey"].(string), e.Creds["ownerSession"].(string)},
		hooks: hk, partnerKey: e.Creds["partnerKey"].(string), connectKey: e.Creds["connectKey"].(string)}
}

// trader is one trader with a linked Binance account: how to reach the
// account's routes (a Trading API key, or the app's key naming the
// trader) and the account's selector.
type trader struct {
	key     string
	headers map[string]string
	session string
	query   string
	id      string
}

// signedUp links the simulator's account (key, secret) for a new signed-in
// trader through the session route, and gives them a Trading API key.
func (e holdEnv) signedUp(t *testing.T, email, key, secret string) trader {
	t.Helper()
	s := e.SignIn(email, traderPassword)
	r := e.AsSession(s, apptest.Req{Method: http.MethodPost, Path: "/api/account/providers",
		Body: map[string]any{"provider": "binance-futures", "apiKey": key, "apiSecret": secret}})
	a := want(t, r, http.StatusCreated, "")["account"].(map[string]any)
	k := want(t, e.AsSession(s, apptest.Req{Method: http.MethodPost, Path: "/api/keys", Body: map[string]string{"name": "bot"}}), http.StatusCreated, "")
	return trader{key: k["secret"].(string), session: s, query: "?broker=binance&account=" + a["accountNumber"].(string), id: a["accountId"].(string)}
}

var frameAttr = regexp.MustCompile(`data-frame="([^"]+)"`)

// connected links the simulator's account for the demo app's trader
// through hosted Connect, as the trader's browser would.
func (e holdEnv) connected(t *testing.T, appTrader, key, secret string) trader {
	t.Helper()
	m := want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/links", Key: e.connectKey,
		Headers: map[string]string{"Idempotency-Key": "link-" + appTrader}, Body: map[string]string{"trader": appTrader}}), http.StatusCreated, "")
	u, err := url.Parse(m["hostedUrl"].(string))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(e.URL + u.RequestURI())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fm := frameAttr.FindStringSubmatch(string(page))
	if fm == nil {
		t.Fatalf("hosted Connect gave no frame session: %d", resp.StatusCode)
	}
	r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/hosted/providers", Key: "-",
		Headers: map[string]string{"Authorization": "Frame " + fm[1], "Origin": e.URL},
		Body:    map[string]any{"provider": "binance-futures", "apiKey": key, "apiSecret": secret}})
	if r.Status != http.StatusOK {
		t.Fatalf("hosted link: %d %s", r.Status, r.Body)
	}
	h := map[string]string{"x-svc-trader": appTrader}
	lst := want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: e.connectKey, Headers: h}), http.StatusOK, "")
	for _, a := range lst["accounts"].([]any) {
		if a := a.(map[string]any); a["broker"] == "binance" {
			return trader{key: e.connectKey, headers: h, query: "?broker=binance&account=" + a["accountNumber"].(string), id: a["accountId"].(string)}
		}
	}
	t.Fatalf("the app lists no Binance account for its trader: %v", lst)
	return trader{}
}

// order places a market buy on the trader's Binance account.
func (e holdEnv) order(tr trader, id string) *apptest.Resp {
	return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order" + tr.query, Key: tr.key, Headers: tr.headers,
		Body: map[string]any{"clientOrderId": id, "instrument": "BTCUSDT", "side": "buy", "orderType": "market", "quantity": "0.01"}})
}

// held reports whether the order was refused by the venue's hold: 403
// feature_disabled with params {feature: live_trading, heldBy: venue} and
// nothing else; false when it went through.
func held(t *testing.T, what string, r *apptest.Resp) bool {
	t.Helper()
	if r.Status == http.StatusOK {
		return false
	}
	m := r.Map(t)
	p, _ := m["params"].(map[string]any)
	if r.Status != http.StatusForbidden || m["code"] != "feature_disabled" || len(p) != 2 || p["feature"] != "live_trading" || p["heldBy"] != "venue" {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
	return true
}

// The venue's traders (one it pre-registered, one of its organization's
// Connect app) are held off live trading by the venue's hold through the
// venue key, and released by the owner in the back office; a trader of
// nobody's is never held, nor is paper. The trader reads the hold on their
// own switch and cannot switch past it. One trader is held by email, the
// venue reads it back, and the firm's webhooks hear every change.
func TestVenueHoldsLiveTradingForItsTraders(t *testing.T) {
	e := startHolds(t)
	vv, bv := "/api/venues/"+e.venueID, "/api/back-office/venues/"+e.venueID
	hold := func(viaKey bool, idem string, body any) *apptest.Resp {
		if viaKey {
			return e.withKey(e.venueKey, idem, apptest.Req{Method: http.MethodPost, Path: vv + "/live-trading/hold", Body: body})
		}
		return e.AsSession(e.owner, apptest.Req{Method: http.MethodPost, Path: bv + "/live-trading/hold", Body: body, Headers: map[string]string{"Idempotency-Key": idem}})
	}
	release := func(viaKey bool, idem string, body any) *apptest.Resp {
		if viaKey {
			return e.withKey(e.venueKey, idem, apptest.Req{Method: http.MethodPost, Path: vv + "/live-trading/release", Body: body})
		}
		return e.AsSession(e.owner, apptest.Req{Method: http.MethodPost, Path: bv + "/live-trading/release", Body: body, Headers: map[string]string{"Idempotency-Key": idem}})
	}
	// The firm's endpoint for the holds, registered in the back office.
	want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodPost, Path: bv + "/webhooks", Headers: map[string]string{"Idempotency-Key": "hook-live"},
		Body: map[string]any{"url": e.hooks.srv.URL + "/live", "eventTypes": []string{"live_trading.held", "live_trading.released"}}}), http.StatusOK, "")

	// The venue pre-registers the trader; the trader links their account.
	want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/connect/accounts", Key: e.partnerKey,
		Body: map[string]any{"email": "Held.Trader@example.com", "provider": "binance-futures"}}), http.StatusOK, "")
	reg := e.signedUp(t, "held.trader@example.com", regKey, regSecret)
	solo := e.signedUp(t, "solo.trader@example.com", soloKey, soloSecret)
	byApp := e.connected(t, "app-trader-1", appKey, appSecret)
	demo := want(t, e.AsSession(reg.session, apptest.Req{Method: http.MethodPost, Path: "/api/account/demo", Body: map[string]any{}}), http.StatusCreated, "")
	paper := trader{key: reg.key, query: "?broker=paper&account=" + demo["account"].(map[string]any)["accountNumber"].(string)}
	paperOrder := func(id string) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order" + paper.query, Key: paper.key,
			Body: map[string]any{"clientOrderId": id, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}})
	}
	n := 0
	check := func(step string, wantReg, wantApp bool) {
		t.Helper()
		n++
		for _, c := range []struct {
			name string
			tr   trader
			want bool
		}{{"the registered trader", reg, wantReg}, {"the app's trader", byApp, wantApp}, {"nobody's trader", solo, false}} {
			if got := held(t, step+": "+c.name, e.order(c.tr, fmt.Sprintf("o-%d-%s", n, c.tr.id[len(c.tr.id)-4:]))); got != c.want {
				t.Errorf("%s: %s held %v, want %v", step, c.name, got, c.want)
			}
		}
		if r := paperOrder(fmt.Sprintf("p-%d", n)); r.Status != http.StatusOK {
			t.Errorf("%s: paper: %d %s", step, r.Status, r.Body)
		}
	}
	check("before any hold", false, false)

	// The whole venue, through the venue key.
	r := hold(true, "hold-venue-1", map[string]any{"reason": "exchange incident"})
	m := want(t, r, http.StatusOK, "")
	lt := m["liveTrading"].(map[string]any)
	hv, _ := lt["hold"].(map[string]any)
	by, _ := hv["heldBy"].(map[string]any)
	if lt["held"] != true || lt["venueId"] != e.venueID || hv["reason"] != "exchange incident" || by["kind"] != "key" || by["name"] != "demo" || m["trader"] != nil {
		t.Fatalf("the hold answered %s", r.Body)
	}
	again := hold(true, "hold-venue-1", map[string]any{"reason": "exchange incident"})
	if again.Status != http.StatusOK || string(again.Body) != string(r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the hold again: %d %s", again.Status, again.Body)
	}
	want(t, hold(true, "hold-venue-1", map[string]any{"reason": "another"}), http.StatusConflict, "idempotency_conflict")
	check("the venue held", true, true)

	// The trader reads the hold on their switch, and switching on lifts nothing.
	lv := want(t, e.AsSession(reg.session, apptest.Req{Method: http.MethodPost, Path: "/api/account/live-trading",
		Body: map[string]any{"enabled": true, "password": traderPassword}}), http.StatusOK, "")["liveTrading"].(map[string]any)
	hs, _ := lv["holds"].([]any)
	if lv["enabled"] != true || len(hs) != 1 {
		t.Fatalf("the trader's switch with the venue holding: %v", lv)
	}
	h0 := hs[0].(map[string]any)
	if v, _ := h0["venue"].(map[string]any); h0["accountId"] != reg.id || h0["heldBy"] != "venue" || h0["scope"] != "venue" || v["id"] != e.venueID || v["name"] != "Demo Venue" {
		t.Fatalf("the hold the trader reads: %v", h0)
	}
	if strings.Contains(fmt.Sprint(lv), "exchange incident") {
		t.Fatalf("the trader reads the venue's own note: %v", lv)
	}
	if g := want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/live-trading", Key: solo.key}), http.StatusOK, "")["liveTrading"].(map[string]any); len(g["holds"].([]any)) != 0 {
		t.Fatalf("nobody's trader reads holds: %v", g)
	}
	check("switched on past the hold", true, true)

	// Released by the owner in the back office; releasing again records nothing.
	m = want(t, release(false, "release-venue-1", map[string]any{}), http.StatusOK, "")
	if lt := m["liveTrading"].(map[string]any); lt["held"] != false || lt["hold"] != nil {
		t.Fatalf("the release answered %v", m)
	}
	want(t, release(false, "release-venue-2", nil), http.StatusOK, "")
	check("released", false, false)

	// One trader, by the email the venue registered (any case).
	m = want(t, hold(false, "hold-trader-1", map[string]any{"reason": "kyc review", "trader": "HELD.trader@example.com"}), http.StatusOK, "")
	tr := m["trader"].(map[string]any)
	if tr["trader"] != "held.trader@example.com" || tr["held"] != true || m["liveTrading"].(map[string]any)["tradersHeld"] != 1.0 {
		t.Fatalf("the trader's hold answered %v", m)
	}
	check("one trader held", true, false)
	g := want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: vv + "/live-trading?trader=Held.Trader@example.com"}), http.StatusOK, "")
	if ts := g["traders"].([]any); len(ts) != 1 || ts[0].(map[string]any)["held"] != true || g["liveTrading"].(map[string]any)["held"] != false {
		t.Fatalf("the venue reads %v", g)
	}
	g = want(t, e.AsSession(e.owner, apptest.Req{Method: http.MethodGet, Path: bv + "/live-trading"}), http.StatusOK, "")
	if ts := g["traders"].([]any); len(ts) != 1 || ts[0].(map[string]any)["hold"].(map[string]any)["heldBy"].(map[string]any)["kind"] != "owner" {
		t.Fatalf("the back office reads %v", g)
	}
	want(t, release(true, "release-trader-1", map[string]any{"trader": "held.trader@example.com"}), http.StatusOK, "")
	check("the trader released", false, false)

	// The firm heard every change, in order.
	var seen []string
	apptest.WaitFor(t, 10*time.Second, func() error {
		seen = seen[:0]
		for _, d := range e.hooks.deliveries() {
			data, _ := d["data"].(map[string]any)
			seen = append(seen, fmt.Sprint(d["type"], " ", data["scope"], " ", data["trader"]))
		}
		if len(seen) < 4 {
			return fmt.Errorf("deliveries %v", seen)
		}
		return nil
	})
	if fmt.Sprint(seen) != "[live_trading.held venue <nil> live_trading.released venue <nil> live_trading.held trader held.trader@example.com live_trading.released trader held.trader@example.com]" {
		t.Fatalf("the firm heard %v", seen)
	}
}

// The hold's routes admit the venue key with account:manage to write and
// account:read or account:manage to read, refuse a write without an
// Idempotency-Key, and refuse bounded inputs out of bounds naming them.
func TestVenueHoldRoutesAdmitAndBound(t *testing.T) {
	e := start(t)
	vv := "/api/venues/" + e.venueID
	issue := func(scope string) string {
		r := e.AsSession(e.owner, apptest.Req{Method: http.MethodPost, Path: "/api/back-office/venues/" + e.venueID + "/keys",
			Headers: map[string]string{"Idempotency-Key": "key-" + scope},
			Body:    map[string]any{"name": "scoped", "scopes": []string{scope}, "expiresAt": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)}})
		return want(t, r, http.StatusCreated, "")["secret"].(string)
	}
	reader, config := issue("account:read"), issue("config:manage")
	post := func(key, idem, path string, body any) *apptest.Resp {
		return e.withKey(key, idem, apptest.Req{Method: http.MethodPost, Path: vv + path, Body: body})
	}
	want(t, e.withKey(reader, "", apptest.Req{Method: http.MethodGet, Path: vv + "/live-trading"}), http.StatusOK, "")
	want(t, e.withKey(config, "", apptest.Req{Method: http.MethodGet, Path: vv + "/live-trading"}), http.StatusForbidden, "permission_denied")
	want(t, post(reader, "r-1", "/live-trading/hold", map[string]any{"reason": "x"}), http.StatusForbidden, "permission_denied")
	want(t, post(e.venueKey, "", "/live-trading/hold", map[string]any{"reason": "x"}), http.StatusBadRequest, "idempotency_key_required")
	for _, c := range []struct {
		path  string
		body  any
		field string
	}{
		{"/live-trading/hold", map[string]any{}, "reason"},
		{"/live-trading/hold", map[string]any{"reason": strings.Repeat("r", 257)}, "reason"},
		{"/live-trading/hold", map[string]any{"reason": "bell\a"}, "reason"},
		{"/live-trading/hold", map[string]any{"reason": "x", "trader": "not an email"}, "trader"},
		{"/live-trading/release", map[string]any{"trader": "a@b"}, "trader"},
	} {
		if m := want(t, post(e.venueKey, "bad-"+c.field+fmt.Sprint(len(fmt.Sprint(c.body))), c.path, c.body), http.StatusBadRequest, "invalid_request"); m["field"] != c.field {
			t.Errorf("%s %v: field %v, want %s", c.path, c.body, m["field"], c.field)
		}
	}
	want(t, post(e.venueKey, "unknown-field", "/live-trading/hold", map[string]any{"reason": "x", "scope": "all"}), http.StatusBadRequest, "invalid_request")
	want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: vv + "/live-trading?trader=nope"}), http.StatusBadRequest, "invalid_request")
	// Another venue's id is not found.
	want(t, e.withKey(e.venueKey, "", apptest.Req{Method: http.MethodGet, Path: "/api/venues/00000000-0000-4000-8000-000000000000/live-trading"}), http.StatusNotFound, "not_found")
}

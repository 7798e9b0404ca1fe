package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/eventlog"
)

// The fuzz targets below send what the fuzzer makes through the real handler
// chain of a running engine (embedded JetStream, memory read models). A
// failure is a crash, a 5xx other than a typed 503 refusal, an error answer
// without the spec's shape, or a 2xx whose commits this build cannot read
// back. scripts/test runs each for a short budget; the seeds hold the attacks
// issue 11 lists.

// hostile are values that once crashed the engine or poisoned its log.
var hostile = []string{`"1e-100000"`, `"1e-70"`, `"1E+6144"`, `"1e100000"`, `"123456789012345678901234567890123456789"`,
	`1e400`, `1e-400`, `"NaN"`, `"-Infinity"`, `"0x10"`, `"1_000"`, `" 1"`, `-0`, `"1e-18"`, `"9999999999999999"`}

// fuzzEngine is one engine for a fuzz target, with the keys its routes take.
type fuzzEngine struct {
	*apptest.Env
	partnerKey string
	checked    uint64 // commits read back so far
}

func startFuzzEngine(f *testing.F) *fuzzEngine {
	e := apptest.Start(f, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		c.Market.NewsSample = "1"
	}})
	fe := &fuzzEngine{Env: e}
	if k, ok := e.Creds["partnerKey"].(string); ok {
		fe.partnerKey = k
	}
	return fe
}

// send runs one request through the engine's handler and checks the answer.
func (fe *fuzzEngine) send(t testing.TB, method, target, key string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	return fe.sendWith(t, method, target, map[string]string{"Authorization": "Bearer " + key}, body)
}

// sendWith is send with the request's credential headers as given.
func (fe *fuzzEngine) sendWith(t testing.TB, method, target string, headers map[string]string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body != nil {
		r = httptest.NewRequest(method, target, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	fe.App.Handler.ServeHTTP(w, r)
	fe.check(t, method, target, body, w)
	return w
}

// typed503 are the 503 refusals an input may legitimately meet in the sandbox.
var typed503 = map[string]bool{"feed_requires_connection": true, "feed_unavailable": true, "market_data_unavailable": true}

func (fe *fuzzEngine) check(t testing.TB, method, target string, body []byte, w *httptest.ResponseRecorder) {
	t.Helper()
	var m map[string]any
	isJSON := json.Unmarshal(w.Body.Bytes(), &m) == nil
	switch {
	case w.Code >= 500:
		if w.Code != http.StatusServiceUnavailable || !isJSON || !typed503[str(m["code"])] {
			t.Fatalf("%s %s %q: %d %s", method, target, body, w.Code, w.Body)
		}
	case w.Code >= 400:
		if !isJSON || str(m["error"]) == "" {
			t.Fatalf("%s %s %q: %d without an error body: %s", method, target, body, w.Code, w.Body)
		}
	}
	if w.Code < 300 && method != http.MethodGet {
		fe.readBack(t)
	}
}

// readBack decodes every commit appended since the last call and checks that
// encoding it again gives a commit that decodes to the same encoding.
func (fe *fuzzEngine) readBack(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	reg := engine.Registry()
	last, err := fe.App.Log.Replay(ctx, fe.checked+1, func(m eventlog.Msg) error {
		c, err := reg.Decode(m.Data)
		if err != nil {
			t.Fatalf("commit %s at %d does not decode: %v", m.Subject, m.Seq, err)
		}
		once, err := reg.Encode(c)
		if err != nil {
			t.Fatalf("commit %s at %d does not encode again: %v", m.Subject, m.Seq, err)
		}
		c2, err := reg.Decode(once)
		if err != nil {
			t.Fatalf("commit %s at %d re-encoded does not decode: %v", m.Subject, m.Seq, err)
		}
		twice, err := reg.Encode(c2)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("commit %s at %d does not round-trip: %v", m.Subject, m.Seq, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if last > fe.checked {
		fe.checked = last
	}
}

func str(v any) string { s, _ := v.(string); return s }

// pathSegment escapes fuzzed text as one path segment that keeps the
// request on the route under test: an empty segment, "." or ".." would
// name another route (or be cleaned into one), which the fuzz target does
// not aim at.
func pathSegment(s string) string {
	switch s {
	case "", ".", "..":
		return "_" + s
	}
	return url.PathEscape(s)
}

func addSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}

// withValue puts each hostile value into a template's %v slot.
func withValue(tmpl string) []string {
	out := make([]string, 0, len(hostile))
	for _, v := range hostile {
		out = append(out, strings.ReplaceAll(tmpl, "%v", v))
	}
	return out
}

func FuzzPlaceOrder(f *testing.F) {
	addSeeds(f, `{"clientOrderId":"f-1","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"0.01"}`,
		`{"clientOrderId":"f-2","instrument":"BTC-PERP","side":"sell","orderType":"limit","quantity":"0.01","limitPrice":"70000"}`,
		`{"clientOrderId":"f-3","instrument":"ETH-PERP","side":"buy","orderType":"stop_limit","quantity":"1","limitPrice":"3300","stopPrice":"3290","timeInForce":"gtc"}`,
		`{"clientOrderId":"a\u0000b","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"1"}`,
		`{"clientOrderId":"\u001b[31m","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"1"}`,
		"{\"clientOrderId\":\"\xff\xfe\",\"instrument\":\"BTC-PERP\",\"side\":\"buy\",\"orderType\":\"market\",\"quantity\":\"1\"}",
		`{"clientOrderId":"f-4","instrument":"ES","side":"buy","orderType":"market","quantity":"1"}`,
		strings.Repeat("[", 5000), `{"a":`+strings.Repeat(`{"a":`, 100)+`1`+strings.Repeat("}", 101))
	addSeeds(f, withValue(`{"clientOrderId":"q","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":%v}`)...)
	addSeeds(f, withValue(`{"clientOrderId":"l","instrument":"BTC-PERP","side":"buy","orderType":"limit","quantity":"0.01","limitPrice":%v}`)...)
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.send(t, http.MethodPost, "/api/trading/order", fe.Key, body)
	})
}

// FuzzEngineAfter sends what the fuzzer makes as X-Engine-After on a read
// and on a write: a whole number the log holds is served, anything else is
// 400 at once (no wait for a sequence no node gave).
func FuzzEngineAfter(f *testing.F) {
	for _, s := range []string{"1", "0", "2", "18446744073709551615", "9223372036854775807", "-1", "1e3", " 1", "01", "99999999999999999999", "\x00", "１"} {
		f.Add(s)
	}
	fe := startFuzzEngine(f)
	n := 0
	f.Fuzz(func(t *testing.T, after string) {
		if !utf8.ValidString(after) || strings.ContainsAny(after, "\r\n\x00") {
			return // not a header value net/http would deliver
		}
		n++
		h := map[string]string{"Authorization": "Bearer " + fe.Key, "X-Engine-After": after}
		fe.sendWith(t, http.MethodGet, "/api/account/orders", h, nil)
		fe.sendWith(t, http.MethodPost, "/api/trading/order", h,
			[]byte(fmt.Sprintf(`{"clientOrderId":"after-%d","instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"0.01"}`, n)))
	})
}

func FuzzReplaceOrder(f *testing.F) {
	addSeeds(f, `{"brokerOrderId":"%id","quantity":"0.02"}`, `{"brokerOrderId":"%id","limitPrice":"60000.5"}`, `{"brokerOrderId":"nope","quantity":"1"}`)
	addSeeds(f, withValue(`{"brokerOrderId":"%id","limitPrice":%v}`)...)
	addSeeds(f, withValue(`{"brokerOrderId":"%id","quantity":%v}`)...)
	fe := startFuzzEngine(f)
	w := fe.send(f, http.MethodPost, "/api/trading/order", fe.Key,
		[]byte(`{"clientOrderId":"resting","instrument":"BTC-PERP","side":"buy","orderType":"limit","quantity":"0.01","limitPrice":"1000"}`))
	var placed struct {
		Order struct {
			BrokerOrderID string `json:"brokerOrderId"`
		} `json:"order"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &placed); err != nil || placed.Order.BrokerOrderID == "" {
		f.Fatalf("resting order: %d %s", w.Code, w.Body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.ReplaceAll(body, []byte("%id"), []byte(placed.Order.BrokerOrderID))
		fe.send(t, http.MethodPost, "/api/trading/replace", fe.Key, body)
	})
}

func FuzzClosePosition(f *testing.F) {
	addSeeds(f, `{"instrument":"BTC-PERP"}`, `{"instrument":"BTC-PERP","quantity":"0.01","clientOrderId":"c-1"}`, `{"instrument":"NOPE"}`)
	addSeeds(f, withValue(`{"instrument":"BTC-PERP","quantity":%v}`)...)
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.send(t, http.MethodPost, "/api/trading/close", fe.Key, body)
	})
}

func FuzzRiskSettings(f *testing.F) {
	addSeeds(f, `{"dailyLossEnabled":true,"dailyLossValue":500}`, `{"eodCloseEnabled":true,"eodCloseValue":15}`, `{"weeklyProfitValue":null}`)
	addSeeds(f, withValue(`{"dailyLossEnabled":true,"dailyLossValue":%v}`)...)
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.send(t, http.MethodPut, "/api/risk", fe.Key, body)
	})
}

func FuzzBalanceOperation(f *testing.F) {
	addSeeds(f, `{"referenceId":"op-1","accountNumber":"%acct","op":"credit","amount":"250.5"}`,
		`{"referenceId":"op-2","accountNumber":"%acct","op":"adjustment","amount":"-10"}`,
		`{"referenceId":"op\u0000","accountNumber":"%acct","op":"credit","amount":"1"}`)
	addSeeds(f, withValue(`{"referenceId":"v","accountNumber":"%acct","op":"credit","amount":%v}`)...)
	fe := startFuzzEngine(f)
	acct := provisioned(f, fe)
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.ReplaceAll(body, []byte("%acct"), []byte(acct))
		fe.send(t, http.MethodPost, "/api/partner/balance-op", fe.partnerKey, body)
	})
}

func FuzzProvisionAccounts(f *testing.F) {
	addSeeds(f, `{"accounts":[{"referenceId":"p-1","email":"p1@trader.example","startingBalance":"50000"}]}`,
		`{"accounts":[{"referenceId":"p-2","email":"not an email","startingBalance":"1"}]}`,
		`{"accounts":[]}`)
	addSeeds(f, withValue(`{"accounts":[{"referenceId":"p-v","email":"v@trader.example","startingBalance":%v}]}`)...)
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.send(t, http.MethodPost, "/api/partner/accounts", fe.partnerKey, body)
	})
}

func FuzzRegisterWebhook(f *testing.F) {
	addSeeds(f, `{"url":"https://hooks.example.com/engine","eventTypes":["account.halted"]}`,
		`{"url":"https://127.0.0.1/"}`, `{"url":"https://2130706433/"}`, `{"url":"https://[::1]/"}`, `{"url":"http://example.com/"}`,
		`{"url":"https://127.1/"}`, `{"url":"https://0.0.0.0/"}`, `{"url":"https://localhost/"}`)
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.send(t, http.MethodPost, "/api/partner/webhooks", fe.partnerKey, body)
	})
}

// FuzzMarketQuery sends fuzzed query values to the market data and news reads,
// the account's paged lists and the pages of the mails' links: symbols and
// spread expressions, timeframes, cursors, limits and tokens.
func FuzzMarketQuery(f *testing.F) {
	for _, s := range []string{"BTC-PERP", "BTC-PERP,ETH-PERP", "BTC-PERP-ETH-PERP", "(BTC-PERP/ETH-PERP)*2", "1m", "1h", "999999999d",
		"0m", "-1m", "abc", "", "\x00", strings.Repeat("(", 4000), "ZZZZ", "2026-01-01", "1e-100000",
		"bzEuMDAwMDAwMDAwMDAwMDAwMDAwMDEveA", "ZjEuOTk5OTk5OTk5OTk5OTk5OTk5OTkvMDFNOEZYUFI0RVdQNlJFVFdFOVY3NTg4N0gtZjE"} {
		f.Add(uint8(0), s)
	}
	routes := []string{"/api/market/quotes?symbols=", "/api/market/history?symbol=BTC-PERP&tf=", "/api/market/history?tf=1m&symbol=",
		"/api/market/symbol-info?symbol=", "/api/market/search?query=", "/api/news?cursor=", "/api/news?limit=", "/api/calendar?from=",
		"/api/partner/webhooks/deliveries?cursor=", "/api/account/orders?limit=", "/api/account/fills?limit=",
		"/api/account/orders?cursor=", "/api/account/fills?cursor=", "/api/account/orders?state=open&limit=1&cursor=", "/api/partner/accounts?cursor=", "/api/trading/actions?quantity=",
		"/verify-email?token=", "/password-reset?token="}
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, route uint8, value string) {
		target := routes[int(route)%len(routes)] + url.QueryEscape(value)
		key := fe.Key
		if strings.HasPrefix(target, "/api/partner/") {
			key = fe.partnerKey
		}
		fe.send(t, http.MethodGet, target, key, nil)
	})
}

// provisioned provisions one account for the balance fuzz target and returns its number.
func provisioned(f *testing.F, fe *fuzzEngine) string {
	r := httptest.NewRequest(http.MethodPost, "/api/partner/accounts",
		strings.NewReader(`{"accounts":[{"referenceId":"fuzz-acct","email":"fuzz@trader.example","startingBalance":"50000"}]}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+fe.partnerKey)
	w := httptest.NewRecorder()
	fe.App.Handler.ServeHTTP(w, r)
	var out struct {
		Results []struct {
			Account struct {
				AccountNumber string `json:"accountNumber"`
			} `json:"account"`
		} `json:"results"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Results) != 1 || out.Results[0].Account.AccountNumber == "" {
		f.Fatalf("provision: %d %s", w.Code, w.Body)
	}
	return out.Results[0].Account.AccountNumber
}

// FuzzAuthBodies sends fuzzed bodies to the identity routes anyone may call
// (sign-up, sign-in, verification, resets); the first byte picks the route.
func FuzzAuthBodies(f *testing.F) {
	routes := []string{"/api/auth/signup", "/api/auth/login", "/api/auth/verify", "/api/auth/verify/resend",
		"/api/auth/password-reset", "/api/auth/password-reset/confirm"}
	for i, s := range []string{`{"email":"a@example.com","password":"long enough password"}`,
		`{"email":"A@EXAMPLE.COM","password":"long enough password"}`,
		`{"token":"usr_000000000000000000000000.000000000000000000000000000000000000000000000000"}`,
		`{"email":"a\u0000@example.com"}`, `{"email":"a@example.com"}`,
		`{"token":"x","password":"\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000"}`} {
		f.Add(append([]byte{byte(i)}, s...))
	}
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		fe.send(t, http.MethodPost, routes[int(b[0])%len(routes)], "", b[1:])
	})
}

// FuzzExitPlan sends fuzzed plans to POST /api/exit-plans and previews of
// them: distances, shares and hostile decimals.
func FuzzExitPlan(f *testing.F) {
	addSeeds(f, `{"name":"a","stop":{"ticks":20},"targets":[{"distance":{"ticks":10},"share":"0.5"},{"distance":{"offset":"3.5"},"share":"0.5"}]}`,
		`{"name":"b","stop":{"ticks":20},"runner":true,"targets":[{"distance":{"ticks":10},"share":"0.3333"}],"trailing":{"distance":{"ticks":5}}}`,
		`{"name":"c","stop":{"ticks":9223372036854775807}}`, `{"name":"d","stop":{"ticks":-1}}`)
	addSeeds(f, withValue(`{"name":"v","stop":{"offset":%v}}`)...)
	addSeeds(f, withValue(`{"name":"v","runner":true,"targets":[{"distance":{"ticks":1},"share":%v}]}`)...)
	fe := startFuzzEngine(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := fe.send(t, http.MethodPost, "/api/exit-plans", fe.Key, body)
		if w.Code != http.StatusCreated {
			return
		}
		var m struct {
			Plan struct{ ID, Revision string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		for _, side := range []string{"buy", "sell"} {
			pv, _ := json.Marshal(map[string]any{"planId": m.Plan.ID, "planRevision": m.Plan.Revision, "instrument": "ETH-PERP", "side": side,
				"quantity": "1.37", "orderType": "limit", "limitPrice": "3000.05", "clientOrderId": "f-1"})
			fe.send(t, http.MethodPost, "/api/account/exit-plans/preview", fe.Key, pv)
		}
		fe.send(t, http.MethodDelete, "/api/exit-plans/"+m.Plan.ID+"?revision="+m.Plan.Revision, fe.Key, nil)
	})
}

// FuzzSessionBodies sends fuzzed bodies, as a signed-in verified user, to the
// session routes that write: keys, organizations and their invitations, demo
// accounts, plan replacement; the first byte picks the route.
func FuzzSessionBodies(f *testing.F) {
	routes := []struct{ method, path string }{{"POST", "/api/keys"}, {"POST", "/api/organizations"},
		{"POST", "/api/organizations/%org/members"}, {"POST", "/api/account/demo"}, {"PUT", "/api/exit-plans/%plan"}}
	for i, s := range []string{`{"name":"bot","expiresAt":"2099-01-01T00:00:00Z"}`, `{"name":"Desk"}`,
		`{"email":"b@example.com","role":"reader"}`, `{"currency":"USD"}`,
		`{"revision":"%rev","name":"x","stop":{"ticks":5}}`, `{"name":"\u0000"}`, `{"expiresAt":"0001-01-01T00:00:00Z"}`} {
		f.Add(append([]byte{byte(i % len(routes))}, s...))
	}
	fe := startFuzzEngine(f)
	cookie := fe.SignIn("fuzz@example.com", "a long enough password")
	// httptest requests go to example.com: that is the engine's own Origin here.
	h := map[string]string{"Cookie": "svc_session=" + cookie, "Origin": "http://example.com"}
	org := fe.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/organizations", Body: map[string]string{"name": "Fuzz"}}).Map(f)["organization"].(map[string]any)["id"].(string)
	plan := fe.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/exit-plans", Body: ladder}).Map(f)["plan"].(map[string]any)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		r := routes[int(b[0])%len(routes)]
		path := strings.NewReplacer("%org", org, "%plan", plan["id"].(string)).Replace(r.path)
		body := bytes.ReplaceAll(b[1:], []byte("%rev"), []byte(plan["revision"].(string)))
		fe.sendWith(t, r.method, path, h, body)
	})
}

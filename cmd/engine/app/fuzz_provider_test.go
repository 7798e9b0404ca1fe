package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// FuzzProviderBodies sends fuzzed bodies through the real handler, as a
// signed-in trader, to the provider link (POST /api/account/providers),
// the live trading switch (POST and GET /api/account/live-trading) and the
// unlink (DELETE /api/account/providers/{accountId}, the id from the
// input). The first byte picks the route; every other attempt repeats the
// previous Idempotency-Key. No answer may be a 5xx or an error without its
// body, every answer matches schema/openapi.yaml, and every accepted
// write's commits must read back.
func FuzzProviderBodies(f *testing.F) {
	seeds := []string{
		`{"provider":"binance-futures","apiKey":"k","apiSecret":"s"}`,
		`{"provider":"binance-futures","apiKey":"k","apiSecret":"s","label":"mine"}`,
		`{"provider":"","apiKey":"a b","apiSecret":""}`,
		`{"provider":"x","apiKey":"k","apiSecret":"s","extra":1}`,
		`{"apiSecret":7}`,
		`{"enabled":true,"password":"correct horse battery"}`,
		`{"enabled":true,"password":"wrong"}`,
		`{"enabled":false}`,
		`{"enabled":true}`,
		`{"enabled":"true"}`,
		`{"enabled":null}`,
		`acct_0000`,
		"\xff\xfe",
		`null`,
	}
	for i, s := range seeds {
		f.Add(append([]byte{byte(i)}, s...))
	}
	e := apptest.Start(f, apptest.Options{ManualFeed: true})
	fe := &fuzzEngine{Env: e}
	trader := e.SignIn("fuzz-provider@example.com", "correct horse battery")
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		n++
		h := map[string]string{"Idempotency-Key": fmt.Sprintf("fz-%d", n-n%2), "Origin": e.URL, "Cookie": "svc_session=" + trader}
		body := b[1:]
		var method, target string
		switch b[0] % 4 {
		case 0:
			method, target = "POST", "/api/account/providers"
		case 1:
			method, target = "POST", "/api/account/live-trading"
		case 2:
			method, target, body = "GET", "/api/account/live-trading", nil
		default:
			method, target, body = "DELETE", "/api/account/providers/"+pathSegment(string(body)), nil
		}
		r := httptest.NewRequest(method, target, bytes.NewReader(body))
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		for k, v := range h {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		e.App.Handler.ServeHTTP(w, r)
		apptest.ValidateResponse(t, r, w.Code, w.Header(), w.Body.Bytes())
		// The sandbox's provider is the exchange itself, out of reach here: a
		// well-formed link meets 503 provider_unavailable with Retry-After,
		// nothing linked, which is its answer to the exchange being down.
		var m map[string]any
		if w.Code == http.StatusServiceUnavailable && json.Unmarshal(w.Body.Bytes(), &m) == nil &&
			m["code"] == "provider_unavailable" && w.Header().Get("Retry-After") == "1" {
			return
		}
		fe.check(t, method, target, body, w)
	})
}

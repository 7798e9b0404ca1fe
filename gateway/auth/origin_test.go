package auth_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// send sends a request with a Host and headers of the caller's choosing and
// validates the answer against the document.
func send(t *testing.T, e *apptest.Env, method, path, host string, headers map[string]string, body any) *apptest.Resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	apptest.ValidateResponse(t, req, resp.StatusCode, resp.Header, b)
	return &apptest.Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// originRefused checks r is the one origin refusal: 403 in the spec's shape,
// a sentence starting "origin not allowed" and code origin_not_allowed.
func originRefused(t *testing.T, name string, r *apptest.Resp) {
	t.Helper()
	m := r.Map(t)
	msg, _ := m["error"].(string)
	if r.Status != 403 || m["requestId"] != r.Header.Get("X-Request-Id") || m["code"] != "origin_not_allowed" || !strings.HasPrefix(msg, "origin not allowed") {
		t.Fatalf("%s: %d %s", name, r.Status, r.Body)
	}
}

func TestTheEnginesOwnOriginIsItsBaseURLsNotTheRequestsHost(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) { c.AllowedOrigins = "https://app.example.com" }})
	cookie := e.SignIn("ann@example.com", "correct horse battery")
	host := strings.TrimPrefix(e.URL, "http://")
	jar := func(origin string) map[string]string {
		return map[string]string{"Cookie": "svc_session=" + cookie, "Origin": origin}
	}
	key := map[string]string{"Authorization": "Bearer " + e.Key}

	// https://<host> on an http engine: another origin, scheme included.
	originRefused(t, "https with the engine's host", send(t, e, "POST", "/api/keys", "", jar("https://"+host), map[string]any{}))
	// A Host the client names is not the engine's origin.
	originRefused(t, "evil origin naming itself as Host", send(t, e, "POST", "/api/keys", "evil.example", jar("http://evil.example"), map[string]any{}))
	key["Origin"] = "http://evil.example"
	originRefused(t, "a key from an evil origin naming itself as Host", send(t, e, "GET", "/api/account/list", "evil.example", key, nil))
	originRefused(t, "operator write", send(t, e, "POST", "/api/operator/venues/v1/accounts/1/reconciliation-hold", "evil.example", jar("http://evil.example"), map[string]any{}))
	// The venue routes too: the origin check precedes the family's credential, in the one shape.
	originRefused(t, "back-office write", send(t, e, "POST", "/api/back-office/venues", "evil.example",
		map[string]string{"Cookie": "svc_session=" + cookie, "Origin": "http://evil.example", "Idempotency-Key": "v1"}, map[string]any{"name": "v"}))

	// The base URL's origin and a registered one are trusted.
	for _, o := range []string{e.URL, "https://app.example.com"} {
		if r := send(t, e, "POST", "/api/keys", "", jar(o), map[string]any{"name": "k"}); r.Status != 201 {
			t.Fatalf("write from %s: %d %s", o, r.Status, r.Body)
		}
	}
}

func TestEveryAnswerForbidsSniffing(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	for _, r := range []*apptest.Resp{
		e.Get("/healthz"),
		e.Get("/api/account/list"),
		e.Get("/api/account/orders?account=nope"),
		e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: "-"}),
		e.Do(apptest.Req{Method: "POST", Path: "/api/trading/order", Body: "{"}),
	} {
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%d %s: X-Content-Type-Options %q", r.Status, r.Body, r.Header.Get("X-Content-Type-Options"))
		}
	}
}

func TestATenantsKeysShareOneRateLimit(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		c.RateLimit, c.RateBurst = 1000, 1000
		c.TenantRateLimit, c.TenantRateBurst = 1, 6
	}})
	cookie := e.SignIn("ann@example.com", "correct horse battery")
	var keys []string
	for range 2 {
		r := e.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/keys", Body: map[string]any{"name": "k"}})
		if r.Status != 201 {
			t.Fatalf("issue key: %d %s", r.Status, r.Body)
		}
		keys = append(keys, r.Map(t)["secret"].(string))
	}
	// The tenant's burst of 6 is spent by the issues and the first key's
	// requests; then the second key, unused, is refused too.
	limited := false
	for i := 0; i < 8 && !limited; i++ {
		r := e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: keys[0]})
		limited = r.Status == 429
	}
	if !limited {
		t.Fatal("8 requests of one key after 2 of the session passed a tenant burst of 6")
	}
	r := e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: keys[1]})
	if r.Status != 429 || r.Map(t)["code"] != "rate_limited" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("the second key over the tenant's limit: %d %s %v", r.Status, r.Body, r.Header)
	}
	// Another tenant is not limited by this one.
	if r := e.Get("/api/account/list"); r.Status != 200 {
		t.Fatalf("another tenant: %d %s", r.Status, r.Body)
	}
}

package app_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/gateway/connect/statement"
)

// fuzzHeaderLimit bounds the fuzzed header value and query: the server's own
// header limit (431, plain text) is not the handlers' to answer.
const fuzzHeaderLimit = 8 << 10

// fuzzHeaderSlots are the headers the fuzzed header string goes in, chosen by
// bits 2-3 of the route selector: the Idempotency-Key (when not empty), the
// Content-Type, a browser Origin, a Cookie.
var fuzzHeaderSlots = []string{"Idempotency-Key", "Content-Type", "Origin", "Cookie"}

// FuzzConnectBodies sends fuzzed bodies, headers and queries through the real
// handler chain of a running sandbox engine to Connect's link routes (with the
// sample app's key) and hosted Connect's choice (with a frame session opened on
// a link made in setup). The route is bits 0-1 of the selector:
//
//	0: POST /api/connect/links, body as given
//	1: DELETE /api/connect/links/{id} of a link made in setup, body as given
//	2: POST /api/connect/hosted/connect (bit 4 clear) or
//	   /api/connect/hosted/disconnect (bit 4 set), body as given, Authorization: Frame ...
//	3: GET /api/connect/links?{body as the query}
//
// Writes carry an Idempotency-Key derived from the input, so a repeated input
// is a replay. Every answer must match schema/openapi.yaml, never be a 5xx
// other than a 503 with Retry-After, and carry an error sentence from 400 on;
// the engine must keep answering /healthz.
func FuzzConnectBodies(f *testing.F) {
	bodies := []string{
		`{"trader":"t"}`, `{}`, `{"trader":""}`, `{"whiteLabel":true}`, `{"accountId":"x","whiteLabel":true}`,
		`{"accountId":"x"}`, `{"whiteLabel":false}`, `{"accountId":"","whiteLabel":false}`, `{"accountId":"` + strings.Repeat("a", 65) + `"}`,
		`{"trader":"t","extra":1}`, `{"trader":"a","trader":"b"}`, `{"trader":"t"}{"trader":"u"}`, `{"trader":"t"} `, `{"trader":7}`,
		`{"trader":"` + strings.Repeat("x", 129) + `"}`, `{"trader":"` + strings.Repeat("\u00e9", 128) + `"}`, `{"trader":"\u0000"}`,
		`{"trader":"a\u202eb"}`, `{"trader":"\ud800"}`, "{\"trader\":\"\xff\xfe\"}", "\xff\xfe", `{"trader":"` + strings.Repeat("x", 70<<10) + `"}`,
		`null`, `[]`, `""`, `1e400`, `{`, ``, `{"whiteLabel":"true"}`, `{"whiteLabel":null,"accountId":null}`,
	}
	queries := []string{``, `trader=t&state=created&limit=5`, `limit=0`, `limit=101`, `limit=-1`, `limit=1e2`, `state=bogus`, `state=`,
		`trader=`, `trader=` + strings.Repeat("x", 129), `trader=%00`, `trader=%ff`, `cursor=%zz`, `cursor=../../x`, `cursor=` + strings.Repeat("c", 129),
		`cursor=zzzz&limit=1`, `limit=1&limit=2`, `state=failed&trader=t`, `;;&&==`}
	for i, b := range bodies {
		for route := range byte(3) {
			f.Add(route, b, "")
		}
		f.Add(byte(i%3)|0<<2, b, "fz-seed")
		f.Add(byte(i%3)|1<<2, b, "text/plain")
		f.Add(byte(2|1<<4), b, "")
	}
	for _, q := range queries {
		f.Add(byte(3), q, "")
	}
	for route := range byte(4) {
		f.Add(route|1<<2, `{"trader":"t"}`, "application/json; charset=utf-8")
		f.Add(route|1<<2, `{"trader":"t"}`, "application/json-seq")
		f.Add(route|2<<2, `{"trader":"t"}`, "https://evil.example")
		f.Add(route|3<<2, `{"trader":"t"}`, "svc_session=x")
		f.Add(route|0<<2, `{"trader":"t"}`, strings.Repeat("k", 129))
		f.Add(route|0<<2, `{"trader":"t"}`, "k k")
	}

	e := apptest.Start(f, apptest.Options{})
	key, _ := e.Creds["connectKey"].(string)
	if key == "" {
		f.Fatal("the sandbox has no connectKey")
	}
	c := &http.Client{Timeout: 30 * time.Second}
	closing := fuzzCreateLink(f, c, e.URL, key, "setup-close")
	hosted := fuzzCreateLink(f, c, e.URL, key, "setup-hosted")
	frame := fuzzOpenFrame(f, c, e.URL, hosted.hostedURL)

	f.Fuzz(func(t *testing.T, route byte, body, header string) {
		if len(header) > fuzzHeaderLimit {
			header = header[:fuzzHeaderLimit]
		}
		header = fuzzHeaderValue(header)
		sum := sha256.Sum256([]byte(string(route) + "\x00" + body + "\x00" + header))
		h := http.Header{"Idempotency-Key": {"fz-" + hex.EncodeToString(sum[:16])}, "Content-Type": {"application/json"}}
		var method, target string
		var payload io.Reader = strings.NewReader(body)
		switch route % 4 {
		case 0:
			method, target = http.MethodPost, "/api/connect/links"
			h.Set("Authorization", "Bearer "+key)
		case 1:
			method, target = http.MethodDelete, "/api/connect/links/"+closing.id
			h.Set("Authorization", "Bearer "+key)
		case 2:
			method, target = http.MethodPost, "/api/connect/hosted/connect"
			if route&(1<<4) != 0 {
				target = "/api/connect/hosted/disconnect"
			}
			h.Set("Authorization", "Frame "+frame)
		case 3:
			method, target, payload = http.MethodGet, "/api/connect/links", nil
			h.Set("Authorization", "Bearer "+key)
			h.Del("Content-Type")
		}
		if slot := fuzzHeaderSlots[(route>>2)%4]; header != "" || slot != "Idempotency-Key" {
			h.Set(slot, header)
		}
		req, err := http.NewRequest(method, e.URL+target, payload)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		if route%4 == 3 {
			req.URL.RawQuery = fuzzQuery(body)
		}
		fuzzCheck(t, c, e.URL, req, body, header)
	})
}

// fuzzCheck sends req and holds its answer to the rules every fuzzed request
// meets: valid against the OpenAPI document, never a 5xx but a 503 with
// Retry-After, an error sentence from 400 on, and the engine still answering.
func fuzzCheck(t *testing.T, c *http.Client, base string, req *http.Request, body, header string) {
	t.Helper()
	method := req.Method
	status, rh, b := fuzzSend(t, c, req)
	switch {
	case status >= 500 && (status != http.StatusServiceUnavailable || rh.Get("Retry-After") == ""):
		t.Fatalf("%s %s %q (%q): %d %s", method, req.URL.RequestURI(), body, header, status, b)
	case status >= 400:
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s %q (%q): %d, not a JSON object: %s", method, req.URL.RequestURI(), body, header, status, b)
		}
		if s, _ := m["error"].(string); s == "" {
			t.Fatalf("%s %s %q (%q): %d without an error sentence: %s", method, req.URL.RequestURI(), body, header, status, b)
		}
	}
	health, err := http.NewRequest(http.MethodGet, base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, b := fuzzSend(t, c, health); status != http.StatusOK {
		t.Fatalf("after %s %s %q: /healthz %d %s", method, req.URL.RequestURI(), body, status, b)
	}
}

// FuzzConnectDashboardBodies sends fuzzed bodies and headers through the real
// handler chain to the Connect dashboard's writes (a verified owner's
// dashboard session, from the engine's own origin) and to the sandbox's
// statement exchange (production's public key configured). The route is bits
// 0-1 of the selector:
//
//	0: POST /api/connect/dashboard/apps
//	1: PATCH /api/connect/dashboard/apps/{id} of an app made in setup
//	2: POST /api/connect/dashboard/apps/{id}/keys
//	3: POST /api/connect/dashboard/exchange (no session)
//
// The header string replaces the Idempotency-Key (route bit 2 clear) or the
// Origin (set). The rules are fuzzCheck's.
func FuzzConnectDashboardBodies(f *testing.F) {
	for _, b := range []string{`{"orgId":"x","name":"A","websites":["https://a.example"]}`, `{"name":"B"}`, `{"websites":[]}`,
		`{"websites":["http://a.example"]}`, `{"websites":["https://a.example:99999"]}`, `{"logoUrl":"javascript:alert(1)"}`,
		`{"whiteLabel":{"enabled":true,"currency":"EUR"}}`, `{"whiteLabel":{"startingBalance":"1e400"}}`, `{"whiteLabel":{"startingBalance":-1}}`,
		`{"name":"k","expiresAt":"2099-01-01T00:00:00Z"}`, `{"name":"k","expiresAt":"1999-01-01T00:00:00Z"}`, `{"name":"","expiresAt":""}`,
		`{"statement":"a.b.c"}`, `{"statement":""}`, `{"statement":"` + strings.Repeat("x", 70<<10) + `"}`, `null`, `[]`, `{`, ``, "\xff",
		`{"orgId":"x","orgId":"y"}`, `{"websites":["` + strings.Repeat("h", 600) + `"]}`} {
		for route := range byte(4) {
			f.Add(route, b, "")
			f.Add(route|4, b, "https://evil.example")
		}
	}
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		f.Fatal(err)
	}
	e := apptest.Start(f, apptest.Options{Configure: func(c *app.Config) { c.Connect.ProductionKey = statement.PublicKeyText(pub) }})
	c := &http.Client{Timeout: 30 * time.Second}
	const email, pw = "fuzz-owner@example.com", "correct horse battery"
	trader := e.SignIn(email, pw)
	dash := fuzzDashboardLogin(f, c, e.URL, email, pw)
	org := e.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/organizations", Body: map[string]string{"name": "Fuzz"}})
	orgID, _ := org.Map(f)["organization"].(map[string]any)["id"].(string)
	made := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps", Key: "-",
		Headers: map[string]string{"Cookie": "svc_connect=" + dash, "Origin": e.URL, "Idempotency-Key": "setup-app"},
		Body:    map[string]any{"orgId": orgID, "name": "Fuzz app", "websites": []string{"https://fuzz.example"}}})
	appID, _ := made.Map(f)["app"].(map[string]any)["id"].(string)
	if appID == "" {
		f.Fatalf("setup app: %d %s", made.Status, made.Body)
	}

	f.Fuzz(func(t *testing.T, route byte, body, header string) {
		if len(header) > fuzzHeaderLimit {
			header = header[:fuzzHeaderLimit]
		}
		header = fuzzHeaderValue(header)
		sum := sha256.Sum256([]byte(string(route) + "\x00" + body + "\x00" + header))
		h := http.Header{"Idempotency-Key": {"fz-" + hex.EncodeToString(sum[:16])}, "Content-Type": {"application/json"},
			"Origin": {e.URL}, "Cookie": {"svc_connect=" + dash}}
		method, target := http.MethodPost, "/api/connect/dashboard/apps"
		switch route % 4 {
		case 1:
			method, target = http.MethodPatch, "/api/connect/dashboard/apps/"+appID
		case 2:
			target = "/api/connect/dashboard/apps/" + appID + "/keys"
		case 3:
			target = "/api/connect/dashboard/exchange"
			h.Del("Cookie")
		}
		if route&4 != 0 {
			h.Set("Origin", header)
		} else if header != "" {
			h.Set("Idempotency-Key", header)
		}
		req, err := http.NewRequest(method, e.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		fuzzCheck(t, c, e.URL, req, body, header)
	})
}

// fuzzDashboardLogin signs in to the Connect dashboard and answers its session cookie.
func fuzzDashboardLogin(t testing.TB, c *http.Client, base, email, pw string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/connect/dashboard/login", strings.NewReader(`{"email":"`+email+`","password":"`+pw+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "svc_connect" {
			return ck.Value
		}
	}
	t.Fatalf("dashboard login: %d", resp.StatusCode)
	return ""
}

// fuzzSend sends req and validates the answer against the OpenAPI document.
func fuzzSend(t testing.TB, c *http.Client, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", req.Method, req.URL.RequestURI(), err)
	}
	apptest.ValidateResponse(t, req, resp.StatusCode, resp.Header, b)
	return resp.StatusCode, resp.Header, b
}

type fuzzLink struct{ id, hostedURL string }

// fuzzCreateLink makes a link of the sample app for trader.
func fuzzCreateLink(t testing.TB, c *http.Client, base, key, trader string) fuzzLink {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/connect/links", strings.NewReader(`{"trader":"`+trader+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "setup-"+trader)
	status, _, b := fuzzSend(t, c, req)
	var m struct {
		Link      struct{ ID string }
		HostedURL string
	}
	if err := json.Unmarshal(b, &m); status != http.StatusCreated || err != nil || m.Link.ID == "" || m.HostedURL == "" {
		t.Fatalf("create a link: %d %s", status, b)
	}
	return fuzzLink{id: m.Link.ID, hostedURL: m.HostedURL}
}

var fuzzFrameAttr = regexp.MustCompile(`data-frame="([^"]+)"`)

// fuzzOpenFrame opens hosted Connect's page on a link (on this engine, whatever
// base URL the hosted URL names) and answers the frame session it opened.
func fuzzOpenFrame(t testing.TB, c *http.Client, base, hostedURL string) string {
	t.Helper()
	u, err := url.Parse(hostedURL)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, base+u.RequestURI(), nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _, b := fuzzSend(t, c, req)
	m := fuzzFrameAttr.FindSubmatch(b)
	if status != http.StatusOK || m == nil {
		t.Fatalf("hosted page: %d %s", status, b)
	}
	return html.UnescapeString(string(m[1]))
}

// fuzzHeaderValue replaces what a header value cannot hold (control bytes but
// tab) so that the client sends it; everything else goes as fuzzed.
func fuzzHeaderValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

// fuzzQuery makes s a query a request line can carry: bytes a URL cannot hold
// are percent-encoded; '%', '&', '=' and ';' go as fuzzed, malformed escapes
// included.
func fuzzQuery(s string) string {
	if len(s) > fuzzHeaderLimit {
		s = s[:fuzzHeaderLimit]
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > 0x20 && c < 0x7f && c != '#' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}

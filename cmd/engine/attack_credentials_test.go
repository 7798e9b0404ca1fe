package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/clusterkit"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/mail"
)

// The attacks of issue 41 on credentials, streams, origins and headers, as a
// client sends them to the binary: a revoked key's open streams end (on
// every node), a client-named Host or another scheme is not the engine's
// origin, a tenant's keys share one rate limit, and no answer may be sniffed.

// send sends a request as a browser of base with the session cookie
// (when not empty), Origin origin (when not empty) and Host host (when not empty).
func send(t *testing.T, base, method, path, cookie, origin, host string, headers map[string]string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.Header.Set("Cookie", "svc_session="+cookie)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, resp.Header, m
}

// person signs a user up through base, verifies the address with the token
// the engine mailed into dir and signs in: the session cookie.
func person(t *testing.T, base, dir, email string) string {
	t.Helper()
	const password = "correct horse battery"
	if code, _, m := send(t, base, "POST", "/api/auth/signup", "", "", "", nil, map[string]string{"email": email, "password": password}); code != 201 {
		t.Fatalf("signup: %d %v", code, m)
	}
	var tok string
	enginetest.WaitFor(t, 10*time.Second, func() error {
		msg, _, err := mail.Latest(filepath.Join(dir, "mail"), email)
		if err != nil {
			return err
		}
		var ok bool
		if tok, ok = mail.Token(msg.Text); !ok {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	if code, _, m := send(t, base, "POST", "/api/auth/verify", "", "", "", nil, map[string]string{"token": tok, "password": password}); code != 200 {
		t.Fatalf("verify: %d %v", code, m)
	}
	req, _ := http.NewRequest("POST", base+"/api/auth/login", strings.NewReader(`{"email":"`+email+`","password":"`+password+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "svc_session" {
			return c.Value
		}
	}
	t.Fatalf("login: %d", resp.StatusCode)
	return ""
}

// issueKey issues a Trading API key through base with the session: the key and its id.
func issueKey(t *testing.T, base, cookie string) (key, id string) {
	t.Helper()
	code, _, m := send(t, base, "POST", "/api/keys", cookie, base, "", nil, map[string]any{"name": "bot"})
	if code != 201 {
		t.Fatalf("issue key: %d %v", code, m)
	}
	return m["secret"].(string), m["key"].(map[string]any)["id"].(string)
}

// demoAccount opens a demo account with key through base: its number.
func demoAccount(t *testing.T, base, key string) string {
	t.Helper()
	code, _, m := send(t, base, "POST", "/api/account/demo", "", "", "", map[string]string{"Authorization": "Bearer " + key, "Idempotency-Key": "demo-" + key[len(key)-8:]}, map[string]any{})
	if code != 201 {
		t.Fatalf("demo account: %d %v", code, m)
	}
	return m["account"].(map[string]any)["accountNumber"].(string)
}

// sseEvent is one event a stream read: its name and data.
type sseEvent struct {
	name string
	data map[string]any
}

// openSSE opens a stream with key and reads its events until the body ends.
func openSSE(t *testing.T, base, path, key string) <-chan sseEvent {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("stream %s: %d", path, resp.StatusCode)
	}
	ch := make(chan sseEvent, 256)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.data)
			case line == "" && ev.name != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch
}

// endsWithin checks the stream's last event is error credential_revoked and
// its body ends, both within d of now.
func endsWithin(t *testing.T, name string, ch <-chan sseEvent, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	var last sseEvent
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				if last.name != "error" || last.data["code"] != "credential_revoked" {
					t.Fatalf("%s ended after %q %v, want the error credential_revoked", name, last.name, last.data)
				}
				return
			}
			last = ev
		case <-deadline:
			t.Fatalf("%s still open %v after the revocation (last event %q)", name, d, last.name)
		}
	}
}

func TestAttackCredentialsStreamsOriginsAndHeaders(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, "ENGINE_RATE_LIMIT=1000", "ENGINE_RATE_BURST=1000", "ENGINE_TENANT_RATE_LIMIT=1", "ENGINE_TENANT_RATE_BURST=12")
	c := readCreds(t, dir)

	t.Run("a revoked key's open streams end with a final error within a second", func(t *testing.T) {
		cookie := person(t, p.base, dir, "ann@example.com")
		key, id := issueKey(t, p.base, cookie)
		account := demoAccount(t, p.base, key)
		acct := openSSE(t, p.base, "/api/account/stream?account="+account, key)
		if ev := <-acct; ev.name != "account" {
			t.Fatalf("first event %q", ev.name)
		}
		bars := openSSE(t, p.base, "/api/market/stream?instrument=BTC-PERP&tf=1m", key)
		if code, _, m := send(t, p.base, "DELETE", "/api/keys/"+id, cookie, p.base, "", nil, nil); code != 204 {
			t.Fatalf("revoke: %d %v", code, m)
		}
		endsWithin(t, "the account stream", acct, time.Second)
		endsWithin(t, "the market stream", bars, time.Second)
	})

	t.Run("only the base URL's origin is the engine's, scheme included", func(t *testing.T) {
		cookie := person(t, p.base, dir, "bob@example.com")
		for _, a := range []struct{ name, origin, host string }{
			{"https with the engine's host", "https://" + addr, ""},
			{"an origin naming itself as Host", "http://evil.example", "evil.example"},
		} {
			code, _, m := send(t, p.base, "POST", "/api/keys", cookie, a.origin, a.host, nil, map[string]any{"name": "x"})
			if code != 403 || m["code"] != "origin_not_allowed" {
				t.Fatalf("%s: %d %v", a.name, code, m)
			}
		}
		code, _, m := send(t, p.base, "GET", "/api/account/list", "", "http://evil.example", "evil.example", map[string]string{"Authorization": "Bearer " + c.TradingKey}, nil)
		if code != 403 || m["code"] != "origin_not_allowed" {
			t.Fatalf("a key from an origin naming itself as Host: %d %v", code, m)
		}
		if code, _, m := send(t, p.base, "POST", "/api/keys", cookie, p.base, "", nil, map[string]any{"name": "x"}); code != 201 {
			t.Fatalf("from the engine's own origin: %d %v", code, m)
		}
	})

	t.Run("a tenant's keys share one rate limit", func(t *testing.T) {
		cookie := person(t, p.base, dir, "cat@example.com")
		k1, _ := issueKey(t, p.base, cookie)
		k2, _ := issueKey(t, p.base, cookie)
		limited := false
		for i := 0; i < 14 && !limited; i++ {
			code, _, _ := send(t, p.base, "GET", "/api/account/list", "", "", "", map[string]string{"Authorization": "Bearer " + k1}, nil)
			limited = code == 429
		}
		if !limited {
			t.Fatal("14 requests of one key passed a tenant burst of 12")
		}
		code, h, m := send(t, p.base, "GET", "/api/account/list", "", "", "", map[string]string{"Authorization": "Bearer " + k2}, nil)
		if code != 429 || m["code"] != "rate_limited" || h.Get("Retry-After") == "" {
			t.Fatalf("the tenant's other key: %d %v %v", code, m, h)
		}
		if code, _, m := send(t, p.base, "GET", "/api/account/list", "", "", "", map[string]string{"Authorization": "Bearer " + c.TradingKey}, nil); code != 200 {
			t.Fatalf("another tenant: %d %v", code, m)
		}
	})

	t.Run("no answer may be sniffed", func(t *testing.T) {
		for _, r := range []struct{ method, path, key string }{
			{"GET", "/healthz", ""}, {"GET", "/api/account/list", c.TradingKey}, {"GET", "/api/account/list", "svc_sk_nope_nope_nope"},
			{"GET", "/no/such/route", ""}, {"GET", "/openapi.yaml", ""},
		} {
			h := map[string]string{}
			if r.key != "" {
				h["Authorization"] = "Bearer " + r.key
			}
			code, hdr, _ := send(t, p.base, r.method, r.path, "", "", "", h, nil)
			if hdr.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("%s %s (%d): X-Content-Type-Options %q", r.method, r.path, code, hdr.Get("X-Content-Type-Options"))
			}
		}
	})
}

// TestAttackRevocationEndsStreamsOnEveryNode: two engine nodes on one
// JetStream cluster; a stream opened on node A with a key ends within a
// second of the key's revocation through node B.
func TestAttackRevocationEndsStreamsOnEveryNode(t *testing.T) {
	root := t.TempDir()
	nats := clusterkit.StartNATS(t, filepath.Join(root, "nats"))
	secret, name := clusterkit.NewSecretKey(), clusterkit.NewDeployment()
	var nodes []*clusterkit.Engine
	for _, n := range []string{"a", "b"} {
		nodes = append(nodes, clusterkit.StartEngine(t, clusterkit.EngineOptions{Node: n, NATSURLs: nats.URLs(), Deployment: name,
			Dir: filepath.Join(root, n), SecretKey: secret, Env: map[string]string{"ENGINE_RATE_LIMIT": "0"}}))
	}
	a, b := nodes[0].URL(), nodes[1].URL()
	cookie := person(t, a, filepath.Join(root, "a"), "dan@example.com")
	key, id := issueKey(t, a, cookie)
	account := demoAccount(t, a, key)
	acct := openSSE(t, a, "/api/account/stream?account="+account, key)
	if ev := <-acct; ev.name != "account" {
		t.Fatalf("first event %q", ev.name)
	}
	// Node B has folded the session and the key: the revocation goes through it.
	enginetest.WaitFor(t, 10*time.Second, func() error {
		code, _, m := send(t, b, "GET", "/api/keys", cookie, b, "", nil, nil)
		if code != 200 || len(m["keys"].([]any)) != 1 {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	if code, _, m := send(t, b, "DELETE", "/api/keys/"+id, cookie, b, "", nil, nil); code != 204 {
		t.Fatalf("revoke through node B: %d %v", code, m)
	}
	endsWithin(t, "node A's account stream", acct, time.Second)
}

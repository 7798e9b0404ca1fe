package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/svc/engine/engine/mail"
)

// browser calls the binary with a session cookie jar and the engine's own Origin.
type browser struct {
	t      *testing.T
	base   string
	cookie string
}

func (b *browser) do(method, path string, body any) (int, map[string]any) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, b.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Origin", b.base)
	if b.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "svc_session", Value: b.cookie})
	}
	resp, err := client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "svc_session" {
			b.cookie = c.Value
		}
	}
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// A person signs up with the real binary, verifies with the token of the
// mail file it wrote, signs in, issues a key, opens a demo account, trades,
// revokes the key (401 next) and finds all of it again after a SIGKILL.
func TestSignUpToTradeThroughTheBinary(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	b := &browser{t: t, base: p.base}
	const email, password = "e2e@example.com", "an e2e password"
	if st, m := b.do("POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	msg, file, err := mail.Latest(filepath.Join(dir, "mail"), email)
	if err != nil {
		t.Fatalf("no mail file: %v\n%s", err, p.out)
	}
	token, ok := mail.Token(msg.Text)
	if !ok {
		t.Fatalf("%s carries no token", file)
	}
	if st, m := b.do("POST", "/api/auth/verify", map[string]string{"token": token, "password": password}); st != 200 {
		t.Fatalf("verify: %d %v", st, m)
	}
	if st, m := b.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}); st != 200 || b.cookie == "" {
		t.Fatalf("login: %d %v", st, m)
	}
	st, m := b.do("POST", "/api/keys", map[string]string{"name": "e2e"})
	if st != 201 {
		t.Fatalf("key: %d %v", st, m)
	}
	key, keyID := m["secret"].(string), m["key"].(map[string]any)["id"].(string)
	if st, body, _ := call(p.base, key, "POST", "/api/account/demo", map[string]any{}); st != 201 {
		t.Fatalf("demo: %d %s", st, body)
	}
	order := map[string]any{"clientOrderId": "e2e-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}
	if st, body, _ := call(p.base, key, "POST", "/api/trading/order", order); st != 200 {
		t.Fatalf("order: %d %s", st, body)
	}

	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	p = start(t, bin, dir, addr)
	b.base = p.base
	if st, m := b.do("GET", "/api/auth/me", nil); st != 200 {
		t.Fatalf("the session after a SIGKILL: %d %v", st, m)
	}
	if st, body, _ := call(p.base, key, "POST", "/api/trading/order", order); st != 409 {
		t.Fatalf("the order after a SIGKILL is not remembered: %d %s", st, body)
	}
	if st, m := b.do("DELETE", "/api/keys/"+keyID, nil); st != 204 {
		t.Fatalf("revoke: %d %v", st, m)
	}
	if st, body, _ := call(p.base, key, "GET", "/api/account/list", nil); st != 401 {
		t.Fatalf("a revoked key: %d %s", st, body)
	}
}

package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/svc/engine/engine/mail"
)

// sendJSON sends a JSON request with a bearer key and extra headers, and
// answers the status and the decoded body.
func sendJSON(t *testing.T, base, key, method, path string, h map[string]string, body any) (int, map[string]any) {
	t.Helper()
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, base+path, bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// listed are the account numbers a key's GET /api/account/list answers, sorted.
func listed(t *testing.T, base, key string) []string {
	t.Helper()
	st, body, err := call(base, key, "GET", "/api/account/list", nil)
	if err != nil || st != 200 {
		t.Fatalf("account list: %d %s %v", st, body, err)
	}
	var l struct {
		Accounts []struct {
			AccountNumber string `json:"accountNumber"`
		} `json:"accounts"`
	}
	_ = json.Unmarshal(body, &l)
	out := []string{}
	for _, a := range l.Accounts {
		out = append(out, a.AccountNumber)
	}
	sort.Strings(out)
	return out
}

// Accounts a firm and a venue issue to an address, attacked through the real
// binary: someone who signs up with the address and never opens its mail, and
// another verified user, reach none of them by list, selector or session;
// the user who verified the address lists and trades both, and still does
// after a SIGKILL and a restart (the binding is replayed from the log).
func TestIssuedAccountsReachOnlyTheirVerifiedAddress(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	var cr struct {
		PartnerKey string `json:"partnerKey"`
		VenueKey   string `json:"venueKey"`
		VenueID    string `json:"venueId"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err := json.Unmarshal(b, &cr); err != nil || cr.PartnerKey == "" || cr.VenueKey == "" {
		t.Fatalf("dev-credentials.json: %v %s", err, b)
	}

	// The firm provisions, and the venue issues, an account to the trader's address.
	const trader = "ivy.trader@example.com"
	st, m := sendJSON(t, p.base, cr.PartnerKey, "POST", "/api/partner/accounts", nil,
		map[string]any{"accounts": []any{map[string]any{"referenceId": "ivy-1", "email": "Ivy.Trader@Example.com", "startingBalance": "25000"}}})
	if st != 200 {
		t.Fatalf("provision: %d %v", st, m)
	}
	firm := m["results"].([]any)[0].(map[string]any)["account"].(map[string]any)["accountNumber"].(string)
	for _, c := range []struct {
		kind, id string
		body     map[string]any
	}{
		{"instruments", "BTC-PERP", map[string]any{"active": true}},
		{"routes", "paper", map[string]any{"target": "paper"}},
		{"groups", "g1", map[string]any{"name": "G", "instruments": []any{"BTC-PERP"}, "routeId": "paper"}},
	} {
		if st, m := sendJSON(t, p.base, cr.VenueKey, "PUT", "/api/venues/"+cr.VenueID+"/"+c.kind+"/"+c.id, map[string]string{"Idempotency-Key": c.kind}, c.body); st >= 300 {
			t.Fatalf("venue %s: %d %v", c.kind, st, m)
		}
	}
	st, m = sendJSON(t, p.base, cr.VenueKey, "POST", "/api/venues/"+cr.VenueID+"/accounts", map[string]string{"Idempotency-Key": "ivy"},
		map[string]any{"groupId": "g1", "email": trader})
	if st != 201 {
		t.Fatalf("venue issue: %d %v", st, m)
	}
	venue := m["account"].(map[string]any)["accountNumber"].(string)
	issued := []string{firm, venue}
	sort.Strings(issued)

	// The squatter signs up with the address first and never opens the mail.
	squat := &browser{t: t, base: p.base}
	const password = "squatter's password"
	if st, m := squat.do("POST", "/api/auth/signup", map[string]string{"email": trader, "password": password}); st != 201 {
		t.Fatalf("squatter signup: %d %v", st, m)
	}
	if st, m := squat.do("POST", "/api/auth/login", map[string]string{"email": trader, "password": password}); st != 200 {
		t.Fatalf("squatter login: %d %v", st, m)
	}
	if st, m := squat.do("POST", "/api/keys", map[string]string{"name": "x"}); st != 403 || m["code"] != "email_unverified" {
		t.Fatalf("an unverified key: %d %v", st, m)
	}
	preview := map[string]any{"planId": "none", "clientOrderId": "p1", "side": "buy", "quantity": "1", "instrument": "BTC-PERP"}
	for _, n := range issued {
		if st, m := squat.do("POST", "/api/account/exit-plans/preview?account="+n, preview); st != 400 || m["code"] != "invalid_request" {
			t.Fatalf("the unverified session reached %s: %d %v", n, st, m)
		}
	}
	if st, m := squat.do("GET", "/api/account/list", nil); st != 401 {
		t.Fatalf("a session on the account list: %d %v", st, m)
	}

	// Another verified user: nothing of the trader's by list, selector or order.
	mallory := verifiedKey(t, p.base, dir, "mallory@example.com")
	if got := listed(t, p.base, mallory); len(got) != 0 {
		t.Fatalf("another user lists %v", got)
	}
	for _, n := range issued {
		for _, q := range []string{"/api/account/orders?account=" + n, "/api/account/snapshot?account=" + n} {
			if st, body, _ := call(p.base, mallory, "GET", q, nil); st != 400 {
				t.Fatalf("another user on %s: %d %s", q, st, body)
			}
		}
		if st, body, _ := call(p.base, mallory, "POST", "/api/trading/order?account="+n,
			map[string]any{"clientOrderId": "m-" + n, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}); st != 400 {
			t.Fatalf("another user's order on %s: %d %s", n, st, body)
		}
	}

	// The address's owner, who holds the mailbox, takes the address back: a
	// password reset (which ends the squatter's session) and the verification.
	msg, _, err := mail.Latest(filepath.Join(dir, "mail"), trader)
	if err != nil {
		t.Fatal(err)
	}
	verify, _ := mail.Token(msg.Text)
	owner := &browser{t: t, base: p.base}
	if st, m := owner.do("POST", "/api/auth/password-reset", map[string]string{"email": trader}); st >= 300 {
		t.Fatalf("reset: %d %v", st, m)
	}
	// The reset mail is sent after the answer (the engine queues it): wait for it.
	waitFor(t, 10*time.Second, func() error {
		msg, _, err = mail.Latest(filepath.Join(dir, "mail"), trader)
		if err == nil && msg.Subject != "Reset your password" {
			err = fmt.Errorf("the newest mail to %s is %q", trader, msg.Subject)
		}
		return err
	})
	reset, _ := mail.Token(msg.Text)
	const ownerPassword = "the owner's own password"
	if st, m := owner.do("POST", "/api/auth/password-reset/confirm", map[string]string{"token": reset, "password": ownerPassword}); st >= 300 {
		t.Fatalf("reset confirm: %d %v", st, m)
	}
	if st, m := owner.do("POST", "/api/auth/verify", map[string]string{"token": verify, "password": ownerPassword}); st != 200 {
		t.Fatalf("verify: %d %v", st, m)
	}
	// The squatter's session ended with the reset, and their password no longer signs in.
	if st, _ := squat.do("POST", "/api/account/exit-plans/preview?account="+firm, preview); st != 401 {
		t.Fatalf("the squatter's session after the owner's reset: %d", st)
	}
	if st, _ := squat.do("POST", "/api/auth/login", map[string]string{"email": trader, "password": password}); st != 401 {
		t.Fatalf("the squatter's password after the owner's reset: %d", st)
	}
	if st, m := owner.do("POST", "/api/auth/login", map[string]string{"email": trader, "password": ownerPassword}); st != 200 {
		t.Fatalf("owner login: %d %v", st, m)
	}
	st, m = owner.do("POST", "/api/keys", map[string]string{"name": "ivy"})
	if st != 201 {
		t.Fatalf("owner key: %d %v", st, m)
	}
	ivy := m["secret"].(string)
	if got := listed(t, p.base, ivy); len(got) != 2 || got[0] != issued[0] || got[1] != issued[1] {
		t.Fatalf("the trader lists %v, want %v", got, issued)
	}
	for _, n := range issued {
		if st, body, _ := call(p.base, ivy, "POST", "/api/trading/order?account="+n,
			map[string]any{"clientOrderId": "ivy-" + n, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}); st != 200 {
			t.Fatalf("the trader's order on %s: %d %s", n, st, body)
		}
	}
	// The venue still acts for the trader on its own account, and only there.
	st, m = sendJSON(t, p.base, cr.VenueKey, "GET", "/api/account/list", map[string]string{"x-svc-trader": trader}, nil)
	if l, _ := m["accounts"].([]any); st != 200 || len(l) != 1 || l[0].(map[string]any)["accountNumber"] != venue {
		t.Fatalf("the venue for the trader: %d %v", st, m)
	}

	// SIGKILL and restart: the binding is the log's.
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	p = start(t, bin, dir, addr)
	if got := listed(t, p.base, ivy); len(got) != 2 || got[0] != issued[0] || got[1] != issued[1] {
		t.Fatalf("after a SIGKILL the trader lists %v, want %v", got, issued)
	}
	if got := listed(t, p.base, mallory); len(got) != 0 {
		t.Fatalf("after a SIGKILL another user lists %v", got)
	}
}

// verifiedKey signs up email on the binary, verifies it from its mail file,
// signs in and answers a new Trading API key.
func verifiedKey(t *testing.T, base, dir, email string) string {
	t.Helper()
	const password = "a verified password"
	b := &browser{t: t, base: base}
	if st, m := b.do("POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); st != 201 {
		t.Fatalf("signup %s: %d %v", email, st, m)
	}
	msg, _, err := mail.Latest(filepath.Join(dir, "mail"), email)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := mail.Token(msg.Text)
	if st, m := b.do("POST", "/api/auth/verify", map[string]string{"token": tok, "password": password}); st != 200 {
		t.Fatalf("verify %s: %d %v", email, st, m)
	}
	if st, m := b.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}); st != 200 {
		t.Fatalf("login %s: %d %v", email, st, m)
	}
	st, m := b.do("POST", "/api/keys", map[string]string{"name": "k"})
	if st != 201 {
		t.Fatalf("key %s: %d %v", email, st, m)
	}
	return m["secret"].(string)
}

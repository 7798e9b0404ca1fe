package app_test

import (
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// issueToEmail issues one account to email by each door that takes an
// address: the firm's provisioning (partner key) and a venue's issue (venue
// key, into a group it sets up first). It answers both account numbers.
func issueToEmail(t *testing.T, e *apptest.Env, email string) (firm, venue string) {
	t.Helper()
	r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/accounts", Key: e.Creds["partnerKey"].(string),
		Body: map[string]any{"accounts": []any{map[string]any{"referenceId": "ref-" + email, "email": email, "startingBalance": "50000"}}}})
	res := r.Map(t)["results"].([]any)[0].(map[string]any)
	if r.Status != 200 || res["status"] != "created" {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	firm = res["account"].(map[string]any)["accountNumber"].(string)

	venueID, venueKey := e.Creds["venueId"].(string), e.Creds["venueKey"].(string)
	put := func(kind, id string, body any) {
		if r := e.Do(apptest.Req{Method: http.MethodPut, Path: "/api/venues/" + venueID + "/" + kind + "/" + id, Key: venueKey,
			Headers: map[string]string{"Idempotency-Key": kind + "-" + id}, Body: body}); r.Status != 201 && r.Status != 200 {
			t.Fatalf("put %s/%s: %d %s", kind, id, r.Status, r.Body)
		}
	}
	put("instruments", "BTC-PERP", map[string]any{"active": true})
	put("routes", "paper", map[string]any{"target": "paper"})
	put("groups", "g1", map[string]any{"name": "G", "instruments": []any{"BTC-PERP"}, "routeId": "paper"})
	r = e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + venueID + "/accounts", Key: venueKey,
		Headers: map[string]string{"Idempotency-Key": "issue-" + email}, Body: map[string]any{"groupId": "g1", "email": email}})
	if r.Status != 201 {
		t.Fatalf("venue issue: %d %s", r.Status, r.Body)
	}
	return firm, r.Map(t)["account"].(map[string]any)["accountNumber"].(string)
}

// numbers are the account numbers of an /api/account/list answer, sorted.
func numbers(t *testing.T, r *apptest.Resp) []string {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("account list: %d %s", r.Status, r.Body)
	}
	out := []string{}
	for _, a := range r.Map(t)["accounts"].([]any) {
		out = append(out, a.(map[string]any)["accountNumber"].(string))
	}
	sort.Strings(out)
	return out
}

// Accounts a firm provisions and a venue issues to an address are the
// accounts of the user who verified that address: their key lists and
// trades them, whatever the case of the address; someone who signed up with
// the address but never opened the mail reaches none of them; another
// verified user reaches none; the venue acting for the trader still does.
func TestAccountsIssuedToAnAddressAreItsVerifiedUsers(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal("100"), Ask: events.MustDecimal("101"), Last: events.MustDecimal("100"), At: time.Now()})
	firm, venue := issueToEmail(t, e, "T.Rader@Example.com")
	want := []string{firm, venue}
	sort.Strings(want)

	// Signed up with the address, not verified: the session resolves no issued account.
	const password = "a long enough password"
	if r := anon(e, "POST", "/api/auth/signup", map[string]string{"email": "t.rader@example.com", "password": password}); r.Status != 201 {
		t.Fatalf("signup: %d %s", r.Status, r.Body)
	}
	s := login(t, e, "t.rader@example.com", password)
	preview := func(s session, number string) *apptest.Resp {
		return e.Do(apptest.Req{Method: "POST", Path: "/api/account/exit-plans/preview?account=" + number, Key: "-",
			Headers: map[string]string{"Cookie": "svc_session=" + s.cookie, "Origin": e.URL},
			Body:    map[string]any{"planId": "no-such-plan", "clientOrderId": "p1", "side": "buy", "quantity": "1", "instrument": "BTC-PERP"}})
	}
	for _, n := range want {
		code(t, preview(s, n), 400, "invalid_request")
	}
	code(t, s.do("POST", "/api/keys", map[string]any{"name": "bot"}), 403, "email_unverified")

	// Verified (the mailbox's token): the same session reaches both, and a key lists and trades them.
	if r := anon(e, "POST", "/api/auth/verify", map[string]string{"token": mailToken(t, e, "t.rader@example.com", "Verify your email address"), "password": password}); r.Status != 200 {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	for _, n := range want {
		if r := preview(s, n); r.Status == 400 {
			t.Fatalf("verified session on issued account %s: %d %s", n, r.Status, r.Body)
		}
	}
	r := s.do("POST", "/api/keys", map[string]any{"name": "bot"})
	if r.Status != 201 {
		t.Fatalf("key: %d %s", r.Status, r.Body)
	}
	key := r.Map(t)["secret"].(string)
	if got := numbers(t, e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: key})); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("the trader's list %v, want %v", got, want)
	}
	for i, n := range want {
		o := map[string]any{"clientOrderId": "o" + n, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "1"}
		if r := e.Do(apptest.Req{Method: "POST", Path: "/api/trading/order?account=" + n, Key: key, Body: o}); r.Status != 200 {
			t.Fatalf("order %d on %s: %d %s", i, n, r.Status, r.Body)
		}
		if r := e.Do(apptest.Req{Method: "GET", Path: "/api/account/orders?account=" + n, Key: key}); r.Status != 200 || len(r.Map(t)["orders"].([]any)) != 1 {
			t.Fatalf("orders of %s: %d %s", n, r.Status, r.Body)
		}
	}

	// Another verified user reaches none of them, by list or by selector.
	other := signedIn(t, e, "other@example.com")
	r = other.do("POST", "/api/keys", map[string]any{"name": "bot"})
	otherKey := r.Map(t)["secret"].(string)
	if got := numbers(t, e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: otherKey})); len(got) != 0 {
		t.Fatalf("another user sees %v", got)
	}
	for _, n := range want {
		code(t, e.Do(apptest.Req{Method: "GET", Path: "/api/account/orders?account=" + n, Key: otherKey}), 400, "invalid_request")
	}
	// The venue still acts for the trader on its own account, and only there.
	if got := numbers(t, e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: e.Creds["venueKey"].(string),
		Headers: map[string]string{"x-svc-trader": "t.rader@example.com"}})); len(got) != 1 || got[0] != venue {
		t.Fatalf("the venue acting for the trader sees %v, want [%s]", got, venue)
	}
}

// The binding is the log's: after a restart (every read model rebuilt by
// replay) the verified user's key still lists the accounts issued to them.
func TestIssuedAccountsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	e := apptest.Start(t, apptest.Options{DataDir: dir})
	firm, _ := issueToEmail(t, e, "r@example.com")
	s := signedIn(t, e, "r@example.com")
	key := s.do("POST", "/api/keys", map[string]any{"name": "bot"}).Map(t)["secret"].(string)
	e.Stop()
	e2 := apptest.Start(t, apptest.Options{DataDir: dir})
	got := numbers(t, e2.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: key}))
	if len(got) != 2 || (got[0] != firm && got[1] != firm) {
		t.Fatalf("after the restart %v, want the firm's %s and the venue's", got, firm)
	}
}

package firm_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

func TestKeysReachOnlyTheirOwnRoutes(t *testing.T) {
	f := start(t, options{})
	r := f.Do(apptest.Req{Method: http.MethodGet, Path: "/api/partner/accounts"}) // the trading key
	wantCode(t, r, http.StatusForbidden, "permission_denied")
	r = f.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: f.partnerKey})
	wantCode(t, r, http.StatusForbidden, "permission_denied")
	r = f.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order", Key: f.partnerKey,
		Body: map[string]any{"clientOrderId": "c1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "1"}})
	wantCode(t, r, http.StatusForbidden, "permission_denied")
	r = f.Do(apptest.Req{Method: http.MethodGet, Path: "/api/operator/venues/" + f.venue + "/balance-ops/x", Key: f.partnerKey})
	wantCode(t, r, http.StatusForbidden, "permission_denied")
	r = f.Do(apptest.Req{Method: http.MethodGet, Path: "/api/operator/venues/" + f.venue + "/balance-ops/x"}) // trading key
	wantCode(t, r, http.StatusForbidden, "permission_denied")
	r = f.Do(apptest.Req{Method: http.MethodGet, Path: "/api/operator/venues/" + f.venue + "/balance-ops/x", Key: "-"})
	wantCode(t, r, http.StatusUnauthorized, "session_required")
	r = f.Do(apptest.Req{Method: http.MethodGet, Path: "/api/partner/accounts", Key: "-"})
	want(t, r, http.StatusUnauthorized)
}

func TestProvisioningIsIdempotentPerItem(t *testing.T) {
	f := start(t, options{})
	batch := []map[string]any{
		{"referenceId": "p-1", "email": "One@Trader.example", "startingBalance": "25000"},
		{"referenceId": "p-2", "email": "two@trader.example", "currency": "USDC", "label": "Two"},
		{"referenceId": "p-3", "email": "not an email"},
		{"referenceId": "p-4", "email": "four@trader.example", "startingBalance": "10.001"},
	}
	r := f.partner(http.MethodPost, "/api/partner/accounts", map[string]any{"accounts": batch})
	want(t, r, http.StatusOK)
	res := r.Map(t)["results"].([]any)
	status := func(i int) string { return res[i].(map[string]any)["status"].(string) }
	if status(0) != "created" || status(1) != "created" || status(2) != "refused" || status(3) != "refused" {
		t.Fatalf("results %s", r.Body)
	}
	if c := res[3].(map[string]any)["code"]; c != "amount_precision_exceeded" {
		t.Fatalf("precision item: %v", res[3])
	}
	first := res[0].(map[string]any)["account"].(map[string]any)
	if first["email"] != "one@trader.example" || first["balance"] != "25000" || first["currency"] != "USD" {
		t.Fatalf("account %v", first)
	}

	// The same batch again: the original accounts; a changed body under a used reference: conflict.
	batch[1]["label"] = "Renamed"
	r = f.partner(http.MethodPost, "/api/partner/accounts", map[string]any{"accounts": batch[:2]})
	want(t, r, http.StatusOK)
	res = r.Map(t)["results"].([]any)
	if status(0) != "existing" || status(1) != "conflict" {
		t.Fatalf("repeat: %s", r.Body)
	}
	if again := res[0].(map[string]any)["account"].(map[string]any); again["accountNumber"] != first["accountNumber"] {
		t.Fatalf("repeat gave another account: %v", again)
	}

	// A currency not issued here refuses the whole batch, recording nothing.
	r = f.partner(http.MethodPost, "/api/partner/accounts", map[string]any{"accounts": []map[string]any{
		{"referenceId": "p-5", "email": "five@trader.example"}, {"referenceId": "p-6", "email": "six@trader.example", "currency": "EUR"}}})
	m := wantCode(t, r, http.StatusBadRequest, "currency_not_issuable")
	if params(m) != "map[currency:EUR environment:sandbox]" {
		t.Fatalf("params %v", m["params"])
	}
	r = f.partner(http.MethodGet, "/api/partner/accounts", nil)
	want(t, r, http.StatusOK)
	if n := len(r.Map(t)["accounts"].([]any)); n != 2 {
		t.Fatalf("%d accounts listed, want 2: %s", n, r.Body)
	}
}

func TestBalanceOperationsFollowTheLedgerRules(t *testing.T) {
	f := start(t, options{})
	a := f.provision("b-1", "1000")
	b := f.provision("b-2", "1000")

	r := f.balanceOp("op-1", a, "credit", "250.50")
	want(t, r, http.StatusOK)
	receipt := r.Map(t)
	if receipt["referenceId"] != "op-1" || receipt["accountNumber"] != a || receipt["op"] != "credit" || receipt["amount"] != "250.5" || receipt["state"] != "applied" {
		t.Fatalf("receipt %s", r.Body)
	}
	// Same reference and body: the original receipt, nothing moves twice.
	r = f.balanceOp("op-1", a, "credit", "250.50")
	want(t, r, http.StatusOK)
	if again := r.Map(t); again["appliedAt"] != receipt["appliedAt"] {
		t.Fatalf("repeat answered another receipt: %s", r.Body)
	}
	// A different body under the same reference: 409, also on another account.
	wantCode(t, f.balanceOp("op-1", a, "credit", "250.51"), http.StatusConflict, "idempotency_conflict")
	wantCode(t, f.balanceOp("op-1", b, "credit", "250.50"), http.StatusConflict, "idempotency_conflict")
	if got := f.balance(a); got != "1250.5" {
		t.Fatalf("balance %s, want 1250.5", got)
	}

	m := wantCode(t, f.balanceOp("op-2", a, "credit", "1.005"), http.StatusBadRequest, "amount_precision_exceeded")
	if params(m) != "map[currency:USD decimals:2]" {
		t.Fatalf("params %v", m["params"])
	}
	want(t, f.balanceOp("op-2b", a, "credit", "1.500"), http.StatusOK) // trailing zeros do not count
	r = f.partner(http.MethodPost, "/api/partner/balance-op", map[string]any{"referenceId": "op-3", "accountNumber": a, "op": "credit", "amount": "1", "currency": "EUR"})
	m = wantCode(t, r, http.StatusBadRequest, "currency_not_issuable")
	if params(m) != "map[currency:EUR environment:sandbox]" {
		t.Fatalf("params %v", m["params"])
	}
	m = wantCode(t, f.balanceOp("op-4", b, "debit", "1000.01"), http.StatusConflict, "balance_refused")
	if params(m) != "map[reason:insufficient_funds]" {
		t.Fatalf("params %v", m["params"])
	}
	want(t, f.balanceOp("op-5", b, "adjustment", "-400"), http.StatusOK)
	want(t, f.balanceOp("op-6", b, "debit", "600"), http.StatusOK)
	if got := f.balance(b); got != "0" {
		t.Fatalf("balance %s, want 0", got)
	}
	big := `{"referenceId":"op-7","accountNumber":"` + a + `","op":"credit","amount":"1","currency":"` + strings.Repeat("U", 17<<10) + `"}`
	want(t, f.partner(http.MethodPost, "/api/partner/balance-op", big), http.StatusRequestEntityTooLarge)
	wantCode(t, f.balanceOp("op-8", "EVNOSUCH", "credit", "1"), http.StatusNotFound, "not_found")

	// The operator reads the receipt by its original reference.
	r = f.operator(http.MethodGet, "/api/operator/venues/"+f.venue+"/balance-ops/op-1", "")
	want(t, r, http.StatusOK)
	if r.Header.Get("Cache-Control") != "no-store" || r.Map(t)["appliedAt"] != receipt["appliedAt"] {
		t.Fatalf("operator receipt %v %s", r.Header, r.Body)
	}
	want(t, f.operator(http.MethodGet, "/api/operator/venues/"+f.venue+"/balance-ops/op-3", ""), http.StatusNotFound)
	want(t, f.operator(http.MethodGet, "/api/operator/venues/00000000-0000-5000-8000-000000000000/balance-ops/op-1", ""), http.StatusNotFound)
}

// TestLostAnswerIsSettledByReceiptAndRetry cuts the connection right after
// sending a balance operation, then settles it by reading the receipt and by
// retrying with the same referenceId: exactly one ledger entry.
func TestLostAnswerIsSettledByReceiptAndRetry(t *testing.T) {
	f := start(t, options{})
	a := f.provision("lost-1", "1000")
	u, _ := url.Parse(f.URL)
	for i := 0; i < 3; i++ {
		ref := fmt.Sprintf("lost-op-%d", i)
		body := fmt.Sprintf(`{"referenceId":%q,"accountNumber":%q,"op":"credit","amount":"10"}`, ref, a)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /api/partner/balance-op HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			u.Host, f.partnerKey, len(body), body)
		if i == 2 { // once, wait for the answer to start and drop it unread
			_, _ = bufio.NewReader(conn).ReadByte()
		}
		conn.Close()

		// Settle: the receipt either exists (the write happened) or not; then retry.
		var applied bool
		apptest.WaitFor(t, 5*time.Second, func() error {
			r := f.operator(http.MethodGet, "/api/operator/venues/"+f.venue+"/balance-ops/"+ref, "")
			applied = r.Status == http.StatusOK
			if r.Status != http.StatusOK && i == 2 {
				return fmt.Errorf("receipt %d", r.Status)
			}
			return nil
		})
		r := f.balanceOp(ref, a, "credit", "10")
		want(t, r, http.StatusOK)
		_ = applied
	}
	if got := f.balance(a); got != "1030" {
		t.Fatalf("balance %s after three lost answers settled, want 1030 (one entry each)", got)
	}
	r := f.partner(http.MethodGet, "/api/partner/accounts", nil)
	var out struct {
		Accounts []json.RawMessage `json:"accounts"`
	}
	r.JSON(t, &out)
}

// TestBalance503sCarryRetryAfter: a log that is gone answers 503
// log_unavailable with Retry-After: 1 on the balance route, as does draining.
func TestBalance503sCarryRetryAfter(t *testing.T) {
	f := start(t, options{})
	a := f.provision("u-1", "1000")
	f.App.Log.Conn().Close() // the log is gone: the append is refused before sending
	r := f.balanceOp("lost", a, "credit", "1")
	wantCode(t, r, http.StatusServiceUnavailable, "log_unavailable")
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	f.App.Deps.Auth.Drain()
	r = f.balanceOp("drained", a, "credit", "1")
	wantCode(t, r, http.StatusServiceUnavailable, "engine_draining")
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
}

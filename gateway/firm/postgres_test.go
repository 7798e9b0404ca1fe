package firm_test

import (
	"net/http"
	"testing"
)

// TestFirmReadModelsOnPostgres runs the firm area's reads against the
// PostgreSQL store: receipts, accounts with their flags, registrations,
// webhooks and the delivery log, usage; and again after a restart.
func TestFirmReadModelsOnPostgres(t *testing.T) {
	rc := newReceiver(t)
	f := start(t, options{postgres: true, receiver: rc})
	key := f.tradingKey()
	a := f.provision("pg-1", "1000")
	want(t, f.balanceOp("pg-op", a, "credit", "5"), http.StatusOK)
	wantCode(t, f.balanceOp("pg-op", a, "credit", "6"), http.StatusConflict, "idempotency_conflict")
	want(t, f.partner(http.MethodPost, "/api/partner/accounts/halt", map[string]any{"accountNumber": a}), http.StatusOK)
	want(t, f.partner(http.MethodPost, "/api/partner/accounts/resume", map[string]any{"accountNumber": a}), http.StatusOK)
	want(t, order(f, key, a, "o-1", "buy", false), http.StatusOK)
	id := f.register(rc, "/pg", 200)
	want(t, f.partner(http.MethodPost, "/api/partner/webhooks/test", map[string]any{"webhookId": id}), http.StatusOK)
	want(t, f.partner(http.MethodPost, "/api/partner/connect/accounts", map[string]any{"email": "pg@example.com"}), http.StatusOK)

	check := func(f *firm) {
		t.Helper()
		r := f.operator(http.MethodGet, "/api/operator/venues/"+f.venue+"/balance-ops/pg-op", "")
		want(t, r, http.StatusOK)
		if m := r.Map(t); m["amount"] != "5" || m["accountNumber"] != a {
			t.Fatalf("receipt %s", r.Body)
		}
		if got := f.balance(a); got != "1005" {
			t.Fatalf("balance %s", got)
		}
		r = f.partner(http.MethodGet, "/api/partner/connect/accounts", nil)
		if n := len(r.Map(t)["registrations"].([]any)); n != 1 {
			t.Fatalf("%d registrations", n)
		}
		r = f.partner(http.MethodGet, "/api/partner/webhooks/deliveries", nil)
		if n := len(r.Map(t)["deliveries"].([]any)); n == 0 {
			t.Fatalf("no deliveries: %s", r.Body)
		}
		r = f.partner(http.MethodGet, "/api/partner/usage", nil)
		if r.Map(t)["accounts"] != float64(1) {
			t.Fatalf("usage %s", r.Body)
		}
		wantCode(t, f.balanceOp("pg-op", a, "credit", "6"), http.StatusConflict, "idempotency_conflict")
	}
	check(f)
	check(f.restart(t))
}

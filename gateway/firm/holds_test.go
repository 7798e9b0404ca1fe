package firm_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
	firmcmd "github.com/svc/engine/commands/firm"
	evacct "github.com/svc/engine/events/account"
)

func order(f *firm, key, number, coid, side string, reduceOnly bool) *apptest.Resp {
	f.T.Helper()
	return f.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order?account=" + number, Key: key,
		Body: map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": side, "orderType": "market", "quantity": "0.1", "reduceOnly": reduceOnly}})
}

// holds is the params.holds of a 423 risk_locked.
func holds(t *testing.T, r *apptest.Resp) string {
	t.Helper()
	return heldAs(t, r, "risk_locked")
}

// heldAs is the params.holds of a 423 with code.
func heldAs(t *testing.T, r *apptest.Resp, code string) string {
	t.Helper()
	m := wantCode(t, r, http.StatusLocked, code)
	return fmt.Sprint(m["params"].(map[string]any)["holds"])
}

func TestFirmHaltIsIdempotentDurableAndOnlyTheFirmsOwn(t *testing.T) {
	f := start(t, options{})
	key := f.tradingKey()
	a := f.provision("h-1", "100000")
	want(t, order(f, key, a, "o-1", "buy", false), http.StatusOK)

	for i := 0; i < 2; i++ { // halting twice answers the same
		r := f.partner(http.MethodPost, "/api/partner/accounts/halt", map[string]any{"accountNumber": a})
		want(t, r, http.StatusOK)
		if m := r.Map(t); m["halted"] != true || m["accountNumber"] != a {
			t.Fatalf("halt: %s", r.Body)
		}
	}
	if h := holds(t, order(f, key, a, "o-2", "buy", false)); h != "[firm_halt]" {
		t.Fatalf("holds %s", h)
	}
	want(t, order(f, key, a, "o-3", "sell", true), http.StatusOK) // reducing stays possible
	m := wantCode(t, f.balanceOp("h-op-1", a, "debit", "1"), http.StatusConflict, "balance_refused")
	if params(m) != "map[reason:permission_denied]" {
		t.Fatalf("params %v", m["params"])
	}
	want(t, f.balanceOp("h-op-2", a, "credit", "1"), http.StatusOK) // credits still move

	before := *f
	f = f.restart(t) // durable across restarts; the dev credentials stay
	if f.partnerKey != before.partnerKey || f.cookie != before.cookie || f.venue != before.venue {
		t.Fatal("a restart replaced the dev credentials")
	}
	if h := holds(t, order(f, key, a, "o-4", "buy", false)); h != "[firm_halt]" {
		t.Fatalf("holds after restart %s", h)
	}
	r := f.partner(http.MethodGet, "/api/partner/accounts", nil)
	want(t, r, http.StatusOK)
	if acct := r.Map(t)["accounts"].([]any)[0].(map[string]any); acct["halted"] != true {
		t.Fatalf("listed %v", acct)
	}
	for i := 0; i < 2; i++ {
		r = f.partner(http.MethodPost, "/api/partner/accounts/resume", map[string]any{"accountNumber": a})
		want(t, r, http.StatusOK)
		if r.Map(t)["halted"] != false {
			t.Fatalf("resume: %s", r.Body)
		}
	}
	want(t, order(f, key, a, "o-5", "buy", false), http.StatusOK)
	wantCode(t, f.partner(http.MethodPost, "/api/partner/accounts/halt", map[string]any{"accountNumber": "EVNOSUCH"}), http.StatusNotFound, "not_found")
}

func TestReconciliationHoldMovesNoMoney(t *testing.T) {
	f := start(t, options{})
	key := f.tradingKey()
	a := f.provision("r-1", "1000")
	path := "/api/operator/venues/" + f.venue + "/accounts/" + a + "/reconciliation-hold"
	want(t, f.operator(http.MethodPost, path, ""), http.StatusForbidden)                          // a write needs a trusted origin
	want(t, f.operator(http.MethodPost, path, "https://evil.example.test"), http.StatusForbidden) // and only a trusted one
	r := f.operator(http.MethodPost, path, trustedOrigin)
	want(t, r, http.StatusOK)
	if r.Map(t)["reconciliationHold"] != true {
		t.Fatalf("hold: %s", r.Body)
	}
	wantCode(t, f.balanceOp("rc-1", a, "credit", "5"), http.StatusLocked, "reconciliation_hold")
	wantCode(t, f.partner(http.MethodPost, "/api/partner/accounts/reset", map[string]any{"accountNumber": a}), http.StatusLocked, "reconciliation_hold")
	want(t, f.operator(http.MethodGet, "/api/operator/venues/"+f.venue+"/balance-ops/rc-1", ""), http.StatusNotFound) // nothing recorded
	if h := heldAs(t, order(f, key, a, "o-1", "buy", false), "reconciliation_hold"); h != "[reconciliation_hold]" {
		t.Fatalf("holds %s", h)
	}
	want(t, f.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/flatten?account=" + a, Key: key}), http.StatusOK) // flattens stay available
	want(t, f.operator(http.MethodDelete, path, trustedOrigin), http.StatusOK)
	want(t, f.balanceOp("rc-1", a, "credit", "5"), http.StatusOK)
	if got := f.balance(a); got != "1005" {
		t.Fatalf("balance %s", got)
	}
}

func TestResetIsLedgerFirst(t *testing.T) {
	f := start(t, options{})
	key := f.tradingKey()
	a := f.provision("z-1", "5000")
	want(t, f.balanceOp("z-op", a, "credit", "100"), http.StatusOK)
	want(t, order(f, key, a, "o-1", "buy", false), http.StatusOK)
	want(t, f.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order?account=" + a, Key: key,
		Body: map[string]any{"clientOrderId": "o-2", "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "0.1", "limitPrice": "1000"}}), http.StatusOK)

	r := f.partner(http.MethodPost, "/api/partner/accounts/reset", map[string]any{"accountNumber": a, "referenceId": "z-reset"})
	want(t, r, http.StatusOK)
	acct := r.Map(t)["account"].(map[string]any)
	if acct["balance"] != "5000" {
		t.Fatalf("after reset %v", acct)
	}
	snap := f.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/snapshot?account=" + a, Key: key})
	want(t, snap, http.StatusOK)
	frame := snap.Map(t)
	if len(frame["positions"].([]any)) != 0 || len(frame["orders"].([]any)) != 0 {
		t.Fatalf("frame after reset: %s", snap.Body)
	}
	rc := f.operator(http.MethodGet, "/api/operator/venues/"+f.venue+"/balance-ops/z-reset", "")
	want(t, rc, http.StatusOK)
	if m := rc.Map(t); m["op"] != "reset" {
		t.Fatalf("reset receipt %s", rc.Body)
	}
	// The same reference again changes nothing; another account under it is 409.
	want(t, f.partner(http.MethodPost, "/api/partner/accounts/reset", map[string]any{"accountNumber": a, "referenceId": "z-reset"}), http.StatusOK)
	b := f.provision("z-2", "5000")
	wantCode(t, f.partner(http.MethodPost, "/api/partner/accounts/reset", map[string]any{"accountNumber": b, "referenceId": "z-reset"}), http.StatusConflict, "idempotency_conflict")

	// Ledger first: in the reset's one commit, the ledger entry is the first event.
	found := false
	for _, c := range f.Commits(evacct.Subject(firmcmd.AccountID("demo-firm", "z-1"))) {
		for i, e := range c.Events {
			if _, ok := e.(evacct.AccountReset); ok {
				found = true
				if bc, ok := c.Events[0].(evacct.BalanceChanged); !ok || bc.Op != "reset" || i == 0 {
					t.Fatalf("reset commit starts with %T", c.Events[0])
				}
			}
		}
	}
	if !found {
		t.Fatal("reset commit not found")
	}
}

package firm_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	firmcmd "github.com/svc/engine/commands/firm"
	riskcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/events"
)

func TestHaltRefusesOverALockTheFirmDoesNotOwn(t *testing.T) {
	f := start(t, options{})
	key := f.tradingKey()
	a := f.provision("l-1", "10000")
	b := f.provision("l-2", "10000")
	eng := f.App.Engine
	res, err := eng.Account(context.Background(), firmcmd.AccountID("demo-firm", "l-1"),
		eng.Envelope(events.Principal{System: "evaluation"}, "", &riskcmd.BreachEvaluation{Reason: "max drawdown"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.App.Deps.Settle(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	wantCode(t, f.partner(http.MethodPost, "/api/partner/accounts/halt", map[string]any{"accountNumber": a}), http.StatusConflict, "lock_not_owned")
	r := f.partner(http.MethodGet, "/api/partner/accounts/risk?accountNumber="+a, nil)
	want(t, r, http.StatusOK)
	if l := r.Map(t)["lock"].(map[string]any); l["lockReason"] != "eval_breach" || l["tradingLocked"] != true {
		t.Fatalf("lock %v", l)
	}

	// The firm's halt stands through the trader's manual unlock.
	want(t, f.partner(http.MethodPost, "/api/partner/accounts/halt", map[string]any{"accountNumber": b}), http.StatusOK)
	want(t, f.Do(apptest.Req{Method: http.MethodPost, Path: "/api/risk/unlock?broker=paper&account=" + b, Key: key}), http.StatusOK)
	if h := holds(t, order(f, key, b, "o-1", "buy", false)); h != "[firm_halt]" {
		t.Fatalf("holds %s", h)
	}
	r = f.partner(http.MethodGet, "/api/partner/accounts/risk?accountNumber="+b, nil)
	if l := r.Map(t)["lock"].(map[string]any); l["lockReason"] != "firm_halt" {
		t.Fatalf("lock %v", l)
	}

	// The firm sets the controls through the same command as PUT /api/risk.
	r = f.partner(http.MethodPut, "/api/partner/accounts/risk?accountNumber="+b, map[string]any{"dailyLossEnabled": true, "dailyLossValue": 500})
	want(t, r, http.StatusOK)
	if s := r.Map(t)["lock"].(map[string]any)["settings"].(map[string]any); s["dailyLossEnabled"] != true || s["dailyLossValue"] != float64(500) {
		t.Fatalf("settings %v", s)
	}
	want(t, f.partner(http.MethodPut, "/api/partner/accounts/risk?accountNumber="+b, map[string]any{"dailyLossEnabled": true}), http.StatusBadRequest)
	want(t, f.partner(http.MethodGet, "/api/partner/accounts/risk?accountNumber=EVNOSUCH", nil), http.StatusNotFound)
}

func TestConnectPreRegistrations(t *testing.T) {
	rc := newReceiver(t)
	clk := &clock{}
	rc.now = clk.now // the engine signs with its own clock
	f := start(t, options{receiver: rc, now: clk.now})
	f.register(rc, "/hooks", 200, "registration.linked", "registration.revoked")

	create := func(body map[string]any) map[string]any {
		t.Helper()
		r := f.partner(http.MethodPost, "/api/partner/connect/accounts", body)
		want(t, r, http.StatusOK)
		if strings.Contains(string(r.Body), "emailSent") {
			t.Fatalf("answer carries emailSent: %s", r.Body)
		}
		return r.Map(t)["registration"].(map[string]any)
	}
	reg := create(map[string]any{"email": "Demo@Example.com", "accountNumber": "ACC-1", "loginName": "demo1", "provider": "tradovate"})
	if reg["status"] != "pending" || reg["linkedAt"] != nil || reg["email"] != "demo@example.com" {
		t.Fatalf("registration %v", reg)
	}
	exp, _ := time.Parse(time.RFC3339Nano, reg["expiresAt"].(string))
	if d := exp.Sub(clk.now()); d < 29*24*time.Hour || d > 30*24*time.Hour {
		t.Fatalf("expires in %v", d)
	}
	wantCode(t, f.partner(http.MethodPost, "/api/partner/connect/accounts", map[string]any{"email": "x@example.com", "handover": true}), http.StatusBadRequest, "invalid_request")

	// Past 30 days it is expired; sending it again refreshes the same registration.
	clk.advance(31 * 24 * time.Hour)
	r := f.partner(http.MethodGet, "/api/partner/connect/accounts", nil)
	want(t, r, http.StatusOK)
	if got := r.Map(t)["registrations"].([]any)[0].(map[string]any); got["status"] != "expired" {
		t.Fatalf("after 31 days %v", got)
	}
	again := create(map[string]any{"email": "demo@example.com", "accountNumber": "ACC-1", "loginName": "demo1", "provider": "tradovate"})
	if again["id"] != reg["id"] || again["status"] != "pending" || again["expiresAt"] == reg["expiresAt"] {
		t.Fatalf("refresh %v", again)
	}

	// The trader whose email matches sees it ready to link, and links it.
	// (a key is refused there: the trader signs in)
	wantCode(t, f.Get("/api/connect/registrations"), http.StatusForbidden, "permission_denied")
	trader := f.SignIn("Demo@example.com", "the trader's password")
	r = f.AsSession(trader, apptest.Req{Method: http.MethodGet, Path: "/api/connect/registrations"})
	want(t, r, http.StatusOK)
	if n := len(r.Map(t)["registrations"].([]any)); n != 1 {
		t.Fatalf("%d ready to link", n)
	}
	// A registration naming a Tradovate login is linked only once the provider
	// confirms that login (connect_login_test.go); one naming no provider login
	// is linked by the trader.
	wantCode(t, f.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/connect/registrations/" + reg["id"].(string) + "/link"}),
		http.StatusConflict, "registration_unconfirmed")
	plain := create(map[string]any{"email": "demo@example.com", "accountNumber": "ACC-2"})
	r = f.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/connect/registrations/" + plain["id"].(string) + "/link"})
	want(t, r, http.StatusOK)
	linked := r.Map(t)["registration"].(map[string]any)
	if linked["status"] != "linked" || linked["linkedAt"] == nil {
		t.Fatalf("linked %v", linked)
	}
	wantCode(t, f.partner(http.MethodDelete, "/api/partner/connect/accounts/"+plain["id"].(string), nil), http.StatusConflict, "registration_linked")

	// Another one is revoked by the firm; a trader with another email cannot link it.
	other := create(map[string]any{"email": "someone@example.com"})
	wantCode(t, f.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/connect/registrations/" + other["id"].(string) + "/link"}), http.StatusNotFound, "not_found")
	r = f.partner(http.MethodDelete, "/api/partner/connect/accounts/"+other["id"].(string), nil)
	want(t, r, http.StatusOK)
	if r.Map(t)["registration"].(map[string]any)["status"] != "revoked" {
		t.Fatalf("revoke %s", r.Body)
	}
	want(t, f.partner(http.MethodDelete, "/api/partner/connect/accounts/nosuch", nil), http.StatusNotFound)

	waitCount(t, rc, "/hooks", "registration.linked", 1)
	waitCount(t, rc, "/hooks", "registration.revoked", 1)
	for _, d := range rc.deliveries("/hooks") {
		if d.Data["registrationId"] == nil {
			t.Fatalf("%s without registrationId", d.Type)
		}
	}
}

func TestUsageCountsAccountsThatTraded(t *testing.T) {
	f := start(t, options{})
	key := f.tradingKey()
	a := f.provision("u-1", "100000")
	f.provision("u-2", "100000")
	want(t, order(f, key, a, "o-1", "buy", false), http.StatusOK)
	last := order(f, key, a, "o-2", "sell", false)
	want(t, last, http.StatusOK)
	// The partner's key is another credential than the trader's: it reads
	// after the trader's writes by sending back their X-Engine-Seq.
	after := map[string]string{"X-Engine-After": last.Header.Get("X-Engine-Seq")}
	partner := func(path string) *apptest.Resp {
		return f.Do(apptest.Req{Method: http.MethodGet, Path: path, Key: f.partnerKey, Headers: after})
	}
	month := f.App.Engine.Now().UTC().Format("2006-01")
	r := partner("/api/partner/usage?month=" + month)
	want(t, r, http.StatusOK)
	u := r.Map(t)
	if u["accounts"] != float64(1) || u["pricePerAccount"] != "15" || u["total"] != "15" || u["currency"] != "USD" {
		t.Fatalf("usage %s", r.Body)
	}
	r = partner("/api/partner/usage/accounts")
	want(t, r, http.StatusOK)
	accts := r.Map(t)["accounts"].([]any)
	if len(accts) != 1 || accts[0].(map[string]any)["accountNumber"] != a || accts[0].(map[string]any)["fills"] != float64(2) {
		t.Fatalf("usage accounts %s", r.Body)
	}
	want(t, f.partner(http.MethodGet, "/api/partner/usage?month=2026-13", nil), http.StatusBadRequest)
	r = f.partner(http.MethodGet, "/api/partner/usage?month=2001-01", nil)
	if m := r.Map(t); m["accounts"] != float64(0) || m["total"] != "0" {
		t.Fatalf("empty month %s", fmt.Sprint(m))
	}
}

// The firm's account list pages through nextCursor in account id order: the
// pages together are the whole list once each, and a foreign cursor is
// refused; over memory and PostgreSQL read models.
func TestPartnerAccountsPageThroughCursors(t *testing.T) {
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			f := start(t, options{postgres: store == "postgres"})
			for i := range 5 {
				f.provision(fmt.Sprintf("page-%d", i), "50000")
			}
			list := func(query string) ([]string, any) {
				t.Helper()
				r := f.partner(http.MethodGet, "/api/partner/accounts"+query, nil)
				want(t, r, http.StatusOK)
				m := r.Map(t)
				var out []string
				for _, a := range m["accounts"].([]any) {
					out = append(out, a.(map[string]any)["accountNumber"].(string))
				}
				return out, m["nextCursor"]
			}
			whole, last := list("")
			if len(whole) != 5 || last != nil {
				t.Fatalf("the whole list: %v, nextCursor %v", whole, last)
			}
			var paged []string
			var sizes []int
			query := "?limit=2"
			for range 10 {
				page, next := list(query)
				paged, sizes = append(paged, page...), append(sizes, len(page))
				if next == nil {
					break
				}
				query = "?limit=2&cursor=" + next.(string)
			}
			if fmt.Sprint(paged) != fmt.Sprint(whole) || fmt.Sprint(sizes) != "[2 2 1]" {
				t.Fatalf("by 2: %v in pages %v, want %v", paged, sizes, whole)
			}
			for _, q := range []string{"?cursor=zzzz", "?cursor=", "?limit=0", "?limit=1001"} {
				r := f.partner(http.MethodGet, "/api/partner/accounts"+q, nil)
				if r.Status != http.StatusBadRequest {
					t.Fatalf("%s: %d %s", q, r.Status, r.Body)
				}
			}
		})
	}
}

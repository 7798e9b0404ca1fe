package firm_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// A venue pre-registers a trader's Tradovate login by email, login name and
// account number. The trader, signed in with that verified email, sees it
// ready to link; linking it by hand is 409 registration_unconfirmed, and
// so is it after the trader links another login of theirs: only when the
// provider confirms the login the registration names (the trader signs in
// with its password) does it become linked and registration.linked fire. A
// registration naming an account that login does not hold stays pending.
func TestPreRegistrationLinkedOnlyOnAConfirmedLogin(t *testing.T) {
	const password = "the-login's-password-77"
	sim, err := tradovatesim.New(tradovatesim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, l := range []tradovatesim.Login{
		{Name: "reg-trader", Password: password, Kind: "demo", Accounts: []tradovatesim.AccountSpec{{Name: "DEMO4711"}}},
		{Name: "other-login", Password: password, Kind: "demo", Accounts: []tradovatesim.AccountSpec{{Name: "DEMO9000"}}},
	} {
		if _, _, err := sim.AddLogin(l); err != nil {
			t.Fatal(err)
		}
	}
	rc := newReceiver(t)
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		c.AllowedOrigins = trustedOrigin
		pool := x509.NewCertPool()
		pool.AddCert(rc.srv.Certificate())
		c.Firm.WebhookClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		c.Firm.WebhookAllowPrivate = true
		c.Providers.Tradovate.Envs = "demo"
		c.Providers.Tradovate.DemoREST, c.Providers.Tradovate.DemoWS, c.Providers.Tradovate.DemoMD = sim.URL(), sim.WSURL(), sim.MDURL()
		c.Providers.AllowPrivate = true
	}})
	f := wrap(e)
	f.register(rc, "/hooks", 200, "registration.linked")

	create := func(body map[string]any) string {
		t.Helper()
		r := f.partner(http.MethodPost, "/api/partner/connect/accounts", body)
		want(t, r, http.StatusOK)
		return r.Map(t)["registration"].(map[string]any)["id"].(string)
	}
	named := create(map[string]any{"email": "futures.trader@example.com", "provider": "tradovate", "loginName": "reg-trader", "accountNumber": "DEMO4711"})
	elsewhere := create(map[string]any{"email": "futures.trader@example.com", "provider": "tradovate", "accountNumber": "DEMO0001"})

	trader := f.SignIn("futures.trader@example.com", "the trader's password")
	status := func() map[string]string {
		t.Helper()
		r := f.AsSession(trader, apptest.Req{Method: http.MethodGet, Path: "/api/connect/registrations"})
		want(t, r, http.StatusOK)
		out := map[string]string{}
		for _, x := range r.Map(t)["registrations"].([]any) {
			x := x.(map[string]any)
			out[x["id"].(string)] = x["status"].(string)
		}
		return out
	}
	byHand := func() *apptest.Resp {
		return f.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/connect/registrations/" + named + "/link"})
	}
	link := func(login, pw string) *apptest.Resp {
		t.Helper()
		return f.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/account/providers",
			Body: map[string]any{"provider": "tradovate", "login": login, "password": pw}})
	}
	if s := status(); s[named] != "pending" || s[elsewhere] != "pending" {
		t.Fatalf("ready to link: %v", s)
	}
	wantCode(t, byHand(), http.StatusConflict, "registration_unconfirmed")
	wantCode(t, link("reg-trader", "not-the-password"), 422, "provider_credentials_refused")
	want(t, link("other-login", password), http.StatusCreated) // a login the registration does not name
	wantCode(t, byHand(), http.StatusConflict, "registration_unconfirmed")
	if s := status(); s[named] != "pending" || s[elsewhere] != "pending" {
		t.Fatalf("after linking another login: %v", s)
	}

	r := link("reg-trader", password)
	want(t, r, http.StatusCreated)
	if a := r.Map(t)["account"].(map[string]any); a["broker"] != "tradovate" || a["clock"] != "observation" {
		t.Fatalf("linked account %v", a)
	}
	if s := status(); s[named] != "linked" || s[elsewhere] != "pending" {
		t.Fatalf("after the provider confirmed the login: %v", s)
	}
	waitCount(t, rc, "/hooks", "registration.linked", 1)
	if d := rc.deliveries("/hooks")[0]; d.Data["registrationId"] != named {
		t.Fatalf("registration.linked names %v, want %s", d.Data["registrationId"], named)
	}
}

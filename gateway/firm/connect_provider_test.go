package firm_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/sim/binance"
)

// A venue pre-registers a trader's Binance account; the trader, signed in
// with that verified email, sees it ready to link, then links their own
// Binance account (the simulator) with its key: the registration for that
// provider becomes linked and the venue's webhook receives
// registration.linked; a registration for another provider stays pending.
func TestPreRegistrationLinkedByAProviderLink(t *testing.T) {
	const key, secret = "regKEYq81VqXlinkedBinanceAPIkey0001", "regSECRETqq42nnNeverInTheAnswer0009"
	sim := binance.New(binance.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	if err := sim.AddAccount(binance.Account{APIKey: key, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	e := apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		c.AllowedOrigins = trustedOrigin
		pool := x509.NewCertPool()
		pool.AddCert(rc.srv.Certificate())
		c.Firm.WebhookClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		c.Firm.WebhookAllowPrivate = true
		c.Providers.BinanceREST, c.Providers.BinanceWS, c.Providers.BinanceSpot = sim.URL(), sim.WSURL(), sim.URL()
		c.Providers.AllowPrivate = true
	}})
	f := wrap(e)
	f.register(rc, "/hooks", 200, "registration.linked")

	create := func(provider string) string {
		t.Helper()
		r := f.partner(http.MethodPost, "/api/partner/connect/accounts", map[string]any{"email": "Binance.Trader@example.com", "provider": provider})
		want(t, r, http.StatusOK)
		return r.Map(t)["registration"].(map[string]any)["id"].(string)
	}
	binanceReg, otherReg := create("binance-futures"), create("tradovate")

	trader := f.SignIn("binance.trader@example.com", "the trader's password")
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
	if s := status(); s[binanceReg] != "pending" || s[otherReg] != "pending" {
		t.Fatalf("ready to link: %v", s)
	}

	link := func(secret string) *apptest.Resp {
		t.Helper()
		return f.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/account/providers",
			Body: map[string]any{"provider": "binance-futures", "apiKey": key, "apiSecret": secret}})
	}
	// A refused key links nothing.
	wantCode(t, link("not-the-secret"), 422, "provider_credentials_refused")
	if s := status(); s[binanceReg] != "pending" {
		t.Fatalf("after a refused key: %v", s)
	}
	want(t, link(secret), http.StatusCreated)
	if s := status(); s[binanceReg] != "linked" || s[otherReg] != "pending" {
		t.Fatalf("after linking a Binance account: %v", s)
	}
	waitCount(t, rc, "/hooks", "registration.linked", 1)
	if d := rc.deliveries("/hooks")[0]; d.Data["registrationId"] != binanceReg {
		t.Fatalf("registration.linked names %v, want %s", d.Data["registrationId"], binanceReg)
	}
	// The venue reads it linked.
	r := f.partner(http.MethodGet, "/api/partner/connect/accounts", nil)
	want(t, r, http.StatusOK)
	for _, x := range r.Map(t)["registrations"].([]any) {
		if x := x.(map[string]any); x["id"] == binanceReg && (x["status"] != "linked" || x["linkedAt"] == nil) {
			t.Fatalf("the venue reads %v", x)
		}
	}
}

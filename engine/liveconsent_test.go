package engine_test

import (
	"context"
	"testing"

	connectcmd "github.com/svc/engine/commands/connect"
	providercmd "github.com/svc/engine/commands/provider"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evconnect "github.com/svc/engine/events/connect"
)

// An account linked through a Connect app trades live only on its
// trader's consent, with live trading off by default as in production (the
// app's tenant has no switch): linked without it (or not said), the app's
// orders and reverses are refused held by the trader while cancels pass;
// linked again with it, they pass; a venue's hold still comes first; a
// withdrawal ends it. A user's own account keeps following its user's
// switch.
func TestLiveConsentGatesAnAppsAccounts(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, tempLog(t), false, 0, nil)
	t.Cleanup(e.Close)
	h := &holds{t: t, e: e, ctx: ctx}
	h.venue("v1", "org_1", "firm_1")
	h.must(e.App(ctx, "app_1", h.keyed(&connectcmd.CreateApp{OrgID: "org_1", TenantID: "capp_1", Env: "sandbox", By: venueOwner,
		Settings: evconnect.Settings{Name: "Org One App", Websites: []string{"https://app.example.com"}, WhiteLabel: connectcmd.DefaultWhiteLabel()}})))
	h.must(e.Tenant(ctx, "capp_1", e.Envelope(events.Principal{}, "", &tenantcmd.CreateTenant{Name: "app", Kind: "firm"})))
	h.user("usr_1", true)
	yes, no := true, false
	link := func(id string, consent *bool) {
		t.Helper()
		h.must(e.Account(ctx, id, e.Envelope(events.Principal{}, "", &providercmd.Link{Provider: "binance-futures", Broker: "binance",
			TenantID: "capp_1", AppID: "app_1", Trader: "t-" + id, AccountNumber: "BF" + id, Currency: "USDT", CredentialID: "cred-" + id,
			Sealed: []byte("sealed"), LiveConsent: consent})))
	}
	link("acct_unsaid", nil)
	link("acct_no", &no)
	link("acct_yes", &yes)
	h.linked("acct_own", "usr_1", "binance-futures", "")
	reverse := &trading.Reverse{Instrument: "BTCUSDT", ClientOrderID: "r-1"}
	cancel := &trading.CancelOrder{BrokerOrderID: "b-1"}
	check := func(step string, accountID string, heldBy string) {
		t.Helper()
		st, code, params := h.gate(accountID, order())
		switch {
		case heldBy == "" && st != 0:
			t.Errorf("%s: %s refused %d %s %v", step, accountID, st, code, params)
		case heldBy != "" && (st != 403 || code != "feature_disabled" || params["feature"] != "live_trading" || params["heldBy"] != heldBy || len(params) != 2):
			t.Errorf("%s: %s: %d %s %v, want 403 feature_disabled held by %s", step, accountID, st, code, params, heldBy)
		}
	}
	check("not said", "acct_unsaid", engine.HeldByTrader)
	check("withheld", "acct_no", engine.HeldByTrader)
	check("given", "acct_yes", "")
	check("a user's own", "acct_own", "")
	if st, code, params := h.gate("acct_no", reverse); st != 403 || params["heldBy"] != engine.HeldByTrader {
		t.Errorf("a reverse without consent: %d %s %v", st, code, params)
	}
	if st, code, _ := h.gate("acct_no", cancel); st != 0 {
		t.Errorf("a cancel without consent: %d %s", st, code)
	}
	v, ok, err := e.LiveConsent(ctx, "acct_yes")
	if err != nil || !ok || !v.On || !v.Set || v.At.IsZero() {
		t.Fatalf("the consent read: %+v %v %v", v, ok, err)
	}
	if v, ok, err := e.LiveConsent(ctx, "acct_unsaid"); err != nil || !ok || v.On || v.Set {
		t.Fatalf("the consent never given: %+v %v %v", v, ok, err)
	}
	if _, ok, _ := e.LiveConsent(ctx, "acct_own"); ok {
		t.Fatal("a user's own account reads a consent")
	}

	link("acct_no", &yes) // linked again with the box checked
	check("given on linking again", "acct_no", "")
	h.hold("v1", "")
	check("a venue's hold comes first", "acct_yes", engine.HeldByVenue)
	h.release("v1", "")
	h.must(e.WithdrawLiveConsent(ctx, events.Principal{System: "test"}, "acct_yes", evacct.ConsentDisconnect))
	check("withdrawn", "acct_yes", engine.HeldByTrader)
	if res, err := e.WithdrawLiveConsent(ctx, events.Principal{System: "test"}, "acct_own", evacct.ConsentHosted); err != nil || len(res.Events) != 0 {
		t.Fatalf("a withdrawal on a user's own account: %v %v", res.Events, err)
	}
	check("a user's own after", "acct_own", "")
}

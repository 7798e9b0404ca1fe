package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	firmcmd "github.com/svc/engine/commands/firm"
	providercmd "github.com/svc/engine/commands/provider"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
)

// holds drives an engine on the real embedded log as the gateway does: it
// opens venues, registrations, Connect apps, users and provider accounts,
// and asks the live trading gate about an order.
type holds struct {
	t   *testing.T
	e   *engine.Engine
	ctx context.Context
	n   int
}

var venueOwner = venuecmd.Owner{UserID: "usr_owner", Verified: true, Owner: true}

func (h *holds) keyed(c commands.Command) commands.Envelope {
	h.n++
	env := h.e.Envelope(events.Principal{System: "test"}, "k-"+ulid.Make().String(), c)
	env.Digest = env.Key
	return env
}

func (h *holds) must(_ any, err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *holds) venue(id, org, firm string) {
	h.t.Helper()
	h.must(h.e.Venue(h.ctx, id, h.keyed(&venuecmd.CreateVenue{OrgID: org, Name: "Venue " + id, FirmTenantID: firm, By: venueOwner})))
}

func (h *holds) hold(venueID, trader string) {
	h.t.Helper()
	h.must(h.e.Venue(h.ctx, venueID, h.keyed(&venuecmd.HoldLive{Trader: trader, Reason: "test", By: venuecmd.Actor{Owner: &venueOwner}})))
}

func (h *holds) release(venueID, trader string) {
	h.t.Helper()
	h.must(h.e.Venue(h.ctx, venueID, h.keyed(&venuecmd.ReleaseLive{Trader: trader, By: venuecmd.Actor{Owner: &venueOwner}})))
}

// registered makes the firm's pre-registration of email for provider, linked by the user.
func (h *holds) registered(firm, id, email, provider, user string) {
	h.t.Helper()
	h.must(h.e.Firm(h.ctx, firm, h.e.Envelope(events.Principal{}, "", &firmcmd.CreateRegistration{ID: id, Email: email, Provider: provider})))
	h.must(h.e.Firm(h.ctx, firm, h.e.Envelope(events.Principal{}, "", &firmcmd.LinkRegistration{ID: id, Email: email, Verified: true, TraderID: user})))
}

// user makes a user whose live trading switch is on.
func (h *holds) user(id string, on bool) {
	h.t.Helper()
	h.must(h.e.Tenant(h.ctx, id, h.e.Envelope(events.Principal{}, "", &tenantcmd.CreateTenant{Name: id, Kind: "user"})))
	h.must(h.e.Tenant(h.ctx, id, h.e.Envelope(events.Principal{}, "", &tenantcmd.SetLiveTrading{On: on})))
}

// linked opens a provider account of tenant, linked through app when not empty.
func (h *holds) linked(id, tenant, provider, app string) {
	h.t.Helper()
	h.must(h.e.Account(h.ctx, id, h.e.Envelope(events.Principal{}, "", &providercmd.Link{Provider: provider, Broker: "binance", TenantID: tenant,
		AppID: app, AccountNumber: "BF" + id, Currency: "USDT", CredentialID: "cred-" + id, Sealed: []byte("sealed")})))
}

func (h *holds) gate(accountID string, cmd commands.Command) (int, string, map[string]any) {
	h.t.Helper()
	err := h.e.LiveGate(h.ctx, accountID, cmd)
	if err == nil {
		return 0, "", nil
	}
	var r *commands.Refusal
	if !errors.As(err, &r) {
		h.t.Fatalf("the gate failed: %v", err)
	}
	return commands.StatusOf(r.Code, r.Malformed), string(r.Code), r.Params
}

func order() *trading.PlaceOrder {
	return &trading.PlaceOrder{ClientOrderID: "o-1", Instrument: "BTCUSDT", Side: "sell", OrderType: "market", Quantity: dec("0.01"), ReduceOnly: true}
}

// A venue's hold on live trading reaches exactly its traders' provider
// accounts: those linked through a Connect app of its organization (the
// whole venue's hold) and those of a trader whose pre-registration by the
// venue was linked for the account's provider (the whole venue's hold or
// the trader's own, by the registration's email). Reducing orders and the
// reverse are refused; cancels, other traders, other venues' traders and
// paper accounts are not. With no hold the user's own switch decides.
func TestVenueHoldsReachTheirTraders(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, tempLog(t), false, 0, nil)
	t.Cleanup(e.Close)
	h := &holds{t: t, e: e, ctx: ctx}
	h.venue("v1", "org_1", "firm_1")
	h.venue("v2", "org_2", "firm_2")
	h.must(e.App(ctx, "app_1", h.keyed(&connectcmd.CreateApp{OrgID: "org_1", TenantID: "capp_1", Env: "sandbox", By: venueOwner,
		Settings: evconnect.Settings{Name: "Org One App", Websites: []string{"https://app.example.com"}, WhiteLabel: connectcmd.DefaultWhiteLabel()}})))
	h.must(e.App(ctx, "app_2", h.keyed(&connectcmd.CreateApp{OrgID: "org_2", TenantID: "capp_2", Env: "sandbox", By: venueOwner,
		Settings: evconnect.Settings{Name: "Org Two App", Websites: []string{"https://two.example.com"}, WhiteLabel: connectcmd.DefaultWhiteLabel()}})))
	for _, u := range []string{"usr_reg", "usr_other", "usr_solo", "usr_v2"} {
		h.user(u, true)
	}
	h.user("usr_off", false)
	h.registered("firm_1", "reg_1", "reg@example.com", "binance-futures", "usr_reg")
	h.registered("firm_1", "reg_2", "other@example.com", "tradovate", "usr_other") // another provider
	h.registered("firm_2", "reg_3", "v2@example.com", "binance-futures", "usr_v2")
	h.linked("acct_reg", "usr_reg", "binance-futures", "")
	h.linked("acct_other", "usr_other", "binance-futures", "")
	h.linked("acct_solo", "usr_solo", "binance-futures", "")
	h.linked("acct_v2", "usr_v2", "binance-futures", "")
	h.linked("acct_app", "capp_1", "binance-futures", "app_1")
	h.linked("acct_app2", "capp_2", "binance-futures", "app_2")
	h.linked("acct_off", "usr_off", "binance-futures", "")
	h.must(e.Account(ctx, "acct_paper", e.Envelope(events.Principal{}, "", &tenantcmd.OpenAccount{TenantID: "usr_reg", Broker: "paper",
		AccountNumber: "P1", Currency: "USD", StartingBalance: dec("1000")})))

	type want struct {
		account string
		cmd     commands.Command
		heldBy  string // "": passes
	}
	check := func(step string, wants ...want) {
		t.Helper()
		for _, w := range wants {
			st, code, params := h.gate(w.account, w.cmd)
			switch {
			case w.heldBy == "" && st != 0:
				t.Errorf("%s: %s %T refused %d %s %v", step, w.account, w.cmd, st, code, params)
			case w.heldBy != "" && (st != 403 || code != "feature_disabled" || params["feature"] != "live_trading" || params["heldBy"] != w.heldBy || len(params) != 2):
				t.Errorf("%s: %s %T: %d %s %v, want 403 feature_disabled held by %s", step, w.account, w.cmd, st, code, params, w.heldBy)
			}
		}
	}
	reverse := &trading.Reverse{Instrument: "BTCUSDT", ClientOrderID: "r-1"}
	cancel := &trading.CancelOrder{BrokerOrderID: "b-1"}
	// An app's accounts live under the app's tenant, which has no switch
	// of its own: their trader's consent stands in, and without it the
	// engine's default holds them (off here, as in production), held by the
	// trader (liveconsent_test.go).
	check("no hold",
		want{"acct_reg", order(), ""}, want{"acct_app", order(), engine.HeldByTrader}, want{"acct_paper", order(), ""},
		want{"acct_off", order(), engine.HeldByUser}, want{"acct_off", cancel, ""})
	if hs, err := e.LiveHolds(ctx, []string{"acct_reg", "acct_app", "acct_paper"}); err != nil || len(hs) != 0 {
		t.Fatalf("holds with none: %v %v", hs, err)
	}

	h.hold("v1", "")
	check("v1 holds its venue",
		want{"acct_reg", order(), engine.HeldByVenue}, want{"acct_reg", reverse, engine.HeldByVenue}, want{"acct_reg", cancel, ""},
		want{"acct_app", order(), engine.HeldByVenue},
		want{"acct_other", order(), ""}, // registered for another provider
		want{"acct_solo", order(), ""}, want{"acct_v2", order(), ""}, want{"acct_app2", order(), engine.HeldByTrader},
		want{"acct_paper", order(), ""}, want{"acct_paper", reverse, ""})
	hs, err := e.LiveHolds(ctx, []string{"acct_paper", "acct_app", "acct_solo", "acct_reg"})
	if err != nil || len(hs) != 2 || hs[0].AccountID != "acct_app" || hs[1].AccountID != "acct_reg" || hs[1].VenueID != "v1" ||
		hs[1].VenueName != "Venue v1" || hs[1].Scope != engine.HoldScopeVenue || hs[1].Since.IsZero() {
		t.Fatalf("holds %+v %v", hs, err)
	}

	h.release("v1", "")
	h.hold("v1", "Reg@Example.com")
	h.hold("v1", "nobody@example.com")
	check("v1 holds one trader",
		want{"acct_reg", order(), engine.HeldByVenue}, want{"acct_app", order(), engine.HeldByTrader}, want{"acct_other", order(), ""},
		want{"acct_paper", order(), ""})
	if hs, err := e.LiveHolds(ctx, []string{"acct_reg"}); err != nil || len(hs) != 1 || hs[0].Scope != engine.HoldScopeTrader {
		t.Fatalf("holds %+v %v", hs, err)
	}
	h.hold("v2", "")
	check("v2 holds its own", want{"acct_v2", order(), engine.HeldByVenue}, want{"acct_app2", order(), engine.HeldByVenue}, want{"acct_solo", order(), ""})
	h.release("v1", "reg@example.com")
	h.release("v2", "")
	check("released", want{"acct_reg", order(), ""}, want{"acct_v2", order(), ""}, want{"acct_app", order(), engine.HeldByTrader})
}

// A hold that cannot be read fails closed: with a venue holding and its
// firm's record out of reach (the log gone), an order on a provider
// account is 503 live_trading_unreadable, retry-safe after a second, and
// the read of the holds is refused alike; paper is never asked.
func TestAnUnreadableHoldFailsClosed(t *testing.T) {
	ctx := context.Background()
	log, err := eventlog.Open(ctx, eventlog.Config{DataDir: t.TempDir(), Sync: "interval", Replicas: 1, Stream: "EVT"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngineOn(t, log, market.NewSim(market.DefaultCrypto(), 1, clock), false, 0, nil)
	t.Cleanup(e.Close)
	h := &holds{t: t, e: e, ctx: ctx}
	h.venue("v1", "org_1", "firm_untouched")
	h.user("usr_1", true)
	h.linked("acct_1", "usr_1", "binance-futures", "")
	h.must(e.Account(ctx, "acct_paper", e.Envelope(events.Principal{}, "", &tenantcmd.OpenAccount{TenantID: "usr_1", Broker: "paper",
		AccountNumber: "P1", Currency: "USD", StartingBalance: dec("1000")})))
	if st, code, _ := h.gate("acct_1", order()); st != 0 {
		t.Fatalf("before the hold: %d %s", st, code)
	}
	h.hold("v1", "")
	log.Close() // the firm's record, never read yet, cannot be read now

	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h.ctx = tctx
	st, code, params := h.gate("acct_1", order())
	spec, _ := commands.Lookup(commands.Code(code))
	if st != 503 || code != "live_trading_unreadable" || params != nil || !spec.RetrySafe || spec.RetryAfter != 1 {
		t.Fatalf("an order with the hold unreadable: %d %s %v", st, code, params)
	}
	var r *commands.Refusal
	if _, err := e.LiveHolds(tctx, []string{"acct_1"}); !errors.As(err, &r) || r.Code != commands.CodeLiveTradingUnreadable {
		t.Fatalf("the read of the holds: %v", err)
	}
	if st, code, _ := h.gate("acct_paper", order()); st != 0 {
		t.Fatalf("paper with the hold unreadable: %d %s", st, code)
	}
}

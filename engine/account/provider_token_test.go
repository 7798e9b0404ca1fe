package account_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

// loginEvents are the events only an account linked through a login
// records: TestLoginTokenReplay records them.
var loginEvents = map[string]bool{evacct.ProviderTokenRenewed{}.Type(): true, evacct.ProviderLoginLost{}.Type(): true}

// loginLink is the link of a futures login's account: its tokens sealed,
// the login and the provider's account named, its times in force.
func loginLink(sealed string) *providercmd.Link {
	return &providercmd.Link{Provider: "tradovate", Broker: "tradovate", TenantID: "u1", AccountNumber: "TF1", Label: "Tradovate",
		Currency: "USD", CredentialID: "login1", Sealed: []byte(sealed), Login: "trader1", Account: "7", AccountName: "DEMO7",
		Environment: "demo", TimeInForce: []string{"day", "gtc", "ioc", "fok"},
		Snapshot: providercmd.Observe{Cause: "link", Complete: true, Settings: &evacct.ProviderSettings{},
			Balances: []evacct.BalanceObserved{{Asset: "USD", Wallet: dec("50000"), Available: dec("50000")}}}}
}

func futuresBuy(id, tif string) *trading.PlaceOrder {
	return &trading.PlaceOrder{ClientOrderID: id, Instrument: "ESZ6", Side: "buy", OrderType: "limit", Quantity: dec("1"),
		LimitPrice: ptr("4900.25"), TimeInForce: tif}
}

// login runs given on an account linked through a login and decides when.
func login(t *testing.T, given []commands.Command, when commands.Command) (*account.State, []events.Event, error) {
	t.Helper()
	s := account.New("a1")
	for i, c := range append([]commands.Command{loginLink("tok-1")}, given...) {
		evs, err := account.Decide(s, env(i, c))
		if err != nil {
			t.Fatalf("given %d (%T): %v", i, c, err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	evs, err := account.Decide(s, env(99, when))
	return s, evs, err
}

func TestLoginTokenDecisions(t *testing.T) {
	renew := func(sealed string) *providercmd.RenewToken {
		return &providercmd.RenewToken{Sealed: []byte(sealed), Cause: providercmd.TokenRenewal}
	}
	lose := func(sealed string) *providercmd.LoseLogin { return &providercmd.LoseLogin{Sealed: []byte(sealed)} }
	for _, tc := range []struct {
		name     string
		given    []commands.Command
		when     commands.Command
		wantCode commands.Code
		want     []string
	}{
		{name: "a day order is an intent: the provider takes day", when: futuresBuy("c1", "day"), want: []string{"order.intended.v1"}},
		{name: "a time in force the provider lacks is refused", when: futuresBuy("c1", "post_only"), wantCode: commands.CodeTimeInForceUnsupported},
		{name: "renewed tokens are recorded", when: renew("tok-2"), want: []string{"account.provider_token_renewed.v1"}},
		{name: "the same tokens again record nothing", when: renew("tok-1")},
		{name: "the provider refusing the tokens marks the login lost", when: lose("tok-1"), want: []string{"account.provider_login_lost.v1"}},
		{name: "a refusal of tokens replaced meanwhile records nothing", given: []commands.Command{renew("tok-2")}, when: lose("tok-1")},
		{name: "a lost login is recorded once", given: []commands.Command{lose("tok-1")}, when: lose("tok-1")},
		{name: "a lost login refuses a new order", given: []commands.Command{lose("tok-1")}, when: futuresBuy("c1", "gtc"),
			wantCode: commands.CodeProviderRelinkRequired},
		{name: "a lost login refuses a cancel", given: []commands.Command{lose("tok-1")}, when: &trading.CancelOrder{BrokerOrderID: "x"},
			wantCode: commands.CodeProviderRelinkRequired},
		{name: "a lost login refuses a close", given: []commands.Command{lose("tok-1")}, when: &trading.ClosePosition{Instrument: "ESZ6"},
			wantCode: commands.CodeProviderRelinkRequired},
		{name: "a retry of an order still open is outcome_unknown, not relink",
			given: []commands.Command{futuresBuy("c1", "gtc"), lose("tok-1")}, when: futuresBuy("c1", "gtc"), wantCode: commands.CodeOutcomeUnknown},
		{name: "signing in again renews the tokens and ends the loss", given: []commands.Command{lose("tok-1")}, when: loginLink("tok-3"),
			want: []string{"account.provider_token_renewed.v1"}},
		{name: "the same link again records nothing", when: loginLink("tok-1")},
		{name: "an order after signing in again is an intent", given: []commands.Command{lose("tok-1"), loginLink("tok-3")},
			when: futuresBuy("c1", "gtc"), want: []string{"order.intended.v1"}},
		{name: "an exit plan is refused: the provider has no reduce-only orders", when: func() commands.Command {
			c := futuresBuy("c1", "gtc")
			c.Bracket = &trading.BracketPlan{}
			return c
		}(), wantCode: commands.CodeInvalidRequest},
		{name: "a bracket on a position is refused likewise", when: &trading.Protect{ClientOrderID: "p1", EntryOrderID: "x"},
			wantCode: commands.CodeInvalidRequest},
		{name: "renewals after unlinking record nothing", given: []commands.Command{&providercmd.Unlink{}}, when: renew("tok-2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, err := login(t, tc.given, tc.when)
			if tc.wantCode != "" {
				var r *commands.Refusal
				if !errors.As(err, &r) || r.Code != tc.wantCode {
					t.Fatalf("err %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, e.Type())
			}
			if !equal(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
}

// The state keeps the freshest sealed tokens and the login as linked;
// replaying the log gives the live state.
func TestLoginTokenReplay(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New:      func() *account.State { return account.New("a1") },
		Decide:   account.Decide,
		Apply:    account.Apply,
		Registry: events.Merge(account.Registry(), evidem.Registry()),
	})
	n := 0
	seen := map[string]bool{}
	do := func(cmd commands.Command) {
		t.Helper()
		if err := cmd.Validate(); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		for _, e := range r.Do(commands.Envelope{ID: id, At: t0.Add(time.Duration(n) * time.Second), Cmd: cmd}) {
			seen[e.Type()] = true
		}
	}
	do(loginLink("tok-1"))
	do(&providercmd.RenewToken{Sealed: []byte("tok-2"), ExpiresAt: t0.Add(time.Hour), Cause: providercmd.TokenRenewal})
	do(&providercmd.LoseLogin{Sealed: []byte("tok-2")})
	if p := r.Live().Provider; !p.LoginLost || string(p.Sealed) != "tok-2" {
		t.Fatalf("after the loss: lost %v sealed %q", p.LoginLost, p.Sealed)
	}
	do(loginLink("tok-3"))
	p := r.Live().Provider
	if p.LoginLost || string(p.Sealed) != "tok-3" || p.LoginName != "trader1" || p.Account != "7" || p.Environment != "demo" ||
		!equal(p.TIFs(), []string{"day", "gtc", "ioc", "fok"}) {
		t.Fatalf("after signing in again: %+v", p.Login)
	}
	for name := range loginEvents {
		if !seen[name] {
			t.Errorf("the script records no %s", name)
		}
	}
	r.Check()
}

// A futures fill the provider reports with the contract's value per point
// (the engine gives it from the catalog) opens a position of that
// multiplier, and its close realizes money, not points: 2 points of ES at
// 50 a point is 100.
func TestFuturesFillRealizesValuePerPoint(t *testing.T) {
	fill := func(id, side, px string) *providercmd.Settle {
		p := dec(px)
		return &providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, provider.ClientOrderID("a1", id)), Outcome: evacct.OutcomeAccepted,
			Order: &providercmd.Order{ProviderClientOrderID: provider.ClientOrderID("a1", id), ProviderOrderID: id, Instrument: "ESZ6", Side: side,
				OrderType: "market", Status: "filled", Quantity: dec("1"), Filled: dec("1"), AvgPrice: &p, Multiplier: dec("50")}}
	}
	market := func(id, side string) *trading.PlaceOrder {
		return &trading.PlaceOrder{ClientOrderID: id, Instrument: "ESZ6", Side: side, OrderType: "market", Quantity: dec("1"), TimeInForce: "gtc"}
	}
	s, evs, err := login(t, []commands.Command{market("c1", "buy"), fill("c1", "buy", "5000"), market("c2", "sell")}, fill("c2", "sell", "5002"))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Positions["ESZ6"]; p.Multiplier.Cmp(dec("50")) != 0 {
		t.Fatalf("the position opened %+v, want multiplier 50", p)
	}
	var realized *events.Decimal
	for _, e := range evs {
		if f, ok := e.(evacct.OrderFilled); ok {
			realized = &f.Realized
		}
	}
	if realized == nil || realized.Cmp(dec("100")) != 0 {
		t.Fatalf("the close realized %v, want 100", realized)
	}
}

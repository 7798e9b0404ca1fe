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

// providerEvents are the events only a provider account records.
var providerEvents = map[string]bool{}

func init() {
	for _, e := range []events.Event{evacct.ProviderLinked{}, evacct.ProviderUnlinked{}, evacct.OrderIntended{}, evacct.IntentSettled{},
		evacct.BalanceObserved{}, evacct.PositionObserved{}, evacct.SettingsObserved{}, evacct.Reconciled{}} {
		providerEvents[e.Type()] = true
	}
}

func link(settings evacct.ProviderSettings) *providercmd.Link {
	return &providercmd.Link{Provider: "binance-futures", Broker: "binance", TenantID: "u1", AccountNumber: "BF1", Label: "Binance",
		Currency: "USDT", CredentialID: "cred1", Sealed: []byte("sealed"),
		Snapshot: providercmd.Observe{Cause: "link", Complete: true, Settings: &settings,
			Balances: []evacct.BalanceObserved{{Asset: "USDT", Wallet: dec("1000"), Available: dec("1000")}}}}
}

func pbuy(id, typ string) *trading.PlaceOrder {
	c := &trading.PlaceOrder{ClientOrderID: id, Instrument: "BTCUSDT", Side: "buy", OrderType: typ, Quantity: dec("0.01"), TimeInForce: "gtc"}
	if typ == "limit" {
		c.LimitPrice = ptr("50000")
	}
	return c
}

// provide runs given through Decide and Apply on a linked provider account
// and decides when.
func provide(t *testing.T, settings evacct.ProviderSettings, given []commands.Command, when commands.Command) (*account.State, []events.Event, error) {
	t.Helper()
	s := account.New("a1")
	for i, c := range append([]commands.Command{link(settings)}, given...) {
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

func pcoid(coid string) string { return provider.ClientOrderID("a1", coid) }

func filled(coid, qty, avg string) *providercmd.Order {
	a := dec(avg)
	return &providercmd.Order{ProviderClientOrderID: pcoid(coid), ProviderOrderID: "9", Instrument: "BTCUSDT", Side: "buy", OrderType: "market",
		Status: "filled", Quantity: dec("0.01"), Filled: dec(qty), AvgPrice: &a}
}

func settle(coid, outcome string, o *providercmd.Order) *providercmd.Settle {
	return &providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, pcoid(coid)), Outcome: outcome, Order: o}
}

func TestProviderDecisions(t *testing.T) {
	types := func(evs []events.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Type())
		}
		return out
	}
	day := pbuy("d1", "limit")
	day.TimeInForce = "day"
	for _, tc := range []struct {
		name     string
		settings evacct.ProviderSettings
		given    []commands.Command
		when     commands.Command
		wantCode commands.Code
		want     []string
	}{
		{name: "an order is an intent under the derived client order id, nothing else", when: pbuy("c1", "market"),
			want: []string{"order.intended.v1"}},
		{name: "a day order is refused naming the provider's times in force", when: day, wantCode: commands.CodeTimeInForceUnsupported},
		{name: "hedge mode refuses orders", settings: evacct.ProviderSettings{HedgeMode: true}, when: pbuy("c1", "market"),
			wantCode: commands.CodeHedgePositionMode},
		{name: "multi-assets mode refuses orders", settings: evacct.ProviderSettings{MultiAssets: true}, when: pbuy("c1", "market"),
			wantCode: commands.CodeMultiAssetsMode},
		{name: "a retry while the intent is open is outcome_unknown", given: []commands.Command{pbuy("c1", "market")},
			when: pbuy("c1", "market"), wantCode: commands.CodeOutcomeUnknown},
		{name: "a retry after a rejection is order_rejected again",
			given: []commands.Command{pbuy("c1", "market"), settle("c1", evacct.OutcomeRejected, nil)},
			when:  pbuy("c1", "market"), wantCode: commands.CodeOrderRejected},
		{name: "a retry after acceptance is the earlier order (409 with its id)",
			given: []commands.Command{pbuy("c1", "market"), settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000"))},
			when:  pbuy("c1", "market"), wantCode: commands.CodeIdempotencyConflict},
		{name: "an id never placed may be used again",
			given: []commands.Command{pbuy("c1", "market"), settle("c1", evacct.OutcomeNeverPlaced, nil)},
			when:  pbuy("c1", "market"), want: []string{"order.intended.v1"}},
		{name: "an accepted market order is placed and filled in the settlement", given: []commands.Command{pbuy("c1", "market")},
			when: settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000")),
			want: []string{"order.intent_settled.v1", "order.placed.v1", "order.filled.v1"}},
		{name: "a settlement the stream made first records only what is new",
			given: []commands.Command{pbuy("c1", "market"), &providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{*filled("c1", "0.01", "50000")}}},
			when:  settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000"))},
		{name: "an order placed elsewhere is adopted", when: &providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{{
			ProviderClientOrderID: "web_1", ProviderOrderID: "77", Instrument: "BTCUSDT", Side: "sell", OrderType: "limit", Status: "working",
			Quantity: dec("1"), Filled: dec("0"), LimitPrice: ptr("70000")}}}, want: []string{"order.placed.v1"}},
		{name: "a close with no position is refused", when: &trading.ClosePosition{Instrument: "BTCUSDT"}, wantCode: commands.CodePositionNotClosable},
		{name: "the paper book's wakes do nothing", when: &trading.FillWorking{Quote: trading.Quote{Instrument: "BTCUSDT"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, err := provide(t, tc.settings, tc.given, tc.when)
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
			if got := types(evs); len(got) != len(tc.want) || (len(got) > 0 && !equal(got, tc.want)) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// A market fill's position and balance, then the provider's own reading
// of them, and the intent's client order id is the derived one.
func TestProviderFillAndObservations(t *testing.T) {
	s, evs, err := provide(t, evacct.ProviderSettings{}, []commands.Command{pbuy("c1", "market")},
		settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000")))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		s = account.Apply(s, e)
	}
	if p := s.Positions["BTCUSDT"]; p.Quantity.Cmp(dec("0.01")) != 0 || p.AvgPrice.Cmp(dec("50000")) != 0 {
		t.Fatalf("position %+v", p)
	}
	if len(s.Working) != 0 || len(s.OpenIntents()) != 0 {
		t.Fatalf("working %d intents %d", len(s.Working), len(s.OpenIntents()))
	}
	obs := &providercmd.Observe{Cause: "stream", Balances: []evacct.BalanceObserved{{Asset: "USDT", Wallet: dec("999.8"), Available: dec("974")}},
		Positions: []evacct.Position{{Instrument: "BTCUSDT", Quantity: dec("0.01"), AvgPrice: dec("50001")}}}
	evs, err = account.Decide(s, env(100, obs))
	if err != nil || len(evs) != 2 {
		t.Fatalf("observations %v %v", evs, err)
	}
	for _, e := range evs {
		s = account.Apply(s, e)
	}
	if s.Balance.Cmp(dec("999.8")) != 0 || s.Positions["BTCUSDT"].AvgPrice.Cmp(dec("50001")) != 0 {
		t.Fatalf("balance %s position %+v", s.Balance, s.Positions["BTCUSDT"])
	}
	if evs, _ := account.Decide(s, env(101, obs)); len(evs) != 0 {
		t.Fatalf("the same reading again recorded %v", evs)
	}
}

func TestProviderAccountReplay(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New:      func() *account.State { return account.New("a1") },
		Decide:   account.Decide,
		Apply:    account.Apply,
		Registry: events.Merge(account.Registry(), evidem.Registry()),
	})
	seen := map[string]bool{}
	n := 0
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
	do(link(evacct.ProviderSettings{}))
	do(pbuy("c1", "market"))
	do(settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000")))
	do(pbuy("l1", "limit"))
	do(settle("l1", evacct.OutcomeAccepted, &providercmd.Order{ProviderClientOrderID: pcoid("l1"), Instrument: "BTCUSDT", Side: "buy",
		OrderType: "limit", Status: "working", Quantity: dec("0.01"), Filled: dec("0"), LimitPrice: ptr("50000")}))
	do(&trading.CancelOrder{BrokerOrderID: r.Live().OrderID("l1")})
	do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentCancel, pcoid("l1")), Outcome: evacct.OutcomeAccepted})
	do(&providercmd.Observe{Cause: "gap", Complete: true, Settings: &evacct.ProviderSettings{HedgeMode: true},
		Balances:  []evacct.BalanceObserved{{Asset: "USDT", Wallet: dec("990"), Available: dec("900")}},
		Positions: []evacct.Position{{Instrument: "BTCUSDT", Quantity: dec("0.01"), AvgPrice: dec("50010")}}})
	do(&providercmd.Unlink{})
	for name := range providerEvents {
		if !seen[name] {
			t.Errorf("the script records no %s: add a command that does", name)
		}
	}
	r.Check()
}

package account_test

import (
	"net/http"
	"testing"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

// issued is an account a venue issued into group g1 at stage version v1.
func issued(t *testing.T, given ...commands.Command) *account.State {
	s := account.New("a1")
	cmds := append([]commands.Command{&tenantcmd.OpenAccount{TenantID: "firm", Broker: "paper", AccountNumber: "EV1", Currency: "USD",
		StartingBalance: dec("10000"), Kind: "evaluation", VenueID: "v1", GroupID: "g1", StageVersion: "v1"}}, given...)
	for i, c := range cmds {
		evs, err := account.Decide(s, env(i, c))
		if err != nil {
			t.Fatalf("given %d: %v", i, err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	return s
}

// terms are g1's: BTC-PERP up to 5, a paper route, stage v1, 0.5 a unit both ways and 2 per opening order.
func terms(edit func(*trading.Terms)) trading.Market {
	t := &trading.Terms{VenueID: "v1", GroupID: "g1", Revision: 7, Permitted: map[string]events.Decimal{"BTC-PERP": dec("5")},
		Route: "paper", StageID: "eval", StageVersion: "v1", Commissions: []trading.Commission{
			{Name: "unit", PerUnit: true, Amount: dec("0.5"), Direction: "both"},
			{Name: "ticket", Amount: dec("2"), Direction: "open"}}}
	if edit != nil {
		edit(t)
	}
	m := mkt("100", "101")
	m.Terms = map[string]*trading.Terms{"v1/g1": t}
	return m
}

func TestVenueTermsGovernOrders(t *testing.T) {
	cases := []struct {
		name   string
		m      trading.Market
		cmd    func(m trading.Market) commands.Command
		given  []commands.Command
		status int
		code   string
		params map[string]any
	}{
		{"permitted, within the limit", terms(nil), func(m trading.Market) commands.Command { return buy("o1", "2", m) }, nil, 0, "", nil},
		{"no terms for the group", mkt("100", "101"), func(m trading.Market) commands.Command { return buy("o1", "1", m) }, nil, 422, "venue_route_missing", nil},
		{"no route", terms(func(t *trading.Terms) { t.Route = "" }), func(m trading.Market) commands.Command { return buy("o1", "1", m) }, nil, 422, "venue_route_missing", nil},
		{"a provider route", terms(func(t *trading.Terms) { t.Route = "provider:p1" }), func(m trading.Market) commands.Command { return buy("o1", "1", m) }, nil, 422, "venue_route_missing", nil},
		{"an instrument the group does not permit", terms(func(t *trading.Terms) { delete(t.Permitted, "BTC-PERP") }), func(m trading.Market) commands.Command { return buy("o1", "1", m) }, nil, 422, "instrument_not_permitted", map[string]any{"instrument": "BTC-PERP"}},
		{"above the limit", terms(nil), func(m trading.Market) commands.Command { return buy("o1", "6", m) }, nil, 422, "order_quantity_above_limit", map[string]any{"limit": "5"}},
		{"an entry halt refuses additions", terms(func(t *trading.Terms) { t.EntryHalted = true }), func(m trading.Market) commands.Command { return buy("o2", "1", m) }, nil, 422, "entry_halted", map[string]any{"groupId": "g1", "instrument": "BTC-PERP"}},
		{"an entry halt lets reductions through", terms(func(t *trading.Terms) { t.EntryHalted = true }), func(m trading.Market) commands.Command { return sell("o2", "1", m) },
			[]commands.Command{buy("o1", "2", terms(nil))}, 0, "", nil},
		{"a new stage version is close-only", terms(func(t *trading.Terms) { t.StageVersion = "v2" }), func(m trading.Market) commands.Command { return buy("o2", "1", m) }, nil, http.StatusLocked, "stage_version_unrecorded", map[string]any{"stageId": "eval", "reason": "stage_version_changed"}},
		{"a new stage version still closes", terms(func(t *trading.Terms) { t.StageVersion = "v2" }), func(m trading.Market) commands.Command { return sell("o2", "2", m) },
			[]commands.Command{buy("o1", "2", terms(nil))}, 0, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := issued(t, tc.given...)
			evs, err := account.Decide(s, env(99, tc.cmd(tc.m)))
			if tc.status != 0 {
				wantRefusal(t, err, evs, tc.status, tc.code, tc.params)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p := only[evacct.OrderPlaced](t, evs); p.Order.TermsRevision != 7 {
				t.Fatalf("the order does not record the terms' revision: %+v", p.Order)
			}
		})
	}
}

// Commissions post on fills in the account currency's decimals: per unit on
// both sides, per order only on opening orders' first fill.
func TestCommissionsPostOnFills(t *testing.T) {
	s := issued(t)
	m := terms(nil)
	evs, err := account.Decide(s, env(10, buy("o1", "2", m)))
	if err != nil {
		t.Fatal(err)
	}
	f := only[evacct.OrderFilled](t, evs)
	if f.Commission == nil || f.Commission.String() != "3" || f.Balance.String() != "9997" { // 2 x 0.5 + 2
		t.Fatalf("opening fill %+v", f)
	}
	for _, e := range evs {
		s = account.Apply(s, e)
	}
	evs, err = account.Decide(s, env(11, sell("o2", "2", m)))
	if err != nil {
		t.Fatal(err)
	}
	f = only[evacct.OrderFilled](t, evs)
	if f.Commission.String() != "1" || f.Balance.Cmp(dec("9997").Add(f.Realized).Sub(dec("1"))) != 0 { // closing: units only
		t.Fatalf("closing fill %+v", f)
	}
	// A plain account pays nothing.
	_, evs, _ = run(t, nil, buy("o1", "2", m))
	if c := only[evacct.OrderFilled](t, evs).Commission; c != nil {
		t.Fatalf("a plain account paid %v", c)
	}
}

// An issued account's whole life replays to the same state: venue checks,
// commissions, a policy bound at its next command, a policy loss limit firing.
func TestIssuedAccountReplay(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New:      func() *account.State { return account.New("a1") },
		Decide:   account.Decide,
		Apply:    account.Apply,
		Registry: events.Merge(account.Registry(), evidem.Registry()),
	})
	seen := map[string]bool{}
	n := 0
	do := func(cmd commands.Command) {
		n++
		for _, e := range r.Do(env(n, cmd)) {
			seen[e.Type()] = true
		}
	}
	do(&tenantcmd.OpenAccount{TenantID: "firm", Broker: "paper", AccountNumber: "EV1", Currency: "USD",
		StartingBalance: dec("10000"), Kind: "evaluation", VenueID: "v1", GroupID: "g1", StageVersion: "v1"})
	do(buy("o1", "2", terms(nil)))
	bound := terms(func(t *trading.Terms) { t.PolicyID, t.PolicyVersion, t.DailyLossLimit = "house", "2026-11", ptr("50") })
	do(&riskcmd.Evaluate{Market: bound}) // binds; the loss is small
	if p := r.Live().Risk.Policy; p.PolicyID != "house" || p.DailyLossLimit.String() != "50" {
		t.Fatalf("not bound: %+v", p)
	}
	falling := terms(func(t *trading.Terms) { t.PolicyID, t.PolicyVersion, t.DailyLossLimit = "house", "2026-11", ptr("50") })
	falling.Quotes["BTC-PERP"] = trading.Quote{Instrument: "BTC-PERP", Bid: dec("60"), Ask: dec("61"), At: t0}
	do(&riskcmd.Evaluate{Market: falling})
	if l := r.Live().Risk.Lock; l == nil || l.Control != evacct.ControlPolicyDailyLoss {
		t.Fatalf("the policy's loss limit did not fire: %+v", l)
	}
	for _, name := range []string{(evacct.RiskPolicyBound{}).Type(), (evacct.RiskLocked{}).Type(), (evacct.OrderFilled{}).Type()} {
		if !seen[name] {
			t.Errorf("no %s", name)
		}
	}
	r.Check()
}

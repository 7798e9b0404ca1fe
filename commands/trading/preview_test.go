package trading

import (
	"errors"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

func dec(s string) events.Decimal   { return events.MustDecimal(s) }
func decp(s string) *events.Decimal { v := dec(s); return &v }

func codeOf(t *testing.T, err error) (commands.Code, map[string]any) {
	t.Helper()
	var r *commands.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v is no refusal", err)
	}
	return r.Code, r.Params
}

// A preview prices the ladder at the entry the order would have and
// refuses, in this order, what the order or the plan could not be.
func TestPreviewPricesTheEntryOrRefuses(t *testing.T) {
	plan := evplan.Spec{Name: "x", Stop: &evplan.Distance{Ticks: 10}}
	sp := &Spec{Symbol: "BTC-PERP", TickSize: dec("0.5"), LotStep: dec("0.001")}
	quote := &Touch{Bid: dec("100"), Ask: dec("101")}
	market := func() PreviewMarket { return PreviewMarket{Plan: plan, Revision: "r1", Spec: sp, Quote: quote} }
	cases := []struct {
		name      string
		c         PreviewBracket
		m         func(PreviewMarket) PreviewMarket
		wantEntry string
		wantCode  commands.Code
	}{
		{name: "a market buy enters at the ask", c: PreviewBracket{Side: "buy", OrderType: "market"}, wantEntry: "101"},
		{name: "a market sell enters at the bid", c: PreviewBracket{Side: "sell", OrderType: "market"}, wantEntry: "100"},
		{name: "a limit entry enters at its limit", c: PreviewBracket{Side: "buy", OrderType: "limit", LimitPrice: decp("95")}, wantEntry: "95"},
		{name: "a limit entry needs no quote", c: PreviewBracket{Side: "buy", OrderType: "limit", LimitPrice: decp("95")},
			m: func(m PreviewMarket) PreviewMarket { m.Quote = nil; return m }, wantEntry: "95"},
		{name: "another revision is a conflict, before anything else", c: PreviewBracket{Side: "buy", OrderType: "stop", PlanRevision: "r0"},
			m: func(m PreviewMarket) PreviewMarket { m.Spec = nil; return m }, wantCode: commands.CodeExitPlanConflict},
		{name: "an unknown instrument", c: PreviewBracket{Side: "buy", OrderType: "market"},
			m: func(m PreviewMarket) PreviewMarket { m.Spec = nil; return m }, wantCode: commands.CodeInstrumentNotPermitted},
		{name: "a limit off the tick", c: PreviewBracket{Side: "buy", OrderType: "limit", LimitPrice: decp("95.2")}, wantCode: commands.CodeInvalidRequest},
		{name: "a futures market entry", c: PreviewBracket{Side: "buy", OrderType: "market"},
			m: func(m PreviewMarket) PreviewMarket { m.Futures = true; return m }, wantCode: commands.CodeFeedRequiresConnection},
		{name: "a market entry with no quote yet", c: PreviewBracket{Side: "buy", OrderType: "market"},
			m: func(m PreviewMarket) PreviewMarket { m.Quote = nil; return m }, wantCode: commands.CodeMarketDataUnavailable},
		{name: "a limit entry without its price", c: PreviewBracket{Side: "buy", OrderType: "limit"}, wantCode: commands.CodeInvalidRequest},
		{name: "a stop is no entry", c: PreviewBracket{Side: "buy", OrderType: "stop"}, wantCode: commands.CodeInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.c.Instrument, c.c.Quantity = "BTC-PERP", dec("1")
			if c.c.PlanRevision == "" {
				c.c.PlanRevision = "r1"
			}
			m := market()
			if c.m != nil {
				m = c.m(m)
			}
			entry, ladder, err := c.c.Price(m)
			if c.wantCode != "" {
				if code, _ := codeOf(t, err); code != c.wantCode {
					t.Fatalf("code %s, want %s", code, c.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if entry.Cmp(dec(c.wantEntry)) != 0 {
				t.Errorf("entry %s, want %s", entry, c.wantEntry)
			}
			if len(ladder.Legs) != 1 || ladder.Legs[0].Price == nil {
				t.Fatalf("ladder %+v: want its stop leg", ladder.Legs)
			}
		})
	}
}

// An order must be the submission its preview bound: each field that
// differs is named, an expired token or another account refused first.
func TestABindingRefusesAnyOtherOrder(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := PreviewBracket{PlanID: "xp_1", PlanRevision: "r1", Instrument: "BTC-PERP", Side: "buy", OrderType: "limit",
		LimitPrice: decp("95"), Quantity: dec("1"), ClientOrderID: "c1"}
	b := p.Binding("acc", "r1", dec("95"), now.Add(time.Minute))
	order := func() *PlaceOrder {
		return &PlaceOrder{ClientOrderID: "c1", Instrument: "BTC-PERP", Side: "buy", OrderType: "limit", Quantity: dec("1"),
			LimitPrice: decp("95"), ExitPlan: &ExitPlanRef{PlanID: "xp_1", PlanRevision: "r1"}}
	}
	if err := b.Check("acc", now, order()); err != nil {
		t.Fatalf("the bound order is refused: %v", err)
	}
	for _, c := range []struct {
		name, reason, field string
		acct                string
		at                  time.Time
		change              func(*PlaceOrder)
	}{
		{name: "expired", reason: "token_expired", acct: "acc", at: now.Add(2 * time.Minute)},
		{name: "another account", reason: "account_changed", acct: "other", at: now},
		{name: "another plan", reason: "binding", field: "exitPlan.planId", change: func(o *PlaceOrder) { o.ExitPlan.PlanID = "xp_2" }},
		{name: "another side", reason: "binding", field: "side", change: func(o *PlaceOrder) { o.Side = "sell" }},
		{name: "another quantity", reason: "binding", field: "quantity", change: func(o *PlaceOrder) { o.Quantity = dec("2") }},
		{name: "another type", reason: "binding", field: "orderType", change: func(o *PlaceOrder) { o.OrderType = "market"; o.LimitPrice = nil }},
		{name: "another limit", reason: "binding", field: "limitPrice", change: func(o *PlaceOrder) { o.LimitPrice = decp("96") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := order()
			if c.change != nil {
				c.change(o)
			}
			acct, at := c.acct, c.at
			if acct == "" {
				acct, at = "acc", now
			}
			code, params := codeOf(t, b.Check(acct, at, o))
			if code != commands.CodeExitPlanConflict || params["reason"] != c.reason || (c.field != "" && params["field"] != c.field) {
				t.Fatalf("refused %s %v, want exit_plan_conflict %s %s", code, params, c.reason, c.field)
			}
		})
	}
}

func TestPlanAtRefusesADeletedOrEditedPlan(t *testing.T) {
	spec := evplan.Spec{Name: "x"}
	if p, err := PlanAt("xp_1", "r1", spec, "r1", true); err != nil || p.PlanRevision != "r1" || p.PlanID != "xp_1" {
		t.Fatalf("PlanAt = %+v, %v", p, err)
	}
	if _, params := codeOf(t, errOnly(PlanAt("xp_1", "r1", spec, "", false))); params["reason"] != "plan_deleted" {
		t.Errorf("a deleted plan: %v", params)
	}
	if _, params := codeOf(t, errOnly(PlanAt("xp_1", "r1", spec, "r2", true))); params["reason"] != "plan_changed" || params["revision"] != "r2" {
		t.Errorf("an edited plan: %v", params)
	}
}

func errOnly(_ *BracketPlan, err error) error { return err }

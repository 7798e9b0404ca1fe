package account_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

func restingLimit(coid string) *providercmd.Order {
	lp := dec("50000")
	return &providercmd.Order{ProviderClientOrderID: pcoid(coid), ProviderOrderID: "7", Instrument: "BTCUSDT", Side: "buy", OrderType: "limit",
		TimeInForce: "gtc", Status: "new", Quantity: dec("0.01"), Filled: dec("0"), LimitPrice: &lp}
}

func complete(orders []providercmd.Order, positions ...evacct.Position) *providercmd.Observe {
	return &providercmd.Observe{Cause: "periodic", Complete: true, Orders: orders, Positions: positions,
		Balances: []evacct.BalanceObserved{{Asset: "USDT", Wallet: dec("1000"), Available: dec("1000")}}}
}

func pos(qty, avg string) evacct.Position {
	return evacct.Position{Instrument: "BTCUSDT", Quantity: dec(qty), AvgPrice: dec(avg), Multiplier: dec("1")}
}

func heldIn(evs []events.Event) (evacct.ReconciliationHeld, bool) {
	for _, e := range evs {
		if h, ok := e.(evacct.ReconciliationHeld); ok {
			return h, true
		}
	}
	return evacct.ReconciliationHeld{}, false
}

func TestProviderReconciliationHold(t *testing.T) {
	accepted := func(coid string, o *providercmd.Order) []commands.Command {
		return []commands.Command{pbuy(coid, o.OrderType), settle(coid, evacct.OutcomeAccepted, o)}
	}
	lim := restingLimit("l1")
	filledLim := *lim
	filledLim.Status, filledLim.Filled = "filled", dec("0.01")
	avg := dec("50000")
	filledLim.AvgPrice = &avg
	outside := providercmd.Order{ProviderClientOrderID: "web_1", ProviderOrderID: "55", Instrument: "BTCUSDT", Side: "sell", OrderType: "limit",
		TimeInForce: "gtc", Status: "new", Quantity: dec("0.02"), Filled: dec("0"), LimitPrice: ptr("90000")}
	for _, tc := range []struct {
		name     string
		given    []commands.Command
		when     *providercmd.Observe
		wantHold bool
	}{
		{name: "a snapshot that agrees with the log holds nothing", given: accepted("l1", lim),
			when: complete([]providercmd.Order{*lim})},
		{name: "an order placed elsewhere is adopted, not held", when: complete([]providercmd.Order{outside})},
		{name: "a fill missed in a cut, reported by the lookup, explains the position",
			given: accepted("l1", lim), when: complete([]providercmd.Order{filledLim}, pos("0.01", "50000"))},
		{name: "a position no recorded fill explains holds", when: complete(nil, pos("0.03", "60000")), wantHold: true},
		{name: "a position gone without a fill holds", given: accepted("m1", filled("m1", "0.01", "60000")),
			when: complete(nil), wantHold: true},
		{name: "a working order the provider neither has nor reports ended holds", given: accepted("l1", lim),
			when: complete(nil), wantHold: true},
		{name: "a balance that moved without a fill is recorded, not held",
			when: &providercmd.Observe{Cause: "periodic", Complete: true,
				Balances: []evacct.BalanceObserved{{Asset: "USDT", Wallet: dec("1250"), Available: dec("1250")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, evs, err := provide(t, evacct.ProviderSettings{}, tc.given, tc.when)
			if err != nil {
				t.Fatal(err)
			}
			h, held := heldIn(evs)
			if held != tc.wantHold {
				t.Fatalf("held %v (%q), want %v; events %v", held, h.Reason, tc.wantHold, evs)
			}
			for _, e := range evs {
				s = account.Apply(s, e)
			}
			if tc.wantHold {
				if h.By != account.HeldByReconciliation || fmt.Sprint(account.Holds(s, t0)) != "[reconciliation_hold]" {
					t.Fatalf("hold %+v, holds %v", h, account.Holds(s, t0))
				}
				if len(s.Working) != 0 {
					t.Fatalf("the book keeps an order the provider does not have: %v", s.Working)
				}
			}
		})
	}
}

// Under a reconciliation hold an addition and money are refused with 423
// reconciliation_hold; a cancel and a close still go out; an operator's
// release (idempotent) lets orders in again, and the next reconciliation of
// the same state holds nothing.
func TestProviderHoldRefusesAdditionsUntilReleased(t *testing.T) {
	lim := restingLimit("l1")
	given := []commands.Command{pbuy("l1", "limit"), settle("l1", evacct.OutcomeAccepted, lim),
		pbuy("m1", "market"), settle("m1", evacct.OutcomeAccepted, filled("m1", "0.01", "60000")),
		complete([]providercmd.Order{*lim}, pos("0.05", "60000"))}
	s, _, _ := provide(t, evacct.ProviderSettings{}, given, &trading.CancelOrder{})
	code := func(err error) string {
		var r *commands.Refusal
		if errors.As(err, &r) {
			return string(r.Code)
		}
		return fmt.Sprint(err)
	}
	run := func(s *account.State, n int, c commands.Command) (*account.State, []events.Event, error) {
		evs, err := account.Decide(s, env(n, c))
		for _, e := range evs {
			s = account.Apply(s, e)
		}
		return s, evs, err
	}
	if _, _, err := run(s, 100, pbuy("c2", "market")); code(err) != string(commands.CodeReconciliationHold) {
		t.Fatalf("an addition under the hold: %v", err)
	}
	if _, _, err := run(s, 101, &firmcmd.BalanceOp{ReferenceID: "r1", Op: firmcmd.OpCredit, Amount: dec("5")}); code(err) != string(commands.CodeReconciliationHold) {
		t.Fatalf("a credit under the hold: %v", err)
	}
	var working string
	for id := range s.Working {
		working = id
	}
	if _, evs, err := run(s, 102, &trading.CancelOrder{BrokerOrderID: working}); err != nil || len(evs) != 1 {
		t.Fatalf("a cancel under the hold: %v %v", evs, err)
	}
	if _, evs, err := run(s, 103, &trading.ClosePosition{Instrument: "BTCUSDT"}); err != nil || len(evs) != 1 {
		t.Fatalf("a close under the hold: %v %v", evs, err)
	}
	s, evs, _ := run(s, 104, &firmcmd.ReleaseReconciliation{By: "op@example.com"})
	if len(evs) != 1 {
		t.Fatalf("release: %v", evs)
	}
	if _, evs, _ := run(s, 105, &firmcmd.ReleaseReconciliation{By: "op@example.com"}); len(evs) != 0 {
		t.Fatalf("a second release records %v", evs)
	}
	if _, evs, err := run(s, 106, pbuy("c2", "market")); err != nil || len(evs) != 1 {
		t.Fatalf("an addition after the release: %v %v", evs, err)
	}
	if _, evs, _ := run(s, 107, complete([]providercmd.Order{*lim}, pos("0.05", "60000"))); len(evs) != 1 {
		t.Fatalf("the same reconciliation again records %v, want only Reconciled", evs)
	}
}

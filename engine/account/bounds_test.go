package account_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// stepped quotes BTC-PERP at bid/ask with the instrument's increments: tick
// 0.5, lot 0.001, minimum 0.002.
func stepped(bid, ask string) trading.Market {
	m := mkt(bid, ask)
	m.Specs = map[string]trading.Spec{"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: dec("1"), MaxQuantity: dec("100"),
		TickSize: dec("0.5"), LotStep: dec("0.001"), MinQuantity: dec("0.002")}}
	return m
}

func stop(id, side, qty, px string, m trading.Market) *trading.PlaceOrder {
	c := buy(id, qty, m)
	c.Side, c.OrderType, c.StopPrice, c.TimeInForce = side, "stop", ptr(px), "gtc"
	return c
}

// wantRefusal fails t unless err is a refusal with status, code and at least params.
func wantRefusal(t *testing.T, err error, evs []events.Event, status int, code string, params map[string]any) {
	t.Helper()
	var ref *commands.Refusal
	if !errors.As(err, &ref) {
		t.Fatalf("want refusal %d %s, got %v (events %v)", status, code, err, evs)
	}
	if commands.StatusOf(ref.Code, ref.Malformed) != status || string(ref.Code) != code || len(evs) != 0 {
		t.Fatalf("got %d %s %v (events %v), want %d %s", commands.StatusOf(ref.Code, ref.Malformed), ref.Code, ref.Params, evs, status, code)
	}
	for k, v := range params {
		if fmt.Sprint(ref.Params[k]) != fmt.Sprint(v) {
			t.Fatalf("params %v, want %s=%v", ref.Params, k, v)
		}
	}
}

func TestIncrementRefusals(t *testing.T) {
	m := stepped("100", "101")
	const first = "01J00000000000000000000001" // the first given order's id
	cases := []struct {
		name       string
		given      []commands.Command
		when       commands.Command
		wantParams map[string]any
	}{
		{"limit price off the tick", nil, limit("l1", "buy", "1", "100.25", m),
			map[string]any{"field": "limitPrice", "tickSize": "0.5", "instrument": "BTC-PERP"}},
		{"stop price off the tick", nil, stop("s1", "buy", "1", "105.1", m),
			map[string]any{"field": "stopPrice", "tickSize": "0.5"}},
		{"quantity off the lot step", nil, buy("c1", "1.0005", m),
			map[string]any{"field": "quantity", "lotStep": "0.001", "minQuantity": "0.002"}},
		{"quantity below the minimum", nil, buy("c1", "0.001", m),
			map[string]any{"field": "quantity", "lotStep": "0.001", "minQuantity": "0.002"}},
		{"replace to a quantity off the lot step", []commands.Command{limit("l1", "buy", "1", "95", m)},
			&trading.ReplaceOrder{BrokerOrderID: first, Quantity: ptr("1.0001"), Market: m},
			map[string]any{"field": "quantity", "lotStep": "0.001"}},
		{"replace to a limit off the tick", []commands.Command{limit("l1", "buy", "1", "95", m)},
			&trading.ReplaceOrder{BrokerOrderID: first, LimitPrice: ptr("95.2"), Market: m},
			map[string]any{"field": "limitPrice", "tickSize": "0.5"}},
		{"replace to a stop off the tick", []commands.Command{stop("s1", "buy", "1", "200", m)},
			&trading.ReplaceOrder{BrokerOrderID: first, StopPrice: ptr("199.9"), Market: m},
			map[string]any{"field": "stopPrice", "tickSize": "0.5"}},
		{"partial close off the lot step", []commands.Command{buy("c1", "1", m)},
			&trading.ClosePosition{Instrument: "BTC-PERP", Quantity: ptr("0.5005"), Market: m},
			map[string]any{"field": "quantity", "lotStep": "0.001"}},
		{"partial close below the minimum", []commands.Command{buy("c1", "1", m)},
			&trading.ClosePosition{Instrument: "BTC-PERP", Quantity: ptr("0.001"), Market: m},
			map[string]any{"field": "quantity", "minQuantity": "0.002"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, err := run(t, tc.given, tc.when)
			wantRefusal(t, err, evs, 422, "invalid_request", tc.wantParams)
		})
	}
}

func TestIncrementsAdmitOnStepValues(t *testing.T) {
	m := stepped("100", "101")
	for _, c := range []commands.Command{
		limit("l1", "buy", "0.002", "99.5", m),
		limit("l2", "sell", "12.345", "1000000.5", m),
		stop("s1", "buy", "1", "150", m),
		buy("c1", "0.01", m),
	} {
		if _, _, err := run(t, nil, c); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	// A whole close takes the position as it is, even off the step or below the minimum.
	_, evs, err := run(t, []commands.Command{buy("c1", "1", mkt("100", "101"))}, &trading.ClosePosition{Instrument: "BTC-PERP", Quantity: ptr("1"), Market: m})
	if err != nil || len(fills(evs)) != 1 {
		t.Fatalf("close: %v %v", evs, err)
	}
}

func TestHoldCodes(t *testing.T) {
	m := mkt("100", "101")
	hold := &firmcmd.HoldForReconciliation{Reason: "ledger mismatch"}
	const first = "01J00000000000000000000001"
	cases := []struct {
		name      string
		given     []commands.Command
		when      commands.Command
		wantCode  string
		wantHolds string
	}{
		{"an addition under a reconciliation hold", []commands.Command{hold}, buy("c1", "1", m), "reconciliation_hold", "[reconciliation_hold]"},
		{"a limit under a reconciliation hold", []commands.Command{hold}, limit("l1", "buy", "1", "95", m), "reconciliation_hold", "[reconciliation_hold]"},
		{"a reconciliation hold over a firm halt", []commands.Command{&firmcmd.HaltAccount{}, hold}, buy("c1", "1", m), "reconciliation_hold", "[firm_halt reconciliation_hold]"},
		{"a replace under a reconciliation hold", []commands.Command{limit("l1", "buy", "1", "95", m), hold},
			&trading.ReplaceOrder{BrokerOrderID: first, LimitPrice: ptr("96"), Market: m}, "reconciliation_hold", "[reconciliation_hold]"},
		{"a reverse under a reconciliation hold", []commands.Command{buy("c1", "1", m), hold},
			&trading.Reverse{Instrument: "BTC-PERP", ClientOrderID: "r1", Market: m}, "reconciliation_hold", "[reconciliation_hold]"},
		{"an addition under a firm halt alone", []commands.Command{&firmcmd.HaltAccount{}}, buy("c1", "1", m), "risk_locked", "[firm_halt]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, err := run(t, tc.given, tc.when)
			wantRefusal(t, err, evs, 423, tc.wantCode, map[string]any{"holds": tc.wantHolds})
		})
	}
}

func TestReconciliationHoldLeavesReductionsClosesCancelsAndFlattens(t *testing.T) {
	m := mkt("100", "101")
	given := []commands.Command{buy("c1", "2", m), limit("l1", "buy", "1", "95", m), &firmcmd.HoldForReconciliation{}}
	for _, c := range []commands.Command{
		&trading.PlaceOrder{ClientOrderID: "r1", Instrument: "BTC-PERP", Side: "sell", OrderType: "market", Quantity: dec("1"), ReduceOnly: true, Market: m},
		sell("r2", "1", m), // a market order no larger than the opposite position
		&trading.ClosePosition{Instrument: "BTC-PERP", Market: m},
		&trading.CancelOrder{BrokerOrderID: "01J00000000000000000000002"},
		&trading.Flatten{Market: m},
	} {
		t.Run(fmt.Sprintf("%T", c), func(t *testing.T) {
			if _, evs, err := run(t, given, c); err != nil || len(evs) == 0 {
				t.Fatalf("refused under the hold: %v %v", evs, err)
			}
		})
	}
}

func TestCloseAndFlattenKeys(t *testing.T) {
	m := mkt("100", "101")
	closeKey := func(key string) *trading.ClosePosition {
		return &trading.ClosePosition{Instrument: "BTC-PERP", ClientOrderID: key, Market: m}
	}
	flattenKey := func(key string) *trading.Flatten { return &trading.Flatten{ClientOrderID: key, Market: m} }
	refusals := []struct {
		name  string
		given []commands.Command
		when  commands.Command
	}{
		{"a close repeating its clientOrderId", []commands.Command{buy("c1", "2", m), closeKey("k1"), buy("c2", "1", m)}, closeKey("k1")},
		{"a close reusing an order's clientOrderId", []commands.Command{buy("c1", "2", m)}, closeKey("c1")},
		{"an order reusing a close's clientOrderId", []commands.Command{buy("c1", "2", m), closeKey("k1")}, buy("k1", "1", m)},
		{"a flatten repeating its clientOrderId", []commands.Command{buy("c1", "2", m), flattenKey("f1"), buy("c2", "1", m)}, flattenKey("f1")},
		{"a flatten reusing an order's clientOrderId", []commands.Command{buy("c1", "2", m)}, flattenKey("c1")},
		{"an order reusing a flatten's clientOrderId", []commands.Command{buy("c1", "2", m), flattenKey("f1")}, buy("f1", "1", m)},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, err := run(t, tc.given, tc.when)
			wantRefusal(t, err, evs, 409, "idempotency_conflict", nil)
		})
	}
	t.Run("a close with a clientOrderId names its order", func(t *testing.T) {
		_, evs, err := run(t, []commands.Command{buy("c1", "2", m)}, closeKey("k1"))
		if err != nil || len(evs) == 0 || evs[0].(evacct.OrderPlaced).Order.ClientOrderID != "k1" {
			t.Fatalf("%v %v", evs, err)
		}
	})
	t.Run("a flatten with a clientOrderId names its first closing order", func(t *testing.T) {
		eth := mkt("100", "101")
		eth.Quotes["ETH-PERP"] = trading.Quote{Instrument: "ETH-PERP", Bid: dec("10"), Ask: dec("11"), At: t0}
		eth.Specs["ETH-PERP"] = trading.Spec{Symbol: "ETH-PERP", Multiplier: dec("1"), MaxQuantity: dec("100")}
		ethBuy := buy("e1", "1", eth)
		ethBuy.Instrument = "ETH-PERP"
		_, evs, err := run(t, []commands.Command{buy("c1", "2", eth), ethBuy}, &trading.Flatten{ClientOrderID: "f1", Market: eth})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range evs {
			if p, ok := e.(evacct.OrderPlaced); ok {
				ids = append(ids, p.Order.ClientOrderID)
			}
		}
		if len(ids) != 2 || ids[0] != "f1" || ids[1] != "flatten-"+env(99, nil).DerivedID("c", 1) {
			t.Fatalf("closing orders %v", ids)
		}
	})
	t.Run("without a clientOrderId a close repeats", func(t *testing.T) {
		_, evs, err := run(t, []commands.Command{buy("c1", "2", m), &trading.ClosePosition{Instrument: "BTC-PERP", Quantity: ptr("1"), Market: m}},
			&trading.ClosePosition{Instrument: "BTC-PERP", Market: m})
		if err != nil || len(fills(evs)) != 1 {
			t.Fatalf("%v %v", evs, err)
		}
	})
}

func TestMoneyBounds(t *testing.T) {
	t.Run("an operation above the maximum", func(t *testing.T) {
		for _, c := range []*firmcmd.BalanceOp{credit("r1", "1000000000.01"), debit("r1", "1000000001"),
			{ReferenceID: "r1", AccountNumber: "EV1", Op: "adjustment", Amount: dec("-1000000000.5"), Env: "sandbox"}} {
			_, evs, err := runFirm(t, "USD", nil, c)
			wantRefusal(t, err, evs, 422, "invalid_request", map[string]any{"field": "amount", "max": "1000000000"})
		}
		if _, evs, err := runFirm(t, "USD", nil, credit("r1", "1000000000")); err != nil || len(evs) != 1 {
			t.Fatalf("the maximum itself: %v %v", evs, err)
		}
	})
	t.Run("a balance above the maximum", func(t *testing.T) {
		s := account.Apply(account.New("a1"), evacct.Opened{AccountID: "a1", TenantID: "firm", Broker: "paper", AccountNumber: "EV1",
			Currency: "USD", StartingBalance: dec("999999999999.5"), Kind: "evaluation", At: t0})
		evs, err := account.Decide(s, env(1, credit("r1", "0.5")))
		if err != nil || len(evs) != 1 {
			t.Fatalf("up to the maximum: %v %v", evs, err)
		}
		evs, err = account.Decide(s, env(2, credit("r2", "0.51")))
		wantRefusal(t, err, evs, 422, "invalid_request", map[string]any{"field": "amount", "maxBalance": "1000000000000"})
	})
	t.Run("a starting balance above the maximum", func(t *testing.T) {
		open := &tenantcmd.OpenAccount{TenantID: "firm", AccountNumber: "EV1", Currency: "USD", StartingBalance: dec("1000000000.01")}
		wantRefusal(t, open.Validate(), nil, 422, "invalid_request", map[string]any{"field": "startingBalance", "max": "1000000000"})
	})
}

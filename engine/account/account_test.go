package account_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

var (
	t0  = time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	dec = events.MustDecimal
)

func ptr(s string) *events.Decimal { d := dec(s); return &d }

// mkt quotes BTC-PERP at bid/ask and permits BTC-PERP (max 100) and ES (multiplier 50).
func mkt(bid, ask string) trading.Market {
	return trading.Market{
		Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: dec(bid), Ask: dec(ask), At: t0}},
		Specs: map[string]trading.Spec{
			"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: dec("1"), MaxQuantity: dec("100")},
			"ES":       {Symbol: "ES", Multiplier: dec("50"), MaxQuantity: dec("50")},
		},
	}
}

func env(n int, cmd commands.Command) commands.Envelope {
	id := ulid.MustParse("01J00000000000000000000000")
	id[15] = byte(n)
	return commands.Envelope{ID: id, At: t0, Cmd: cmd}
}

// run applies given commands through Decide+Apply, then decides when.
func run(t *testing.T, given []commands.Command, when commands.Command) (*account.State, []events.Event, error) {
	t.Helper()
	s := account.New("a1")
	for i, c := range append([]commands.Command{&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("50000")}}, given...) {
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

func buy(id, qty string, m trading.Market) *trading.PlaceOrder {
	return &trading.PlaceOrder{ClientOrderID: id, Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: dec(qty), TimeInForce: "day", Market: m}
}

func sell(id, qty string, m trading.Market) *trading.PlaceOrder {
	c := buy(id, qty, m)
	c.Side = "sell"
	return c
}

func limit(id, side, qty, px string, m trading.Market) *trading.PlaceOrder {
	c := buy(id, qty, m)
	c.Side, c.OrderType, c.LimitPrice = side, "limit", ptr(px)
	return c
}

func TestRefusals(t *testing.T) {
	m := mkt("100", "101")
	noQuote := mkt("100", "101")
	delete(noQuote.Quotes, "BTC-PERP")
	cases := []struct {
		name       string
		given      []commands.Command
		when       commands.Command
		wantCode   string
		wantStatus int
	}{
		{"repeated clientOrderId is a conflict", []commands.Command{buy("c1", "1", m)}, buy("c1", "1", m), "idempotency_conflict", 409},
		{"repeated clientOrderId after the order ended is still a conflict", []commands.Command{buy("c1", "1", m), sell("c2", "1", m)}, sell("c1", "1", m), "idempotency_conflict", 409},
		{"reverse reusing an order's clientOrderId is a conflict", []commands.Command{buy("c1", "1", m)}, &trading.Reverse{Instrument: "BTC-PERP", ClientOrderID: "c1", Market: m}, "idempotency_conflict", 409},
		{"instrument outside the book", nil, &trading.PlaceOrder{ClientOrderID: "c1", Instrument: "DOGE-PERP", Side: "buy", OrderType: "market", Quantity: dec("1"), Market: m}, "instrument_not_permitted", 422},
		{"quantity above the per-order limit", nil, buy("c1", "100.5", m), "order_quantity_above_limit", 422},
		{"market order without a price", nil, buy("c1", "1", noQuote), "market_data_unavailable", 422},
		{"reduce-only with no position", nil, &trading.PlaceOrder{ClientOrderID: "c1", Instrument: "BTC-PERP", Side: "sell", OrderType: "market", Quantity: dec("1"), ReduceOnly: true, Market: m}, "position_not_closable", 422},
		{"reduce-only in the position's direction", []commands.Command{buy("c0", "1", m)}, &trading.PlaceOrder{ClientOrderID: "c1", Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: dec("1"), ReduceOnly: true, Market: m}, "position_not_closable", 422},
		{"reduce-only above the position", []commands.Command{buy("c0", "1", m)}, &trading.PlaceOrder{ClientOrderID: "c1", Instrument: "BTC-PERP", Side: "sell", OrderType: "market", Quantity: dec("2"), ReduceOnly: true, Market: m}, "invalid_request", 422},
		{"close without a position", nil, &trading.ClosePosition{Instrument: "BTC-PERP", Market: m}, "position_not_closable", 422},
		{"close more than the position", []commands.Command{buy("c0", "1", m)}, &trading.ClosePosition{Instrument: "BTC-PERP", Quantity: ptr("2"), Market: m}, "invalid_request", 422},
		{"reverse without a position", nil, &trading.Reverse{Instrument: "BTC-PERP", ClientOrderID: "r1", Market: m}, "position_not_closable", 422},
		{"opening again with a different request is a conflict", nil, &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("25000")}, "idempotency_conflict", 409},
		{"cancel of an unknown order", nil, &trading.CancelOrder{BrokerOrderID: "nope"}, "not_found", 404},
		{"cancel of a filled order", []commands.Command{buy("c0", "1", m)}, &trading.CancelOrder{BrokerOrderID: "01J00000000000000000000001"}, "not_found", 404},
		{"replace of an unknown order", nil, &trading.ReplaceOrder{BrokerOrderID: "nope", Quantity: ptr("1")}, "not_found", 404},
		{"replace setting a limit on a stop order", []commands.Command{&trading.PlaceOrder{ClientOrderID: "s1", Instrument: "BTC-PERP", Side: "buy", OrderType: "stop", StopPrice: ptr("200"), Quantity: dec("1"), TimeInForce: "gtc", Market: m}}, &trading.ReplaceOrder{BrokerOrderID: "01J00000000000000000000001", LimitPrice: ptr("150")}, "invalid_request", 422},
		{"account not opened", nil, nil, "not_found", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			var evs []events.Event
			if tc.when == nil {
				evs, err = account.Decide(account.New("x"), env(1, buy("c1", "1", m)))
			} else {
				_, evs, err = run(t, tc.given, tc.when)
			}
			var ref *commands.Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("want refusal %s, got %v (events %v)", tc.wantCode, err, evs)
			}
			if string(ref.Code) != tc.wantCode || commands.StatusOf(ref.Code, ref.Malformed) != tc.wantStatus {
				t.Fatalf("got %s/%d, want %s/%d", ref.Code, commands.StatusOf(ref.Code, ref.Malformed), tc.wantCode, tc.wantStatus)
			}
			if evs != nil {
				t.Fatalf("a refusal recorded events: %v", evs)
			}
		})
	}
}

// Opening an open account with the request that opened it changes nothing.
func TestOpeningTwiceWithTheSameRequestChangesNothing(t *testing.T) {
	open := &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("50000")}
	_, evs, err := run(t, nil, open)
	if err != nil || len(evs) != 0 {
		t.Fatalf("reopen: %v %v", evs, err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		c    trading.PlaceOrder
	}{
		{"bad side", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "long", OrderType: "market", Quantity: dec("1")}},
		{"bad type", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "buy", OrderType: "iceberg", Quantity: dec("1")}},
		{"limit without price", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "buy", OrderType: "limit", Quantity: dec("1")}},
		{"stop without stop price", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "buy", OrderType: "stop", Quantity: dec("1")}},
		{"market with a limit price", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "buy", OrderType: "market", Quantity: dec("1"), LimitPrice: ptr("1")}},
		{"zero quantity", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "buy", OrderType: "market", Quantity: dec("0")}},
		{"negative limit", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "buy", OrderType: "limit", Quantity: dec("1"), LimitPrice: ptr("-1")}},
		{"bad tif", trading.PlaceOrder{ClientOrderID: "c", Instrument: "X", Side: "buy", OrderType: "market", Quantity: dec("1"), TimeInForce: "gtd"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ref *commands.Refusal
			if err := tc.c.Validate(); !errors.As(err, &ref) || ref.Code != "invalid_request" || commands.StatusOf(ref.Code, ref.Malformed) != 422 {
				t.Fatalf("want 422 invalid_request, got %v", err)
			}
		})
	}
	// A malformed identifier is 400, naming the field.
	for name, c := range map[string]trading.PlaceOrder{
		"missing clientOrderId":   {Instrument: "X", Side: "buy", OrderType: "market", Quantity: dec("1")},
		"clientOrderId with NUL":  {ClientOrderID: "c\u0000", Instrument: "X", Side: "buy", OrderType: "market", Quantity: dec("1")},
		"clientOrderId too long":  {ClientOrderID: strings.Repeat("c", 65), Instrument: "X", Side: "buy", OrderType: "market", Quantity: dec("1")},
		"instrument with ESC":     {ClientOrderID: "c", Instrument: "X\x1b[0m", Side: "buy", OrderType: "market", Quantity: dec("1")},
		"clientOrderId with bidi": {ClientOrderID: "c\u202e1", Instrument: "X", Side: "buy", OrderType: "market", Quantity: dec("1")},
	} {
		t.Run(name, func(t *testing.T) {
			var ref *commands.Refusal
			if err := c.Validate(); !errors.As(err, &ref) || ref.Code != "invalid_request" || commands.StatusOf(ref.Code, ref.Malformed) != 400 || ref.Params["field"] == nil {
				t.Fatalf("want 400 invalid_request naming the field, got %v", err)
			}
		})
	}
}

func fills(evs []events.Event) []evacct.OrderFilled {
	var out []evacct.OrderFilled
	for _, e := range evs {
		if f, ok := e.(evacct.OrderFilled); ok {
			out = append(out, f)
		}
	}
	return out
}

func TestTransitions(t *testing.T) {
	m := mkt("100", "101")
	up := mkt("110", "111")
	down := mkt("90", "91")
	cases := []struct {
		name        string
		given       []commands.Command
		when        commands.Command
		wantFills   int
		wantPrice   string // of the last fill
		wantPos     string // signed position after
		wantBalance string
		wantWorking int
	}{
		{"market buy fills at the ask", nil, buy("c1", "2", m), 1, "101", "2", "50000", 0},
		{"market sell fills at the bid", nil, sell("c1", "2", m), 1, "100", "-2", "50000", 0},
		{"closing a long realizes the difference", []commands.Command{buy("c1", "2", m)}, sell("c2", "2", up), 1, "110", "0", "50018", 0},
		{"closing a short at a loss", []commands.Command{sell("c1", "2", m)}, buy("c2", "2", up), 1, "111", "0", "49978", 0},
		{"selling through a long flips it short", []commands.Command{buy("c1", "1", m)}, sell("c2", "3", up), 1, "110", "-2", "50009", 0},
		{"adding averages the price", []commands.Command{buy("c1", "1", m)}, buy("c2", "1", up), 1, "111", "2", "50000", 0},
		{"limit below the ask rests", nil, limit("l1", "buy", "1", "95", m), 0, "", "0", "50000", 1},
		{"marketable limit fills at the touch", nil, limit("l1", "buy", "1", "105", m), 1, "101", "1", "50000", 0},
		{"ioc limit that does not cross is canceled", nil, &trading.PlaceOrder{ClientOrderID: "i1", Instrument: "BTC-PERP", Side: "buy", OrderType: "limit", LimitPrice: ptr("95"), Quantity: dec("1"), TimeInForce: "ioc", Market: m}, 0, "", "0", "50000", 0},
		{"resting limit fills when the touch crosses", []commands.Command{limit("l1", "buy", "1", "95", m)}, &trading.FillWorking{Quote: down.Quotes["BTC-PERP"]}, 1, "91", "1", "50000", 0},
		{"resting limit stays when the touch does not cross", []commands.Command{limit("l1", "buy", "1", "95", m)}, &trading.FillWorking{Quote: up.Quotes["BTC-PERP"]}, 0, "", "0", "50000", 1},
		{"buy stop triggers and fills at the ask", []commands.Command{&trading.PlaceOrder{ClientOrderID: "s1", Instrument: "BTC-PERP", Side: "buy", OrderType: "stop", StopPrice: ptr("105"), Quantity: dec("1"), TimeInForce: "gtc", Market: m}}, &trading.FillWorking{Quote: up.Quotes["BTC-PERP"]}, 1, "111", "1", "50000", 0},
		{"buy stop an earlier quote traded through triggers and fills at this ask", []commands.Command{&trading.PlaceOrder{ClientOrderID: "s1", Instrument: "BTC-PERP", Side: "buy", OrderType: "stop", StopPrice: ptr("105"), Quantity: dec("1"), TimeInForce: "gtc", Market: m}}, &trading.FillWorking{Quote: m.Quotes["BTC-PERP"], TradedThrough: []string{"01J00000000000000000000001"}}, 1, "101", "1", "50000", 0},
		{"a traded-through name that is no working stop changes nothing", []commands.Command{&trading.PlaceOrder{ClientOrderID: "s1", Instrument: "BTC-PERP", Side: "buy", OrderType: "stop", StopPrice: ptr("105"), Quantity: dec("1"), TimeInForce: "gtc", Market: m}, limit("l1", "buy", "1", "95", m)}, &trading.FillWorking{Quote: m.Quotes["BTC-PERP"], TradedThrough: []string{"01J00000000000000000000002", "other"}}, 0, "", "0", "50000", 2},
		{"a resting limit an earlier quote touched fills at its limit", []commands.Command{limit("l1", "buy", "1", "95", m)}, &trading.FillWorking{Quote: up.Quotes["BTC-PERP"], Touched: []string{"01J00000000000000000000001"}}, 1, "95", "1", "50000", 0},
		{"a touched limit the touch now betters fills at the touch", []commands.Command{limit("l1", "buy", "1", "95", m)}, &trading.FillWorking{Quote: down.Quotes["BTC-PERP"], Touched: []string{"01J00000000000000000000001"}}, 1, "91", "1", "50000", 0},
		{"a touched name that is no resting limit changes nothing", []commands.Command{&trading.PlaceOrder{ClientOrderID: "s1", Instrument: "BTC-PERP", Side: "buy", OrderType: "stop", StopPrice: ptr("105"), Quantity: dec("1"), TimeInForce: "gtc", Market: m}, limit("l1", "buy", "1", "95", m)}, &trading.FillWorking{Quote: m.Quotes["BTC-PERP"], Touched: []string{"01J00000000000000000000001", "other"}}, 0, "", "0", "50000", 2},
		{"stop-limit triggers and rests when above its limit", []commands.Command{&trading.PlaceOrder{ClientOrderID: "s1", Instrument: "BTC-PERP", Side: "buy", OrderType: "stop_limit", StopPrice: ptr("105"), LimitPrice: ptr("106"), Quantity: dec("1"), TimeInForce: "gtc", Market: m}}, &trading.FillWorking{Quote: up.Quotes["BTC-PERP"]}, 0, "", "0", "50000", 1},
		{"cancel ends a working order", []commands.Command{limit("l1", "buy", "1", "95", m)}, &trading.CancelOrder{BrokerOrderID: "01J00000000000000000000001"}, 0, "", "0", "50000", 0},
		{"replace into the market fills", []commands.Command{limit("l1", "buy", "1", "95", m)}, &trading.ReplaceOrder{BrokerOrderID: "01J00000000000000000000001", LimitPrice: ptr("102"), Market: m}, 1, "101", "1", "50000", 0},
		{"close takes the whole position", []commands.Command{buy("c1", "2", m)}, &trading.ClosePosition{Instrument: "BTC-PERP", Market: up}, 1, "110", "0", "50018", 0},
		{"partial close", []commands.Command{buy("c1", "2", m)}, &trading.ClosePosition{Instrument: "BTC-PERP", Quantity: ptr("0.5"), Market: up}, 1, "110", "1.5", "50004.5", 0},
		{"flatten cancels and closes", []commands.Command{buy("c1", "2", m), limit("l1", "buy", "1", "95", m)}, &trading.Flatten{Market: up}, 1, "110", "0", "50018", 0},
		{"reverse turns a long short", []commands.Command{buy("c1", "2", m)}, &trading.Reverse{Instrument: "BTC-PERP", ClientOrderID: "r1", Market: up}, 1, "110", "-2", "50018", 0},
		{"reduce-only resting order is canceled once the position is gone", []commands.Command{buy("c1", "1", m), &trading.PlaceOrder{ClientOrderID: "tp", Instrument: "BTC-PERP", Side: "sell", OrderType: "limit", LimitPrice: ptr("120"), Quantity: dec("1"), ReduceOnly: true, TimeInForce: "gtc", Market: m}, sell("c2", "1", m)}, &trading.FillWorking{Quote: mkt("125", "126").Quotes["BTC-PERP"]}, 0, "", "0", "49999", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, evs, err := run(t, tc.given, tc.when)
			if err != nil {
				t.Fatal(err)
			}
			fs := fills(evs)
			if len(fs) != tc.wantFills {
				t.Fatalf("fills %d, want %d: %v", len(fs), tc.wantFills, evs)
			}
			if tc.wantPrice != "" && fs[len(fs)-1].Price.Cmp(dec(tc.wantPrice)) != 0 {
				t.Fatalf("price %s, want %s", fs[len(fs)-1].Price, tc.wantPrice)
			}
			for _, e := range evs {
				s = account.Apply(s, e)
			}
			pos := s.Positions["BTC-PERP"].Quantity
			if pos.Cmp(dec(tc.wantPos)) != 0 {
				t.Fatalf("position %s, want %s", pos, tc.wantPos)
			}
			if s.Balance.Cmp(dec(tc.wantBalance)) != 0 {
				t.Fatalf("balance %s, want %s", s.Balance, tc.wantBalance)
			}
			if len(s.Working) != tc.wantWorking {
				t.Fatalf("working %d, want %d", len(s.Working), tc.wantWorking)
			}
		})
	}
}

// Every kind of account event, decided live, then written to the log in
// both encodings and read back, rebuilds the whole live state: positions,
// working orders, keys, the ledger, risk and firm state, field for field.
func TestReplayRebuildsTheSameState(t *testing.T) {
	// The account's events and the Idempotency-Key record of its venue-door writes.
	registry := events.Merge(account.Registry(), evidem.Registry())
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New:      func() *account.State { return account.New("a1") },
		Decide:   account.Decide,
		Apply:    account.Apply,
		Registry: registry,
	})
	at := t0 // a Monday, 14:00 UTC
	n := 0
	seen := map[string]bool{}
	do := func(cmd commands.Command) []events.Event {
		t.Helper()
		if err := cmd.Validate(); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[14], id[15] = byte(n>>8), byte(n)
		evs := r.Do(commands.Envelope{ID: id, At: at, Key: fmt.Sprint("k", n), Principal: events.Principal{TenantID: "firm", KeyID: "key1"}, Cmd: cmd})
		for _, e := range evs {
			seen[e.Type()] = true
		}
		return evs
	}
	order := func(clientOrderID string) string { return r.Live().OrderID(clientOrderID) }
	m := mkt("100", "101")
	stopLimit := limit("sl1", "buy", "1", "125", m)
	stopLimit.OrderType, stopLimit.StopPrice = "stop_limit", ptr("120")
	stop := sell("st1", "1", m)
	stop.OrderType, stop.StopPrice = "stop", ptr("95")
	gtc := limit("g1", "buy", "1", "90", m)
	gtc.TimeInForce = "gtc"

	do(&tenantcmd.OpenAccount{TenantID: "firm", Broker: "paper", AccountNumber: "EV1", Label: "Evaluation 1", Currency: "USD",
		StartingBalance: dec("50000.00"), Kind: "evaluation", Email: "ev1@example.com", ReferenceID: "open-1"})
	do(settings(func(c *riskcmd.SetSettings) {
		c.DailyLossEnabled, c.DailyLossValue = on(), num("100")
		c.WeeklyProfitEnabled, c.WeeklyProfitValue = on(), num("5000.50")
	}))
	do(buy("c1", "2", m))
	do(limit("l1", "sell", "1", "130", m))
	do(gtc)
	do(stopLimit)
	do(stop)
	do(&trading.ReplaceOrder{BrokerOrderID: order("l1"), Quantity: ptr("2.0"), LimitPrice: ptr("131.00"), Market: m})
	at = at.Add(time.Minute)
	do(&trading.FillWorking{Quote: mkt("125.5", "126").Quotes["BTC-PERP"]}) // sl1 triggers, its limit not reached
	do(&trading.FillWorking{Quote: mkt("131", "132").Quotes["BTC-PERP"]})   // l1 fills, closing c1
	do(&trading.CancelOrder{BrokerOrderID: order("g1")})
	do(&firmcmd.BalanceOp{ReferenceID: "r1", AccountNumber: "EV1", Op: "credit", Amount: dec("10.50"), Env: "sandbox"})
	do(&firmcmd.BalanceOp{ReferenceID: "r2", AccountNumber: "EV1", Op: "debit", Amount: dec("5"), Env: "sandbox"})
	do(&firmcmd.HaltAccount{})
	do(&firmcmd.ResumeAccount{})
	keyed := func(key string, cmd commands.Command) { // a venue-door write: the key recorded with its answer
		t.Helper()
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[14], id[15] = byte(n>>8), byte(n)
		for _, e := range r.Do(commands.Envelope{ID: id, At: at, Key: key, Digest: "digest-" + key, Principal: events.Principal{TenantID: "firm", KeyID: "vk1"}, Cmd: cmd}) {
			seen[e.Type()] = true
		}
	}
	keyed("halt-1", &firmcmd.HaltAccount{})
	keyed("resume-1", &firmcmd.ResumeAccount{})
	do(&firmcmd.HoldForReconciliation{Reason: "a broker statement to check", By: "op-1"})
	do(&firmcmd.ReleaseReconciliation{By: "op-1"})
	at = at.Add(time.Minute)
	do(buy("c2", "3", m))
	do(&riskcmd.Evaluate{Market: mkt("40", "41")}) // the daily loss fires: cancels and flattens
	do(&riskcmd.Unlock{})
	at = at.Add(time.Minute)
	do(buy("c3", "1", m))
	do(&trading.Reverse{Instrument: "BTC-PERP", ClientOrderID: "rv1", Market: m})
	do(&trading.ClosePosition{Instrument: "BTC-PERP", ClientOrderID: "x1", Market: m})
	do(&riskcmd.BreachEvaluation{Reason: "max drawdown"})
	do(&riskcmd.ReleaseEvaluation{})
	do(limit("d1", "buy", "1", "90", m))
	at = account.DayStart(at).Add(24*time.Hour + time.Second)
	do(&trading.ExpireDayOrders{})
	do(buy("c4", "1", m))
	do(limit("l9", "sell", "1", "200", m))
	tm := tmkt("100", "100.5")
	do(bracketed(buy("bk1", "2", tm), atm(), "100.5"))
	do(quoteAt("104.5", "105")) // breakeven
	do(quoteAt("109", "109.5")) // the target fills, the stop trails
	do(bracketed(limit("bk2", "buy", "1", "95", tm), atm(), "95"))
	bk2 := r.Live().Working[order("bk2")].BracketID
	do(&trading.ChangeBracket{BracketID: bk2, Legs: []trading.LegPrice{{ID: bk2[:len(bk2)-2] + "l0", Price: dec("80")}}, Market: tm})
	do(&trading.CancelOrder{BrokerOrderID: order("bk2")})
	do(&trading.Protect{ClientOrderID: "pr1", EntryOrderID: order("l9"), PlanID: "xp_1", PlanRevision: "rev_1", Plan: planned(atm(), "0"), Market: tm})
	do(&trading.WithdrawBracket{BracketID: r.Live().Working[order("l9")].BracketID})
	do(&trading.Flatten{ClientOrderID: "fl1", Market: m})
	do(&firmcmd.ResetAccount{ReferenceID: "reset-1"})

	for name := range registry {
		// A policy binds only an account a venue issued: TestIssuedAccountReplay records it.
		// A provider account's: TestProviderAccountReplay records them; a login's, TestLoginTokenReplay.
		// An app's provider account's consent: TestLiveConsentReplay.
		if !seen[name] && name != (evacct.RiskPolicyBound{}).Type() && !providerEvents[name] && !loginEvents[name] && !consentEvents[name] {
			t.Errorf("the script records no %s: add a command that does", name)
		}
	}
	r.Check()
}

func TestRegistryNamesMatchTypes(t *testing.T) {
	for name, f := range account.Registry() {
		e, err := f.Decode([]byte(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e.Type() != name {
			t.Fatalf("registry name %s decodes a %s", name, e.Type())
		}
	}
}

func TestDayOrdersExpireAtTheDayBoundary(t *testing.T) {
	m := mkt("100", "101")
	day := limit("d1", "buy", "1", "90", m)
	gtc := limit("g1", "buy", "1", "90", m)
	gtc.TimeInForce = "gtc"
	s, evs, err := run(t, []commands.Command{day, gtc}, &trading.ExpireDayOrders{})
	if err != nil || len(evs) != 0 {
		t.Fatalf("same day: %v %v", evs, err)
	}
	next := env(50, &trading.ExpireDayOrders{})
	next.At = account.DayStart(t0).Add(24 * time.Hour)
	evs, err = account.Decide(s, next)
	if err != nil || len(evs) != 1 {
		t.Fatalf("next day: %v %v", evs, err)
	}
	if c := evs[0].(evacct.OrderCanceled); c.Reason != "expired" || s.Working[c.BrokerOrderID].TimeInForce != "day" {
		t.Fatalf("expired %+v", c)
	}
}

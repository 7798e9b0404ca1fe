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
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evidem "github.com/svc/engine/events/idem"
)

// resting is the provider's report of the limit l1 resting.
func resting(qty, price string) *providercmd.Order {
	return &providercmd.Order{ProviderClientOrderID: pcoid("l1"), ProviderOrderID: "8", Instrument: "BTCUSDT", Side: "buy", OrderType: "limit",
		Status: "working", Quantity: dec(qty), Filled: dec("0"), LimitPrice: ptr(price)}
}

// longAndLimit: a long of 0.01 (c1 filled) and the limit l1 resting.
var longAndLimit = []commands.Command{pbuy("c1", "market"), settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000")),
	pbuy("l1", "limit"), settle("l1", evacct.OutcomeAccepted, resting("0.01", "50000"))}

func replaceKey() string { return providercmd.IntentKey(evacct.IntentReplace, pcoid("l1")) }

func brokerID(t *testing.T, s *account.State, coid string) string {
	t.Helper()
	for id, w := range s.Working {
		if w.ClientOrderID == coid {
			return id
		}
	}
	t.Fatalf("no working order %s", coid)
	return ""
}

func refused(t *testing.T, err error, code commands.Code) {
	t.Helper()
	var r *commands.Refusal
	if !errors.As(err, &r) || r.Code != code {
		t.Fatalf("err %v, want %s", err, code)
	}
}

// A replace of a resting limit is one replace intent under the order's
// client order id, the order as changed; the book changes when the
// provider's acceptance is recorded, and not on a rejection.
func TestProviderReplace(t *testing.T) {
	s, _, _ := provide(t, evacct.ProviderSettings{}, longAndLimit, &trading.FillWorking{})
	id := brokerID(t, s, "l1")
	evs, err := account.Decide(s, env(50, &trading.ReplaceOrder{BrokerOrderID: id, Quantity: ptr("0.02"), LimitPrice: ptr("50500")}))
	if err != nil || len(evs) != 1 {
		t.Fatalf("replace: %v %v", evs, err)
	}
	in, ok := evs[0].(evacct.OrderIntended)
	if !ok || in.Op != evacct.IntentReplace || in.ProviderClientOrderID != pcoid("l1") || in.Order.Quantity.Cmp(dec("0.02")) != 0 ||
		in.Order.LimitPrice.Cmp(dec("50500")) != 0 || in.Order.BrokerOrderID != id {
		t.Fatalf("intent %+v", evs[0])
	}
	replace := &trading.ReplaceOrder{BrokerOrderID: id, Quantity: ptr("0.02"), LimitPrice: ptr("50500")}
	after := func(then ...commands.Command) *account.State { // Apply changes its state: each case folds its own
		s, _, _ := provide(t, evacct.ProviderSettings{}, append(append(longAndLimit[:len(longAndLimit):len(longAndLimit)], replace), then...),
			&trading.FillWorking{})
		return s
	}
	_, err = account.Decide(after(), env(51, &trading.ReplaceOrder{BrokerOrderID: id, LimitPrice: ptr("50600")}))
	refused(t, err, commands.CodeOutcomeUnknown)

	s2 := after(&providercmd.Settle{Key: replaceKey(), Outcome: evacct.OutcomeAccepted})
	if w := s2.Working[id]; w.Quantity.Cmp(dec("0.02")) != 0 || w.LimitPrice.Cmp(dec("50500")) != 0 || len(s2.OpenIntents()) != 0 {
		t.Fatalf("after acceptance %+v, intents %v", w, s2.OpenIntents())
	}
	s3 := after(&providercmd.Settle{Key: replaceKey(), Outcome: evacct.OutcomeRejected, Code: -5027})
	if w := s3.Working[id]; w.Quantity.Cmp(dec("0.01")) != 0 || w.LimitPrice.Cmp(dec("50000")) != 0 || len(s3.OpenIntents()) != 0 {
		t.Fatalf("after rejection %+v, intents %v", w, s3.OpenIntents())
	}
	if _, err := account.Decide(s3, env(54, &trading.ReplaceOrder{BrokerOrderID: id, LimitPrice: ptr("50600")})); err != nil {
		t.Fatalf("a replace after the rejection: %v", err)
	}
	if st := s3.Provider.Replaced[pcoid("l1")]; st.Outcome != evacct.OutcomeRejected || s2.Provider.Replaced[pcoid("l1")].Outcome != evacct.OutcomeAccepted {
		t.Fatalf("the replace's settlement as the answer reads it: %+v, %+v", st, s2.Provider.Replaced)
	}
	if evs, err := account.Decide(s3, env(55, &trading.ReplaceOrder{BrokerOrderID: id, Quantity: ptr("0.01"), LimitPrice: ptr("50000")})); err != nil || len(evs) != 0 {
		t.Fatalf("a replace that changes nothing: %v %v", evs, err)
	}
}

func TestProviderRouteRefusals(t *testing.T) {
	s, _, _ := provide(t, evacct.ProviderSettings{}, longAndLimit, &trading.FillWorking{})
	id := brokerID(t, s, "l1")
	for _, tc := range []struct {
		name string
		cmd  commands.Command
		code commands.Code
	}{
		{"a replace of no working order", &trading.ReplaceOrder{BrokerOrderID: "nope", LimitPrice: ptr("1")}, commands.CodeNotFound},
		{"a stop price on a limit", &trading.ReplaceOrder{BrokerOrderID: id, StopPrice: ptr("49000")}, commands.CodeInvalidRequest},
		{"a quantity at or below the filled", &trading.ReplaceOrder{BrokerOrderID: id, Quantity: ptr("0")}, commands.CodeInvalidRequest},
		{"a reverse with no position", &trading.Reverse{Instrument: "ETHUSDT", ClientOrderID: "r9"}, commands.CodePositionNotClosable},
		{"a reverse under a used clientOrderId", &trading.Reverse{Instrument: "BTCUSDT", ClientOrderID: "c1"}, commands.CodeIdempotencyConflict},
		{"a flatten under a used clientOrderId", &trading.Flatten{ClientOrderID: "c1"}, commands.CodeIdempotencyConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := account.Decide(s, env(60, tc.cmd))
			refused(t, err, tc.code)
		})
	}
	hedged, _, _ := provide(t, evacct.ProviderSettings{}, append(longAndLimit[:2:2],
		&providercmd.Observe{Cause: "stream", Settings: &evacct.ProviderSettings{HedgeMode: true}}), &trading.FillWorking{})
	_, err := account.Decide(hedged, env(61, &trading.Reverse{Instrument: "BTCUSDT", ClientOrderID: "r1"}))
	refused(t, err, commands.CodeHedgePositionMode)
}

// A reverse is one market order for twice the position, the other way, not
// reduce-only, under the request's clientOrderId.
func TestProviderReverse(t *testing.T) {
	_, evs, err := provide(t, evacct.ProviderSettings{}, longAndLimit, &trading.Reverse{Instrument: "BTCUSDT", ClientOrderID: "r1"})
	if err != nil || len(evs) != 1 {
		t.Fatalf("reverse: %v %v", evs, err)
	}
	in := evs[0].(evacct.OrderIntended)
	if in.Op != evacct.IntentPlace || in.ProviderClientOrderID != pcoid("r1") || in.Order.Side != "sell" || in.Order.OrderType != "market" ||
		in.Order.Quantity.Cmp(dec("0.02")) != 0 || in.Order.ReduceOnly {
		t.Fatalf("intent %+v", in)
	}
}

// A flatten is a cancel intent per working order and a reduce-only market
// close per position, the first under the request's clientOrderId; again
// while they are open it sends no second cancel or close, and its key is
// outcome_unknown.
func TestProviderFlatten(t *testing.T) {
	s, evs, err := provide(t, evacct.ProviderSettings{}, longAndLimit, &trading.Flatten{ClientOrderID: "f1"})
	if err != nil || len(evs) != 2 {
		t.Fatalf("flatten: %v %v", evs, err)
	}
	cancel, closing := evs[0].(evacct.OrderIntended), evs[1].(evacct.OrderIntended)
	if cancel.Op != evacct.IntentCancel || cancel.ProviderClientOrderID != pcoid("l1") {
		t.Fatalf("cancel %+v", cancel)
	}
	if closing.Op != evacct.IntentPlace || closing.ProviderClientOrderID != pcoid("f1") || closing.Order.Side != "sell" ||
		!closing.Order.ReduceOnly || closing.Order.Quantity.Cmp(dec("0.01")) != 0 {
		t.Fatalf("close %+v", closing)
	}
	for _, e := range evs {
		s = account.Apply(s, e)
	}
	_, err = account.Decide(s, env(70, &trading.Flatten{ClientOrderID: "f1"}))
	refused(t, err, commands.CodeOutcomeUnknown)
	if again, err := account.Decide(s, env(71, &trading.Flatten{})); err != nil || len(again) != 0 {
		t.Fatalf("a flatten while its cancel and close are open: %v %v", again, err)
	}
}

// Replace, reverse and flatten on a provider account, settled, replay to
// the state they left live.
func TestProviderRoutesReplay(t *testing.T) {
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New:      func() *account.State { return account.New("a1") },
		Decide:   account.Decide,
		Apply:    account.Apply,
		Registry: events.Merge(account.Registry(), evidem.Registry()),
	})
	n := 0
	do := func(cmd commands.Command) []events.Event {
		t.Helper()
		n++
		id := ulid.MustParse("01J00000000000000000000000")
		id[15] = byte(n)
		return r.Do(commands.Envelope{ID: id, At: t0.Add(time.Duration(n) * time.Second), Cmd: cmd})
	}
	do(link(evacct.ProviderSettings{}))
	for _, c := range longAndLimit {
		do(c)
	}
	id := r.Live().OrderID("l1")
	do(&trading.ReplaceOrder{BrokerOrderID: id, Quantity: ptr("0.02"), LimitPrice: ptr("50500")})
	do(&providercmd.Settle{Key: replaceKey(), Outcome: evacct.OutcomeAccepted, Order: resting("0.02", "50500")})
	rev := do(&trading.Reverse{Instrument: "BTCUSDT", ClientOrderID: "r1"})[0].(evacct.OrderIntended)
	sold := filled("r1", "0.02", "50100")
	sold.Side, sold.Quantity = "sell", dec("0.02")
	do(&providercmd.Settle{Key: providercmd.IntentKey(evacct.IntentPlace, rev.ProviderClientOrderID), Outcome: evacct.OutcomeAccepted, Order: sold})
	if p := r.Live().Positions["BTCUSDT"]; p.Quantity.Cmp(dec("-0.01")) != 0 {
		t.Fatalf("after the reverse %+v", p)
	}
	for _, e := range do(&trading.Flatten{ClientOrderID: "f1"}) {
		in := e.(evacct.OrderIntended)
		o := &providercmd.Order{ProviderClientOrderID: in.ProviderClientOrderID, Instrument: "BTCUSDT", Side: in.Order.Side,
			OrderType: in.Order.OrderType, Status: "canceled", Quantity: in.Order.Quantity, Filled: dec("0"), LimitPrice: in.Order.LimitPrice}
		if in.Op == evacct.IntentPlace {
			o.Status, o.Filled, o.AvgPrice = "filled", in.Order.Quantity, ptr("50200")
		}
		do(&providercmd.Settle{Key: providercmd.IntentKey(in.Op, in.ProviderClientOrderID), Outcome: evacct.OutcomeAccepted, Order: o})
	}
	if s := r.Live(); len(s.Positions) != 0 || len(s.Working) != 0 || len(s.OpenIntents()) != 0 {
		t.Fatalf("after the flatten: positions %v working %d intents %v", s.Positions, len(s.Working), s.OpenIntents())
	}
	r.Check()
}

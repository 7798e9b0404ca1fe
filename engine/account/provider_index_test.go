package account_test

import (
	"errors"
	"testing"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// A provider account keeps only its working orders' provider ids in its
// state; an order that ended is found through the index by its provider
// id, so a late or repeated report of it (a reconciliation that lists it
// again) adopts no order and moves no money, and its clientOrderId still
// answers 409 naming it; a report the log cannot confirm decides nothing.
func TestAnEndedProviderOrderIsKnownThroughTheIndex(t *testing.T) {
	log := map[uint64][]events.Event{}
	var down error
	s := account.New("a1")
	s.UseFinder(func(seq uint64) ([]events.Event, error) {
		if down != nil {
			return nil, down
		}
		return log[seq], nil
	})
	seq := uint64(0)
	do := func(cmd commands.Command) ([]events.Event, error) {
		t.Helper()
		seq++
		evs, err := account.Decide(s, env(int(seq), cmd))
		if err != nil {
			return nil, err
		}
		log[seq] = evs
		s = account.Fold(s, seq, evs)
		return evs, nil
	}
	must := func(cmd commands.Command) []events.Event {
		t.Helper()
		evs, err := do(cmd)
		if err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		return evs
	}
	must(link(evacct.ProviderSettings{}))
	must(pbuy("c1", "market"))
	must(settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000")))
	must(pbuy("l1", "limit"))
	must(settle("l1", evacct.OutcomeAccepted, &providercmd.Order{ProviderClientOrderID: pcoid("l1"), Instrument: "BTCUSDT", Side: "buy",
		OrderType: "limit", Status: "working", Quantity: dec("0.01"), Filled: dec("0"), LimitPrice: ptr("50000")}))
	if len(s.Provider.Orders) != 1 || s.Provider.Orders[pcoid("l1")] == "" || len(s.Provider.Placed) != 0 {
		t.Fatalf("the provider state holds %d order ids and %d placements, want the working one only", len(s.Provider.Orders), len(s.Provider.Placed))
	}
	c1 := s.OrderID("c1")
	balance := s.Balance
	late := &providercmd.Observe{Cause: "gap", Orders: []providercmd.Order{*filled("c1", "0.01", "50000")}}
	for _, e := range must(late) {
		if p, ok := e.(evacct.OrderPlaced); ok {
			t.Fatalf("a report of an order that ended adopted it again as %s", p.Order.BrokerOrderID)
		}
		if f, ok := e.(evacct.OrderFilled); ok {
			t.Fatalf("a report of an order that ended filled it again: %+v", f)
		}
	}
	if s.Balance.Cmp(balance) != 0 {
		t.Fatalf("balance %s after the late report, want %s", s.Balance, balance)
	}
	var ref *commands.Refusal
	if _, err := do(pbuy("c1", "market")); !errors.As(err, &ref) || ref.Code != commands.CodeIdempotencyConflict || ref.Params["brokerOrderId"] != c1 {
		t.Fatalf("the ended order's clientOrderId again: %v, want 409 naming %s", err, c1)
	}
	down = errors.New("no responders")
	if _, err := do(late); err == nil || errors.As(err, &ref) {
		t.Fatalf("a report the log could not confirm answered %v, want the log's error", err)
	}
}

package jepsen

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// op is an attempt on [call, ret] (ret < 0: unknown, open to the end).
func op(client int, call, ret int64, in, out any) porcupine.Operation {
	if ret < 0 {
		ret = 1000
	}
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

func TestOrderModel(t *testing.T) {
	limit := orderIn{Kind: KindPlace, OrderType: "limit"}
	cancel := func(id string) orderIn { return orderIn{Kind: KindCancel, CancelID: id} }
	ok := func(id string) orderOut { return orderOut{Outcome: OK, OrderID: id, State: "working"} }
	dup := func(id string) orderOut { return orderOut{Outcome: Dup, OrderID: id} }
	for _, c := range []struct {
		name string
		hist []porcupine.Operation
		want bool
	}{
		{"one place, its repeat answered 409 naming it", []porcupine.Operation{
			op(0, 0, 10, limit, ok("a")), op(1, 5, 20, limit, dup("a"))}, true},
		{"two concurrent places, one 409", []porcupine.Operation{
			op(0, 0, 10, limit, dup("a")), op(1, 1, 9, limit, ok("a"))}, true},
		{"two places both acknowledged", []porcupine.Operation{
			op(0, 0, 10, limit, ok("a")), op(1, 1, 9, limit, ok("b"))}, false},
		{"a 409 naming another order", []porcupine.Operation{
			op(0, 0, 10, limit, ok("a")), op(1, 20, 30, limit, dup("b"))}, false},
		{"a 409 before anything was placed", []porcupine.Operation{
			op(0, 0, 10, limit, dup("a")), op(1, 20, 30, limit, ok("a"))}, false},
		{"an unknown place settled by its retry's 409", []porcupine.Operation{
			op(0, 0, -1, limit, orderOut{Outcome: Unknown}), op(0, 20, 30, limit, dup("a"))}, true},
		{"a place refused before anything was recorded, then 409", []porcupine.Operation{
			op(0, 0, 10, limit, orderOut{Outcome: Fail}), op(0, 20, 30, limit, dup("a"))}, false},
		{"a cancel of the working order, then one refused", []porcupine.Operation{
			op(0, 0, 10, limit, ok("a")), op(1, 20, 30, cancel("a"), orderOut{Outcome: OK}),
			op(2, 40, 50, cancel("a"), orderOut{Outcome: Refused, Code: "not_found"})}, true},
		{"a cancel refused while the order works", []porcupine.Operation{
			op(0, 0, 10, limit, ok("a")), op(1, 20, 30, cancel("a"), orderOut{Outcome: Refused, Code: "not_found"})}, false},
		{"two cancels of one order both done", []porcupine.Operation{
			op(0, 0, 10, limit, ok("a")), op(1, 20, 30, cancel("a"), orderOut{Outcome: OK}),
			op(2, 21, 31, cancel("a"), orderOut{Outcome: OK})}, false},
		{"a market order filled cannot be canceled", []porcupine.Operation{
			op(0, 0, 10, orderIn{Kind: KindPlace, OrderType: "market"}, orderOut{Outcome: OK, OrderID: "a", State: "filled"}),
			op(1, 20, 30, cancel("a"), orderOut{Outcome: OK})}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(OrderModel, c.hist); got != c.want {
				t.Errorf("linearizable: %v, want %v", got, c.want)
			}
		})
	}
}

func TestBalanceModel(t *testing.T) {
	credit := func(ref string, c int64) balanceIn { return balanceIn{Ref: ref, Op: "credit", Cents: c} }
	debit := func(ref string, c int64) balanceIn { return balanceIn{Ref: ref, Op: "debit", Cents: c} }
	ok, dup := balanceOut{Outcome: OK}, balanceOut{Outcome: Dup}
	short := balanceOut{Outcome: Refused, Code: "balance_refused"}
	for _, c := range []struct {
		name string
		hist []porcupine.Operation
		want bool
	}{
		{"a debit past the balance refused", []porcupine.Operation{
			op(0, 0, 10, debit("a", 200), short)}, true},
		{"a debit within the balance refused", []porcupine.Operation{
			op(0, 0, 10, debit("a", 50), short)}, false},
		{"a credit makes room for a debit after it", []porcupine.Operation{
			op(0, 0, 10, credit("a", 150), ok), op(1, 20, 30, debit("b", 200), ok)}, true},
		{"a debit done before the credit that pays it", []porcupine.Operation{
			op(1, 0, 10, debit("b", 200), ok), op(0, 20, 30, credit("a", 150), ok)}, false},
		{"concurrent: either order, as long as one fits", []porcupine.Operation{
			op(0, 0, 30, credit("a", 150), ok), op(1, 5, 25, debit("b", 200), ok)}, true},
		{"the same reference and body again: its receipt", []porcupine.Operation{
			op(0, 0, 10, credit("a", 10), ok), op(1, 20, 30, credit("a", 10), ok)}, true},
		{"another body under a used reference: 409", []porcupine.Operation{
			op(0, 0, 10, credit("a", 10), ok), op(1, 20, 30, credit("a", 11), dup)}, true},
		{"a 409 for a reference never used", []porcupine.Operation{
			op(1, 20, 30, credit("a", 11), dup)}, false},
		{"an unknown credit that explains a later debit", []porcupine.Operation{
			op(0, 0, -1, credit("a", 150), balanceOut{Outcome: Unknown}), op(1, 20, 30, debit("b", 200), ok)}, true},
		{"a failed credit cannot explain a later debit", []porcupine.Operation{
			op(0, 0, 10, credit("a", 150), balanceOut{Outcome: Fail}), op(1, 20, 30, debit("b", 200), ok)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(BalanceModel(100), c.hist); got != c.want {
				t.Errorf("linearizable: %v, want %v", got, c.want)
			}
		})
	}
}

// The checker's verdicts on an account's log: a chain of expectations, one
// order per clientOrderId, the state at a revision.
func TestAccountLogAt(t *testing.T) {
	a := &accountLog{}
	a.commits = []commitFact{{seq: 3, prev: 0, hasPrev: true}, {seq: 7, prev: 3, hasPrev: true}, {seq: 9, prev: 3, hasPrev: true}, {seq: 12}}
	k := &Checker{rep: &Report{}, logs: map[string]*accountLog{"A": a}}
	k.fencing()
	if len(k.rep.Anomalies) != 2 {
		t.Fatalf("anomalies %v, want the fork at 9 and the unfenced 12", k.rep.Anomalies)
	}
}

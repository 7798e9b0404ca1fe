package jepsen

import (
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/svc/engine/commands"
)

// The models porcupine checks the writes against. An account's orders are
// independent objects, one per clientOrderId (a place and the cancels of the
// order it placed touch nothing else), so the orders' history is checked
// per clientOrderId, which is equivalent (linearizability is local) and
// keeps the search small; that two clientOrderIds never share a
// brokerOrderId is an invariant of check.go. An account's balance
// operations all meet in its balance: one object per account.
//
// Reads are not here: the engine serves them from read models, which
// promise read-your-writes (X-Engine-After) and frames "as of one moment",
// not linearizable reads; check.go holds each read to the log's state at
// the revision it names.
//
// Every attempt is an operation. Fail (retry-safe 503) and Refused leave
// the state as it was, so a write answered so that still happened shows up
// as a later answer the model cannot explain. Unknown may have happened or
// not (a nondeterministic step), anywhere from its call to the end of time.

// orderIn is a place (OrderType) or a cancel (CancelID) of one clientOrderId.
type orderIn struct {
	Kind      string
	OrderType string
	CancelID  string
}

type orderOut struct {
	Outcome string
	OrderID string
	State   string
	Code    string
}

// orderState is one clientOrderId's order: none, or placed with its id ("":
// placed by an attempt whose answer was lost, bound by the first answer
// that names it) and status.
type orderState struct {
	Placed bool
	ID     string
	Status string // working, filled, canceled
}

func orderStep(st, in, out any) []any {
	s, i, o := st.(orderState), in.(orderIn), out.(orderOut)
	same := func(id string) bool { return s.ID == "" || s.ID == id }
	switch i.Kind {
	case KindPlace:
		switch o.Outcome {
		case OK:
			if s.Placed {
				return nil // a used clientOrderId answers 409, never a second order
			}
			return []any{orderState{Placed: true, ID: o.OrderID, Status: answered(o.State)}}
		case Dup:
			if !s.Placed || !same(o.OrderID) {
				return nil
			}
			s.ID = o.OrderID
			return []any{s}
		case Refused:
			if s.Placed {
				return nil
			}
			return []any{s}
		case Fail:
			return []any{s}
		case Unknown:
			if s.Placed {
				return []any{s}
			}
			status := "working"
			if i.OrderType == "market" {
				status = "filled"
			}
			return []any{s, orderState{Placed: true, Status: status}}
		}
	case KindCancel:
		working := s.Placed && s.Status == "working" && same(i.CancelID)
		switch o.Outcome {
		case OK:
			if !working {
				return nil
			}
			return []any{orderState{Placed: true, ID: i.CancelID, Status: "canceled"}}
		case Refused:
			if working && o.Code == string(commands.CodeNotFound) {
				return nil
			}
			return []any{s}
		case Fail:
			return []any{s}
		case Unknown:
			if !working {
				return []any{s}
			}
			return []any{s, orderState{Placed: true, ID: i.CancelID, Status: "canceled"}}
		}
	}
	return nil
}

// answered is the status an order's answered state leaves it in.
func answered(state string) string {
	switch state {
	case "filled", "canceled", "rejected", "expired":
		if state == "filled" {
			return "filled"
		}
		return "canceled"
	}
	return "working"
}

// OrderModel is the model of one clientOrderId's order.
var OrderModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{orderState{}} },
	Step: orderStep,
	DescribeOperation: func(in, out any) string {
		i, o := in.(orderIn), out.(orderOut)
		what := i.Kind + " " + i.OrderType
		if i.Kind == KindCancel {
			what = "cancel " + i.CancelID
		}
		s := what + " -> " + o.Outcome
		if o.OrderID != "" {
			s += " " + o.OrderID
		}
		if o.State != "" {
			s += " " + o.State
		}
		if o.Code != "" {
			s += " " + o.Code
		}
		return s
	},
	DescribeState: func(st any) string {
		s := st.(orderState)
		if !s.Placed {
			return "none"
		}
		return fmt.Sprintf("%s %s", s.ID, s.Status)
	},
}).ToModel()

// balanceIn is one balance operation.
type balanceIn struct {
	Ref   string
	Op    string // credit or debit
	Cents int64
}

type balanceOut struct {
	Outcome string
	Code    string
}

// balanceState is an account's balance and the operations recorded under
// their references; h hashes the references (xor of each one's hash), so
// equal states hash equal whatever the order they were recorded in.
type balanceState struct {
	Cents int64
	Refs  map[string]balanceIn
	h     uint64
}

func refHash(b balanceIn) uint64 {
	f := fnv.New64a()
	fmt.Fprintf(f, "%s|%s|%d", b.Ref, b.Op, b.Cents)
	return f.Sum64()
}

func (s balanceState) with(b balanceIn) balanceState {
	refs := maps.Clone(s.Refs)
	if refs == nil {
		refs = map[string]balanceIn{}
	}
	refs[b.Ref] = b
	d := b.Cents
	if b.Op == "debit" {
		d = -d
	}
	return balanceState{Cents: s.Cents + d, Refs: refs, h: s.h ^ refHash(b)}
}

func balanceStep(st, in, out any) []any {
	s, i, o := st.(balanceState), in.(balanceIn), out.(balanceOut)
	prev, used := s.Refs[i.Ref]
	fits := i.Op == "credit" || s.Cents >= i.Cents
	switch o.Outcome {
	case OK:
		if used {
			if prev != i {
				return nil // another body under a used reference is 409
			}
			return []any{s} // the original receipt again
		}
		if !fits {
			return nil // a debit past the balance is refused
		}
		return []any{s.with(i)}
	case Dup:
		if !used || prev == i {
			return nil
		}
		return []any{s}
	case Refused:
		if used {
			return nil // a used reference answers its receipt or 409
		}
		if o.Code == string(commands.CodeBalanceRefused) && fits {
			return nil
		}
		return []any{s}
	case Fail:
		return []any{s}
	case Unknown:
		if used || !fits {
			return []any{s}
		}
		return []any{s, s.with(i)}
	}
	return nil
}

// BalanceModel is the model of an account's balance from start cents.
func BalanceModel(start int64) porcupine.Model {
	return (&porcupine.NondeterministicModel{
		Init: func() []any { return []any{balanceState{Cents: start}} },
		Step: balanceStep,
		Equal: func(a, b any) bool {
			x, y := a.(balanceState), b.(balanceState)
			return x.Cents == y.Cents && x.h == y.h && maps.Equal(x.Refs, y.Refs)
		},
		Hash: func(st any) uint64 {
			s := st.(balanceState)
			return s.h ^ uint64(s.Cents)*0x9e3779b97f4a7c15
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(balanceIn), out.(balanceOut)
			s := fmt.Sprintf("%s %s %s -> %s", i.Ref, i.Op, cents(i.Cents), o.Outcome)
			if o.Code != "" {
				s += " " + o.Code
			}
			return s
		},
		DescribeState: func(st any) string {
			s := st.(balanceState)
			refs := make([]string, 0, len(s.Refs))
			for r := range s.Refs {
				refs = append(refs, r)
			}
			sort.Strings(refs)
			return fmt.Sprintf("balance %s; %d operations: %s", cents(s.Cents), len(refs), strings.Join(refs, " "))
		},
	}).ToModel()
}

// cents formats an amount in cents as a decimal.
func cents(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

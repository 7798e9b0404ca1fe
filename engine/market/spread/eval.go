package spread

import (
	"errors"

	"github.com/cockroachdb/apd/v3"
)

// Ctx is the arithmetic of division and powers in spread values: 16
// significant digits, half-even, errors on division by zero, overflow and
// invalid operations. Addition, subtraction and multiplication are exact
// (Exact): an expression without / or ^ has an exact value.
var Ctx = apd.Context{Precision: 16, MaxExponent: 1000, MinExponent: -1000, Rounding: apd.RoundHalfEven, Traps: apd.DefaultTraps}

// Exact is the arithmetic of +, - and *: no rounding, the same traps.
var Exact = apd.Context{Precision: 0, MaxExponent: 1000, MinExponent: -1000, Rounding: apd.RoundHalfEven, Traps: apd.DefaultTraps}

// ErrUndefined is the value of an expression that has none at some point
// (division by zero, a negative base to a fractional power, overflow).
var ErrUndefined = errors.New("spread: undefined value")

// Evaluator evaluates one expression repeatedly without allocating. Not safe
// for concurrent use; make one per goroutine.
type Evaluator struct {
	e       *Expr
	scratch []apd.Decimal  // results of operations, by stack position
	stack   []*apd.Decimal // operands: legs' values (never written) or scratch
}

// NewEvaluator prepares an evaluator of e.
func NewEvaluator(e *Expr) *Evaluator {
	return &Evaluator{e: e, scratch: make([]apd.Decimal, e.depth+1), stack: make([]*apd.Decimal, e.depth+1)}
}

// Eval sets dst to the expression's value for the legs' values (in e.Legs
// order); the legs' values are only read.
func (ev *Evaluator) Eval(dst *apd.Decimal, legs []*apd.Decimal) error {
	sp := 0
	for i := range ev.e.prog {
		in := &ev.e.prog[i]
		var err error
		switch in.op {
		case opLeg:
			ev.stack[sp] = legs[in.leg]
			sp++
			continue
		case opNum:
			ev.stack[sp] = &in.num
			sp++
			continue
		case opNeg:
			z := &ev.scratch[sp-1]
			z.Neg(ev.stack[sp-1])
			ev.stack[sp-1] = z
			continue
		}
		x, y, z := ev.stack[sp-2], ev.stack[sp-1], &ev.scratch[sp-2]
		switch in.op {
		case opAdd:
			_, err = Exact.Add(z, x, y)
		case opSub:
			_, err = Exact.Sub(z, x, y)
		case opMul:
			_, err = Exact.Mul(z, x, y)
		case opDiv:
			err = quo(z, x, y)
		case opPow:
			_, err = Ctx.Pow(z, x, y)
		}
		if err != nil || z.Form != apd.Finite {
			return ErrUndefined
		}
		ev.stack[sp-2] = z
		sp--
	}
	dst.Reduce(ev.stack[0])
	return nil
}

// Package dec is the decimal arithmetic the simulators share: every price, quantity and balance
// of a simulator is an *apd.Decimal computed through one context of 40 digits. A Decimal once
// shared is never mutated in place; every function returns a fresh one (Min returns one of its
// arguments).
package dec

import (
	"github.com/cockroachdb/apd/v3"
)

// ctx is the one arithmetic context of the simulators.
var ctx = apd.BaseContext.WithPrecision(40)

// Must reads a decimal constant; it panics on one that is not a decimal.
func Must(s string) *apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic("sim: bad decimal constant " + s)
	}
	return d
}

// Parse reads a finite decimal from its text ("4500.25", "0.001").
func Parse(s string) (*apd.Decimal, bool) {
	d, _, err := apd.NewFromString(s)
	if err != nil || d.Form != apd.Finite {
		return nil, false
	}
	return d, true
}

// Zero is a fresh 0.
func Zero() *apd.Decimal { return new(apd.Decimal) }

// Int is i as a decimal.
func Int(i int64) *apd.Decimal { return apd.New(i, 0) }

// Add is a+b.
func Add(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = ctx.Add(r, a, b)
	return r
}

// Sub is a-b.
func Sub(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = ctx.Sub(r, a, b)
	return r
}

// Mul is a×b.
func Mul(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = ctx.Mul(r, a, b)
	return r
}

// Quo is a÷b, and 0 when b is 0.
func Quo(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	if b.IsZero() {
		return r
	}
	_, _ = ctx.Quo(r, a, b)
	return r
}

// Neg is -a.
func Neg(a *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	r.Neg(a)
	return r
}

// Abs is |a|.
func Abs(a *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	r.Abs(a)
	return r
}

// Min is the smaller of a and b (a when they are equal), not a copy.
func Min(a, b *apd.Decimal) *apd.Decimal {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

// Places is how many digits d carries after its point, as written.
func Places(d *apd.Decimal) int {
	if d.Exponent >= 0 {
		return 0
	}
	return int(-d.Exponent)
}

// IsMultiple says whether d is a whole multiple of step (always, for a zero step).
func IsMultiple(d, step *apd.Decimal) bool {
	if step.IsZero() {
		return true
	}
	r := new(apd.Decimal)
	_, _ = ctx.Rem(r, d, step)
	return r.IsZero()
}

// Quantize is d rounded (half up, the context's rounding) to exactly places digits after the point.
func Quantize(d *apd.Decimal, places int) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = ctx.Quantize(r, d, int32(-places))
	return r
}

// Fixed writes d with exactly places digits after the point (rounded half up), never "-0":
// "0.00000000", "60000.10".
func Fixed(d *apd.Decimal, places int) string {
	r := Quantize(d, places)
	if r.IsZero() {
		r.Negative = false
	}
	return r.Text('f')
}

// Plain writes d without trailing zeros and without an exponent: "0.25", "5000", "-12.5", "0".
func Plain(d *apd.Decimal) string {
	r := new(apd.Decimal)
	r.Reduce(d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}

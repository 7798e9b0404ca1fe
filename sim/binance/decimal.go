package binance

import (
	"github.com/cockroachdb/apd/v3"
)

// dctx is the one arithmetic context of the simulator: every price, quantity and balance is an
// apd.Decimal computed through it. Values are never mutated in place once shared; every helper
// returns a fresh Decimal.
var dctx = apd.BaseContext.WithPrecision(40)

func mustDec(s string) *apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic("binance sim: bad decimal constant " + s)
	}
	return d
}

func parseDec(s string) (*apd.Decimal, bool) {
	d, _, err := apd.NewFromString(s)
	if err != nil || d.Form != apd.Finite {
		return nil, false
	}
	return d, true
}

func zero() *apd.Decimal { return new(apd.Decimal) }

func add(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = dctx.Add(r, a, b)
	return r
}

func sub(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = dctx.Sub(r, a, b)
	return r
}

func mul(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = dctx.Mul(r, a, b)
	return r
}

func quo(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	if b.IsZero() {
		return r
	}
	_, _ = dctx.Quo(r, a, b)
	return r
}

func neg(a *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	r.Neg(a)
	return r
}

func abs(a *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	r.Abs(a)
	return r
}

func minDec(a, b *apd.Decimal) *apd.Decimal {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

func fromInt(i int64) *apd.Decimal { return apd.New(i, 0) }

// decimals is how many digits a decimal carries after its point, as written.
func decimals(d *apd.Decimal) int {
	if d.Exponent >= 0 {
		return 0
	}
	return int(-d.Exponent)
}

// isMultiple says whether d is a whole multiple of step.
func isMultiple(d, step *apd.Decimal) bool {
	if step.IsZero() {
		return true
	}
	r := new(apd.Decimal)
	_, _ = dctx.Rem(r, d, step)
	return r.IsZero()
}

// fixed writes d with exactly places digits after the point (half-even rounding), as the exchange
// writes amounts: "0.00000000", "60000.10".
func fixed(d *apd.Decimal, places int) string {
	r := new(apd.Decimal)
	_, _ = dctx.Quantize(r, d, int32(-places))
	if r.IsZero() {
		r.Negative = false
	}
	return r.Text('f')
}

// plain writes d without trailing zeros: "0.1", "25", "0".
func plain(d *apd.Decimal) string {
	r := new(apd.Decimal)
	r.Reduce(d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}

package spread

import (
	"math/bits"

	"github.com/cockroachdb/apd/v3"
)

var pow10 = func() [20]uint64 {
	var p [20]uint64
	p[0] = 1
	for i := 1; i < 20; i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func numDigits(v uint64) int {
	n := 1
	for n < 20 && v >= pow10[n] {
		n++
	}
	return n
}

// quo sets z to x/y rounded half-even to 16 significant digits, the same
// value Ctx.Quo gives, through 128-bit integer division when both
// coefficients fit in 64 bits; otherwise it defers to Ctx.Quo.
func quo(z, x, y *apd.Decimal) error {
	if x.Form != apd.Finite || y.Form != apd.Finite || !x.Coeff.IsUint64() || !y.Coeff.IsUint64() {
		_, err := Ctx.Quo(z, x, y)
		return err
	}
	a, b := x.Coeff.Uint64(), y.Coeff.Uint64()
	if a == 0 || b == 0 {
		_, err := Ctx.Quo(z, x, y)
		return err
	}
	k := 17 + numDigits(b) - numDigits(a) // a*10^k / b has 17 or 18 digits
	if k < 0 || k > 19 {
		_, err := Ctx.Quo(z, x, y)
		return err
	}
	hi, lo := bits.Mul64(a, pow10[k])
	q, r := bits.Div64(hi, lo, b) // q < 10^18: hi < b holds
	d := numDigits(q) - 16
	unit := pow10[d]
	q, rem := q/unit, q%unit
	half := unit / 2
	if rem > half || (rem == half && (r != 0 || q%2 == 1)) {
		q++
		if q == pow10[16] {
			q /= 10
			d++
		}
	}
	exp := int64(x.Exponent) - int64(y.Exponent) - int64(k) + int64(d)
	for q%10 == 0 {
		q /= 10
		exp++
	}
	adjusted := exp + int64(numDigits(q)) - 1
	if adjusted > int64(Ctx.MaxExponent) || adjusted < int64(Ctx.MinExponent) {
		_, err := Ctx.Quo(z, x, y)
		return err
	}
	z.Coeff.SetUint64(q)
	z.Exponent = int32(exp)
	z.Negative = x.Negative != y.Negative
	z.Form = apd.Finite
	return nil
}

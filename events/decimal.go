package events

import (
	"bytes"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/apd/v3"
	"github.com/tinylib/msgp/msgp"
)

// Ctx is the one apd context every decimal operation goes through:
// 34 significant digits (decimal128), half-even rounding, traps on.
var Ctx = apd.Context{Precision: 34, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent, Rounding: apd.RoundHalfEven, Traps: apd.DefaultTraps}

// Decimal is an exact decimal for money, prices and quantities. Its methods
// never change the receiver: every operation returns a new value. On the wire it
// is a decimal string; it decodes from a string or a JSON number, never via float.
type Decimal struct{ v apd.Decimal }

// ErrBadDecimal is returned for text that is not a finite decimal.
var ErrBadDecimal = errors.New("not a finite decimal")

// ParseDecimal reads a finite decimal such as "12.50" or "-3e2".
func ParseDecimal(s string) (Decimal, error) {
	if d, ok := parsePlain(s); ok {
		return d, nil
	}
	var d Decimal
	if _, _, err := d.v.SetString(s); err != nil || d.v.Form != apd.Finite {
		return Decimal{}, fmt.Errorf("%q: %w", s, ErrBadDecimal)
	}
	return d, nil
}

// parsePlain reads the common case, -?digits(.digits)? with at most 18
// digits, straight into an int64 coefficient and exponent. Everything else
// (exponents, longer numbers) is left to apd.
func parsePlain[T string | []byte](s T) (Decimal, bool) {
	i, neg := 0, false
	if len(s) > 0 && s[0] == '-' {
		i, neg = 1, true
	}
	var coeff int64
	digits, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if digits == 18 {
				return Decimal{}, false
			}
			coeff = coeff*10 + int64(c-'0')
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot && digits > 0:
			dot = true
		default:
			return Decimal{}, false
		}
	}
	if digits == 0 || (dot && frac == 0) {
		return Decimal{}, false
	}
	if neg {
		coeff = -coeff
	}
	var d Decimal
	d.v.SetFinite(coeff, int32(-frac))
	if neg && coeff == 0 {
		d.v.Negative = true
	}
	return d, true
}

// MustDecimal parses s and panics on failure; for constants and tests.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// Int makes a Decimal of an integer.
func Int(i int64) Decimal { var d Decimal; d.v.SetInt64(i); return d }

// Apd returns a copy as an apd.Decimal.
func (d Decimal) Apd() *apd.Decimal { var out apd.Decimal; out.Set(&d.v); return &out }

func op(f func(z, x, y *apd.Decimal) (apd.Condition, error), a, b Decimal) Decimal {
	var z apd.Decimal
	if _, err := f(&z, &a.v, &b.v); err != nil {
		panic(fmt.Sprintf("decimal: %v", err))
	}
	return Decimal{v: z}
}

// Add returns d+e.
func (d Decimal) Add(e Decimal) Decimal {
	if z, ok := addSmall(&d.v, &e.v, false); ok {
		return z
	}
	return op(Ctx.Add, d, e)
}

// Sub returns d-e.
func (d Decimal) Sub(e Decimal) Decimal {
	if z, ok := addSmall(&d.v, &e.v, true); ok {
		return z
	}
	return op(Ctx.Sub, d, e)
}

// pow10 holds 10^0 .. 10^18.
var pow10 = [...]int64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// addSmall is x+y (x-y when sub) when both coefficients, aligned to the
// smaller exponent, and their sum fit in an int64: the common case of prices,
// quantities and balances, exact like apd and without its big-number path.
// apd's result is the same: the exact sum at the smaller exponent (34 digits
// hold any int64), and a zero sum is negative only when both terms are.
func addSmall(x, y *apd.Decimal, sub bool) (Decimal, bool) {
	if x.Form != apd.Finite || y.Form != apd.Finite || !x.Coeff.IsInt64() || !y.Coeff.IsInt64() {
		return Decimal{}, false
	}
	a, b := x.Coeff.Int64(), y.Coeff.Int64()
	na, nb := x.Negative, y.Negative != sub
	exp := min(x.Exponent, y.Exponent)
	var ok bool
	if a, ok = scaleSmall(a, x.Exponent-exp); !ok {
		return Decimal{}, false
	}
	if b, ok = scaleSmall(b, y.Exponent-exp); !ok {
		return Decimal{}, false
	}
	if na {
		a = -a
	}
	if nb {
		b = -b
	}
	sum := a + b
	if (a > 0 && b > 0 && sum < 0) || (a < 0 && b < 0 && sum >= 0) {
		return Decimal{}, false
	}
	var z Decimal
	z.v.SetFinite(sum, exp)
	if sum == 0 {
		z.v.Negative = na && nb
	}
	return z, true
}

// scaleSmall is c*10^n when that fits in an int64; c is not negative.
func scaleSmall(c int64, n int32) (int64, bool) {
	if n == 0 {
		return c, true
	}
	if n >= int32(len(pow10)) || c > math.MaxInt64/pow10[n] {
		return 0, false
	}
	return c * pow10[n], true
}

// Mul returns d*e.
func (d Decimal) Mul(e Decimal) Decimal { return op(Ctx.Mul, d, e) }

// Quo returns d/e rounded to 34 digits, trailing zeros removed; e must not be zero.
func (d Decimal) Quo(e Decimal) Decimal {
	q := op(Ctx.Quo, d, e)
	q.v.Reduce(&q.v)
	return q
}

// Neg returns -d.
func (d Decimal) Neg() Decimal { var z apd.Decimal; z.Neg(&d.v); return Decimal{v: z} }

// Abs returns |d|.
func (d Decimal) Abs() Decimal { var z apd.Decimal; z.Abs(&d.v); return Decimal{v: z} }

// Cmp compares d and e: -1, 0 or +1.
func (d Decimal) Cmp(e Decimal) int { return d.v.Cmp(&e.v) }

// Sign is -1, 0 or +1.
func (d Decimal) Sign() int { return d.v.Sign() }

// IsZero reports d == 0.
func (d Decimal) IsZero() bool { return d.v.IsZero() }

// Min returns the smaller of d and e.
func (d Decimal) Min(e Decimal) Decimal {
	if d.Cmp(e) <= 0 {
		return d
	}
	return e
}

// Decimals is the number of digits after the point as written (2 for "1.50").
func (d Decimal) Decimals() int {
	if d.v.Exponent >= 0 {
		return 0
	}
	return int(-d.v.Exponent)
}

// Round returns d rounded half-even to n decimals.
func (d Decimal) Round(n int32) Decimal {
	var z apd.Decimal
	if _, err := Ctx.Quantize(&z, &d.v, -n); err != nil {
		panic(fmt.Sprintf("decimal: %v", err))
	}
	return Decimal{v: z}
}

// Int64 is d rounded half-even to an integer, or an error when it does not fit.
func (d Decimal) Int64() (int64, error) {
	r := d.Round(0)
	return r.v.Int64()
}

// String renders plain decimal notation, without exponent or trailing
// fractional zeros ("64998.50" is "64998.5").
func (d Decimal) String() string {
	var r apd.Decimal
	r.Reduce(&d.v)
	if r.Exponent > 0 {
		return d.v.Text('f')
	}
	return r.Text('f')
}

// MarshalText writes the decimal's text; in JSON it is a string. (Text rather
// than MarshalJSON spares encoding/json its validation pass over the output.)
func (d Decimal) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalJSON reads a decimal string or a JSON number, exactly.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 1 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	} else if len(b) == 0 || !(b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) {
		return fmt.Errorf("%s: %w", b, ErrBadDecimal)
	}
	return d.setText(b)
}

// setText reads the text of a decimal, at most 64 bytes of it.
func (d *Decimal) setText(b []byte) error {
	if len(b) == 0 || len(b) > 64 {
		return fmt.Errorf("%q: %w", b, ErrBadDecimal)
	}
	if p, ok := parsePlain(b); ok {
		*d = p
		return nil
	}
	p, err := ParseDecimal(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// MarshalMsg appends the decimal as a MessagePack string of the same text
// JSON carries, so a commit replays to the same value in either encoding.
func (d Decimal) MarshalMsg(b []byte) ([]byte, error) { return msgp.AppendString(b, d.String()), nil }

// UnmarshalMsg reads a decimal written by MarshalMsg.
func (d *Decimal) UnmarshalMsg(b []byte) ([]byte, error) {
	s, rest, err := msgp.ReadStringZC(b)
	if err != nil {
		return b, err
	}
	return rest, d.setText(s)
}

// Msgsize is an upper bound of the encoded size of a decimal that fits setText.
func (d Decimal) Msgsize() int { return msgp.StringPrefixSize + 64 }

// Value stores the decimal as text for a NUMERIC column.
func (d Decimal) Value() (driver.Value, error) { return d.String(), nil }

// Scan reads a NUMERIC column.
func (d *Decimal) Scan(src any) error {
	var z apd.Decimal
	if err := z.Scan(src); err != nil {
		return err
	}
	d.v = z
	return nil
}

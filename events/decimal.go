package events

import (
	"bytes"
	"cmp"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/cockroachdb/apd/v3"
	"github.com/tinylib/msgp/msgp"
)

// Ctx is the one apd context every decimal operation goes through:
// 34 significant digits (decimal128), half-even rounding, traps on. Its
// exponent range (±100000) is far beyond any product, quotient or sum of
// values within the codec's bounds, so arithmetic on them cannot overflow
// or underflow; the only trap left to them is a division by zero.
var Ctx = apd.Context{Precision: 34, MaxExponent: apd.MaxExponent, MinExponent: apd.MinExponent, Rounding: apd.RoundHalfEven, Traps: apd.DefaultTraps}

// Decimal is an exact decimal for money, prices and quantities. Its methods
// never change the receiver: every operation returns a new value. On the wire it
// is a decimal string; it decodes from a string or a JSON number, never via float.
type Decimal struct{ v apd.Decimal }

// The bounds of every decimal the API takes (ParseDecimal, UnmarshalJSON):
// text of -?(d+(.d*)?|.d+)([eE][+-]?d+)? in at most MaxDecimalText bytes, no
// '+', space, NaN, infinity, hex or '_'; at most MaxDecimalDigits significant
// digits; a nonzero magnitude from 1e-18 (adjusted exponent, the exponent of
// the leading digit, MinDecimalExponent) to below 1e16 (MaxDecimalExponent);
// a zero's exponent from MinDecimalExponent-MaxDecimalDigits+1 to MaxDecimalExponent.
// Sums, products and quotients of such values stay within the codec's bounds.
const (
	MaxDecimalText     = 64
	MaxDecimalDigits   = 34 // from the first nonzero digit to the last digit written
	MinDecimalExponent = -18
	MaxDecimalExponent = 15
)

// The codec's bounds: what a commit may hold, in either encoding. Encoding
// refuses (MarshalMsg, MarshalText) exactly what decoding would, so a commit
// that could not be read back fails to append. They are wider than the
// input's for computed values (price × quantity × multiplier of bounded
// inputs is below 1e48 and at least 1e-54), and hold every plain text of up to
// 64 bytes that earlier versions wrote. MaxCodecText is the longest plain
// text of a value within them: "-0." then 63 zeros and 64 digits.
const (
	MaxCodecText     = 130
	MaxCodecDigits   = 64
	MinCodecExponent = -64
	MaxCodecExponent = 63
)

// ErrBadDecimal is returned for text that is not a finite decimal within bounds.
var ErrBadDecimal = errors.New("not a finite decimal")

// DecimalBoundError is a decimal refused by the parser or the codec; Reason
// names the rule it broke, such as "more than 34 significant digits",
// "smaller than 1e-18" or "1e16 or larger". It wraps ErrBadDecimal.
type DecimalBoundError struct {
	Text   string // the text refused, cut to 40 bytes
	Reason string
}

func (e *DecimalBoundError) Error() string { return fmt.Sprintf("decimal %q: %s", e.Text, e.Reason) }

// Unwrap makes errors.Is(err, ErrBadDecimal) hold.
func (e *DecimalBoundError) Unwrap() error { return ErrBadDecimal }

// decimalLimits is one set of bounds and the reasons that name them.
type decimalLimits struct {
	text, digits                      int
	minExp, maxExp                    int64 // of a nonzero value's leading digit
	long, precise, small, large, zero string
}

// inputLimits and codecLimits are never written.
var (
	inputLimits = decimalLimits{MaxDecimalText, MaxDecimalDigits, MinDecimalExponent, MaxDecimalExponent,
		"more than 64 characters", "more than 34 significant digits", "smaller than 1e-18", "1e16 or larger",
		"a zero with an exponent outside -51..15"}
	codecLimits = decimalLimits{MaxCodecText, MaxCodecDigits, MinCodecExponent, MaxCodecExponent,
		"more than 130 characters", "more than 64 significant digits", "smaller than 1e-64", "1e64 or larger",
		"a zero with an exponent outside -127..63"}
)

// ParseDecimal reads a decimal such as "12.50", "-3e2" or "0.001" within the
// input's bounds (see MaxDecimalDigits); anything else is a *DecimalBoundError.
// It is parseDecimal(s, &inputLimits), spelled out to keep the fast path fast.
func ParseDecimal(s string) (Decimal, error) {
	if d, ok := parsePlain(s, MaxDecimalExponent); ok {
		return d, nil
	}
	return parseSlow(s, &inputLimits)
}

// parseDecimal is the one reader of decimal text, within lim (inputLimits
// or codecLimits): parsePlain's fast path, then parseSlow.
func parseDecimal[T string | []byte](s T, lim *decimalLimits) (Decimal, error) {
	if d, ok := parsePlain(s, lim.maxExp); ok {
		return d, nil
	}
	return parseSlow(s, lim)
}

// parseSlow reads what parsePlain leaves: exponents, long texts, and every
// refusal.
func parseSlow[T string | []byte](s T, lim *decimalLimits) (Decimal, error) {
	if len(s) > lim.text {
		return Decimal{}, refuse(s, lim.long)
	}
	digits, exp, reason := scanDecimal(s)
	if reason == "" {
		reason = lim.check(digits, exp)
	}
	if reason != "" {
		return Decimal{}, refuse(s, reason)
	}
	var d Decimal
	if _, _, err := d.v.SetString(string(s)); err != nil || d.v.Form != apd.Finite {
		return Decimal{}, refuse(s, "not a decimal number") // the scan above lets through only what apd reads
	}
	return d, nil
}

// refuse is the *DecimalBoundError for s, quoting at most 40 bytes of it.
func refuse[T string | []byte](s T, reason string) error {
	if len(s) > 40 {
		s = s[:40]
	}
	return &DecimalBoundError{Text: string(s), Reason: reason}
}

// check is the reason a value of digits significant digits (0 for a zero)
// whose last digit has exponent exp is outside lim, or "".
func (lim *decimalLimits) check(digits int, exp int64) string {
	switch adj := exp + int64(digits) - 1; {
	case digits == 0 && (exp < lim.minExp-int64(lim.digits)+1 || exp > lim.maxExp):
		return lim.zero
	case digits == 0:
		return ""
	case digits > lim.digits:
		return lim.precise
	case adj < lim.minExp:
		return lim.small
	case adj > lim.maxExp:
		return lim.large
	}
	return ""
}

// scanDecimal checks the syntax -?(d+(.d*)?|.d+)([eE][+-]?d+)? and returns
// the significant digits (from the first nonzero digit to the last; 0 for a
// zero) and the exponent of the last digit written, or the reason s is not a
// decimal. The exponent saturates far beyond every bound.
func scanDecimal[T string | []byte](s T) (digits int, exp int64, reason string) {
	switch {
	case len(s) == 0:
		return 0, 0, "empty"
	case s[0] == '+':
		return 0, 0, "a leading '+'"
	case isSpace(s[0]) || isSpace(s[len(s)-1]):
		return 0, 0, "space around the number"
	}
	i := 0
	if s[0] == '-' {
		i = 1
	}
	if i < len(s) && (lower(s[i]) == 'n' || lower(s[i]) == 'i' || lower(s[i]) == 's') {
		if rest := strings.ToLower(string(s[i:min(i+4, len(s))])); strings.HasPrefix(rest, "nan") ||
			strings.HasPrefix(rest, "inf") || strings.HasPrefix(rest, "snan") {
			return 0, 0, "not finite"
		}
	}
	mantissa, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		mantissa++
		if digits > 0 || c != '0' {
			digits++
		}
		if dot {
			frac++
		}
	}
	if mantissa == 0 {
		return 0, 0, "not a decimal number"
	}
	var e int64
	if i < len(s) && lower(s[i]) == 'e' {
		i++
		neg := false
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			neg, i = s[i] == '-', i+1
		}
		n := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			e = min(e*10+int64(s[i]-'0'), 1<<40)
			n++
		}
		if n == 0 {
			return 0, 0, "not a decimal number"
		}
		if neg {
			e = -e
		}
	}
	if i < len(s) {
		return 0, 0, "not a decimal number"
	}
	return digits, e - int64(frac), ""
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func lower(c byte) byte { return c | 0x20 }

// parsePlain reads the common case, -?digits(.digits)? with at most 18
// digits and a magnitude below 10^(maxExp+1), straight into an int64
// coefficient and exponent. Everything else (exponents, longer numbers, out
// of bounds) is left to parseSlow. Its values are within both sets of bounds:
// at most 18 digits in at most 20 bytes and, a digit being required before
// the point, at least 1e-17.
func parsePlain[T string | []byte](s T, maxExp int64) (Decimal, bool) {
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
	if n := maxExp + 1 + int64(frac); n < int64(len(pow10)) && coeff >= pow10[n] {
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

// Steps is d rounded to a whole multiple of step with rounding (apd's
// modes: apd.RoundHalfUp for a price at a tick, apd.RoundFloor for a
// quantity at a lot step), trailing zeros removed; step must be positive.
func (d Decimal) Steps(step Decimal, rounding apd.Rounder) Decimal {
	if z, ok := stepsSmall(&d.v, &step.v, rounding); ok {
		return z
	}
	var q apd.Decimal
	c := Ctx
	c.Rounding = rounding
	_, err := Ctx.Quo(&q, &d.v, &step.v)
	if err == nil {
		_, err = c.RoundToIntegralValue(&q, &q)
	}
	if err == nil {
		_, err = Ctx.Mul(&q, &q, &step.v)
	}
	if err != nil { // a zero step: a division by zero panics here, as in op
		panic(fmt.Sprintf("decimal: %v", err))
	}
	q.Reduce(&q)
	return Decimal{v: q}
}

// MultipleOf reports whether d is a whole multiple of step; a step of zero
// or less admits everything, and a quotient too large to compute (apd's Rem
// fails) is no multiple.
func (d Decimal) MultipleOf(step Decimal) bool {
	if step.Sign() <= 0 {
		return true
	}
	if m, ok := multipleSmall(&d.v, &step.v); ok {
		return m
	}
	var rem apd.Decimal
	if _, err := Ctx.Rem(&rem, &d.v, &step.v); err != nil {
		return false
	}
	return rem.IsZero()
}

// multipleSmall is MultipleOf when both coefficients, aligned to the smaller
// exponent, fit in an int64 (the quotient then has at most 19 digits, and
// apd's Rem computes it): whether step's divides x's.
func multipleSmall(x, step *apd.Decimal) (multiple, ok bool) {
	if x.Form != apd.Finite || step.Form != apd.Finite || !x.Coeff.IsInt64() || !step.Coeff.IsInt64() {
		return false, false
	}
	a, b := x.Coeff.Int64(), step.Coeff.Int64()
	exp := min(x.Exponent, step.Exponent)
	if a, ok = scaleSmall(a, x.Exponent-exp); !ok {
		return false, false
	}
	if b, ok = scaleSmall(b, step.Exponent-exp); !ok || b == 0 {
		return false, false
	}
	return a%b == 0, true
}

// The operations of op.
const (
	opAdd = iota
	opSub
	opMul
	opQuo
)

// op is a (kind) b in Ctx. Each operation is called by name, not through a
// function value: through one, the compiler cannot see that apd keeps no
// pointer to the operands and the result, and moves all three to the heap.
func op(kind int, a, b Decimal) Decimal {
	var z apd.Decimal
	var err error
	switch kind {
	case opAdd:
		_, err = Ctx.Add(&z, &a.v, &b.v)
	case opSub:
		_, err = Ctx.Sub(&z, &a.v, &b.v)
	case opMul:
		_, err = Ctx.Mul(&z, &a.v, &b.v)
	default:
		_, err = Ctx.Quo(&z, &a.v, &b.v)
	}
	if err != nil {
		panic(fmt.Sprintf("decimal: %v", err))
	}
	return Decimal{v: z}
}

// Add returns d+e.
func (d Decimal) Add(e Decimal) Decimal {
	if z, ok := addSmall(&d.v, &e.v, false); ok {
		return z
	}
	return op(opAdd, d, e)
}

// Sub returns d-e.
func (d Decimal) Sub(e Decimal) Decimal {
	if z, ok := addSmall(&d.v, &e.v, true); ok {
		return z
	}
	return op(opSub, d, e)
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
func (d Decimal) Mul(e Decimal) Decimal { return op(opMul, d, e) }

// Quo returns d/e rounded to 34 digits, trailing zeros removed; e must not be zero.
func (d Decimal) Quo(e Decimal) Decimal {
	if z, ok := quoSmall(&d.v, &e.v); ok {
		return z
	}
	q := op(opQuo, d, e)
	q.v.Reduce(&q.v)
	return q
}

// quoSmall is x/y with trailing zeros removed when both coefficients are
// int64s, neither is zero and x's times some 10^k within an int64 is a
// multiple of y's: an average price of quantities and prices, without
// apd's big-number division. The quotient is then exact in at most 19
// digits, as apd's 34 give it, and with its trailing zeros removed there is
// only one form of it.
func quoSmall(x, y *apd.Decimal) (Decimal, bool) {
	if x.Form != apd.Finite || y.Form != apd.Finite || !x.Coeff.IsInt64() || !y.Coeff.IsInt64() {
		return Decimal{}, false
	}
	a, b := x.Coeff.Int64(), y.Coeff.Int64()
	if a <= 0 || b <= 0 {
		return Decimal{}, false
	}
	exp := int64(x.Exponent) - int64(y.Exponent)
	for a%b != 0 {
		if a > math.MaxInt64/10 {
			return Decimal{}, false
		}
		a *= 10
		exp--
	}
	c := a / b
	for c%10 == 0 {
		c /= 10
		exp++
	}
	if exp < -1000 || exp > 1000 { // far from money: apd's bounds are apd's to apply
		return Decimal{}, false
	}
	var z Decimal
	z.v.SetFinite(c, int32(exp))
	z.v.Negative = x.Negative != y.Negative
	return z, true
}

// Neg returns -d.
func (d Decimal) Neg() Decimal { var z apd.Decimal; z.Neg(&d.v); return Decimal{v: z} }

// Abs returns |d|.
func (d Decimal) Abs() Decimal { var z apd.Decimal; z.Abs(&d.v); return Decimal{v: z} }

// Cmp compares d and e: -1, 0 or +1.
func (d Decimal) Cmp(e Decimal) int {
	if c, ok := cmpSmall(&d.v, &e.v); ok {
		return c
	}
	return d.v.Cmp(&e.v)
}

// Same reports whether d and e are the same decimal as written: equal, with
// the same exponent and sign (1.0 is not 1.00, -0 is not 0), so they encode
// alike.
func (d Decimal) Same(e Decimal) bool {
	return d.v.Form == e.v.Form && d.v.Negative == e.v.Negative && d.v.Exponent == e.v.Exponent &&
		d.v.Coeff.Cmp(&e.v.Coeff) == 0
}

// cmpSmall is x's order against y when both coefficients, aligned to the
// smaller exponent, fit in an int64 (apd's Cmp goes through big numbers
// to align them): prices against prices on a trailing stop's walk. Zero
// equals zero whatever its sign, as in apd.
func cmpSmall(x, y *apd.Decimal) (int, bool) {
	if x.Form != apd.Finite || y.Form != apd.Finite || !x.Coeff.IsInt64() || !y.Coeff.IsInt64() {
		return 0, false
	}
	a, b := x.Coeff.Int64(), y.Coeff.Int64()
	exp := min(x.Exponent, y.Exponent)
	var ok bool
	if a, ok = scaleSmall(a, x.Exponent-exp); !ok {
		return 0, false
	}
	if b, ok = scaleSmall(b, y.Exponent-exp); !ok {
		return 0, false
	}
	if x.Negative {
		a = -a
	}
	if y.Negative {
		b = -b
	}
	return cmp.Compare(a, b), true
}

// stepsSmall is Steps without apd's 34-digit division when d and step,
// aligned to the smaller exponent, are below 10^18 and 10^15 and d is at
// least one step from zero (the common case: a price at a tick). apd
// rounds the quotient to 34 digits before rounding it to a whole number;
// with at most 18 digits before the point, 16 after it are kept, and with
// a step below 10^15 the quotient's fraction is at least 1/(2 step) from 0,
// 1/2 and 1 unless it is exactly one of them, so both roundings agree with
// the integer one here. The result is nonzero, so its trailing zeros
// removed give apd's one form of it. (A quotient below 0.1 apd rounds to
// zero whatever the mode, floor of a negative one included: left to it.)
func stepsSmall(x, step *apd.Decimal, rounding apd.Rounder) (Decimal, bool) {
	if (rounding != apd.RoundHalfUp && rounding != apd.RoundFloor) || x.Form != apd.Finite || step.Form != apd.Finite ||
		step.Negative || !x.Coeff.IsInt64() || !step.Coeff.IsInt64() {
		return Decimal{}, false
	}
	a, s := x.Coeff.Int64(), step.Coeff.Int64()
	exp := min(x.Exponent, step.Exponent)
	var ok bool
	if a, ok = scaleSmall(a, x.Exponent-exp); !ok || a >= pow10[18] {
		return Decimal{}, false
	}
	if s, ok = scaleSmall(s, step.Exponent-exp); !ok || s <= 0 || s >= pow10[15] {
		return Decimal{}, false
	}
	if a < s { // apd rounds a quotient below 0.1 to zero in either mode: left to it
		return Decimal{}, false
	}
	n, r := a/s, a%s
	switch {
	case rounding == apd.RoundHalfUp && 2*r >= s: // half away from zero, on the magnitude
		n++
	case rounding == apd.RoundFloor && x.Negative && r != 0: // toward minus infinity
		n++
	}
	c := n * s // at most a + s: fits
	for c%10 == 0 {
		c /= 10
		exp++
	}
	if x.Negative {
		c = -c
	}
	var z Decimal
	z.v.SetFinite(c, exp)
	return z, true
}

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

// Round returns d rounded half-even to n decimals. A result of more than 34
// digits (1e40 to 2 decimals) is exact, not an error.
func (d Decimal) Round(n int32) Decimal {
	var z apd.Decimal
	if _, err := Ctx.Quantize(&z, &d.v, -n); err == nil {
		return Decimal{v: z}
	}
	c := Ctx
	c.Precision = uint32(max(d.v.NumDigits()+int64(d.v.Exponent)+int64(n), 1))
	if _, err := c.Quantize(&z, &d.v, -n); err != nil {
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
// fractional zeros ("64998.50" is "64998.5", "50000.00" is "50000"): equal
// values have one text, so a replay of the log renders what the live state did.
func (d Decimal) String() string {
	var buf [40]byte
	return string(d.appendText(buf[:0]))
}

// appendText appends String's text of d to b: apd's Text('f') of d
// reduced, one text per value (10.00, 10.0 and 1E+1 are all "10").
func (d Decimal) appendText(b []byte) []byte {
	var r apd.Decimal
	r.Reduce(&d.v)
	return r.Append(b, 'f')
}

// appendCodec appends the text a commit holds for d to b, or answers b and
// a *DecimalBoundError when d is outside the codec's bounds: exactly when
// setText would refuse the text.
func (d Decimal) appendCodec(b []byte) ([]byte, error) {
	if d.v.Form != apd.Finite {
		return b, &DecimalBoundError{Text: d.v.String(), Reason: "not finite"}
	}
	n := len(b)
	b = d.appendText(b)
	if len(b)-n > 64 { // a plain text of up to 64 bytes is within the bounds
		if _, err := parseSlow(b[n:], &codecLimits); err != nil {
			return b[:n], err
		}
	}
	return b, nil
}

// MarshalText writes the decimal's text; in JSON it is a string. (Text rather
// than MarshalJSON spares encoding/json its validation pass over the output.)
// A decimal outside the codec's bounds is an error.
func (d Decimal) MarshalText() ([]byte, error) {
	var buf [48]byte
	t, err := d.appendCodec(buf[:0])
	if err != nil {
		return nil, err
	}
	return bytes.Clone(t), nil
}

// UnmarshalJSON reads a decimal string or a JSON number, exactly, within the
// input's bounds (see ParseDecimal).
func (d *Decimal) UnmarshalJSON(b []byte) error { return d.unmarshalJSON(b, &inputLimits) }

func (d *Decimal) unmarshalJSON(b []byte, lim *decimalLimits) error {
	b = bytes.TrimSpace(b)
	if len(b) > 1 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	} else if len(b) == 0 || !(b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) {
		return refuse(b, "neither a decimal string nor a number")
	}
	p, err := parseDecimal(b, lim)
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// MarshalBinary is MarshalText, for encoding/gob (a command forwarded
// between nodes carries its decimals so).
func (d Decimal) MarshalBinary() ([]byte, error) { return d.MarshalText() }

// UnmarshalBinary reads what MarshalBinary wrote, within the codec's bounds.
func (d *Decimal) UnmarshalBinary(b []byte) error { return d.setText(b) }

// storedDecimal is a Decimal as a commit holds it: its JSON is read within
// the codec's bounds. It has Decimal's layout (see storedType).
type storedDecimal Decimal

func (d *storedDecimal) UnmarshalJSON(b []byte) error {
	return (*Decimal)(d).unmarshalJSON(b, &codecLimits)
}

// setText reads the text of a decimal in a commit, within the codec's
// bounds: parseDecimal(b, &codecLimits), spelled out as ParseDecimal is.
func (d *Decimal) setText(b []byte) error {
	if p, ok := parsePlain(b, MaxCodecExponent); ok {
		*d = p
		return nil
	}
	p, err := parseSlow(b, &codecLimits)
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// MarshalMsg appends the decimal as a MessagePack string of the same text
// JSON carries, so a commit replays to the same value in either encoding. A
// decimal outside the codec's bounds is an error.
func (d Decimal) MarshalMsg(b []byte) ([]byte, error) {
	var buf [48]byte
	t, err := d.appendCodec(buf[:0])
	if err != nil {
		return b, err
	}
	return msgp.AppendStringFromBytes(b, t), nil
}

// UnmarshalMsg reads a decimal written by MarshalMsg.
func (d *Decimal) UnmarshalMsg(b []byte) ([]byte, error) {
	s, rest, err := msgp.ReadStringZC(b)
	if err != nil {
		return b, err
	}
	return rest, d.setText(s)
}

// Msgsize is an upper bound of the encoded size of the decimal: of its
// plain text, which MarshalMsg refuses past MaxCodecText.
func (d Decimal) Msgsize() int {
	n, e := d.v.NumDigits(), int64(d.v.Exponent)
	text := 1 + max(n+max(e, 0), n+1, 2-e) // sign, then digits and point, or "0." and zeros
	return msgp.StringPrefixSize + int(min(text, MaxCodecText))
}

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

// AppendPacked appends d in the packed form of a document kept in memory
// (projections' Packable): its exponent and sign as one MessagePack integer
// and its coefficient as another, or, where the coefficient passes 64 bits
// or d is not finite, its exact text (read back as a commit's decimal is,
// within the codec's bounds, which every decimal kept came through).
// ReadPacked reads back the very same value, digits and exponent alike; it
// is no wire format and never stored.
func (d Decimal) AppendPacked(b []byte) []byte {
	if d.v.Form != apd.Finite || !d.v.Coeff.IsUint64() {
		return msgp.AppendString(b, d.v.String())
	}
	head := int64(d.v.Exponent) << 1
	if d.v.Negative {
		head |= 1
	}
	return msgp.AppendUint64(msgp.AppendInt64(b, head), d.v.Coeff.Uint64())
}

// ReadPacked reads a decimal AppendPacked wrote and returns the bytes after it.
func (d *Decimal) ReadPacked(b []byte) ([]byte, error) {
	if msgp.NextType(b) == msgp.StrType {
		s, rest, err := msgp.ReadStringZC(b)
		if err != nil {
			return b, err
		}
		return rest, d.setText(s) // a commit's decimal reader: within its bounds, as every decimal kept
	}
	head, rest, err := msgp.ReadInt64Bytes(b)
	if err != nil {
		return b, err
	}
	coeff, rest, err := msgp.ReadUint64Bytes(rest)
	if err != nil {
		return b, err
	}
	d.v = apd.Decimal{Form: apd.Finite, Negative: head&1 == 1, Exponent: int32(head >> 1)}
	d.v.Coeff.SetUint64(coeff)
	return rest, nil
}

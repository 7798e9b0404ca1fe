package events

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/tinylib/msgp/msgp"
)

// withinCodec reports whether text, read by apd, is within the codec's bounds,
// worked out from the coefficient rather than the text.
func withinCodec(text string) bool {
	d, _, err := apd.NewFromString(text)
	if err != nil || d.Form != apd.Finite || len(text) > MaxCodecText {
		return false
	}
	n, e := d.NumDigits(), int64(d.Exponent)
	if d.IsZero() {
		return e >= MinCodecExponent-MaxCodecDigits+1 && e <= MaxCodecExponent
	}
	return n <= MaxCodecDigits && e+n-1 >= MinCodecExponent && e+n-1 <= MaxCodecExponent
}

// written matches the plain text String renders, which every earlier version
// wrote into commits.
var written = regexp.MustCompile(`^-?[0-9]+(\.[0-9]*[1-9])?$`)

// The codec reads every text within its bounds, and every plain text of up
// to 64 bytes (all that earlier versions could read back); what it reads it
// writes again to the same value, in at most Msgsize bytes; and its encoder
// refuses a value exactly when its decoder would refuse the text.
func FuzzCodecDecimal(f *testing.F) {
	for _, s := range []string{"0", "-12.50", "1e-64", "1e-65", "1e63", "1e64", "0e-127", "0e-128", "1e-70", "1E+6144",
		"123456789012345678901234567890123456789", "-0." + strings.Repeat("0", 63) + strings.Repeat("9", 64), "10.0", "NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d Decimal
		_, err := d.UnmarshalMsg(msgp.AppendString(nil, s))
		if err != nil {
			var be *DecimalBoundError
			if !errors.As(err, &be) {
				t.Fatalf("UnmarshalMsg(%q): %v is not a *DecimalBoundError", s, err)
			}
			if written.MatchString(s) && len(s) <= 64 {
				t.Fatalf("UnmarshalMsg(%q) refused a text earlier versions wrote: %v", s, err)
			}
			if withinCodec(s) && s[0] != '+' && strings.TrimSpace(s) == s {
				t.Fatalf("UnmarshalMsg(%q) refused a decimal within the codec's bounds: %v", s, err)
			}
		} else {
			want, _, werr := apd.NewFromString(s)
			if werr != nil || d.v.Cmp(want) != 0 || d.v.Exponent != want.Exponent || !withinCodec(s) {
				t.Fatalf("UnmarshalMsg(%q) = %+v, apd %v %v, within %v", s, d.v, want, werr, withinCodec(s))
			}
			b, err := d.MarshalMsg(nil)
			var back Decimal
			if err != nil || len(b) > d.Msgsize() {
				t.Fatalf("%q decoded, but encodes as %d bytes (Msgsize %d), %v", s, len(b), d.Msgsize(), err)
			}
			if _, err := back.UnmarshalMsg(b); err != nil || back.Cmp(d) != 0 {
				t.Fatalf("%q decoded and encoded, but reads back as %s, %v", s, back, err)
			}
		}
		// Any finite value: the encoders refuse it exactly when the decoder would.
		raw, _, err := apd.NewFromString(s)
		if err != nil || raw.Form != apd.Finite || raw.Exponent > 1000 || raw.Exponent < -1000 {
			return
		}
		v := Decimal{v: *raw}
		b, merr := v.MarshalMsg(nil)
		text, terr := v.MarshalText()
		if (merr == nil) != (terr == nil) || (merr == nil) != withinCodec(v.String()) {
			t.Fatalf("%s: MarshalMsg %v, MarshalText %v, its text within the bounds %v", s, merr, terr, withinCodec(v.String()))
		}
		if merr != nil {
			return
		}
		var back Decimal
		if _, err := back.UnmarshalMsg(b); err != nil || back.Cmp(v) != 0 || len(b) > v.Msgsize() {
			t.Fatalf("%s encodes as %q (Msgsize %d), reads back as %s, %v", s, b, v.Msgsize(), back, err)
		}
		var fromJSON storedDecimal
		if err := fromJSON.UnmarshalJSON(append(append([]byte{'"'}, text...), '"')); err != nil || Decimal(fromJSON).Cmp(v) != 0 {
			t.Fatalf("%s in JSON reads back as %s, %v", s, Decimal(fromJSON), err)
		}
	})
}

// Arithmetic on values within the input's bounds never reaches the panic:
// products of three, quotients, sums and rounding of the extremes.
func TestArithmeticOfBoundedValues(t *testing.T) {
	ext := []Decimal{}
	for _, s := range []string{"1e-18", "-1e-18", "9999999999999999.999999999999999999", "-9.99e15", "1234567890123456789012345678901234e-18",
		"0.000000000000000001234567890123456789012345678901234", "0", "-0", "0e-51", "0e15", "1", "0.5"} {
		ext = append(ext, MustDecimal(s))
	}
	for _, a := range ext {
		for _, b := range ext {
			for _, c := range ext {
				p := a.Mul(b).Mul(c)
				sum := p.Add(a).Sub(b)
				for _, n := range []int32{0, 2, 8, 18} {
					sum.Round(n)
					p.Round(n)
				}
				if _, err := p.Int64(); err != nil && p.Abs().Cmp(MustDecimal("9e15")) < 0 {
					t.Errorf("Int64(%s): %v", p, err)
				}
				if !c.IsZero() {
					_ = a.Mul(b).Quo(c)
					_ = a.Quo(c).Quo(c)
				}
			}
		}
	}
	// Round keeps the value exactly when its padded coefficient passes 34 digits.
	big := raw("1e40")
	if r := big.Round(2); r.Cmp(big) != 0 || r.Decimals() != 2 {
		t.Errorf("Round(2) of 1e40 = %s (%d decimals)", r, r.Decimals())
	}
	if r := raw("12345678901234567890123456789012345.675").Round(2); r.String() != "12345678901234567890123456789012345.68" {
		t.Errorf("Round(2) = %s", r)
	}
	if r := MustDecimal("2.675").Round(2); r.String() != "2.68" || r.Decimals() != 2 {
		t.Errorf("Round(2) of 2.675 = %s", r)
	}
}

package events

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

// The plain fast path must read exactly what apd reads, and leave the rest to it.
func TestParseDecimalAgreesWithApd(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "12.50", "0.00000001", "-3.25", "007", "123456789012345678",
		"1234567890123456789", "99999999999999999.9", "1e3", "-3e2", "1.", ".5", "1.2.3", "", "-", "abc", "1,5", "+1", "NaN", "Infinity"} {
		want, _, werr := apd.NewFromString(s)
		got, gerr := ParseDecimal(s)
		if werr != nil || want.Form != apd.Finite {
			if gerr == nil {
				t.Errorf("ParseDecimal(%q) = %s, want an error", s, got)
			}
			continue
		}
		if gerr != nil {
			t.Errorf("ParseDecimal(%q): %v", s, gerr)
			continue
		}
		if got.v.Cmp(want) != 0 || got.v.Exponent != want.Exponent || got.v.Negative != want.Negative || got.String() != (Decimal{v: *want}).String() {
			t.Errorf("ParseDecimal(%q) = %+v, apd reads %+v", s, got.v, *want)
		}
		var u Decimal
		if err := u.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil || u.v.Cmp(want) != 0 || u.v.Exponent != want.Exponent {
			t.Errorf("UnmarshalJSON(%q) = %+v, %v", s, u.v, err)
		}
	}
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "-12.50", "1e3", "123456789012345678"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _, werr := apd.NewFromString(s)
		got, gerr := ParseDecimal(s)
		if (werr != nil || want.Form != apd.Finite) != (gerr != nil) {
			t.Fatalf("ParseDecimal(%q) error %v, apd %v", s, gerr, werr)
		}
		if gerr == nil && (got.v.Cmp(want) != 0 || got.v.Exponent != want.Exponent || got.v.Negative != want.Negative) {
			t.Fatalf("ParseDecimal(%q) = %+v, apd %+v", s, got.v, *want)
		}
	})
}

// The int64 path of Add and Sub must give exactly what apd gives: the same
// value, exponent and sign, zeros included.
func TestAddSubAgreeWithApd(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	vals := []string{"0", "-0", "0.00", "-0.0", "1", "-1", "9223372036854775807", "-9223372036854775807", "922337203685477580.8",
		"12.50", "-12.5", "1e3", "-2e18", "0.000000000000000001", "123456789012345678901234", "1e-30"}
	for range 20000 {
		coeff := r.Int64N(1 << uint(r.IntN(63)))
		if r.IntN(2) == 0 {
			coeff = -coeff
		}
		vals = append(vals, apd.New(coeff, int32(r.IntN(25)-18)).String())
	}
	for i := range 40000 {
		a, b := MustDecimal(vals[r.IntN(len(vals))]), MustDecimal(vals[r.IntN(len(vals))])
		if i < 256 {
			a, b = MustDecimal(vals[i%16]), MustDecimal(vals[i/16])
		}
		for _, sub := range []bool{false, true} {
			var want apd.Decimal
			f, got := Ctx.Add, a.Add(b)
			if sub {
				f, got = Ctx.Sub, a.Sub(b)
			}
			if _, err := f(&want, &a.v, &b.v); err != nil {
				t.Fatal(err)
			}
			if got.v.Cmp(&want) != 0 || got.v.Exponent != want.Exponent || got.v.Negative != want.Negative || got.v.Form != want.Form {
				t.Fatalf("%s %v %s = %+v (%s), apd %+v (%s)", a, map[bool]string{false: "+", true: "-"}[sub], b, got.v, got.v.String(), want, want.String())
			}
		}
	}
}

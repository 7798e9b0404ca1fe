package events

import (
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

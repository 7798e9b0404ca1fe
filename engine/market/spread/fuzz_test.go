package spread

import (
	"errors"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

// FuzzParse proves the parser never panics, errors stay inside the input and
// every parsed expression evaluates (or reports an undefined value) without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"BTC-PERP", "BTC-PERP-ETH-PERP", "(ES - 2*NQ)/6E", "-SOL-PERP^2^0.5", "ES/(NQ-NQ)",
		"1.2.3", "((((ES))))", "ES^-1000000", "EUR/USD/6E", ")(", "ES+", "BTC-PERP-X-ETH-PERP", "9^9^9^9*ES"} {
		f.Add(s)
	}
	vals := []*apd.Decimal{dec("65000.5"), dec("-0.25"), dec("0"), dec("1.1")}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s, known)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error of type %T", s, err)
			}
			if pe.Pos < 1 || pe.Pos > len(s)+1 {
				t.Fatalf("%q: position %d outside 1..%d", s, pe.Pos, len(s)+1)
			}
			return
		}
		if len(e.Legs) == 0 || len(e.Legs) > MaxLegs {
			t.Fatalf("%q: %d legs", s, len(e.Legs))
		}
		var out apd.Decimal
		_ = NewEvaluator(e).Eval(&out, vals[:len(e.Legs)])
		if _, err := Parse(e.Canonical, known); err != nil {
			t.Fatalf("%q: canonical %q does not parse: %v", s, e.Canonical, err)
		}
	})
}

package events

import (
	"testing"

	"github.com/cockroachdb/apd/v3"
)

// BenchmarkParseDecimal is the API's common case: a short plain decimal.
func BenchmarkParseDecimal(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDecimal("65012.5"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseDecimalExponent is the slow path: exponent notation.
func BenchmarkParseDecimalExponent(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDecimal("6.50125e4"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalJSON is a decimal string in a request body.
func BenchmarkUnmarshalJSON(b *testing.B) {
	b.ReportAllocs()
	var d Decimal
	for b.Loop() {
		if err := d.UnmarshalJSON([]byte(`"65012.5"`)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecimalMsg is one decimal written to and read from a commit.
func BenchmarkDecimalMsg(b *testing.B) {
	b.ReportAllocs()
	d := MustDecimal("65012.5")
	buf := make([]byte, 0, 64)
	var out Decimal
	for b.Loop() {
		var err error
		if buf, err = d.MarshalMsg(buf[:0]); err != nil {
			b.Fatal(err)
		}
		if _, err = out.UnmarshalMsg(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSteps is a trailing stop's level rounded to its tick.
func BenchmarkSteps(b *testing.B) {
	b.ReportAllocs()
	d, tick := MustDecimal("65012.37"), MustDecimal("0.25")
	for b.Loop() {
		_ = d.Steps(tick, apd.RoundHalfUp)
	}
}

// BenchmarkCmp is two prices compared, at different exponents.
func BenchmarkCmp(b *testing.B) {
	b.ReportAllocs()
	x, y := MustDecimal("65012.5"), MustDecimal("65012.25")
	for b.Loop() {
		_ = x.Cmp(y)
	}
}

// BenchmarkMulQuo is a fill's arithmetic: a notional and a price back from it.
func BenchmarkMulQuo(b *testing.B) {
	b.ReportAllocs()
	px, qty := MustDecimal("65012.5"), MustDecimal("0.013")
	var sink Decimal
	for b.Loop() {
		n := px.Mul(qty)
		sink = n.Quo(qty).Sub(px.Add(n))
	}
	_ = sink
}

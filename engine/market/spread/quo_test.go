package spread

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

// TestQuoMatchesApd checks the fast division against apd's at 16 digits.
func TestQuoMatchesApd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	coeff := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Uint64N(100) + 1
		case 1:
			return rng.Uint64N(1_000_000_000) + 1
		case 2:
			return rng.Uint64() | 1
		}
		return pow10[rng.IntN(19)] * (rng.Uint64N(9) + 1)
	}
	for i := 0; i < 200000; i++ {
		var x, y apd.Decimal
		x.Coeff.SetUint64(coeff())
		y.Coeff.SetUint64(coeff())
		x.Exponent, y.Exponent = int32(rng.IntN(21)-10), int32(rng.IntN(21)-10)
		x.Negative, y.Negative = rng.IntN(2) == 0, rng.IntN(2) == 0
		var want, got apd.Decimal
		_, werr := Ctx.Quo(&want, &x, &y)
		gerr := quo(&got, &x, &y)
		if (werr == nil) != (gerr == nil) || (werr == nil && want.Cmp(&got) != 0) {
			t.Fatalf("%s / %s: apd %s (%v), fast %s (%v)", x.String(), y.String(), want.String(), werr, got.String(), gerr)
		}
	}
	for _, c := range [][3]string{{"1", "4", "0.25"}, {"2", "3", "0.6666666666666667"}, {"-10", "4", "-2.5"}, {"65012.5", "3201.35", "20.3078388804723"}, {"0", "7", "0"}} {
		x, _, _ := apd.NewFromString(c[0])
		y, _, _ := apd.NewFromString(c[1])
		var z apd.Decimal
		if err := quo(&z, x, y); err != nil {
			t.Fatal(err)
		}
		var r apd.Decimal
		r.Reduce(&z)
		if r.Text('f') != c[2] {
			t.Errorf("%s/%s = %s, want %s", c[0], c[1], r.Text('f'), c[2])
		}
	}
	var z apd.Decimal
	if err := quo(&z, apd.New(1, 0), apd.New(0, 0)); err == nil {
		t.Fatal("division by zero must fail")
	}
}

func BenchmarkQuo(b *testing.B) {
	x, _, _ := apd.NewFromString("65012.5")
	y, _, _ := apd.NewFromString("3201.35")
	var z apd.Decimal
	b.Run("fast", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = quo(&z, x, y)
		}
	})
	b.Run("apd", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, _ = Ctx.Quo(&z, x, y)
		}
	})
}

package dec_test

import (
	"testing"

	"github.com/svc/engine/sim/internal/dec"
)

func TestWriting(t *testing.T) {
	for _, tc := range []struct {
		name, in    string
		places      int
		fixed, flat string
	}{
		{"pads to the places", "60000.1", 2, "60000.10", "60000.1"},
		{"rounds half up", "0.125", 2, "0.13", "0.125"},
		{"never writes minus zero", "-0.0000000001", 8, "0.00000000", "-0.0000000001"},
		{"zero", "0.000", 0, "0", "0"},
		{"no exponent", "5E+3", 1, "5000.0", "5000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dec.Must(tc.in)
			if got := dec.Fixed(d, tc.places); got != tc.fixed {
				t.Errorf("Fixed(%s, %d) = %s, want %s", tc.in, tc.places, got, tc.fixed)
			}
			if got := dec.Plain(d); got != tc.flat {
				t.Errorf("Plain(%s) = %s, want %s", tc.in, got, tc.flat)
			}
		})
	}
}

func TestArithmetic(t *testing.T) {
	a, b := dec.Must("7.5"), dec.Must("2.5")
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"add", dec.Plain(dec.Add(a, b)), "10"},
		{"sub", dec.Plain(dec.Sub(b, a)), "-5"},
		{"mul", dec.Plain(dec.Mul(a, b)), "18.75"},
		{"quo", dec.Plain(dec.Quo(a, b)), "3"},
		{"quo by zero is zero", dec.Plain(dec.Quo(a, dec.Zero())), "0"},
		{"neg", dec.Plain(dec.Neg(a)), "-7.5"},
		{"abs", dec.Plain(dec.Abs(dec.Neg(a))), "7.5"},
		{"min", dec.Plain(dec.Min(a, b)), "2.5"},
		{"int", dec.Plain(dec.Int(-3)), "-3"},
		{"quantize", dec.Quantize(dec.Must("1.23456789"), 4).String(), "1.2346"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if a.String() != "7.5" || b.String() != "2.5" {
		t.Errorf("arguments changed: %s, %s", a, b)
	}
}

func TestReading(t *testing.T) {
	for _, tc := range []struct {
		in     string
		ok     bool
		places int
	}{{"4500.25", true, 2}, {"110.515625", true, 6}, {"25", true, 0}, {"NaN", false, 0}, {"Infinity", false, 0}, {"x", false, 0}} {
		d, ok := dec.Parse(tc.in)
		if ok != tc.ok {
			t.Errorf("Parse(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if ok && dec.Places(d) != tc.places {
			t.Errorf("Places(%s) = %d, want %d", tc.in, dec.Places(d), tc.places)
		}
	}
	for _, tc := range []struct {
		d, step string
		want    bool
	}{{"5001.25", "0.25", true}, {"5001.3", "0.25", false}, {"0.003", "0.001", true}, {"7", "0", true}} {
		if got := dec.IsMultiple(dec.Must(tc.d), dec.Must(tc.step)); got != tc.want {
			t.Errorf("IsMultiple(%s, %s) = %v, want %v", tc.d, tc.step, got, tc.want)
		}
	}
}

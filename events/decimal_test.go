package events

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/tinylib/msgp/msgp"
)

// raw makes a Decimal of any finite text apd reads, past every bound.
func raw(s string) Decimal {
	var d Decimal
	if _, _, err := d.v.SetString(s); err != nil || d.v.Form != apd.Finite {
		panic(fmt.Sprintf("raw(%q): %v", s, err))
	}
	return d
}

// withinInput reports whether apd's reading of a decimal is within the
// input's bounds, worked out from the coefficient rather than the text.
func withinInput(d *apd.Decimal) bool {
	n, e := d.NumDigits(), int64(d.Exponent)
	if d.IsZero() {
		return e >= MinDecimalExponent-MaxDecimalDigits+1 && e <= MaxDecimalExponent
	}
	return n <= MaxDecimalDigits && e+n-1 >= MinDecimalExponent && e+n-1 <= MaxDecimalExponent
}

// The plain fast path must read exactly what apd reads, and leave the rest to it.
func TestParseDecimalAgreesWithApd(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-1", "12.50", "0.00000001", "-3.25", "007", "1234567890123456", "123456789012345.678",
		"999999999999999.9", "99999999999999.99", "1e3", "-3e2", "1.", ".5", "-.5", "1.e3", "0.000000000000000001", "-0.00", "0e-51",
		"1234567890123456789012345678901234e-18", "1.5E+15"} {
		want, _, werr := apd.NewFromString(s)
		if werr != nil || want.Form != apd.Finite || !withinInput(want) {
			t.Fatalf("%q is not a decimal within the bounds: %v", s, werr)
		}
		got, gerr := ParseDecimal(s)
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

// Every decimal the API takes is within the stated bounds; the error names the bound.
func TestParseDecimalBounds(t *testing.T) {
	const digits34, digits35 = "1234567890123456789012345678901234", "12345678901234567890123456789012345"
	cases := []struct {
		in     string
		reason string // "" for accepted
	}{
		{"1e-100000", "smaller than 1e-18"},
		{"1e-70", "smaller than 1e-18"},
		{"1E+6144", "1e16 or larger"},
		{"1e100000", "1e16 or larger"},
		{"1e400", "1e16 or larger"},
		{"1e-400", "smaller than 1e-18"},
		{"1e99999999999999999999999", "1e16 or larger"},
		{"1e-99999999999999999999999", "smaller than 1e-18"},
		{"123456789012345678901234567890123456789", "more than 34 significant digits"},
		{"0.000123456789012345678901234567890123456789", "more than 34 significant digits"},
		{"NaN", "not finite"},
		{"nan", "not finite"},
		{"sNaN", "not finite"},
		{"Infinity", "not finite"},
		{"-Inf", "not finite"},
		{"inf", "not finite"},
		{"0x10", "not a decimal number"},
		{"1_000", "not a decimal number"},
		{"1e1_0", "not a decimal number"},
		{" 1", "space around the number"},
		{"1 ", "space around the number"},
		{"\t1", "space around the number"},
		{"1\n", "space around the number"},
		{"1\u00a0", "not a decimal number"},
		{"+1", "a leading '+'"},
		{"", "empty"},
		{"-", "not a decimal number"},
		{".", "not a decimal number"},
		{"1e", "not a decimal number"},
		{"1e+", "not a decimal number"},
		{"1.2.3", "not a decimal number"},
		{"--1", "not a decimal number"},
		{"1,5", "not a decimal number"},
		{"١", "not a decimal number"},
		{strings.Repeat("0", 64) + "1", "more than 64 characters"},
		{"0e-52", "a zero with an exponent outside -51..15"},
		{"0e16", "a zero with an exponent outside -51..15"},
		{"1e-18", ""},
		{"-1e-18", ""},
		{"0.000000000000000001", ""},
		{"1e-19", "smaller than 1e-18"},
		{"0.0000000000000000001", "smaller than 1e-18"},
		{"-0.0000000000000000009", "smaller than 1e-18"},
		{"9999999999999999", ""}, // 16 digits, still below 1e16
		{"9999999999999999.9", ""},
		{"99999999999999999", "1e16 or larger"},
		{"10000000000000000", "1e16 or larger"},
		{"-10000000000000000", "1e16 or larger"},
		{"9999999999999999.999999999999999999", ""},
		{"9999999999999999.9999999999999999999", "more than 34 significant digits"},
		{"999999999999999.9", ""},
		{"999999999999999", ""},
		{"9.99e15", ""},
		{"1e16", "1e16 or larger"},
		{digits34, "1e16 or larger"},
		{digits34 + "e-19", ""},
		{"0." + digits34, ""},
		{"-0." + digits34, ""},
		{"0." + digits35, "more than 34 significant digits"},
		{"0.00000000000000000" + digits34, ""}, // 1.23…e-18, 34 digits: the longest plain text, 53 bytes
		{"0.000000000000000000" + digits34, "smaller than 1e-18"},
		{"1.000000000000000000000000000000000", ""}, // trailing zeros are significant: 34 digits
		{"1.0000000000000000000000000000000000", "more than 34 significant digits"},
		{"0000000000000000000000000000000000000000000001", ""}, // leading zeros are not
		{"0", ""},
		{"-0", ""},
		{"0e-51", ""},
		{"0e15", ""},
		{"-0.000", ""},
	}
	for _, c := range cases {
		in := c.in
		d, err := ParseDecimal(in)
		var u Decimal
		jerr := u.UnmarshalJSON([]byte(strconv.Quote(in)))
		if c.reason == "" {
			if err != nil || jerr != nil {
				t.Errorf("ParseDecimal(%q): %v; UnmarshalJSON: %v", in, err, jerr)
			} else if u.v.Cmp(&d.v) != 0 {
				t.Errorf("UnmarshalJSON(%q) = %s, ParseDecimal %s", in, u, d)
			}
			continue
		}
		for how, err := range map[string]error{"ParseDecimal": err, "UnmarshalJSON": jerr} {
			want := c.reason
			if how == "UnmarshalJSON" && strconv.Quote(in) != `"`+in+`"` {
				want = "not a decimal number" // an escape in a JSON string is never part of a decimal
			}
			var be *DecimalBoundError
			if !errors.As(err, &be) || be.Reason != want || !errors.Is(err, ErrBadDecimal) {
				t.Errorf("%s(%q) = %v, want %q", how, in, err, want)
			}
		}
	}
	// The same bounds hold for JSON numbers.
	for in, reason := range map[string]string{"1e400": "1e16 or larger", "1e-400": "smaller than 1e-18", "-1e-100000": "smaller than 1e-18",
		"123456789012345678901234567890123456789": "more than 34 significant digits", "1E+6144": "1e16 or larger",
		"null": "neither a decimal string nor a number", "true": "neither a decimal string nor a number", "1.5": "", "-0": "", "1e-18": ""} {
		var d Decimal
		err := d.UnmarshalJSON([]byte(in))
		var be *DecimalBoundError
		switch {
		case reason == "" && err != nil:
			t.Errorf("UnmarshalJSON(%s): %v", in, err)
		case reason != "" && (!errors.As(err, &be) || be.Reason != reason):
			t.Errorf("UnmarshalJSON(%s) = %v, want %q", in, err, reason)
		}
	}
	// A request body goes through encoding/json, which hands the error back.
	var body struct{ Quantity Decimal }
	err := stdjson.Unmarshal([]byte(`{"Quantity": "1e-100000"}`), &body)
	var be *DecimalBoundError
	if !errors.As(err, &be) || be.Reason != "smaller than 1e-18" {
		t.Errorf("encoding/json: %v", err)
	}
	// The error quotes at most 40 bytes of the text.
	_, err = ParseDecimal(strings.Repeat("9", 10000))
	if !errors.As(err, &be) || len(be.Text) != 40 || len(err.Error()) > 100 {
		t.Errorf("long text: %v", err)
	}
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "-12.50", "1e3", "123456789012345678", "1e-18", "9.99e15", "1e-19", "0e-51", "-0.0",
		"1234567890123456789012345678901234e-18", "NaN", "+1", " 1", ".5", "1.e3", "1e99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gerr := ParseDecimal(s)
		if gerr != nil {
			var be *DecimalBoundError
			if !errors.As(gerr, &be) || be.Reason == "" || !errors.Is(gerr, ErrBadDecimal) {
				t.Fatalf("ParseDecimal(%q): %v is not a *DecimalBoundError", s, gerr)
			}
			if want, _, werr := apd.NewFromString(s); werr == nil && want.Form == apd.Finite && withinInput(want) &&
				s[0] != '+' && len(s) <= MaxDecimalText && strings.TrimSpace(s) == s {
				t.Fatalf("ParseDecimal(%q) refused a decimal within the bounds: %v", s, gerr)
			}
			return
		}
		want, _, werr := apd.NewFromString(s)
		if werr != nil || want.Form != apd.Finite {
			t.Fatalf("ParseDecimal(%q) = %s, apd refuses it: %v", s, got, werr)
		}
		if got.v.Cmp(want) != 0 || got.v.Exponent != want.Exponent || got.v.Negative != want.Negative {
			t.Fatalf("ParseDecimal(%q) = %+v, apd %+v", s, got.v, *want)
		}
		if !withinInput(want) || len(s) > MaxDecimalText || s[0] == '+' {
			t.Fatalf("ParseDecimal(%q) = %s, outside the bounds", s, got)
		}
		again, err := ParseDecimal(got.String())
		if err != nil || again.Cmp(got) != 0 {
			t.Fatalf("ParseDecimal(%q).String() = %q reads back as %s, %v", s, got.String(), again, err)
		}
		b, err := got.MarshalMsg(nil)
		if err != nil {
			t.Fatalf("MarshalMsg(%s): %v", got, err)
		}
		var back Decimal
		if rest, err := back.UnmarshalMsg(b); err != nil || len(rest) != 0 || back.Cmp(got) != 0 || len(b) > got.Msgsize() {
			t.Fatalf("MessagePack of %s reads back as %s, %v (%d bytes, Msgsize %d)", got, back, err, len(b), got.Msgsize())
		}
	})
}

// appendRandomDecimals appends n decimals of any int64 magnitude and sign,
// at exponents -18 to 6.
func appendRandomDecimals(r *rand.Rand, vals []string, n int) []string {
	for range n {
		coeff := r.Int64N(1 << uint(r.IntN(63)))
		if r.IntN(2) == 0 {
			coeff = -coeff
		}
		vals = append(vals, apd.New(coeff, int32(r.IntN(25)-18)).String())
	}
	return vals
}

// The int64 path of Add and Sub must give exactly what apd gives: the same
// value, exponent and sign, zeros included.
func TestAddSubAgreeWithApd(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	vals := []string{"0", "-0", "0.00", "-0.0", "1", "-1", "9223372036854775807", "-9223372036854775807", "922337203685477580.8",
		"12.50", "-12.5", "1e3", "-2e18", "0.000000000000000001", "123456789012345678901234", "1e-30"}
	vals = appendRandomDecimals(r, vals, 20000)
	for i := range 40000 {
		a, b := raw(vals[r.IntN(len(vals))]), raw(vals[r.IntN(len(vals))])
		if i < 256 {
			a, b = raw(vals[i%16]), raw(vals[i/16])
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

// The int64 path of Quo must give exactly what apd gives, reduced: the
// same value, exponent and sign, for exact quotients (an average price)
// and the others (which take apd's path).
func TestQuoAgreesWithApd(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	vals := []string{"0", "-0", "0.00", "1", "-1", "3", "4", "0.25", "-12.50", "1e3", "100", "0.01", "9223372036854775807",
		"-9223372036854775807", "123456789012345678901234", "1e-30", "7", "0.07", "50000.5", "0.0003"}
	vals = appendRandomDecimals(r, vals, 5000)
	for range 5000 { // exact quotients: a multiple of a divisor, at any exponents
		b := r.Int64N(1 << uint(1+r.IntN(31)))
		q := r.Int64N(1 << uint(1+r.IntN(31)))
		if b == 0 || q > math.MaxInt64/max(b, 1) {
			continue
		}
		vals = append(vals, apd.New(b, int32(r.IntN(19)-12)).String(), apd.New(b*q, int32(r.IntN(19)-12)).String())
	}
	for i := range 60000 {
		a, b := raw(vals[r.IntN(len(vals))]), raw(vals[r.IntN(len(vals))])
		switch {
		case i < 400:
			a, b = raw(vals[i%20]), raw(vals[i/20])
		case i < 20000: // a pair made to divide exactly
			j := 20 + 5000 + 2*r.IntN((len(vals)-5020)/2)
			a, b = raw(vals[j+1]), raw(vals[j])
		}
		if b.IsZero() {
			continue
		}
		var want apd.Decimal
		if _, err := Ctx.Quo(&want, &a.v, &b.v); err != nil {
			t.Fatal(err)
		}
		want.Reduce(&want)
		got := a.Quo(b)
		if got.v.Cmp(&want) != 0 || got.v.Exponent != want.Exponent || got.v.Negative != want.Negative || got.v.Form != want.Form {
			t.Fatalf("%s / %s = %+v (%s), apd %+v (%s)", a, b, got.v, got.v.String(), want, want.String())
		}
	}
}

// String, MarshalText and MarshalMsg write apd's Text('f') of the reduced
// decimal, whatever its size.
func TestTextAgreesWithApd(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	vals := []string{"0", "-0", "0.00", "-0.0", "1", "-1", "10.00", "1e1", "1E+5", "64998.50", "-0.000000000000000001",
		"9223372036854775807", "123456789012345678901234", "1e-30", "-12345678901234567890.123456789"}
	vals = appendRandomDecimals(r, vals, 20000)
	for _, v := range vals {
		d := raw(v)
		var red apd.Decimal
		red.Reduce(&d.v)
		want := red.Text('f')
		if got := d.String(); got != want {
			t.Fatalf("String of %s = %q, apd %q", v, got, want)
		}
		if got, err := d.MarshalText(); err != nil || string(got) != want {
			t.Fatalf("MarshalText of %s = %q, %v; apd %q", v, got, err, want)
		}
		if got, err := d.MarshalMsg([]byte{7}); err != nil || string(got) != string(msgp.AppendString([]byte{7}, want)) {
			t.Fatalf("MarshalMsg of %s = %q, %v; apd %q", v, got, err, want)
		}
	}
}

// MultipleOf's int64 path must answer as apd's Rem does.
func TestMultipleOfAgreesWithApd(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	vals := []string{"0", "-0", "0.00", "1", "-1", "0.01", "0.25", "0.5", "5", "10", "1e3", "0.001", "-12.50", "9223372036854775807",
		"123456789012345678901234", "1e-30", "3"}
	vals = appendRandomDecimals(r, vals, 5000)
	steps := []string{"0.01", "0.25", "0.5", "1", "5", "0.001", "0.1", "1e-8", "100", "3", "7"}
	for i := range 40000 {
		a := raw(vals[r.IntN(len(vals))])
		b := raw(steps[r.IntN(len(steps))])
		switch {
		case i < len(vals)*len(steps) && i < 200:
			a, b = raw(vals[i%len(vals)]), raw(steps[i%len(steps)])
		case i%3 == 0: // a multiple of b, at times off by one of its last digit
			q := raw(strconv.FormatInt(r.Int64N(1_000_000)-500_000, 10))
			a = b.Mul(q)
			if i%2 == 0 {
				a = a.Add(raw("1e-9"))
			}
		case i%3 == 1:
			b = raw(vals[r.IntN(len(vals))])
		}
		if b.Sign() <= 0 {
			continue
		}
		var rem apd.Decimal
		_, err := Ctx.Rem(&rem, &a.v, &b.v)
		want := err == nil && rem.IsZero()
		if got := a.MultipleOf(b); got != want {
			t.Fatalf("%s MultipleOf %s = %v, apd %v (%v)", a, b, got, want, err)
		}
	}
}

// The int64 paths of Steps and Cmp must give exactly what apd gives: the
// same value, exponent and sign (Steps), the same order (Cmp), for values
// inside and outside their bounds.
func TestStepsAndCmpAgreeWithApd(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	vals := []string{"0", "-0", "0.00", "1", "-1", "0.5", "-0.5", "2.5", "-2.5", "0.25", "0.125", "65012.37", "-65012.37",
		"999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807", "0.000000000000000001",
		"123456789012345678901234", "1e-30", "1e3", "-2e18", "0.3333333333333333", "99999999999999.99", "100000000000000"}
	vals = appendRandomDecimals(r, vals, 20000)
	steps := []string{"0.25", "0.01", "1", "0.5", "5", "0.00000001", "0.3", "7", "1e3", "0.0000000000000001", "99999999999999.9", "999999999999999", "3e-20"}
	for range 2000 {
		steps = append(steps, apd.New(1+r.Int64N(1<<uint(r.IntN(62))), int32(r.IntN(20)-12)).String())
	}
	slow := func(d, step Decimal, rounding apd.Rounder) apd.Decimal { // Steps as apd alone does it
		var q apd.Decimal
		c := Ctx
		c.Rounding = rounding
		if _, err := Ctx.Quo(&q, &d.v, &step.v); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RoundToIntegralValue(&q, &q); err != nil {
			t.Fatal(err)
		}
		if _, err := Ctx.Mul(&q, &q, &step.v); err != nil {
			t.Fatal(err)
		}
		q.Reduce(&q)
		return q
	}
	fast := 0
	for i := range 60000 {
		a, b := raw(vals[r.IntN(len(vals))]), raw(vals[r.IntN(len(vals))])
		if i < len(vals)*len(vals) && i < 625 {
			a, b = raw(vals[i%25]), raw(vals[i/25])
		}
		if got, want := a.Cmp(b), a.v.Cmp(&b.v); got != want {
			t.Fatalf("Cmp(%s, %s) = %d, apd %d", a, b, got, want)
		}
		step := raw(steps[r.IntN(len(steps))])
		for _, rounding := range []apd.Rounder{apd.RoundHalfUp, apd.RoundFloor} {
			if _, ok := stepsSmall(&a.v, &step.v, rounding); ok {
				fast++
			}
			got, want := a.Steps(step, rounding), slow(a, step, rounding)
			if got.v.Cmp(&want) != 0 || got.v.Exponent != want.Exponent || got.v.Negative != want.Negative || got.v.Form != want.Form {
				t.Fatalf("%s.Steps(%s, %s) = %+v (%s), apd %+v (%s)", a, step, rounding, got.v, got.v.String(), want, want.String())
			}
		}
	}
	if fast < 20000 {
		t.Fatalf("the int64 path took %d of 120000 cases: the test no longer reaches it", fast)
	}
}

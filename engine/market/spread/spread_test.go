package spread

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/apd/v3"
)

var catalog = map[string]bool{"BTC-PERP": true, "ETH-PERP": true, "SOL-PERP": true, "ES": true, "NQ": true, "6E": true, "BTC-PERP-X": true, "EUR/USD": true}

func known(name string) (string, bool) {
	up := strings.ToUpper(name)
	return up, catalog[up]
}

func dec(s string) *apd.Decimal { d, _, _ := apd.NewFromString(s); return d }

func eval(t *testing.T, e *Expr, vals map[string]string) string {
	t.Helper()
	legs := make([]*apd.Decimal, len(e.Legs))
	for i, l := range e.Legs {
		legs[i] = dec(vals[l])
	}
	var out apd.Decimal
	if err := NewEvaluator(e).Eval(&out, legs); err != nil {
		return "error: " + err.Error()
	}
	return out.Text('f')
}

func TestParseAndEvaluate(t *testing.T) {
	vals := map[string]string{"BTC-PERP": "100", "ETH-PERP": "10", "SOL-PERP": "4", "ES": "5000", "NQ": "20000", "6E": "1.1", "BTC-PERP-X": "7", "EUR/USD": "1.25"}
	cases := []struct {
		in, legs, want string
	}{
		{"BTC-PERP", "BTC-PERP", "100"},
		{"  btc-perp ", "BTC-PERP", "100"},
		{"BTC-PERP-ETH-PERP", "BTC-PERP ETH-PERP", "90"},
		{"BTC-PERP-X", "BTC-PERP-X", "7"}, // an exact catalog symbol is always that symbol
		{"BTC-PERP-X-ETH-PERP", "BTC-PERP-X ETH-PERP", "-3"},
		{"EUR/USD", "EUR/USD", "1.25"},
		{"EUR/USD/6E", "EUR/USD 6E", "1.136363636363636"},
		{"BTC-PERP - 2*ETH-PERP", "BTC-PERP ETH-PERP", "80"},
		{"2*6E", "6E", "2.2"},
		{"BTC-PERP + ETH-PERP * SOL-PERP", "BTC-PERP ETH-PERP SOL-PERP", "140"},
		{"(BTC-PERP + ETH-PERP) * SOL-PERP", "BTC-PERP ETH-PERP SOL-PERP", "440"},
		{"SOL-PERP ^ 2 ^ 0.5", "SOL-PERP", "4"}, // right-associative: 4^(2^0.5) would differ; 2^0.5 first
		{"-SOL-PERP^2", "SOL-PERP", "-16"},
		{"ES/NQ", "ES NQ", "0.25"},
		{"ES - NQ/4 + .5 - 6E", "ES NQ 6E", "-0.6"},
		{"BTC-PERP/(ETH-PERP-ETH-PERP)", "BTC-PERP ETH-PERP", "error: spread: undefined value"},
		{"BTC-PERP + ETH-PERP + SOL-PERP + ES", "BTC-PERP ETH-PERP SOL-PERP ES", "5114"},
		{"BTC-PERP * BTC-PERP", "BTC-PERP", "10000"},
	}
	for _, c := range cases {
		e, err := Parse(c.in, known)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got := strings.Join(e.Legs, " "); got != c.legs {
			t.Errorf("%q: legs %q, want %q", c.in, got, c.legs)
		}
		if c.in == "SOL-PERP ^ 2 ^ 0.5" {
			continue // value checked below
		}
		if got := eval(t, e, vals); got != c.want {
			t.Errorf("%q = %s, want %s", c.in, got, c.want)
		}
	}
	e, _ := Parse("SOL-PERP ^ 2 ^ 0.5", known)
	if got := eval(t, e, vals); !strings.HasPrefix(got, "7.10") { // 4^1.41421...
		t.Errorf("right associativity: got %s", got)
	}
}

func TestErrorsNamePosition(t *testing.T) {
	cases := []struct {
		in   string
		pos  int
		word string
	}{
		{"", 1, "empty"},
		{"BTC-PERP +", 11, "expected a number"},
		{"BTC-PERP + FOO", 12, `unknown instrument "FOO"`},
		{"(BTC-PERP - ETH-PERP", 21, "expected ')'"},
		{"BTC-PERP )", 10, "unexpected ')'"},
		{"BTC-PERP # 2", 10, "unexpected character"},
		{"1.2.3 * ES", 1, "malformed number"},
		{"2 + 3", 1, "at least one instrument"},
		{"BTC-PERP+ETH-PERP+SOL-PERP+ES+NQ", 31, "more than 4 legs"},
		{"BTC-PERP ES", 10, "unexpected instrument ES"},
		{strings.Repeat("(", 40) + "ES" + strings.Repeat(")", 40), 34, "nested more than"},
		{strings.Repeat("ES+", 90), 257, "longer than 256"},
		{"ES * é", 6, "unexpected character"},
	}
	for _, c := range cases {
		_, err := Parse(c.in, known)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%q: want a parse error, got %v", c.in, err)
			continue
		}
		if pe.Pos != c.pos || !strings.Contains(pe.Msg, c.word) {
			t.Errorf("%q: got %q at %d, want %q at %d", c.in, pe.Msg, pe.Pos, c.word, c.pos)
		}
		if !strings.Contains(err.Error(), "position") {
			t.Errorf("%q: message %q does not name the position", c.in, err)
		}
	}
}

func TestCanonicalSharesSpellings(t *testing.T) {
	a, _ := Parse("BTC-PERP-ETH-PERP", known)
	b, _ := Parse(" btc-perp  -  eth-perp", known)
	if a.Canonical != b.Canonical || a.Canonical != "BTC-PERP - ETH-PERP" {
		t.Fatalf("canonical %q vs %q", a.Canonical, b.Canonical)
	}
	if !a.Single() == false && a.Single() {
		t.Fatal("a spread is not a single instrument")
	}
	s, _ := Parse("ES", known)
	if !s.Single() {
		t.Fatal("ES is a single instrument")
	}
}

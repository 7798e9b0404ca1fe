package tradovate

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// dctx is the one arithmetic context of the simulator: every price, quantity of money and balance
// is an apd.Decimal computed through it. A Decimal once shared is never mutated in place; every
// helper returns a fresh one.
var dctx = apd.BaseContext.WithPrecision(40)

func mustDec(s string) *apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic("tradovate sim: bad decimal constant " + s)
	}
	return d
}

// parseDec reads a finite decimal from its text ("4500.25", "110.515625").
func parseDec(s string) (*apd.Decimal, bool) {
	d, _, err := apd.NewFromString(s)
	if err != nil || d.Form != apd.Finite {
		return nil, false
	}
	return d, true
}

func zero() *apd.Decimal { return new(apd.Decimal) }

func fromInt(i int64) *apd.Decimal { return apd.New(i, 0) }

func add(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = dctx.Add(r, a, b)
	return r
}

func sub(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = dctx.Sub(r, a, b)
	return r
}

func mul(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	_, _ = dctx.Mul(r, a, b)
	return r
}

func quo(a, b *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	if b.IsZero() {
		return r
	}
	_, _ = dctx.Quo(r, a, b)
	return r
}

func abs(a *apd.Decimal) *apd.Decimal {
	r := new(apd.Decimal)
	r.Abs(a)
	return r
}

// isMultiple says whether d is a whole multiple of step.
func isMultiple(d, step *apd.Decimal) bool {
	if step.IsZero() {
		return true
	}
	r := new(apd.Decimal)
	_, _ = dctx.Rem(r, d, step)
	return r.IsZero()
}

// plain writes d without trailing zeros and without an exponent: "0.25", "5000", "-12.5".
func plain(d *apd.Decimal) string {
	r := new(apd.Decimal)
	r.Reduce(d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}

// num is a decimal written into JSON as a number literal, as the provider writes its doubles
// ("price": 4500.25). It is never a float on the way: the literal is the decimal's own text.
type num apd.Decimal

func dnum(d *apd.Decimal) *num {
	if d == nil {
		return nil
	}
	c := new(apd.Decimal)
	c.Set(d)
	return (*num)(c)
}

func (n *num) dec() *apd.Decimal { return (*apd.Decimal)(n) }

// MarshalJSON writes the decimal as a JSON number.
func (n *num) MarshalJSON() ([]byte, error) {
	if n == nil {
		return []byte("null"), nil
	}
	return []byte(plain((*apd.Decimal)(n))), nil
}

// UnmarshalJSON reads a JSON number (or a numeric string) exactly, without passing through a float.
func (n *num) UnmarshalJSON(b []byte) error {
	var raw json.Number
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		raw = json.Number(s)
	} else if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	d, ok := parseDec(raw.String())
	if !ok {
		return fmt.Errorf("not a number: %s", b)
	}
	(*apd.Decimal)(n).Set(d)
	return nil
}

package tradovate

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

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
	return []byte(dec.Plain((*apd.Decimal)(n))), nil
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
	d, ok := dec.Parse(raw.String())
	if !ok {
		return fmt.Errorf("not a number: %s", b)
	}
	(*apd.Decimal)(n).Set(d)
	return nil
}

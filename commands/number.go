package commands

import (
	"bytes"
	"errors"

	"github.com/svc/engine/events"
)

// Number is a value a client sends as a JSON number literal or null, never
// a string and never through a float: Set reports whether one was sent.
type Number struct {
	events.Decimal
	Set bool
}

// maxNumber bounds a number literal's length.
const maxNumber = 64

var errNotNumber = errors.New("not a number")

// UnmarshalJSON accepts a JSON number literal or null.
func (n *Number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*n = Number{}
		return nil
	}
	if len(b) == 0 || len(b) > maxNumber || !(b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) {
		return errNotNumber
	}
	d, err := events.ParseDecimal(string(b))
	if err != nil {
		return errNotNumber
	}
	*n = Number{Decimal: d, Set: true}
	return nil
}

// MarshalBinary writes whether a number was sent and its text (for
// encoding/gob; the embedded Decimal's would drop Set).
func (n Number) MarshalBinary() ([]byte, error) {
	if !n.Set {
		return []byte{0}, nil
	}
	b, err := n.Decimal.MarshalBinary()
	return append([]byte{1}, b...), err
}

// UnmarshalBinary reads what MarshalBinary wrote.
func (n *Number) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] == 0 {
		*n = Number{}
		return nil
	}
	var d events.Decimal
	if err := d.UnmarshalBinary(b[1:]); err != nil {
		return err
	}
	*n = Number{Decimal: d, Set: true}
	return nil
}

// Ptr is the number sent, or nil when none was.
func (n *Number) Ptr() *events.Decimal {
	if n == nil || !n.Set {
		return nil
	}
	d := n.Decimal
	return &d
}

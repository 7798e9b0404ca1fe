package projections

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/tinylib/msgp/msgp"

	"github.com/svc/engine/events"
)

// Packable is a document the memory store keeps packed: as the bytes
// AppendPacked writes, in one allocation with its key, rather than as a Go
// value whose every string and decimal the collector traces at each cycle.
// Orders and fills are most of a long log's documents (two of every fill's
// commit): packed, a cold replay of a million commits keeps a fraction of
// the memory and the collector has next to nothing to trace in them.
// Packing is an in-memory form only, never written anywhere; UnpackFrom
// reads back the very same value.
type Packable interface {
	AppendPacked(b []byte) []byte
	// UnpackFrom sets the document to the one packed in s. The strings it
	// sets may share s's memory (a string never changes).
	UnpackFrom(s string) error
}

// AsPackable is v as a Packable: v itself, or a pointer to a copy of an
// Order or Fill value.
func AsPackable(v any) (Packable, bool) {
	switch x := v.(type) {
	case Packable:
		return x, true
	case Order:
		return &x, true
	case Fill:
		return &x, true
	}
	return nil, false
}

// The number of fields each packed type writes: a packed value of another
// shape is refused, not misread.
const (
	orderFields = 18
	fillFields  = 9
)

// AppendPacked implements Packable.
// A copier's mirror packs one more field, its leader's order id, last.
func (o *Order) AppendPacked(b []byte) []byte {
	n := uint32(orderFields)
	if o.LeaderOrderID != "" {
		n++
	}
	b = msgp.AppendArrayHeader(b, n)
	for _, s := range [...]string{o.AccountID, o.BrokerOrderID, o.ClientOrderID, o.Instrument, o.Side,
		o.OrderType, o.TimeInForce, o.State, o.BracketID} {
		b = msgp.AppendString(b, s)
	}
	b = o.Quantity.AppendPacked(b)
	b = o.FilledQuantity.AppendPacked(b)
	for _, d := range [...]*events.Decimal{o.LimitPrice, o.StopPrice, o.AvgFillPrice} {
		if d == nil {
			b = msgp.AppendNil(b)
		} else {
			b = d.AppendPacked(b)
		}
	}
	b = msgp.AppendBool(b, o.ReduceOnly)
	b = msgp.AppendTimeExt(b, o.CreatedAt)
	b = msgp.AppendTimeExt(b, o.UpdatedAt)
	b = msgp.AppendUint64(b, o.Seq)
	if o.LeaderOrderID != "" {
		b = msgp.AppendString(b, o.LeaderOrderID)
	}
	return b
}

// UnpackFrom implements Packable.
func (o *Order) UnpackFrom(s string) error {
	var r unpacker
	n := r.openOf(s, orderFields, orderFields+1)
	var v Order
	for _, p := range [...]*string{&v.AccountID, &v.BrokerOrderID, &v.ClientOrderID, &v.Instrument, &v.Side,
		&v.OrderType, &v.TimeInForce, &v.State, &v.BracketID} {
		*p = r.string()
	}
	v.Quantity = r.decimal()
	v.FilledQuantity = r.decimal()
	v.LimitPrice, v.StopPrice, v.AvgFillPrice = r.optDecimal(), r.optDecimal(), r.optDecimal()
	v.ReduceOnly = r.bool()
	v.CreatedAt, v.UpdatedAt = r.time(), r.time()
	v.Seq = r.uint()
	if n == orderFields+1 {
		v.LeaderOrderID = r.string()
	}
	if err := r.done("an order"); err != nil {
		return err
	}
	*o = v
	return nil
}

// AppendPacked implements Packable.
func (f *Fill) AppendPacked(b []byte) []byte {
	b = msgp.AppendArrayHeader(b, fillFields)
	for _, s := range [...]string{f.FillID, f.BrokerOrderID, f.Instrument, f.Side} {
		b = msgp.AppendString(b, s)
	}
	for _, d := range [...]*events.Decimal{&f.Quantity, &f.Price, &f.RealizedPnl, &f.Commission} {
		b = d.AppendPacked(b)
	}
	return msgp.AppendTimeExt(b, f.Time)
}

// UnpackFrom implements Packable.
func (f *Fill) UnpackFrom(s string) error {
	var r unpacker
	r.open(s, fillFields)
	var v Fill
	for _, p := range [...]*string{&v.FillID, &v.BrokerOrderID, &v.Instrument, &v.Side} {
		*p = r.string()
	}
	for _, p := range [...]*events.Decimal{&v.Quantity, &v.Price, &v.RealizedPnl, &v.Commission} {
		*p = r.decimal()
	}
	v.Time = r.time()
	if err := r.done("a fill"); err != nil {
		return err
	}
	*f = v
	return nil
}

// unpacker reads a packed document field by field; the first error stops
// it and done reports it. b is a string's memory: it is only read, and the
// strings read share it.
type unpacker struct {
	b   []byte
	err error
}

var errPackShape = errors.New("not the packed shape of its type")

// open starts reading the packed document s, which should hold fields fields.
func (r *unpacker) open(s string, fields uint32) {
	n, b, err := msgp.ReadArrayHeaderBytes(unsafe.Slice(unsafe.StringData(s), len(s)))
	if err == nil && n != fields {
		err = errPackShape
	}
	r.b, r.err = b, err
}

// openOf is open for a document of any of the field counts; it answers
// the document's.
func (r *unpacker) openOf(s string, counts ...uint32) uint32 {
	n, b, err := msgp.ReadArrayHeaderBytes(unsafe.Slice(unsafe.StringData(s), len(s)))
	if err == nil && !slices.Contains(counts, n) {
		err = errPackShape
	}
	r.b, r.err = b, err
	return n
}

func (r *unpacker) string() string {
	if r.err != nil {
		return ""
	}
	var s []byte
	s, r.b, r.err = msgp.ReadStringZC(r.b)
	if len(s) == 0 {
		return ""
	}
	return unsafe.String(&s[0], len(s))
}

func (r *unpacker) decimal() events.Decimal {
	var d events.Decimal
	if r.err == nil {
		r.b, r.err = d.ReadPacked(r.b)
	}
	return d
}

func (r *unpacker) optDecimal() *events.Decimal {
	if r.err != nil {
		return nil
	}
	if msgp.IsNil(r.b) {
		r.b, r.err = msgp.ReadNilBytes(r.b)
		return nil
	}
	d := r.decimal()
	return &d
}

func (r *unpacker) bool() bool {
	var v bool
	if r.err == nil {
		v, r.b, r.err = msgp.ReadBoolBytes(r.b)
	}
	return v
}

func (r *unpacker) uint() uint64 {
	var v uint64
	if r.err == nil {
		v, r.b, r.err = msgp.ReadUint64Bytes(r.b)
	}
	return v
}

func (r *unpacker) time() time.Time {
	var t time.Time
	if r.err == nil {
		t, r.b, r.err = msgp.ReadTimeUTCBytes(r.b)
	}
	return t
}

// done is the first error met reading the document (what), or one for
// bytes left over.
func (r *unpacker) done(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.err = errPackShape
	}
	if r.err != nil {
		return fmt.Errorf("projections: unpack %s: %w", what, r.err)
	}
	return nil
}

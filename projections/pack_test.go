package projections_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
)

// fill sets every field of the struct v points to, distinct by field, so a
// field the packing forgets comes back different.
func fill(t testing.TB, v any, dec func(i int) events.Decimal) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch p := f.Addr().Interface().(type) {
		case *string:
			*p = "v" + string(rune('a'+i)) + "-ÿ"
		case *bool:
			*p = true
		case *uint64:
			*p = uint64(1<<40 + i)
		case *events.Decimal:
			*p = dec(i)
		case **events.Decimal:
			d := dec(i)
			*p = &d
		case *time.Time:
			*p = time.Date(2026, 11, 27, 10, i, 3, 123456789, time.UTC)
		default:
			t.Fatalf("field %s of %T: no value for a %s", rv.Type().Field(i).Name, v, f.Type())
		}
	}
}

// Orders and fills pack and unpack to the very same value: every field, each
// decimal's digits and exponent (past 64 bits of coefficient too), nil
// decimals and zero times; bytes of another shape are refused.
func TestPackedDocumentsReadBackTheSame(t *testing.T) {
	decimals := map[string]func(int) events.Decimal{
		"small":    func(i int) events.Decimal { return events.MustDecimal("-12.500") },
		"exponent": func(i int) events.Decimal { return events.MustDecimal("3e5") },
		"large":    func(i int) events.Decimal { return events.MustDecimal("1234567890123.123456789012345678901") },
		"zero":     func(i int) events.Decimal { return events.MustDecimal("-0.00") },
	}
	for name, dec := range decimals {
		var o projections.Order
		fill(t, &o, dec)
		var f projections.Fill
		fill(t, &f, dec)
		for _, c := range []struct{ in, out projections.Packable }{{&o, new(projections.Order)}, {&f, new(projections.Fill)},
			{&projections.Order{}, new(projections.Order)}, {&projections.Fill{}, new(projections.Fill)}} {
			if err := c.out.UnpackFrom(string(c.in.AppendPacked(nil))); err != nil {
				t.Fatalf("%s: unpack %T: %v", name, c.in, err)
			}
			if !reflect.DeepEqual(c.in, c.out) {
				t.Fatalf("%s: %+v\nreads back as %+v", name, c.in, c.out)
			}
		}
	}
	var o projections.Order
	if err := o.UnpackFrom(string((&projections.Fill{}).AppendPacked(nil))); err == nil {
		t.Fatal("a fill's bytes unpacked as an order")
	}
	if err := o.UnpackFrom(string((&projections.Order{}).AppendPacked(nil)) + "x"); err == nil {
		t.Fatal("an order with a byte too many unpacked")
	}
}

// Whatever bytes UnpackFrom is given, it answers an error or a document that
// packs and unpacks to itself: packed bytes never come from outside, but a
// fault in them must never crash the store's reader.
func FuzzUnpackOrder(f *testing.F) {
	var o projections.Order
	fill(f, &o, func(int) events.Decimal { return events.MustDecimal("-12.500") })
	f.Add(o.AppendPacked(nil))
	f.Add((&projections.Fill{}).AppendPacked(nil))
	f.Add([]byte{0x92, 0xc0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got projections.Order
		if got.UnpackFrom(string(b)) != nil {
			return
		}
		var again projections.Order
		if err := again.UnpackFrom(string(got.AppendPacked(nil))); err != nil || !reflect.DeepEqual(got, again) {
			t.Fatalf("%+v packs to %+v (%v)", got, again, err)
		}
	})
}

// The cost of packing an order (the fold, once a write) and of unpacking it
// (every read of it from the memory store).
func BenchmarkPackOrder(b *testing.B) {
	var o projections.Order
	fill(b, &o, func(int) events.Decimal { return events.MustDecimal("65000.5") })
	o.ClientOrderID, o.BrokerOrderID = "c-01JBENCH0000000000000001", "01JBENCHORDER00000000000001"
	packed := string(o.AppendPacked(nil))
	b.Run("pack", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		b.ReportAllocs()
		for b.Loop() {
			buf = o.AppendPacked(buf[:0])
		}
		b.ReportMetric(float64(len(buf)), "bytes")
	})
	b.Run("unpack", func(b *testing.B) {
		var got projections.Order
		b.ReportAllocs()
		for b.Loop() {
			if err := got.UnpackFrom(packed); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package events_test

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
	evorg "github.com/svc/engine/events/org"
	evplan "github.com/svc/engine/events/plan"
	evtenant "github.com/svc/engine/events/tenant"
)

// scan makes a Decimal of any finite text, past every bound, as a NUMERIC
// column would.
func scan(s string) events.Decimal {
	var d events.Decimal
	if err := d.Scan(s); err != nil {
		panic(fmt.Sprintf("scan %q: %v", s, err))
	}
	return d
}

const digits34 = "1234567890123456789012345678901234"

// boundary is a decimal at or past a bound, and whether a commit may hold it.
type boundary struct {
	d        events.Decimal
	encodes  bool
	describe string
}

// boundaries are decimals at and beyond every bound of the input and the codec.
func boundaries() []boundary {
	digits64 := strings.Repeat("1234567890", 6) + "1234"
	var out []boundary
	for _, c := range []struct {
		text    string
		encodes bool
	}{
		// the input's bounds, and just past them: a commit holds all of these
		{"0", true}, {"-0", true}, {"0e-51", true}, {"-0.000", true}, {"0e15", true},
		{"1e-18", true}, {"-1e-18", true}, {"1e-19", true}, {"9.99e15", true}, {"-9.99e15", true},
		{"9999999999999999.999999999999999999", true}, {"1e16", true}, {"-1e16", true},
		{digits34, true}, {"-" + digits34 + "e-51", true}, {"0.00000000000000000" + digits34, true},
		{"123456789012345678901234567890123456789", true}, // 39 digits
		{"1e-40", true}, {"1e-60", true}, {"-1e-60", true}, {"1e60", true},
		// the codec's bounds
		{"1e-64", true}, {"-1e-64", true}, {"-0." + strings.Repeat("0", 63) + digits64, true}, // 130 bytes
		{"9." + strings.Repeat("9", 63) + "e63", true}, {"-" + digits64 + "e-10", true}, {"0e-127", true}, {"0e63", true},
		{"1e-65", false}, {"-1e-65", false}, {"1e64", false}, {"-1e64", false},
		{digits64 + "5", false}, {"0." + digits64 + "5", false},
		{"1." + strings.Repeat("0", 64), true}, // 65 digits, but written as "1"
		// the issue's
		{"1e-70", false}, {"1e-100000", false}, {"1E+6144", false}, {"1e100000", false}, {"1e400", false}, {"-1e-400", false},
		{"NaN", false}, {"Infinity", false}, {"-Infinity", false},
	} {
		var d events.Decimal
		if err := d.Scan(c.text); err != nil {
			panic(err)
		}
		out = append(out, boundary{d, c.encodes, c.text})
	}
	return out
}

// fillWith sets every field of v, recursively, to a value that is not its
// zero, each decimal to one next() gives.
func fillWith(t *testing.T, v reflect.Value, at time.Time, next func() events.Decimal) {
	switch v.Interface().(type) {
	case events.Decimal:
		v.Set(reflect.ValueOf(next()))
		return
	case time.Time:
		v.Set(reflect.ValueOf(at))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.Set(reflect.ValueOf(7).Convert(v.Type()))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillWith(t, v.Elem(), at, next)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fillWith(t, v.Index(0), at, next)
		fillWith(t, v.Index(1), at, next)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillWith(t, k, at, next)
		fillWith(t, e, at, next)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		for i := range v.NumField() {
			fillWith(t, v.Field(i), at, next)
		}
	default:
		t.Fatalf("fill: no value for a %s", v.Type())
	}
}

// registered is one zero event of every type the registry holds, in name order.
func registered(t *testing.T, reg events.Registry) []events.Event {
	names := make([]string, 0, len(reg))
	for name := range reg {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []events.Event
	for _, name := range names {
		e, err := reg[name].Decode([]byte("{}"))
		if err != nil || e.Type() != name {
			t.Fatalf("%s: the empty event decodes as %v, %v", name, e, err)
		}
		out = append(out, e)
	}
	return out
}

// Property: for every registered event type, with its decimals at and past
// every bound, Encode then Decode gives back the same commit in MessagePack
// and in JSON, or Encode refuses it (exactly when a decimal is outside the
// codec's bounds): never an encoded commit that fails to decode.
func TestPropertyEveryEventTypeRoundTripsOrIsRefused(t *testing.T) {
	reg := events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry(), evorg.Registry(), evplan.Registry())
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.UTC)
	bs := boundaries()
	rng := rand.New(rand.NewPCG(11, 12))
	runs := 60
	if testing.Short() {
		runs = 10
	}
	withDecimals := 0
	for _, zero := range registered(t, reg) {
		typ := reflect.TypeOf(zero)
		// one event with every decimal at each boundary, then random mixes
		for i := range len(bs) + runs {
			ok, decimals := true, 0
			var used []string
			next := func() events.Decimal {
				b := bs[rng.IntN(len(bs))]
				if i < len(bs) {
					b = bs[i]
				}
				ok, decimals = ok && b.encodes, decimals+1
				used = append(used, b.describe)
				return b.d
			}
			v := reflect.New(typ).Elem()
			fillWith(t, v, at, next)
			e := v.Interface().(events.Event)
			if decimals == 0 && i > 0 {
				break
			}
			if decimals > 0 && i == 0 {
				withDecimals++
			}
			c := events.Commit{CommandID: "01J0000000000000000000000E", Key: "k", At: at, Events: []events.Event{zero, e}}
			for how, r := range map[string]events.Registry{"MessagePack": reg, "JSON": reg.WritingJSON()} {
				b, err := r.Encode(c)
				if !ok {
					if err == nil {
						t.Fatalf("%s %s with decimals %q: encoded, want an error", how, e.Type(), used)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s %s with decimals %q: %v", how, e.Type(), used, err)
				}
				if (b[0] == '{') != (how == "JSON") {
					t.Fatalf("%s %s: written as %q...", how, e.Type(), b[:1])
				}
				got, err := reg.Decode(b)
				if err != nil {
					t.Fatalf("%s %s with decimals %q: encoded, but does not decode: %v", how, e.Type(), used, err)
				}
				sameCommit(t, how+" "+e.Type(), got, c)
			}
		}
	}
	if withDecimals < 5 {
		t.Fatalf("only %d event types hold decimals: the registries or fillWith went wrong", withDecimals)
	}
}

// A decimal a commit may not hold is refused by its encoder with the bound it
// breaks, in either encoding, before any byte is appended.
func TestEncodeRefusesWhatDecodeWould(t *testing.T) {
	reg := events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry(), evorg.Registry(), evplan.Registry())
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	price := scan("1e-70")
	c := events.Commit{CommandID: "c", At: at, Events: []events.Event{evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: "o1",
		Instrument: "BTC-PERP", Side: "buy", OrderType: "limit", Quantity: events.MustDecimal("1"), LimitPrice: &price, CreatedAt: at}}}}
	for how, r := range map[string]events.Registry{"MessagePack": reg, "JSON": reg.WritingJSON()} {
		b, err := r.Encode(c)
		if err == nil || !errors.Is(err, events.ErrBadDecimal) {
			t.Errorf("%s: %d bytes, %v; want ErrBadDecimal", how, len(b), err)
		}
		var be *events.DecimalBoundError
		if !errors.As(err, &be) || be.Reason != "smaller than 1e-64" {
			t.Errorf("%s: %v, want the bound it breaks", how, err)
		}
	}
	for _, b := range boundaries() {
		mb, merr := b.d.MarshalMsg([]byte{0xc0})
		_, terr := b.d.MarshalText()
		if (merr == nil) != b.encodes || (terr == nil) != b.encodes {
			t.Errorf("%s: MarshalMsg %v, MarshalText %v, want encodes=%v", b.describe, merr, terr, b.encodes)
		}
		if merr != nil && len(mb) != 1 {
			t.Errorf("%s: MarshalMsg appended %d bytes before it refused", b.describe, len(mb)-1)
		}
		if merr == nil && len(mb)-1 > b.d.Msgsize() {
			t.Errorf("%s: %d bytes, Msgsize %d", b.describe, len(mb)-1, b.d.Msgsize())
		}
	}
}

// JSON this build wrote is read within the codec's bounds, through pointers,
// slices, arrays and maps; what comes from outside, within the input's.
func TestUnmarshalStoredReadsComputedValues(t *testing.T) {
	type position struct {
		Qty  events.Decimal  `json:"qty"`
		Avg  *events.Decimal `json:"avg,omitempty"`
		Note string          `json:"note"`
	}
	type model struct {
		Balance   events.Decimal             `json:"balance"`
		Positions []position                 `json:"positions"`
		ByName    map[string]*events.Decimal `json:"byName"`
		Last      [2]events.Decimal          `json:"last"`
		At        time.Time                  `json:"at"`
	}
	big, small := scan("1234567890123456789012.123456789012"), scan("-1e-40")
	want := model{Balance: big, Positions: []position{{Qty: small, Avg: &big, Note: "n"}}, ByName: map[string]*events.Decimal{"x": &small},
		Last: [2]events.Decimal{big, small}, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := stdjson.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got model
	if err := events.UnmarshalStored(b, &got); err != nil {
		t.Fatal(err)
	}
	if again, _ := stdjson.Marshal(got); !bytes.Equal(again, b) {
		t.Errorf("read back as\n%s\nwant\n%s", again, b)
	}
	var outside model
	if err := stdjson.Unmarshal(b, &outside); !errors.Is(err, events.ErrBadDecimal) {
		t.Errorf("json.Unmarshal of computed values: %v, want the input's bounds", err)
	}
	var d events.Decimal
	if err := events.UnmarshalStored([]byte(`"1e-70"`), &d); !errors.Is(err, events.ErrBadDecimal) {
		t.Errorf("1e-70: %v, want the codec's bounds", err)
	}
}

// A type inside itself is read without looping: its own decimals within the
// codec's bounds, its child's within the input's.
func TestUnmarshalStoredSelfReference(t *testing.T) {
	type node struct {
		Amount events.Decimal `json:"amount"`
		Child  *node          `json:"child"`
	}
	var n node
	if err := events.UnmarshalStored([]byte(`{"amount":"1e20","child":{"amount":"2"}}`), &n); err != nil || n.Child == nil || n.Child.Amount.String() != "2" {
		t.Fatalf("%+v, %v", n, err)
	}
}

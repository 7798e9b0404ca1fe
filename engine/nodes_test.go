package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// fill sets every field reachable from v to a value other than its zero,
// different per field (n counts them), so a field the wire drops or a value
// it changes shows up in a comparison.
func fill(t *testing.T, v reflect.Value, n *int, depth int) {
	*n++
	if depth > 6 {
		return
	}
	if v.Type() == reflect.TypeOf(events.Decimal{}) {
		v.Set(reflect.ValueOf(events.MustDecimal("12.5")))
		return
	}
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 24, 10, *n%60, 0, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n%100 + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n%100 + 1))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), n, depth+1)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte{1, 2, 3})
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), n, depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(t, k, n, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, n, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				t.Errorf("%s.%s is unexported: a forwarded command would lose it", v.Type(), v.Type().Field(i).Name)
				continue
			}
			fill(t, f, n, depth+1)
		}
	case reflect.Interface:
		// left nil: no command carries one across the wire
	default:
		t.Errorf("%s: kind %s cannot be filled", v.Type(), v.Kind())
	}
}

// Every command an account decides crosses between nodes whole: each field
// set, encoded, decoded and compared.
func TestEveryAccountCommandSurvivesTheWire(t *testing.T) {
	for _, c := range accountCommands() {
		t.Run(reflect.TypeOf(c).Elem().Name(), func(t *testing.T) {
			v := reflect.New(reflect.TypeOf(c).Elem())
			n := 0
			fill(t, v.Elem(), &n, 0)
			env := commands.Envelope{ID: ulid.Make(), At: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC), Key: "k", Digest: "d",
				Principal: events.Principal{TenantID: "t", UserID: "u", KeyID: "k", OnBehalfOf: "o", System: "s"}, Cmd: v.Interface().(commands.Command)}
			b, err := encodeEnvelope("acct-1", env)
			if err != nil {
				t.Fatal(err)
			}
			id, got, err := decodeEnvelope(b)
			if err != nil {
				t.Fatal(err)
			}
			if id != "acct-1" || !reflect.DeepEqual(got, env) {
				t.Fatalf("after the wire:\n got %#v\nwant %#v", got.Cmd, env.Cmd)
			}
		})
	}
}

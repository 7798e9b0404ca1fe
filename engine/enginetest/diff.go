package enginetest

import (
	"encoding"
	"fmt"
	"reflect"
)

// maxDiffs bounds the differences Diff reports.
const maxDiffs = 20

// Diff lists the differences between want and got, one "path: want X, got Y"
// line each (at most 20), walking pointers, structs, slices and maps. A value
// of a type with a MarshalText method (events.Decimal, time.Time, ulid.ULID)
// is compared by its text, as the log and the API write it: 2.50 and 2.5
// (the same decimal text, 2.5) are equal, as are the same instant read back
// with another *time.Location of the same offset; 2.5 and 2.6, or a nil and a
// non-nil slice or map, are not.
func Diff(want, got any) []string {
	var out []string
	diff(&out, "", reflect.ValueOf(want), reflect.ValueOf(got))
	return out
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

func diff(out *[]string, path string, a, b reflect.Value) {
	if len(*out) >= maxDiffs {
		return
	}
	report := func(format string, args ...any) {
		p := path
		if p == "" {
			p = "(value)"
		}
		*out = append(*out, p+": "+fmt.Sprintf(format, args...))
	}
	if !a.IsValid() || !b.IsValid() {
		if a.IsValid() != b.IsValid() {
			report("want %v, got %v", a, b)
		}
		return
	}
	if a.Type() != b.Type() {
		report("want a %s, got a %s", a.Type(), b.Type())
		return
	}
	k := a.Kind()
	if k != reflect.Pointer && k != reflect.Interface && a.Type().Implements(textMarshaler) {
		if !a.CanInterface() {
			report("a %s in an unexported field: Diff cannot read it", a.Type())
			return
		}
		ta, ea := text(a)
		tb, eb := text(b)
		if ta != tb || ea != eb {
			report("want %s, got %s", ta+ea, tb+eb)
		}
		return
	}
	switch k {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				report("want %s, got %s", nilness(a), nilness(b))
			}
			return
		}
		diff(out, path, a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			diff(out, path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
		}
	case reflect.Slice, reflect.Array:
		if k == reflect.Slice && a.IsNil() != b.IsNil() {
			report("want %s, got %s", nilness(a), nilness(b))
			return
		}
		if a.Len() != b.Len() {
			report("want %d elements, got %d", a.Len(), b.Len())
		}
		for i := range min(a.Len(), b.Len()) {
			diff(out, fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if a.IsNil() != b.IsNil() {
			report("want %s, got %s", nilness(a), nilness(b))
			return
		}
		for _, key := range a.MapKeys() {
			p := fmt.Sprintf("%s[%v]", path, key)
			if bv := b.MapIndex(key); bv.IsValid() {
				diff(out, p, a.MapIndex(key), bv)
			} else if len(*out) < maxDiffs {
				*out = append(*out, p+": missing")
			}
		}
		for _, key := range b.MapKeys() {
			if !a.MapIndex(key).IsValid() && len(*out) < maxDiffs {
				*out = append(*out, fmt.Sprintf("%s[%v]: not wanted", path, key))
			}
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			report("want %v, got %v", a.Bool(), b.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			report("want %d, got %d", a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if a.Uint() != b.Uint() {
			report("want %d, got %d", a.Uint(), b.Uint())
		}
	case reflect.Float32, reflect.Float64:
		if a.Float() != b.Float() {
			report("want %v, got %v", a.Float(), b.Float())
		}
	case reflect.String:
		if a.String() != b.String() {
			report("want %q, got %q", a.String(), b.String())
		}
	case reflect.Func:
		// A function a state is given (a way to read the log), not state
		// of its own: only whether it has one.
		if a.IsNil() != b.IsNil() {
			report("want %s, got %s", nilness(a), nilness(b))
		}
	default: // complex, chan, unsafe pointer: not state
		report("cannot compare a %s", a.Type())
	}
}

// text is v's MarshalText, or its error's text after "!".
func text(v reflect.Value) (string, string) {
	b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return "", "!" + err.Error()
	}
	return string(b), ""
}

func nilness(v reflect.Value) string {
	if v.IsNil() {
		return "nil"
	}
	return "non-nil " + v.Type().String()
}

package snapshot

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
)

// Shape ties a snapshot to the state it encodes: the kind's version (which
// its package raises when Apply folds an event differently, so states folded
// by the old rules are not reused) and a digest of the state's Go type, field
// by field with names, tags and types, so a build whose state has another
// shape ignores the snapshots of the old one instead of misreading them.
func Shape(version int, state any) string {
	var b strings.Builder
	describe(&b, reflect.TypeOf(state), map[reflect.Type]bool{})
	sum := sha256.Sum256([]byte(b.String()))
	return fmt.Sprintf("v%d-%s", version, hex.EncodeToString(sum[:8]))
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()

// describe writes t's structure: a type that encodes itself as text
// (events.Decimal, time.Time) by its name alone.
func describe(b *strings.Builder, t reflect.Type, visiting map[reflect.Type]bool) {
	if t == nil {
		b.WriteString("nil")
		return
	}
	if t.Kind() != reflect.Pointer && t.Implements(textMarshalerType) {
		b.WriteString(t.String())
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		b.WriteString("*")
		describe(b, t.Elem(), visiting)
	case reflect.Slice:
		b.WriteString("[]")
		describe(b, t.Elem(), visiting)
	case reflect.Array:
		fmt.Fprintf(b, "[%d]", t.Len())
		describe(b, t.Elem(), visiting)
	case reflect.Map:
		b.WriteString("map[")
		describe(b, t.Key(), visiting)
		b.WriteString("]")
		describe(b, t.Elem(), visiting)
	case reflect.Struct:
		if visiting[t] {
			b.WriteString(t.String())
			return
		}
		visiting[t] = true
		defer delete(visiting, t)
		b.WriteString(t.String() + "{")
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(b, "%s %q ", f.Name, f.Tag)
			describe(b, f.Type, visiting)
			b.WriteString(";")
		}
		b.WriteString("}")
	default:
		b.WriteString(t.String())
	}
}

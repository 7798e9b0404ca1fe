package postgres

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	gojson "github.com/goccy/go-json"

	"github.com/svc/engine/events"
)

// A document is stored as the value's JSON, plus, when its type is a struct
// with exported fields tagged `json:"-"` (kept out of the API shape but part of
// the record, such as projections.Order.Seq), those fields as a JSON object by
// Go field name. So a value reads back as the memory store hands it out.
// Unexported fields, and hidden fields of nested structs, are not kept.

var hiddenCache sync.Map // reflect.Type -> []reflect.StructField

func hiddenFields(t reflect.Type) []reflect.StructField {
	if t.Kind() != reflect.Struct {
		return nil
	}
	if f, ok := hiddenCache.Load(t); ok {
		return f.([]reflect.StructField)
	}
	var out []reflect.StructField
	for _, f := range reflect.VisibleFields(t) {
		if f.IsExported() && !f.Anonymous && f.Tag.Get("json") == "-" {
			out = append(out, f)
		}
	}
	hiddenCache.Store(t, out)
	return out
}

// encode writes with goccy/go-json, which writes what encoding/json writes
// at a fraction of its cost (the projector's writes are its hot path).
func encode(v any) (doc, hidden []byte, err error) {
	doc, err = gojson.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return doc, nil, nil
	}
	fs := hiddenFields(rv.Type())
	if len(fs) == 0 {
		return doc, nil, nil
	}
	m := make(map[string]any, len(fs))
	for _, f := range fs {
		fv, err := rv.FieldByIndexErr(f.Index)
		if err != nil || fv.IsZero() {
			continue
		}
		m[f.Name] = fv.Interface()
	}
	if len(m) == 0 {
		return doc, nil, nil
	}
	hidden, err = gojson.Marshal(m)
	return doc, hidden, err
}

// decode replaces *v with the stored value: v is zeroed first, so fields the
// JSON omits (omitempty) read as zero, as with the memory store.
func decode(doc, hidden []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("postgres: decode into %T: not a pointer", v)
	}
	el := rv.Elem()
	el.SetZero()
	if err := events.UnmarshalStored(doc, v); err != nil { // computed values may lie outside the API's input bounds
		return fmt.Errorf("postgres: decode into %T: %w", v, err)
	}
	if hidden == nil {
		return nil
	}
	for el.Kind() == reflect.Pointer && !el.IsNil() {
		el = el.Elem()
	}
	fs := hiddenFields(el.Type())
	if len(fs) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(hidden, &m); err != nil {
		return fmt.Errorf("postgres: decode hidden fields of %T: %w", v, err)
	}
	for _, f := range fs {
		raw, ok := m[f.Name]
		if !ok {
			continue
		}
		fv, err := el.FieldByIndexErr(f.Index)
		if err != nil {
			continue
		}
		if err := events.UnmarshalStored(raw, fv.Addr().Interface()); err != nil {
			return fmt.Errorf("postgres: decode %T.%s: %w", v, f.Name, err)
		}
	}
	return nil
}

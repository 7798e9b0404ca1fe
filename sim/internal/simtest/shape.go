// Package simtest holds what the simulators' tests share: the check of a simulator's answers
// against the providers' own samples (SameShape).
package simtest

import (
	"encoding/json"
	"reflect"
	"testing"
)

// DecodeAny reads JSON into the generic values SameShape compares; it fails t on bad JSON.
func DecodeAny(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// Shape is how SameShape compares: Skip names keys left out at any depth; NonEmpty also fails an
// array that is empty where the sample's has elements.
type Shape struct {
	Skip     map[string]bool
	NonEmpty bool
}

// SameShape fails t unless ours carries every key of sample (but those skipped) with the same JSON
// kind, recursing into objects and into the first element of arrays; where names the value in
// failures.
func (sh Shape) SameShape(t testing.TB, where string, sample, ours any) {
	t.Helper()
	if reflect.TypeOf(sample) != reflect.TypeOf(ours) {
		t.Errorf("%s: sample is %T, ours %T (%v)", where, sample, ours, ours)
		return
	}
	switch sv := sample.(type) {
	case map[string]any:
		ov := ours.(map[string]any)
		for k, v := range sv {
			if sh.Skip[k] {
				continue
			}
			o, ok := ov[k]
			if !ok {
				t.Errorf("%s: missing %q", where, k)
				continue
			}
			sh.SameShape(t, where+"."+k, v, o)
		}
	case []any:
		ov := ours.([]any)
		if sh.NonEmpty && len(sv) > 0 && len(ov) == 0 {
			t.Errorf("%s: empty where the sample has elements", where)
		}
		if len(sv) > 0 && len(ov) > 0 {
			sh.SameShape(t, where+"[0]", sv[0], ov[0])
		}
	}
}

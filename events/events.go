// Package events holds the event types, the commit envelope and the codec.
// It imports nothing of the project's own: every other package speaks events.
package events

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unsafe"

	"github.com/goccy/go-json"
	"github.com/tinylib/msgp/msgp"
)

// Event is one immutable fact. Type returns a stable, versioned name such as
// "order.placed.v1"; a change an old event cannot be converted into is a new type.
type Event interface {
	Type() string
}

// Commit is the one message a command appends: its events, atomically.
type Commit struct {
	CommandID string    `json:"id"`
	Key       string    `json:"key,omitempty"`
	Principal Principal `json:"principal"`
	At        time.Time `json:"at"`
	Events    []Event   `json:"-"`
}

// Committed is a commit as read back from the log: its subject and stream sequence.
// The sequence is the aggregate's revision after the commit.
type Committed struct {
	Subject string
	Seq     uint64
	Commit
}

// Factory encodes and decodes one event type.
type Factory struct {
	json func(data []byte) (Event, error)
	// the MessagePack code msgp generates for the type; nil when it has none
	// (a test's own type, say), and then a commit holding it is written as JSON
	appendMsg func(b []byte, e Event) ([]byte, error)
	msg       func(b []byte) (Event, []byte, error) // the event and the bytes after it
}

// Of is the Factory of event type T. Its JSON decoding reads decimals within
// the codec's bounds, as its encoding writes them (see storedType).
func Of[T Event]() Factory {
	f := Factory{json: func(data []byte) (Event, error) {
		var v T
		err := json.Unmarshal(data, &v)
		return v, err
	}}
	if st, ok := storedType(reflect.TypeFor[T](), nil); ok {
		f.json = func(data []byte) (Event, error) {
			p := new(T)
			err := json.Unmarshal(data, reflect.NewAt(st, unsafe.Pointer(p)).Interface())
			return *p, err
		}
	}
	var zero T
	_, enc := any(&zero).(msgp.Marshaler)
	_, dec := any(&zero).(msgp.Unmarshaler)
	if enc && dec {
		ptr := unboxer[T]()
		f.appendMsg = func(b []byte, e Event) ([]byte, error) {
			return any(ptr(e)).(msgp.Marshaler).MarshalMsg(b)
		}
		box := boxer[T]()
		f.msg = func(b []byte) (Event, []byte, error) {
			p := new(T)
			rest, err := any(p).(msgp.Unmarshaler).UnmarshalMsg(b)
			return box(p), rest, err
		}
	}
	return f
}

// Decode reads one event's data in either encoding: its JSON object or its
// MessagePack map.
func (f Factory) Decode(data []byte) (Event, error) {
	if len(data) > 0 && data[0] == '{' || f.msg == nil {
		return f.json(data)
	}
	e, rest, err := f.msg(data)
	if err == nil && len(rest) > 0 {
		err = errTrailing
	}
	return e, err
}

// boxer returns how to make an Event of the T that p points to. A T larger
// than a word is held by an interface as a pointer to a T, so p itself can be
// that pointer: the decoded event is not copied into a second allocation.
// The caller hands p over and never uses it again. Any other T is copied.
func boxer[T Event]() func(p *T) Event {
	var zero T
	if unsafe.Sizeof(zero) <= unsafe.Sizeof(uintptr(0)) {
		return func(p *T) Event { return *p }
	}
	var z Event = zero
	itab := (*[2]unsafe.Pointer)(unsafe.Pointer(&z))[0]
	return func(p *T) Event {
		var e Event
		w := (*[2]unsafe.Pointer)(unsafe.Pointer(&e))
		w[0], w[1] = itab, unsafe.Pointer(p)
		return e
	}
}

// unboxer returns how to reach the T an Event holds, to read it (MarshalMsg,
// which reads through a pointer): a T larger than a word is held by the
// interface as a pointer to a T, which is used as it is instead of copying
// the T out of the interface into an allocation of its own. Any other T is
// copied. The T is never written through the pointer: an event is immutable.
func unboxer[T Event]() func(e Event) *T {
	var zero T
	if unsafe.Sizeof(zero) <= unsafe.Sizeof(uintptr(0)) {
		return func(e Event) *T {
			v := e.(T)
			return &v
		}
	}
	return func(e Event) *T {
		_ = e.(T) // the type it must hold
		return (*T)((*[2]unsafe.Pointer)(unsafe.Pointer(&e))[1])
	}
}

// UnmarshalStored is json.Unmarshal for JSON this build wrote (a commit's
// events, a stored read model) into v, a pointer: every Decimal is read within
// the codec's bounds, which hold computed values, rather than the input's,
// which Decimal.UnmarshalJSON applies to what comes from outside.
func UnmarshalStored(data []byte, v any) error {
	if p := reflect.ValueOf(v); p.Kind() == reflect.Pointer && !p.IsNil() {
		if st, ok := storedType(p.Type().Elem(), nil); ok {
			v = reflect.NewAt(st, p.UnsafePointer()).Interface()
		}
	}
	return json.Unmarshal(data, v)
}

var (
	decimalType         = reflect.TypeFor[Decimal]()
	storedDecimalType   = reflect.TypeFor[storedDecimal]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// storedType is t with every Decimal it holds, in fields, pointers, slices,
// arrays and map values, replaced by a storedDecimal: the same memory layout
// and the same JSON, but its decimals are read within the codec's bounds
// rather than the input's. ok is false when t holds no Decimal that can be
// replaced; a struct with an unexported or embedded field, or its own JSON
// or text decoding, is kept as it is, and so is a struct inside itself (a
// child *T in a T: the child's decimals are read within the input's bounds).
// visiting holds the structs being replaced.
func storedType(t reflect.Type, visiting map[reflect.Type]bool) (_ reflect.Type, ok bool) {
	switch t.Kind() {
	case reflect.Pointer:
		if e, ok := storedType(t.Elem(), visiting); ok {
			return reflect.PointerTo(e), true
		}
	case reflect.Slice:
		if e, ok := storedType(t.Elem(), visiting); ok {
			return reflect.SliceOf(e), true
		}
	case reflect.Array:
		if e, ok := storedType(t.Elem(), visiting); ok {
			return reflect.ArrayOf(t.Len(), e), true
		}
	case reflect.Map:
		if e, ok := storedType(t.Elem(), visiting); ok {
			return reflect.MapOf(t.Key(), e), true
		}
	case reflect.Struct:
		if t == decimalType {
			return storedDecimalType, true
		}
		if p := reflect.PointerTo(t); visiting[t] || p.Implements(jsonUnmarshalerType) || p.Implements(textUnmarshalerType) {
			return t, false
		}
		if visiting == nil {
			visiting = map[reflect.Type]bool{}
		}
		visiting[t] = true
		defer delete(visiting, t)
		fields := make([]reflect.StructField, t.NumField())
		for i := range fields {
			f := t.Field(i)
			if !f.IsExported() || f.Anonymous {
				return t, false
			}
			var changed bool
			if f.Type, changed = storedType(f.Type, visiting); changed {
				ok = true
			}
			fields[i] = f
		}
		if !ok {
			return t, false
		}
		st := reflect.StructOf(fields)
		if st.Size() != t.Size() || st.Align() != t.Align() {
			return t, false
		}
		for i := range fields {
			if st.Field(i).Offset != t.Field(i).Offset {
				return t, false
			}
		}
		return st, true
	}
	return t, false
}

// Registry maps event type names to factories. It is an explicit map, built by
// whoever owns the event types; there is no init() registration.
type Registry map[string]Factory

// ErrUnknownType is returned when a commit names an event type the registry lacks.
var ErrUnknownType = errors.New("events: unknown event type")

var errTrailing = errors.New("bytes after the value")

type wireEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type wireCommit struct {
	Commit
	Events []wireEvent `json:"events"`
}

// Encode renders a commit as the bytes of one log message. A commit whose
// event types all have MessagePack code (every type the engine registers has)
// is a MessagePack map, see encodeMsg; any other is the JSON object the log
// held before: {"id",...,"events":[{"type":...,"data":{...}},...]}.
func (r Registry) Encode(c Commit) ([]byte, error) {
	return r.AppendEncode(nil, c)
}

// AppendEncode is Encode appending to dst, which a writer may reuse once
// the bytes are sent.
func (r Registry) AppendEncode(dst []byte, c Commit) ([]byte, error) {
	binary := true
	for _, e := range c.Events {
		f, ok := r[e.Type()]
		if !ok {
			return nil, fmt.Errorf("encode %s: %w", e.Type(), ErrUnknownType)
		}
		binary = binary && f.appendMsg != nil
	}
	if binary {
		return r.encodeMsg(dst, c)
	}
	b, err := r.encodeJSON(c)
	return append(dst, b...), err
}

// encodeJSON writes the JSON form. Each event's bytes are appended as they
// are, not re-validated.
func (r Registry) encodeJSON(c Commit) ([]byte, error) {
	head, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode commit: %w", err)
	}
	b := make([]byte, 0, len(head)+256*len(c.Events))
	b = append(b, head[:len(head)-1]...)
	b = append(b, `,"events":[`...)
	for i, e := range c.Events {
		data, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", e.Type(), err)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = strconv.AppendQuote(b, e.Type())
		b = append(b, `,"data":`...)
		b = append(b, data...)
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// Decode parses the bytes of one log message in either encoding: a JSON
// commit starts with '{', which no MessagePack map does.
func (r Registry) Decode(b []byte) (Commit, error) {
	if len(b) > 0 && b[0] == '{' {
		return r.decodeJSON(b)
	}
	return r.decodeMsg(b)
}

func (r Registry) decodeJSON(b []byte) (Commit, error) {
	var w wireCommit
	if err := json.Unmarshal(b, &w); err != nil {
		return Commit{}, fmt.Errorf("decode commit: %w", err)
	}
	c := w.Commit
	c.Events = make([]Event, 0, len(w.Events))
	for _, we := range w.Events {
		f, ok := r[we.Type]
		if !ok {
			return Commit{}, fmt.Errorf("decode %s: %w", we.Type, ErrUnknownType)
		}
		e, err := f.json(we.Data)
		if err != nil {
			return Commit{}, fmt.Errorf("decode %s: %w", we.Type, err)
		}
		c.Events = append(c.Events, e)
	}
	return c, nil
}

// WritingJSON is the registry that writes every commit in JSON, as versions
// before MessagePack did, and still reads both: for a deployment that may
// have to roll back to such a version (ENGINE_COMMIT_ENCODING=json).
func (r Registry) WritingJSON() Registry {
	out := make(Registry, len(r))
	for k, f := range r {
		f.appendMsg = nil
		out[k] = f
	}
	return out
}

// Merge joins registries; a name registered twice is a programming error.
func Merge(rs ...Registry) Registry {
	out := Registry{}
	for _, r := range rs {
		for k, v := range r {
			if _, dup := out[k]; dup {
				panic("events: type registered twice: " + k)
			}
			out[k] = v
		}
	}
	return out
}

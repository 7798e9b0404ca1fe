// Package events holds the event types, the commit envelope and the codec.
// It imports nothing of the project's own: every other package speaks events.
package events

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goccy/go-json"
)

// Event is one immutable fact. Type returns a stable, versioned name such as
// "order.placed.v1"; a change an old event cannot be converted into is a new type.
type Event interface {
	Type() string
}

// Principal names who called and on whose behalf.
type Principal struct {
	TenantID   string `json:"tenantId,omitempty"`
	UserID     string `json:"userId,omitempty"`
	KeyID      string `json:"keyId,omitempty"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
	System     string `json:"system,omitempty"` // set when a reactor or bootstrap made the command
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

// Factory decodes the data of one event type.
type Factory func(data []byte) (Event, error)

// Of is the Factory of event type T.
func Of[T Event]() Factory {
	return func(data []byte) (Event, error) {
		var v T
		err := json.Unmarshal(data, &v)
		return v, err
	}
}

// Registry maps event type names to factories. It is an explicit map, built by
// whoever owns the event types; there is no init() registration.
type Registry map[string]Factory

// ErrUnknownType is returned when a commit names an event type the registry lacks.
var ErrUnknownType = errors.New("events: unknown event type")

type wireEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type wireCommit struct {
	Commit
	Events []wireEvent `json:"events"`
}

// Encode renders a commit as the bytes of one log message:
// {"id",...,"events":[{"type":...,"data":{...}},...]}. Each event's bytes are
// appended as they are, not re-validated.
func (r Registry) Encode(c Commit) ([]byte, error) {
	head, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode commit: %w", err)
	}
	b := make([]byte, 0, len(head)+256*len(c.Events))
	b = append(b, head[:len(head)-1]...)
	b = append(b, `,"events":[`...)
	for i, e := range c.Events {
		if _, ok := r[e.Type()]; !ok {
			return nil, fmt.Errorf("encode %s: %w", e.Type(), ErrUnknownType)
		}
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

// Decode parses the bytes of one log message, upcasting older event versions.
func (r Registry) Decode(b []byte) (Commit, error) {
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
		e, err := f(we.Data)
		if err != nil {
			return Commit{}, fmt.Errorf("decode %s: %w", we.Type, err)
		}
		c.Events = append(c.Events, e)
	}
	return c, nil
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

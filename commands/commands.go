// Package commands holds the command envelope and the refusal type every write
// can end in. One Go type per write lives in the subpackage of its domain.
package commands

import (
	"fmt"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/events"
)

// Command is one write, decoded and shape-checked. Checks that need state live in Decide.
type Command interface {
	Validate() error
}

// Envelope carries a command with everything Decide may not make itself:
// its id, the time, the idempotency key and the principal.
type Envelope struct {
	ID        ulid.ULID
	At        time.Time
	Key       string
	Digest    string // of the request an Idempotency-Key came with (engine/idem)
	Principal events.Principal
	Cmd       Command
}

// DerivedID is the id of the n-th thing a command makes (an order, a fill):
// derived from the command id so replay gives the same ids.
func (e Envelope) DerivedID(kind string, n int) string {
	if n == 0 && kind == "" {
		return e.ID.String()
	}
	var buf [64]byte // ID-kindN, in one string
	b := buf[:ulid.EncodedSize]
	_ = e.ID.MarshalTextTo(b) // fails only on a short buffer
	b = append(append(b, '-'), kind...)
	return string(strconv.AppendInt(b, int64(n), 10))
}

// Refusal is a decision not to record anything, in domain terms: the spec's
// code, its params and a sentence. It names no HTTP status: the gateway takes
// the status and Retry-After of the code from the catalogue (codes.json).
type Refusal struct {
	Code Code
	// Malformed marks a value that could not be read at all (an
	// invalid_request answered 400) as against one read but out of bounds
	// (422). It matters only for a code the catalogue lists with both.
	Malformed bool
	// Conflict marks a refusal of a command the account cannot prove safe
	// rather than one its state forbids outright (a close the provider does
	// not hold to reducing, while a risk lock holds): it is answered with
	// the code's 409 where the catalogue lists 409 for the code.
	Conflict bool
	Params   map[string]any
	Msg      string
	// RetryAfter, in seconds, replaces the catalogue's Retry-After of a
	// retry-safe code when the refusal knows the wait (a provider's rate
	// limit); 0 keeps the catalogue's.
	RetryAfter int
}

func (r *Refusal) Error() string { return r.Msg }

// Refuse makes a Refusal.
func Refuse(code Code, msg string, params map[string]any) *Refusal {
	return &Refusal{Code: code, Params: params, Msg: msg}
}

// MalformedRefusal makes a Refusal of a value that could not be read (see
// Refusal.Malformed).
func MalformedRefusal(code Code, msg string, params map[string]any) *Refusal {
	return &Refusal{Code: code, Malformed: true, Params: params, Msg: msg}
}

// Invalid is an invalid_request refusal of a value out of bounds (422).
func Invalid(format string, args ...any) *Refusal {
	return &Refusal{Code: CodeInvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

// BadRequest is an invalid_request refusal of a value that cannot be read (400).
func BadRequest(format string, args ...any) *Refusal {
	return &Refusal{Code: CodeInvalidRequest, Malformed: true, Msg: fmt.Sprintf(format, args...)}
}

// BadField is a 400 invalid_request refusal for a malformed value: params.field
// names the field, and params holds whatever else restates the rule.
func BadField(field string, params map[string]any, format string, args ...any) *Refusal {
	return fieldRefusal(true, field, params, format, args...)
}

// InvalidField is a 422 invalid_request refusal for a well-formed value out of
// bounds: params.field names the field, and params holds the bound (max,
// tickSize, lotStep, minQuantity) as the client must restate it.
func InvalidField(field string, params map[string]any, format string, args ...any) *Refusal {
	return fieldRefusal(false, field, params, format, args...)
}

func fieldRefusal(malformed bool, field string, params map[string]any, format string, args ...any) *Refusal {
	p := make(map[string]any, len(params)+1)
	for k, v := range params {
		p[k] = v
	}
	p["field"] = field
	return &Refusal{Code: CodeInvalidRequest, Malformed: malformed, Params: p, Msg: fmt.Sprintf(format, args...)}
}

// Replay is the answer to an Idempotency-Key an aggregate has answered
// before with the same request: the original status and body (engine/idem).
// It travels as the decision's error, so nothing is committed; the gateway
// writes it as it stands.
type Replay struct {
	Status int
	Body   []byte
}

func (r *Replay) Error() string { return fmt.Sprintf("idempotent replay (%d)", r.Status) }

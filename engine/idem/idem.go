// Package idem is the Idempotency-Key discipline of an aggregate's writes:
// the record of keys it has answered, and Write, which every keyed decision
// goes through. The gateway's middleware (gateway/idem) requires the key and
// puts it, with a digest of the request, in the command envelope; the
// aggregate remembers both, with the answer, in the commit of the write.
package idem

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evidem "github.com/svc/engine/events/idem"
)

// Record is the keys an aggregate has answered, forever. It is aggregate
// state: owned by the aggregate's mailbox goroutine.
type Record map[string]evidem.KeyUsed

// Apply folds a KeyUsed into the record; other events leave it alone.
func (r Record) Apply(e events.Event) {
	if k, ok := e.(evidem.KeyUsed); ok {
		r[k.Key] = k
	}
}

// ErrNoKey: a keyed decision ran without a key; the gateway's middleware never lets that happen.
var ErrNoKey = errors.New("idem: a keyed write without an Idempotency-Key")

// Write runs a keyed decision. A key answered before with the same request
// digest replays its answer (*Replay, nothing committed); with another digest
// it is 409 idempotency_conflict, nothing committed. Otherwise decide runs;
// a refusal records nothing, so the key stays free for a corrected request;
// a success commits decide's events and a KeyUsed with the answer it gives.
func Write(r Record, env commands.Envelope, decide func() ([]events.Event, commands.Outcome, any, error)) ([]events.Event, error) {
	if env.Key == "" || env.Digest == "" {
		return nil, ErrNoKey
	}
	if used, ok := r[env.Key]; ok {
		if used.Digest == env.Digest {
			return nil, &commands.Replay{Status: used.Status, Body: used.Body}
		}
		return nil, commands.Refuse(commands.CodeIdempotencyConflict,
			"this Idempotency-Key was used with a different request; the original write stands", nil)
	}
	evs, status, answer, err := decide()
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(answer)
	if err != nil {
		return nil, fmt.Errorf("idem: answer: %w", err)
	}
	return append(evs, evidem.KeyUsed{Key: env.Key, Digest: env.Digest, Status: int(status), Body: body, At: env.At}), nil
}

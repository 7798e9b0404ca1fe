// Package idem holds the event that remembers an Idempotency-Key: recorded
// in the same commit as the write it keyed, by every aggregate whose writes
// take one (venue-platform and Connect-link writes).
package idem

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file idem.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// KeyUsed records a key, the digest of the request it came with, and the
// answer the write gave (status and JSON body), which a retry with the same
// key and request gets again, byte for byte. The body never holds a secret.
type KeyUsed struct {
	Key    string    `json:"key"`
	Digest string    `json:"digest"`
	Status int       `json:"status"`
	Body   []byte    `json:"body"`
	At     time.Time `json:"at"`
}

func (KeyUsed) Type() string { return "idempotency.key_used.v1" }

// Registry lists the event; each aggregate that keys its writes merges it into its own.
func Registry() events.Registry {
	return events.Registry{KeyUsed{}.Type(): events.Of[KeyUsed]()}
}

// The catalogue of error codes is commands/codes.json: a new code, or a change
// of a code's status, retry rule, params or sentence, goes there, then run
// go generate ./commands/ (it writes codes_gen.go, the ErrorCode enum of
// schema/openapi.yaml and docs/codes.md; a test fails while they are stale).
// Do not list codes in this file.

//go:generate go run ./internal/gencodes -root ..

package commands

import "slices"

// Code is a stable error code: the code of a Refusal, of an httpx.Error and
// of a stream's error event. The constants (CodeRiskLocked, ...) are
// generated from commands/codes.json.
type Code string

// CodeSpec is one code of the catalogue.
type CodeSpec struct {
	Code Code
	// Status lists the HTTP statuses the code is answered with, the usual
	// first; empty for a code sent only in a stream's error event.
	Status []int
	// RetrySafe reports whether the client may send the same request again,
	// as is and with the same idempotency key (after Retry-After), and expect
	// it may succeed: nothing was recorded and the cause is transient. False
	// where resending earns the same answer until the request or the account
	// changes, where the write may have been recorded (outcome_unknown: read
	// the account stream or the receipt first) and where it was
	// (write_recorded).
	RetrySafe bool
	// RetryAfter is the Retry-After, in seconds, of an answer whose route
	// states none; set exactly when RetrySafe.
	RetryAfter int
	// RetryAfterOnRoute: not retry-safe in general, but a route whose key
	// makes resending harmless (the partner balance routes) may state a
	// Retry-After.
	RetryAfterOnRoute bool
	// Params names the keys of params the code may carry.
	Params      []string
	Description string
}

// Lookup returns the catalogue's entry for code.
func Lookup(code Code) (CodeSpec, bool) {
	s, ok := catalogue[code]
	return s, ok
}

// StatusOf is the status a refusal with code is answered with. A code the
// catalogue lists with one status has that one. A code it lists with 400 and
// others (invalid_request: 400, 422) is 400 for a value that could not be
// read (Refusal.Malformed) and else the first of the others. A code missing
// from the catalogue is a 500 (a test keeps every refused code in it).
func StatusOf(code Code, malformed bool) int {
	s, ok := catalogue[code]
	if !ok || len(s.Status) == 0 {
		return 500
	}
	if len(s.Status) == 1 {
		return s.Status[0]
	}
	for _, st := range s.Status {
		if (st == 400) == malformed {
			return st
		}
	}
	return s.Status[0]
}

// Status is the status r is answered with: StatusOf its code, or 409 for a
// Conflict where the catalogue lists 409 for the code.
func (r *Refusal) Status() int {
	if s, ok := catalogue[r.Code]; ok && r.Conflict && slices.Contains(s.Status, statusConflict) {
		return statusConflict
	}
	return StatusOf(r.Code, r.Malformed)
}

// statusConflict is HTTP's 409 (commands never imports net/http).
const statusConflict = 409

// Answer is how an error with code is answered: the status, the one a call
// site stated where the catalogue lists it for the code and else the
// catalogue's usual one, and the Retry-After in seconds (0: no header), the
// site's where the catalogue lets the code carry one and else the
// catalogue's. A code missing from the catalogue keeps what the site
// stated; a test keeps every answered code in it.
func Answer(code Code, status, retryAfter int) (int, int) {
	s, ok := catalogue[code]
	if !ok {
		return status, retryAfter
	}
	if len(s.Status) > 0 && !slices.Contains(s.Status, status) {
		status = s.Status[0]
	}
	switch {
	case s.RetrySafe && retryAfter <= 0:
		retryAfter = s.RetryAfter
	case !s.RetrySafe && !s.RetryAfterOnRoute:
		retryAfter = 0
	}
	return status, max(retryAfter, 0)
}

// CodeInfo describes one stable error code (see CodeSpec).
type CodeInfo struct {
	Status    []int
	RetrySafe bool
}

// RetrySafe reports the catalogue's RetrySafe of code (false for a code not
// in it).
func RetrySafe(code Code) bool { return catalogue[code].RetrySafe }

// Codes is the table of every stable error code, built from the catalogue.
// It returns a new map on every call. A test checks that every code the
// source answers is listed and that schema/openapi.yaml's ErrorCode enum
// lists the same codes.
func Codes() map[string]CodeInfo {
	m := make(map[string]CodeInfo, len(catalogue))
	for c, s := range catalogue {
		m[string(c)] = CodeInfo{Status: slices.Clone(s.Status), RetrySafe: s.RetrySafe}
	}
	return m
}

package simkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Handle registers a control API route on mux: h's answer is written as JSON, its error as
// 400 {"error": "..."}.
func Handle(mux *http.ServeMux, pattern string, h func(*http.Request) (any, error)) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		ans, err := h(r)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(ans)
	})
}

// HandleBody registers a control API route (as Handle does) whose request carries a JSON body B,
// read by Decode: a body that is not a B is refused.
func HandleBody[B any](mux *http.ServeMux, pattern string, h func(r *http.Request, body B) (any, error)) {
	Handle(mux, pattern, func(r *http.Request) (any, error) {
		var b B
		if err := Decode(r, &b); err != nil {
			return nil, err
		}
		return h(r, b)
	})
}

// Decode reads a control request's JSON body (at most 1 MiB, no unknown fields) into v.
func Decode(r *http.Request, v any) error {
	d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}

// Durations reads the Go duration strings ("250ms", "2m") of a control request, keeping every
// failure for Err.
type Durations struct{ errs []error }

// Parse reads the duration in of the field name: 0 when in is empty or not a duration (the
// failure then goes to Err).
func (p *Durations) Parse(name, in string) time.Duration {
	if in == "" {
		return 0
	}
	d, err := time.ParseDuration(in)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s: %w", name, err))
	}
	return d
}

// Err is every failure of Parse, or nil.
func (p *Durations) Err() error { return errors.Join(p.errs...) }

// Positive reads the duration in of the field name, which must be above zero.
func Positive(name, in string) (time.Duration, error) {
	d, err := time.ParseDuration(in)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: a positive duration is required", name)
	}
	return d, nil
}

// DecodeStreamFaults reads the control API's stream faults body:
// {"duplicate": true, "reorder": true, "reorderHold": "200ms"}.
func DecodeStreamFaults(r *http.Request) (StreamFaults, error) {
	var b struct {
		Duplicate, Reorder, BalanceFirst bool
		ReorderHold                      string
	}
	if err := Decode(r, &b); err != nil {
		return StreamFaults{}, err
	}
	var p Durations
	f := StreamFaults{Duplicate: b.Duplicate, Reorder: b.Reorder, ReorderHold: p.Parse("reorderHold", b.ReorderHold), BalanceFirst: b.BalanceFirst}
	return f, p.Err()
}

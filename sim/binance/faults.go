package binance

import (
	"errors"
	"time"

	"github.com/svc/engine/sim/internal/simkit"
)

// Fault is one injected misbehaviour of the REST API. It applies to the requests of Route
// ("POST /fapi/v1/order"; empty for every route), the next Times of them (0: until ClearFaults).
// One fault may combine Latency and AnswerDelay with one of the others.
type Fault struct {
	Route   string        `json:"route,omitempty"`
	Times   int           `json:"times,omitempty"`
	Latency time.Duration `json:"latency,omitempty"` // wait this long before handling
	// AnswerDelay: handle it, then wait this long before answering (the
	// user stream tells of the order first, as on a slow way back)
	AnswerDelay time.Duration `json:"answerDelay,omitempty"`
	Drop        bool          `json:"drop,omitempty"`     // handle it, then close the connection unanswered
	Status      int           `json:"status,omitempty"`   // answer this 5xx with -1001, not handled
	Throttle    time.Duration `json:"throttle,omitempty"` // answer 429 -1003, Retry-After this long, and keep refusing the key so long
	Ban         time.Duration `json:"ban,omitempty"`      // answer 418 -1003, Retry-After this long, and ban the key so long
}

func (f Fault) validate() error {
	var errs []error
	n := 0
	for _, on := range []bool{f.Drop, f.Status != 0, f.Throttle > 0, f.Ban > 0} {
		if on {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, errors.New("fault: at most one of drop, status, throttle, ban"))
	}
	if f.Status != 0 && (f.Status < 500 || f.Status > 599) {
		errs = append(errs, errors.New("fault: status must be a 5xx"))
	}
	if f.Times < 0 || f.Latency < 0 || f.AnswerDelay < 0 || f.Throttle < 0 || f.Ban < 0 {
		errs = append(errs, errors.New("fault: negative times or duration"))
	}
	if n == 0 && f.Latency == 0 && f.AnswerDelay == 0 {
		errs = append(errs, errors.New("fault: nothing to inject"))
	}
	return errors.Join(errs...)
}

// AddFault injects f; faults apply in the order they were added, one per request.
func (s *Sim) AddFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Add(f.Route, f.Times, f)
	return nil
}

// ClearFaults removes every REST fault and lifts throttles and bans.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Clear()
	for _, l := range s.limits {
		l.throttledUntil, l.bannedUntil, l.strikes = time.Time{}, time.Time{}, 0
	}
}

// StreamFaults misbehave the user data streams: Duplicate sends every event twice, Reorder swaps
// every two consecutive events of an account (a lone event goes out after ReorderHold).
type StreamFaults = simkit.StreamFaults

// SetStreamFaults replaces the user stream faults; an event held for reordering goes out now if
// Reorder is turned off.
func (s *Sim) SetStreamFaults(f StreamFaults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream = f
	if !f.Reorder {
		for _, a := range s.accounts {
			a.reorder.Flush(func(m []byte) { s.deliver(a, m) })
		}
	}
}

// DisconnectStreams drops every WebSocket connection, user and market, without a close frame, as
// a network failure would. Listen keys stay valid.
func (s *Sim) DisconnectStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Drop()
	}
}

package tradovate

import (
	"errors"
	"strings"
	"time"

	"github.com/svc/engine/sim/internal/simkit"
)

// Fault is one injected misbehaviour of the API. It applies to the requests of Endpoint
// ("order/placeorder", lower case, without /v1; empty for every endpoint), over REST and the
// sockets alike, for the next Times of them (0: until ClearFaults). Latency may combine with one of
// the others.
type Fault struct {
	Endpoint string        `json:"endpoint,omitempty"`
	Times    int           `json:"times,omitempty"`
	Latency  time.Duration `json:"latency,omitempty"` // wait this long before handling
	// Drop handles the request (an order is placed), then loses the answer: a REST connection is
	// closed unanswered; a socket is cut without a close frame.
	Drop bool `json:"drop,omitempty"`
	// Status answers this status without handling: a 5xx with the provider's "Internal Server
	// Error" text, or 423 / 429 with an empty body (a socket gets {"s":429,"i":…}).
	Status int `json:"status,omitempty"`
	// Penalty answers the provider's time penalty without handling: HTTP 200 with p-ticket and
	// p-time (this duration, in whole seconds). Retrying with the p-ticket in the body once p-time
	// has passed is handled; retrying earlier gets the same ticket with the time left.
	Penalty time.Duration `json:"penalty,omitempty"`
	// Captcha adds "p-captcha": true to the penalty (p-time one hour when Penalty is zero): the
	// ticket cannot be redeemed, as a third-party application cannot answer a captcha.
	Captcha bool `json:"captcha,omitempty"`
	// Lockout answers 429 and keeps answering 429 to the same user (or, before authentication, the
	// same address) for this long, the provider's user-level rate limit.
	Lockout time.Duration `json:"lockout,omitempty"`
}

func (f Fault) validate() error {
	var errs []error
	n := 0
	for _, on := range []bool{f.Drop, f.Status != 0, f.Penalty > 0 || f.Captcha, f.Lockout > 0} {
		if on {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, errors.New("fault: at most one of drop, status, penalty/captcha, lockout"))
	}
	if f.Status != 0 && f.Status != 423 && f.Status != 429 && (f.Status < 500 || f.Status > 599) {
		errs = append(errs, errors.New("fault: status must be 423, 429 or a 5xx"))
	}
	if f.Times < 0 || f.Latency < 0 || f.Penalty < 0 || f.Lockout < 0 {
		errs = append(errs, errors.New("fault: negative times or duration"))
	}
	if n == 0 && f.Latency == 0 {
		errs = append(errs, errors.New("fault: nothing to inject"))
	}
	return errors.Join(errs...)
}

func (f *Fault) penalizes() bool { return f.Penalty > 0 || f.Captcha }

// AddFault injects f; faults apply in the order they were added, one per request.
func (s *Sim) AddFault(f Fault) error {
	f.Endpoint = strings.ToLower(strings.TrimPrefix(f.Endpoint, "/"))
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Add(f.Endpoint, f.Times, f)
	return nil
}

// ClearFaults removes every fault and lifts lockouts, outstanding penalty tickets, captchas earned
// by wrong passwords and the rate windows.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Clear()
	s.lockouts = map[string]time.Time{}
	s.tickets = map[string]*ticket{}
	s.rates = map[string]*window{}
	for _, u := range s.users {
		u.failures, u.captchaUntil, u.captchaTik = 0, time.Time{}, ""
	}
}

// takeFault returns the fault for one request of endpoint and uses it up, with s.mu held. A request
// redeeming a penalty ticket passes penalty faults by without using them up.
func (s *Sim) takeFault(endpoint string, redeemed bool) *Fault {
	return s.faults.Take(endpoint, func(f *Fault) bool { return redeemed && f.penalizes() })
}

// ticket is an outstanding time penalty: its key (an endpoint, or "auth:"+login for the access token
// request limit) and the time from which it may be redeemed.
type ticket struct {
	key     string
	due     time.Time
	captcha bool
}

// issueTicket answers a new penalty for key of d (at least a second), with s.mu held.
func (s *Sim) issueTicket(key string, d time.Duration, now time.Time) answer {
	v := randomToken(24)
	s.tickets[v] = &ticket{key: key, due: now.Add(d)}
	return penalty(v, d, false)
}

// redeem uses up a ticket for key that is due; it reports false for no ticket, another key's
// ticket, or one not yet due.
func (s *Sim) redeem(value, key string, now time.Time) bool {
	t, ok := s.tickets[value]
	if !ok || t.key != key || t.captcha || now.Before(t.due) {
		return false
	}
	delete(s.tickets, value)
	return true
}

// early is the ticket value presented for key that is not yet due, or nil.
func (s *Sim) early(value, key string, now time.Time) *ticket {
	t, ok := s.tickets[value]
	if !ok || t.key != key || !now.Before(t.due) {
		return nil
	}
	return t
}

// penalty is the provider's time penalty answer: HTTP 200 with p-ticket, p-time in whole seconds and,
// when set, p-captcha.
func penalty(ticketValue string, d time.Duration, captcha bool) answer {
	secs := int64((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	body := map[string]any{"p-ticket": ticketValue, "p-time": secs}
	if captcha {
		body["p-captcha"] = true
	}
	return ok(body)
}

// window is the times of one key's requests in the last minute.
type window struct{ times []time.Time }

func (s *Sim) rate(key string, now time.Time) *window { return s.window(key, time.Minute, now) }

// window is key's rolling window of span, its times older than span dropped, with s.mu held.
func (s *Sim) window(key string, span time.Duration, now time.Time) *window {
	w, ok := s.rates[key]
	if !ok {
		w = &window{}
		s.rates[key] = w
	}
	cut := 0
	for cut < len(w.times) && !w.times[cut].After(now.Add(-span)) {
		cut++
	}
	w.times = w.times[cut:]
	return w
}

// StreamFaults misbehave the user data sockets' props events: Duplicate sends every event twice,
// Reorder swaps every two consecutive events of a socket (a lone event goes out after ReorderHold).
type StreamFaults = simkit.StreamFaults

// SetStreamFaults replaces the socket faults; an event held for reordering goes out now if Reorder is
// turned off.
func (s *Sim) SetStreamFaults(f StreamFaults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream = f
	if !f.Reorder {
		for c := range s.conns {
			c.reorder.Flush(c.Send)
		}
	}
}

// DisconnectSockets cuts every socket, user data and market data. Abrupt: without a close frame, as a
// network failure would. Graceful: the provider's "shutdown" event (reasonCode Maintenance), then a
// close frame. Sessions and tokens stay valid.
func (s *Sim) DisconnectSockets(graceful bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if graceful {
			c.Send(`a[{"e":"shutdown","d":{"reasonCode":"Maintenance","reason":"Simulated maintenance"}}]`)
			c.closeWith(`c[1000,"Server shutdown"]`)
			continue
		}
		c.Drop()
	}
}

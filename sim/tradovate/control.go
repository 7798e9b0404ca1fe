package tradovate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/svc/engine/sim/internal/simkit"
)

// The control API drives a standalone simulator over HTTP/JSON under /_sim/, with the same
// operations as the Go methods. Durations are Go duration strings ("250ms", "2m"), times RFC 3339.
// Every answer is JSON; a refusal is 400 {"error": "..."}.
//
//	POST   /_sim/logins                        Login                                  AddLogin
//	POST   /_sim/logins/{name}/marketdata      {"products": ["ES"]}                   SetMarketData
//	POST   /_sim/accounts/{name}/reject        {"reason": "...", "text": "..."}       RejectNext
//	POST   /_sim/accounts/{name}/orders        a placeorder body without account      PlaceOutside
//	POST   /_sim/price                         {"symbol": "ESZ6", "price": "5001.25"} SetPrice
//	POST   /_sim/roll                          {"contract": "ESZ6", "rollDate": "...", "expiration": "..."} SetRollDate / SetExpiration ("now" for either: now)
//	POST   /_sim/session                       {"open": false}                        SetSessionOpen
//	POST   /_sim/endofday                                                             EndOfDay
//	POST   /_sim/faults                        {"endpoint": "order/placeorder", "times": 1, "drop": true, "latency": "300ms", "status": 503, "penalty": "5s", "captcha": true, "lockout": "1m"}
//	DELETE /_sim/faults                                                               ClearFaults
//	POST   /_sim/sockets/faults                {"duplicate": true, "reorder": true, "reorderHold": "200ms"}
//	POST   /_sim/sockets/disconnect            {"graceful": false}                    DisconnectSockets
//	POST   /_sim/restart                                                              Restart
//	POST   /_sim/tokens/expire                                                        ExpireTokens
//	POST   /_sim/tokens/lifetime               {"lifetime": "5m"}                     SetTokenLifetime
//	GET    /_sim/contracts                     → {"ES": ["ESH7", ...], ...} and the month to trade now
//	GET    /_sim/counters                      → {"requests": {endpoint: n}, "ordersByClOrdId": {account: {id: n}}, "ordersByText": ..., "ordersByCustomTag50": ...}
func (s *Sim) serveControl(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_sim/logins", simkit.Control(func(r *http.Request) (any, error) {
		var l Login
		if err := simkit.Decode(r, &l); err != nil {
			return nil, err
		}
		id, accounts, err := s.AddLogin(l)
		return map[string]any{"userId": id, "accounts": accounts}, err
	}))
	mux.HandleFunc("POST /_sim/logins/{name}/marketdata", simkit.Control(func(r *http.Request) (any, error) {
		var b struct{ Products []string }
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"products": b.Products}, s.SetMarketData(r.PathValue("name"), b.Products)
	}))
	mux.HandleFunc("POST /_sim/accounts/{name}/reject", simkit.Control(func(r *http.Request) (any, error) {
		var b Rejection
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"queued": true}, s.RejectNext(r.PathValue("name"), b)
	}))
	mux.HandleFunc("POST /_sim/accounts/{name}/orders", simkit.Control(func(r *http.Request) (any, error) {
		var b map[string]any
		d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
		d.UseNumber() // prices stay the decimals they were written as
		if err := d.Decode(&b); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		id, err := s.PlaceOutside(r.PathValue("name"), b)
		return map[string]any{"orderId": id}, err
	}))
	mux.HandleFunc("POST /_sim/price", simkit.Control(func(r *http.Request) (any, error) {
		var b struct{ Symbol, Price string }
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"symbol": b.Symbol, "price": b.Price}, s.SetPrice(b.Symbol, b.Price)
	}))
	mux.HandleFunc("POST /_sim/roll", simkit.Control(func(r *http.Request) (any, error) {
		var b struct{ Contract, RollDate, Expiration string }
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		if b.RollDate == "" && b.Expiration == "" {
			return nil, errors.New("rollDate or expiration is required")
		}
		for _, f := range []struct {
			v   string
			set func(string, time.Time) error
		}{{b.RollDate, s.SetRollDate}, {b.Expiration, s.SetExpiration}} {
			if f.v == "" {
				continue
			}
			var at time.Time
			if f.v != "now" {
				t, err := time.Parse(time.RFC3339, f.v)
				if err != nil {
					return nil, fmt.Errorf("time %q: %w", f.v, err)
				}
				at = t
			}
			if err := f.set(b.Contract, at); err != nil {
				return nil, err
			}
		}
		return map[string]any{"contract": b.Contract}, nil
	}))
	mux.HandleFunc("POST /_sim/session", simkit.Control(func(r *http.Request) (any, error) {
		var b struct{ Open bool }
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		s.SetSessionOpen(b.Open)
		return map[string]any{"open": b.Open}, nil
	}))
	mux.HandleFunc("POST /_sim/endofday", simkit.Control(func(*http.Request) (any, error) {
		s.EndOfDay()
		return map[string]any{"ended": true}, nil
	}))
	mux.HandleFunc("POST /_sim/faults", simkit.Control(func(r *http.Request) (any, error) {
		var b struct {
			Endpoint                  string
			Times, Status             int
			Drop, Captcha             bool
			Latency, Penalty, Lockout string
		}
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		var d simkit.Durations
		f := Fault{Endpoint: b.Endpoint, Times: b.Times, Status: b.Status, Drop: b.Drop, Captcha: b.Captcha,
			Latency: d.Parse("latency", b.Latency), Penalty: d.Parse("penalty", b.Penalty), Lockout: d.Parse("lockout", b.Lockout)}
		if err := d.Err(); err != nil {
			return nil, err
		}
		return map[string]any{"added": true}, s.AddFault(f)
	}))
	mux.HandleFunc("DELETE /_sim/faults", simkit.Control(func(*http.Request) (any, error) {
		s.ClearFaults()
		return map[string]any{"cleared": true}, nil
	}))
	mux.HandleFunc("POST /_sim/sockets/faults", simkit.Control(func(r *http.Request) (any, error) {
		f, err := simkit.DecodeStreamFaults(r)
		if err != nil {
			return nil, err
		}
		s.SetStreamFaults(f)
		return map[string]any{"duplicate": f.Duplicate, "reorder": f.Reorder, "reorderHold": f.ReorderHold.String()}, nil
	}))
	mux.HandleFunc("POST /_sim/sockets/disconnect", simkit.Control(func(r *http.Request) (any, error) {
		var b struct{ Graceful bool }
		if r.ContentLength != 0 {
			if err := simkit.Decode(r, &b); err != nil {
				return nil, err
			}
		}
		s.DisconnectSockets(b.Graceful)
		return map[string]any{"disconnected": true}, nil
	}))
	mux.HandleFunc("POST /_sim/restart", simkit.Control(func(*http.Request) (any, error) {
		s.Restart()
		return map[string]any{"restarted": true}, nil
	}))
	mux.HandleFunc("POST /_sim/tokens/expire", simkit.Control(func(*http.Request) (any, error) {
		s.ExpireTokens()
		return map[string]any{"expired": true}, nil
	}))
	mux.HandleFunc("POST /_sim/tokens/lifetime", simkit.Control(func(r *http.Request) (any, error) {
		var b struct{ Lifetime string }
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		d, err := simkit.Positive("lifetime", b.Lifetime)
		if err != nil {
			return nil, err
		}
		s.SetTokenLifetime(d)
		return map[string]any{"lifetime": d.String()}, nil
	}))
	mux.HandleFunc("GET /_sim/contracts", simkit.Control(func(*http.Request) (any, error) {
		s.mu.Lock()
		names := append([]string(nil), s.productOrder...)
		s.mu.Unlock()
		out := map[string]any{}
		for _, n := range names {
			out[n] = map[string]any{"contracts": s.Contracts(n), "front": s.FrontContract(n)}
		}
		return out, nil
	}))
	mux.HandleFunc("GET /_sim/counters", simkit.Control(func(*http.Request) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return map[string]any{"requests": maps.Clone(s.requests), "ordersByClOrdId": s.byClOrdID.Copy(),
			"ordersByText": s.byText.Copy(), "ordersByCustomTag50": s.byTag50.Copy()}, nil
	}))
	mux.ServeHTTP(w, r)
}

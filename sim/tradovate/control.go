package tradovate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
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
	mux.HandleFunc("POST /_sim/logins", s.ctl(func(r *http.Request) (any, error) {
		var l Login
		if err := decode(r, &l); err != nil {
			return nil, err
		}
		id, accounts, err := s.AddLogin(l)
		return map[string]any{"userId": id, "accounts": accounts}, err
	}))
	mux.HandleFunc("POST /_sim/logins/{name}/marketdata", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Products []string }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"products": b.Products}, s.SetMarketData(r.PathValue("name"), b.Products)
	}))
	mux.HandleFunc("POST /_sim/accounts/{name}/reject", s.ctl(func(r *http.Request) (any, error) {
		var b Rejection
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"queued": true}, s.RejectNext(r.PathValue("name"), b)
	}))
	mux.HandleFunc("POST /_sim/accounts/{name}/orders", s.ctl(func(r *http.Request) (any, error) {
		var b map[string]any
		d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
		d.UseNumber() // prices stay the decimals they were written as
		if err := d.Decode(&b); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		id, err := s.PlaceOutside(r.PathValue("name"), b)
		return map[string]any{"orderId": id}, err
	}))
	mux.HandleFunc("POST /_sim/price", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Symbol, Price string }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"symbol": b.Symbol, "price": b.Price}, s.SetPrice(b.Symbol, b.Price)
	}))
	mux.HandleFunc("POST /_sim/roll", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Contract, RollDate, Expiration string }
		if err := decode(r, &b); err != nil {
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
	mux.HandleFunc("POST /_sim/session", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Open bool }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		s.SetSessionOpen(b.Open)
		return map[string]any{"open": b.Open}, nil
	}))
	mux.HandleFunc("POST /_sim/endofday", s.ctl(func(*http.Request) (any, error) {
		s.EndOfDay()
		return map[string]any{"ended": true}, nil
	}))
	mux.HandleFunc("POST /_sim/faults", s.ctl(func(r *http.Request) (any, error) {
		var b struct {
			Endpoint                  string
			Times, Status             int
			Drop, Captcha             bool
			Latency, Penalty, Lockout string
		}
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		f := Fault{Endpoint: b.Endpoint, Times: b.Times, Status: b.Status, Drop: b.Drop, Captcha: b.Captcha}
		var errs []error
		for _, d := range []struct {
			name string
			in   string
			out  *time.Duration
		}{{"latency", b.Latency, &f.Latency}, {"penalty", b.Penalty, &f.Penalty}, {"lockout", b.Lockout, &f.Lockout}} {
			if d.in == "" {
				continue
			}
			v, err := time.ParseDuration(d.in)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
			}
			*d.out = v
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return map[string]any{"added": true}, s.AddFault(f)
	}))
	mux.HandleFunc("DELETE /_sim/faults", s.ctl(func(*http.Request) (any, error) {
		s.ClearFaults()
		return map[string]any{"cleared": true}, nil
	}))
	mux.HandleFunc("POST /_sim/sockets/faults", s.ctl(func(r *http.Request) (any, error) {
		var b struct {
			Duplicate, Reorder bool
			ReorderHold        string
		}
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		f := StreamFaults{Duplicate: b.Duplicate, Reorder: b.Reorder}
		if b.ReorderHold != "" {
			d, err := time.ParseDuration(b.ReorderHold)
			if err != nil {
				return nil, fmt.Errorf("reorderHold: %w", err)
			}
			f.ReorderHold = d
		}
		s.SetStreamFaults(f)
		return map[string]any{"duplicate": f.Duplicate, "reorder": f.Reorder, "reorderHold": f.ReorderHold.String()}, nil
	}))
	mux.HandleFunc("POST /_sim/sockets/disconnect", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Graceful bool }
		if r.ContentLength != 0 {
			if err := decode(r, &b); err != nil {
				return nil, err
			}
		}
		s.DisconnectSockets(b.Graceful)
		return map[string]any{"disconnected": true}, nil
	}))
	mux.HandleFunc("POST /_sim/restart", s.ctl(func(*http.Request) (any, error) {
		s.Restart()
		return map[string]any{"restarted": true}, nil
	}))
	mux.HandleFunc("POST /_sim/tokens/expire", s.ctl(func(*http.Request) (any, error) {
		s.ExpireTokens()
		return map[string]any{"expired": true}, nil
	}))
	mux.HandleFunc("POST /_sim/tokens/lifetime", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Lifetime string }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(b.Lifetime)
		if err != nil || d <= 0 {
			return nil, errors.New("lifetime: a positive duration is required")
		}
		s.SetTokenLifetime(d)
		return map[string]any{"lifetime": d.String()}, nil
	}))
	mux.HandleFunc("GET /_sim/contracts", s.ctl(func(*http.Request) (any, error) {
		s.mu.Lock()
		names := append([]string(nil), s.productOrder...)
		s.mu.Unlock()
		out := map[string]any{}
		for _, n := range names {
			out[n] = map[string]any{"contracts": s.Contracts(n), "front": s.FrontContract(n)}
		}
		return out, nil
	}))
	mux.HandleFunc("GET /_sim/counters", s.ctl(func(*http.Request) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		req := make(map[string]int, len(s.requests))
		for k, v := range s.requests {
			req[k] = v
		}
		return map[string]any{"requests": req, "ordersByClOrdId": copyCounts(s.byClOrdID),
			"ordersByText": copyCounts(s.byText), "ordersByCustomTag50": copyCounts(s.byTag50)}, nil
	}))
	mux.ServeHTTP(w, r)
}

func (s *Sim) ctl(h func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ans, err := h(r)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(ans)
	}
}

func decode(r *http.Request, v any) error {
	d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}

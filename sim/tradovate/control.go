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
//	POST   /_sim/sockets/faults                {"duplicate": true, "reorder": true, "reorderHold": "200ms", "balanceFirst": true}
//	POST   /_sim/sockets/disconnect            {"graceful": false}                    DisconnectSockets
//	POST   /_sim/restart                                                              Restart
//	POST   /_sim/tokens/expire                                                        ExpireTokens
//	POST   /_sim/tokens/lifetime               {"lifetime": "5m"}                     SetTokenLifetime
//	GET    /_sim/contracts                     → {"ES": ["ESH7", ...], ...} and the month to trade now
//	GET    /_sim/counters                      → {"requests": {endpoint: n}, "ordersByClOrdId": {account: {id: n}}, "ordersByText": ..., "ordersByCustomTag50": ...}
func (s *Sim) serveControl(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	simkit.HandleBody(mux, "POST /_sim/logins", func(_ *http.Request, l Login) (any, error) {
		id, accounts, err := s.AddLogin(l)
		return map[string]any{"userId": id, "accounts": accounts}, err
	})
	simkit.HandleBody(mux, "POST /_sim/logins/{name}/marketdata", func(r *http.Request, b struct{ Products []string }) (any, error) {
		return map[string]any{"products": b.Products}, s.SetMarketData(r.PathValue("name"), b.Products)
	})
	simkit.HandleBody(mux, "POST /_sim/accounts/{name}/reject", func(r *http.Request, b Rejection) (any, error) {
		return map[string]any{"queued": true}, s.RejectNext(r.PathValue("name"), b)
	})
	simkit.Handle(mux, "POST /_sim/accounts/{name}/orders", func(r *http.Request) (any, error) {
		var b map[string]any
		d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
		d.UseNumber() // prices stay the decimals they were written as
		if err := d.Decode(&b); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		id, err := s.PlaceOutside(r.PathValue("name"), b)
		return map[string]any{"orderId": id}, err
	})
	simkit.HandleBody(mux, "POST /_sim/price", func(_ *http.Request, b struct{ Symbol, Price string }) (any, error) {
		return map[string]any{"symbol": b.Symbol, "price": b.Price}, s.SetPrice(b.Symbol, b.Price)
	})
	simkit.HandleBody(mux, "POST /_sim/roll", func(_ *http.Request, b struct{ Contract, RollDate, Expiration string }) (any, error) {
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
	})
	simkit.HandleBody(mux, "POST /_sim/session", func(_ *http.Request, b struct{ Open bool }) (any, error) {
		s.SetSessionOpen(b.Open)
		return map[string]any{"open": b.Open}, nil
	})
	simkit.Handle(mux, "POST /_sim/endofday", func(*http.Request) (any, error) {
		s.EndOfDay()
		return map[string]any{"ended": true}, nil
	})
	simkit.Handle(mux, "POST /_sim/faults", func(r *http.Request) (any, error) {
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
	})
	simkit.Handle(mux, "DELETE /_sim/faults", func(*http.Request) (any, error) {
		s.ClearFaults()
		return map[string]any{"cleared": true}, nil
	})
	simkit.Handle(mux, "POST /_sim/sockets/faults", func(r *http.Request) (any, error) {
		f, err := simkit.DecodeStreamFaults(r)
		if err != nil {
			return nil, err
		}
		s.SetStreamFaults(f)
		return map[string]any{"duplicate": f.Duplicate, "reorder": f.Reorder, "reorderHold": f.ReorderHold.String(), "balanceFirst": f.BalanceFirst}, nil
	})
	simkit.Handle(mux, "POST /_sim/sockets/disconnect", func(r *http.Request) (any, error) {
		var b struct{ Graceful bool }
		if r.ContentLength != 0 {
			if err := simkit.Decode(r, &b); err != nil {
				return nil, err
			}
		}
		s.DisconnectSockets(b.Graceful)
		return map[string]any{"disconnected": true}, nil
	})
	simkit.Handle(mux, "POST /_sim/restart", func(*http.Request) (any, error) {
		s.Restart()
		return map[string]any{"restarted": true}, nil
	})
	simkit.Handle(mux, "POST /_sim/tokens/expire", func(*http.Request) (any, error) {
		s.ExpireTokens()
		return map[string]any{"expired": true}, nil
	})
	simkit.HandleBody(mux, "POST /_sim/tokens/lifetime", func(_ *http.Request, b struct{ Lifetime string }) (any, error) {
		d, err := simkit.Positive("lifetime", b.Lifetime)
		if err != nil {
			return nil, err
		}
		s.SetTokenLifetime(d)
		return map[string]any{"lifetime": d.String()}, nil
	})
	simkit.Handle(mux, "GET /_sim/contracts", func(*http.Request) (any, error) {
		s.mu.Lock()
		names := append([]string(nil), s.productOrder...)
		s.mu.Unlock()
		out := map[string]any{}
		for _, n := range names {
			out[n] = map[string]any{"contracts": s.Contracts(n), "front": s.FrontContract(n)}
		}
		return out, nil
	})
	simkit.Handle(mux, "GET /_sim/counters", func(*http.Request) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return map[string]any{"requests": maps.Clone(s.requests), "ordersByClOrdId": s.byClOrdID.Copy(),
			"ordersByText": s.byText.Copy(), "ordersByCustomTag50": s.byTag50.Copy()}, nil
	})
	mux.ServeHTTP(w, r)
}

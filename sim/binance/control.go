package binance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The control API drives a standalone simulator over HTTP/JSON under /_sim/, with the same
// operations as the Go methods. Durations are Go duration strings ("250ms", "2m"). Every answer is
// JSON; a refusal is 400 {"error": "..."}.
//
//	POST   /_sim/accounts                     Account                      add or replace an account
//	POST   /_sim/accounts/{key}/hedge         {"on": true}                 SetHedgeMode
//	POST   /_sim/accounts/{key}/multiassets   {"on": true}                 SetMultiAssetsMode
//	POST   /_sim/accounts/{key}/leverage      {"symbol": "BTCUSDT", "leverage": 10}
//	POST   /_sim/accounts/{key}/orders        {"symbol": ..., "side": ..., ...} PlaceOutside
//	POST   /_sim/price                        {"symbol": "BTCUSDT", "price": "61000"}
//	POST   /_sim/markprice                    {"symbol": "BTCUSDT", "price": "61000"}   SetMarkPrice
//	POST   /_sim/faults                       {"route": "POST /fapi/v1/order", "times": 1, "drop": true, "latency": "300ms", "status": 503, "throttle": "10s", "ban": "1m"}
//	DELETE /_sim/faults                                                     ClearFaults
//	POST   /_sim/streams/faults               {"duplicate": true, "reorder": true, "reorderHold": "200ms"}
//	POST   /_sim/streams/disconnect                                         DisconnectStreams
//	POST   /_sim/restart                                                    Restart
//	POST   /_sim/listenkey-ttl                {"ttl": "5s"}
//	GET    /_sim/counters                     → {"requests": {route: n}, "ordersByClientId": {apiKey: {clientOrderId: n}}}
func (s *Sim) serveControl(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_sim/accounts", s.ctl(func(r *http.Request) (any, error) {
		var a Account
		if err := decode(r, &a); err != nil {
			return nil, err
		}
		return map[string]any{"apiKey": a.APIKey}, s.AddAccount(a)
	}))
	mux.HandleFunc("POST /_sim/accounts/{key}/hedge", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ On bool }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"hedgeMode": b.On}, s.SetHedgeMode(r.PathValue("key"), b.On)
	}))
	mux.HandleFunc("POST /_sim/accounts/{key}/multiassets", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ On bool }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"multiAssets": b.On}, s.SetMultiAssetsMode(r.PathValue("key"), b.On)
	}))
	mux.HandleFunc("POST /_sim/accounts/{key}/leverage", s.ctl(func(r *http.Request) (any, error) {
		var b struct {
			Symbol   string
			Leverage int
		}
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"symbol": b.Symbol, "leverage": b.Leverage}, s.SetLeverage(r.PathValue("key"), b.Symbol, b.Leverage)
	}))
	mux.HandleFunc("POST /_sim/accounts/{key}/orders", s.ctl(func(r *http.Request) (any, error) {
		var p map[string]string
		if err := decode(r, &p); err != nil {
			return nil, err
		}
		id, err := s.PlaceOutside(r.PathValue("key"), p)
		return map[string]any{"orderId": id}, err
	}))
	mux.HandleFunc("POST /_sim/price", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Symbol, Price string }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"symbol": b.Symbol, "price": b.Price}, s.SetPrice(b.Symbol, b.Price)
	}))
	mux.HandleFunc("POST /_sim/markprice", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ Symbol, Price string }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		return map[string]any{"symbol": b.Symbol, "markPrice": b.Price}, s.SetMarkPrice(b.Symbol, b.Price)
	}))
	mux.HandleFunc("POST /_sim/faults", s.ctl(func(r *http.Request) (any, error) {
		var b struct {
			Route                  string
			Times, Status          int
			Drop                   bool
			Latency, Throttle, Ban string
		}
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		f := Fault{Route: b.Route, Times: b.Times, Status: b.Status, Drop: b.Drop}
		var errs []error
		for _, d := range []struct {
			name string
			in   string
			out  *time.Duration
		}{{"latency", b.Latency, &f.Latency}, {"throttle", b.Throttle, &f.Throttle}, {"ban", b.Ban, &f.Ban}} {
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
	mux.HandleFunc("POST /_sim/streams/faults", s.ctl(func(r *http.Request) (any, error) {
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
		return f, nil
	}))
	mux.HandleFunc("POST /_sim/streams/disconnect", s.ctl(func(*http.Request) (any, error) {
		s.DisconnectStreams()
		return map[string]any{"disconnected": true}, nil
	}))
	mux.HandleFunc("POST /_sim/restart", s.ctl(func(*http.Request) (any, error) {
		s.Restart()
		return map[string]any{"restarted": true}, nil
	}))
	mux.HandleFunc("POST /_sim/listenkey-ttl", s.ctl(func(r *http.Request) (any, error) {
		var b struct{ TTL string }
		if err := decode(r, &b); err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(b.TTL)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("ttl: a positive duration is required")
		}
		s.SetListenKeyTTL(d)
		return map[string]any{"ttl": d.String()}, nil
	}))
	mux.HandleFunc("GET /_sim/counters", s.ctl(func(*http.Request) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		orders := map[string]map[string]int{}
		for k, m := range s.accepted {
			orders[k] = map[string]int{}
			for cid, n := range m {
				orders[k][cid] = n
			}
		}
		req := map[string]int{}
		for k, v := range s.requests {
			req[k] = v
		}
		return map[string]any{"requests": req, "ordersByClientId": orders}, nil
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

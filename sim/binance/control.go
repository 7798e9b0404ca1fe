package binance

import (
	"maps"
	"net/http"

	"github.com/svc/engine/sim/internal/simkit"
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
//	POST   /_sim/faults                       {"route": "POST /fapi/v1/order", "times": 1, "drop": true, "latency": "300ms", "answerDelay": "200ms", "status": 503, "throttle": "10s", "ban": "1m"}
//	DELETE /_sim/faults                                                     ClearFaults
//	POST   /_sim/streams/faults               {"duplicate": true, "reorder": true, "reorderHold": "200ms", "balanceFirst": true}
//	POST   /_sim/streams/disconnect                                         DisconnectStreams
//	POST   /_sim/restart                                                    Restart
//	POST   /_sim/listenkey-ttl                {"ttl": "5s"}
//	GET    /_sim/counters                     → {"requests": {route: n}, "ordersByClientId": {apiKey: {clientOrderId: n}}}
func (s *Sim) serveControl(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	simkit.HandleBody(mux, "POST /_sim/accounts", func(_ *http.Request, a Account) (any, error) {
		return map[string]any{"apiKey": a.APIKey}, s.AddAccount(a)
	})
	simkit.HandleBody(mux, "POST /_sim/accounts/{key}/hedge", func(r *http.Request, b struct{ On bool }) (any, error) {
		return map[string]any{"hedgeMode": b.On}, s.SetHedgeMode(r.PathValue("key"), b.On)
	})
	simkit.HandleBody(mux, "POST /_sim/accounts/{key}/multiassets", func(r *http.Request, b struct{ On bool }) (any, error) {
		return map[string]any{"multiAssets": b.On}, s.SetMultiAssetsMode(r.PathValue("key"), b.On)
	})
	simkit.HandleBody(mux, "POST /_sim/accounts/{key}/leverage", func(r *http.Request, b struct {
		Symbol   string
		Leverage int
	}) (any, error) {
		return map[string]any{"symbol": b.Symbol, "leverage": b.Leverage}, s.SetLeverage(r.PathValue("key"), b.Symbol, b.Leverage)
	})
	simkit.HandleBody(mux, "POST /_sim/accounts/{key}/orders", func(r *http.Request, p map[string]string) (any, error) {
		id, err := s.PlaceOutside(r.PathValue("key"), p)
		return map[string]any{"orderId": id}, err
	})
	simkit.HandleBody(mux, "POST /_sim/price", func(_ *http.Request, b struct{ Symbol, Price string }) (any, error) {
		return map[string]any{"symbol": b.Symbol, "price": b.Price}, s.SetPrice(b.Symbol, b.Price)
	})
	simkit.HandleBody(mux, "POST /_sim/markprice", func(_ *http.Request, b struct{ Symbol, Price string }) (any, error) {
		return map[string]any{"symbol": b.Symbol, "markPrice": b.Price}, s.SetMarkPrice(b.Symbol, b.Price)
	})
	simkit.Handle(mux, "POST /_sim/faults", func(r *http.Request) (any, error) {
		var b struct {
			Route                  string
			Times, Status          int
			Drop                   bool
			Latency, Throttle, Ban string
			AnswerDelay            string
		}
		if err := simkit.Decode(r, &b); err != nil {
			return nil, err
		}
		var d simkit.Durations
		f := Fault{Route: b.Route, Times: b.Times, Status: b.Status, Drop: b.Drop,
			Latency: d.Parse("latency", b.Latency), AnswerDelay: d.Parse("answerDelay", b.AnswerDelay), Throttle: d.Parse("throttle", b.Throttle),
			Ban: d.Parse("ban", b.Ban)}
		if err := d.Err(); err != nil {
			return nil, err
		}
		return map[string]any{"added": true}, s.AddFault(f)
	})
	simkit.Handle(mux, "DELETE /_sim/faults", func(*http.Request) (any, error) {
		s.ClearFaults()
		return map[string]any{"cleared": true}, nil
	})
	simkit.Handle(mux, "POST /_sim/streams/faults", func(r *http.Request) (any, error) {
		f, err := simkit.DecodeStreamFaults(r)
		if err != nil {
			return nil, err
		}
		s.SetStreamFaults(f)
		return f, nil
	})
	simkit.Handle(mux, "POST /_sim/streams/disconnect", func(*http.Request) (any, error) {
		s.DisconnectStreams()
		return map[string]any{"disconnected": true}, nil
	})
	simkit.Handle(mux, "POST /_sim/restart", func(*http.Request) (any, error) {
		s.Restart()
		return map[string]any{"restarted": true}, nil
	})
	simkit.HandleBody(mux, "POST /_sim/listenkey-ttl", func(_ *http.Request, b struct{ TTL string }) (any, error) {
		d, err := simkit.Positive("ttl", b.TTL)
		if err != nil {
			return nil, err
		}
		s.SetListenKeyTTL(d)
		return map[string]any{"ttl": d.String()}, nil
	})
	simkit.Handle(mux, "GET /_sim/counters", func(*http.Request) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return map[string]any{"requests": maps.Clone(s.requests), "ordersByClientId": s.accepted.Copy()}, nil
	})
	mux.ServeHTTP(w, r)
}

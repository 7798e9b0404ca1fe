package clusterkit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Exchange is a Coinbase Exchange market-data feed on 127.0.0.1 that the
// test drives: every engine pointed at it (ExchangeEnv) sees the same quotes
// in the same order. It speaks the messages engine/market/exchange reads:
// subscribe answered by subscriptions, then the newest ticker and a
// last_match of each product; on Quote a ticker (best bid and ask) and a
// match (trade_id one more than the last) to every subscriber; a heartbeat
// of each product every 250 ms, so no engine calls the feed stale.
type Exchange struct {
	t    testing.TB
	srv  *httptest.Server
	mu   sync.Mutex
	subs map[chan []byte]bool
	last map[string][2]string // product -> newest bid, ask
	id   map[string]int64     // product -> last trade id
	done chan struct{}
}

// StartExchange starts an Exchange; it stops when the test ends.
func StartExchange(t testing.TB) *Exchange {
	x := &Exchange{t: t, subs: map[chan []byte]bool{}, last: map[string][2]string{}, id: map[string]int64{}, done: make(chan struct{})}
	x.srv = httptest.NewServer(http.HandlerFunc(x.serve))
	go x.heartbeats()
	t.Cleanup(func() {
		close(x.done)
		x.srv.CloseClientConnections()
		x.srv.Close()
	})
	return x
}

// URL is the feed's websocket URL (ENGINE_COINBASE_URL).
func (x *Exchange) URL() string { return "ws" + x.srv.URL[len("http"):] + "/" }

// Env is the environment that points an engine at the feed, with the
// exchange's product BTC-USD as the catalog's BTC-PERP.
func (x *Exchange) Env() map[string]string {
	return map[string]string{"ENGINE_MARKET_FEED": "coinbase", "ENGINE_COINBASE_URL": x.URL(),
		"ENGINE_COINBASE_PRODUCTS": "BTC-USD=BTC-PERP"}
}

// Subscribers counts the connections subscribed now.
func (x *Exchange) Subscribers() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.subs)
}

// Quote makes bid and ask product's newest touch and sends it, as a ticker
// and a trade at the bid, to every subscriber.
func (x *Exchange) Quote(product, bid, ask string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.last[product] = [2]string{bid, ask}
	x.id[product]++
	now := time.Now().UTC().Format(time.RFC3339Nano)
	tick := x.encode(map[string]any{"type": "ticker", "product_id": product, "best_bid": bid, "best_ask": ask, "price": bid, "time": now})
	match := x.encode(map[string]any{"type": "match", "product_id": product, "trade_id": x.id[product], "price": bid, "size": "0.01", "side": "sell", "time": now})
	for ch := range x.subs {
		x.send(ch, tick, match)
	}
}

func (x *Exchange) encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		x.t.Errorf("clusterkit: exchange: %v", err)
	}
	return b
}

// send queues frames for one subscriber; a subscriber too slow to take them
// is dropped (its engine redials and meets the newest quote). x.mu is held.
func (x *Exchange) send(ch chan []byte, frames ...[]byte) {
	for _, f := range frames {
		select {
		case ch <- f:
		default:
			delete(x.subs, ch)
			close(ch)
			return
		}
	}
}

func (x *Exchange) heartbeats() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-x.done:
			return
		case <-t.C:
		}
		x.mu.Lock()
		now := time.Now().UTC().Format(time.RFC3339Nano)
		for p := range x.last {
			hb := x.encode(map[string]any{"type": "heartbeat", "product_id": p, "last_trade_id": x.id[p], "time": now})
			for ch := range x.subs {
				x.send(ch, hb)
			}
		}
		x.mu.Unlock()
	}
}

func (x *Exchange) serve(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var sub struct {
		Type       string   `json:"type"`
		ProductIDs []string `json:"product_ids"`
	}
	if _, data, err := c.Read(ctx); err != nil || json.Unmarshal(data, &sub) != nil || sub.Type != "subscribe" {
		return
	}
	go func() { // reads until the engine goes: its close ends the session
		for {
			if _, _, err := c.Read(ctx); err != nil {
				cancel()
				return
			}
		}
	}()
	ch := make(chan []byte, 4096)
	x.mu.Lock()
	x.send(ch, x.encode(map[string]any{"type": "subscriptions"}))
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for p, q := range x.last {
		x.send(ch, x.encode(map[string]any{"type": "ticker", "product_id": p, "best_bid": q[0], "best_ask": q[1], "price": q[0], "time": now}),
			x.encode(map[string]any{"type": "last_match", "product_id": p, "trade_id": x.id[p], "price": q[0], "size": "0.01", "side": "sell", "time": now}))
	}
	x.subs[ch] = true
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		if x.subs[ch] {
			delete(x.subs, ch)
			close(ch)
		}
		x.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-x.done:
			return
		case f, ok := <-ch:
			if !ok {
				return
			}
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Write(wctx, websocket.MessageText, f)
			wcancel()
			if err != nil {
				return
			}
		}
	}
}

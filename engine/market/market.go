// Package market is the market-data service, not the command side: the
// instrument catalog and the price feeds the paper book and the market-data
// routes read. Its subpackages hold the rest of market data: bars, spread
// expressions, news and the economic calendar (news), the trading calendar
// (calendar), the exchange feed and the replay feed. Nothing here decides a
// command or writes to the commit log; the command side reads it.
package market

import (
	"sync"
	"time"

	"github.com/svc/engine/events"
)

// Quote is the touch of one instrument at one moment.
type Quote struct {
	Instrument string         `json:"instrument"`
	Bid        events.Decimal `json:"bid"`
	Ask        events.Decimal `json:"ask"`
	Last       events.Decimal `json:"last"`
	Size       events.Decimal `json:"size"` // traded size of the last tick; zero for a quote-only update
	At         time.Time      `json:"at"`
}

// Mid is the middle of bid and ask.
func (q Quote) Mid() events.Decimal { return q.Bid.Add(q.Ask).Quo(events.Int(2)) }

// Feed is a source of quotes.
type Feed interface {
	// Name labels the source, e.g. "simulated".
	Name() string
	// Quote returns the newest quote of symbol, if any arrived.
	Quote(symbol string) (Quote, bool)
	// Subscribe calls fn for every quote from now on, until the returned cancel.
	// fn must not block.
	Subscribe(fn func(Quote)) (cancel func())
}

// Hub fans quotes out to subscribers and keeps the newest of each instrument.
// Feeds embed it.
type Hub struct {
	mu     sync.RWMutex
	last   map[string]Quote
	subs   map[int]func(Quote)
	nextID int
}

// NewHub makes an empty hub.
func NewHub() *Hub { return &Hub{last: map[string]Quote{}, subs: map[int]func(Quote){}} }

// Publish records q as the newest quote of its instrument and hands it to every subscriber.
func (h *Hub) Publish(q Quote) {
	h.mu.Lock()
	h.last[q.Instrument] = q
	subs := make([]func(Quote), 0, len(h.subs))
	for _, fn := range h.subs {
		subs = append(subs, fn)
	}
	h.mu.Unlock()
	for _, fn := range subs {
		fn(q)
	}
}

// Quote returns the newest quote of symbol.
func (h *Hub) Quote(symbol string) (Quote, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	q, ok := h.last[symbol]
	return q, ok
}

// Subscribe registers fn for every published quote.
func (h *Hub) Subscribe(fn func(Quote)) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextID
	h.nextID++
	h.subs[id] = fn
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, id)
	}
}

// Package exchange adapts a real public crypto exchange feed into a
// market.Feed: the Coinbase Exchange market-data websocket feed
// (wss://ws-feed.exchange.coinbase.com), written against its documented
// messages: subscribe / subscriptions, match and last_match (trades, each with
// a per-product trade_id that increases by one), ticker (best bid and ask),
// heartbeat (every second per product, with last_trade_id) and error.
//
// The adapter reconnects with jittered exponential backoff and resubscribes,
// detects gaps (a trade_id that skips, a heartbeat's last_trade_id ahead of the
// trades seen), drops duplicates after a reconnect, and detects stale data: a
// connection silent for Stale is dropped and redialled, and a product without
// a message for Stale is reported stale (the routes then answer 503).
package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// DefaultURL is Coinbase Exchange's public market-data feed.
const DefaultURL = "wss://ws-feed.exchange.coinbase.com"

// Config shapes the adapter.
type Config struct {
	URL string // default DefaultURL
	// Products maps exchange product ids to catalog symbols ("BTC-USD": "BTC-PERP").
	Products   map[string]string
	Stale      time.Duration // default 5 s (heartbeats arrive every second)
	MinBackoff time.Duration // default 500 ms
	MaxBackoff time.Duration // default 30 s
	Now        func() time.Time
}

// Coinbase is the adapter; it is a market.Feed and a market.HealthReporter.
type Coinbase struct {
	*market.Hub
	cfg        Config
	mu         sync.Mutex
	products   map[string]*product
	connected  bool
	since      time.Time // when the current connection subscribed
	lastMsg    time.Time
	gaps       int64
	missed     int64
	reconnects int64
	sessions   int64
}

type product struct {
	symbol      string
	lastTradeID int64
	bid, ask    *events.Decimal
	lastMsg     time.Time
}

// New makes an adapter; Run connects it.
func New(cfg Config) *Coinbase {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.Stale <= 0 {
		cfg.Stale = 5 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.MinBackoff)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Coinbase{Hub: market.NewHub(), cfg: cfg, products: map[string]*product{}}
	for id, sym := range cfg.Products {
		c.products[id] = &product{symbol: sym}
	}
	return c
}

// Name labels the feed.
func (c *Coinbase) Name() string { return "coinbase" }

// Health reports the connection, stale products, gaps and reconnects.
func (c *Coinbase) Health() market.Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	h := market.Health{Connected: c.connected, LastMessage: c.lastMsg, Gaps: c.gaps, Missed: c.missed, Reconnects: c.reconnects, Stale: []string{}}
	for _, p := range c.products {
		last := p.lastMsg
		if last.Before(c.since) {
			last = c.since
		}
		if !c.connected || now.Sub(last) > c.cfg.Stale {
			h.Stale = append(h.Stale, p.symbol)
		}
	}
	sort.Strings(h.Stale)
	return h
}

// errStale ends a session that went silent.
var errStale = errors.New("exchange: no message within the staleness limit")

// Run keeps a connection up until ctx ends.
func (c *Coinbase) Run(ctx context.Context) {
	backoff := c.cfg.MinBackoff
	for ctx.Err() == nil {
		began := time.Now()
		err := c.session(ctx)
		c.mu.Lock()
		c.connected = false
		c.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > 30*time.Second {
			backoff = c.cfg.MinBackoff // the connection was healthy for a while
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		slog.Warn("exchange: connection lost; reconnecting", "feed", c.Name(), "err", err, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, c.cfg.MaxBackoff)
	}
}

type subscribe struct {
	Type       string   `json:"type"`
	ProductIDs []string `json:"product_ids"`
	Channels   []string `json:"channels"`
}

// message is the union of the documented fields the adapter reads.
type message struct {
	Type        string `json:"type"`
	ProductID   string `json:"product_id"`
	TradeID     int64  `json:"trade_id"`
	LastTradeID int64  `json:"last_trade_id"`
	Sequence    int64  `json:"sequence"`
	Price       string `json:"price"`
	Size        string `json:"size"`
	BestBid     string `json:"best_bid"`
	BestAsk     string `json:"best_ask"`
	Time        string `json:"time"`
	Message     string `json:"message"`
	Reason      string `json:"reason"`
}

func (c *Coinbase) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, _, err := websocket.Dial(dctx, c.cfg.URL, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	ids := make([]string, 0, len(c.products))
	for id := range c.products {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	sub, _ := json.Marshal(subscribe{Type: "subscribe", ProductIDs: ids, Channels: []string{"heartbeat", "ticker", "matches"}})
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = conn.Write(wctx, websocket.MessageText, sub)
	cancel()
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.Stale)
		_, data, err := conn.Read(rctx)
		stale := errors.Is(rctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			if stale && ctx.Err() == nil {
				return errStale
			}
			return fmt.Errorf("read: %w", err)
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			continue // not a message we can read; new types are expected and ignored
		}
		if err := c.handle(m); err != nil {
			return err
		}
	}
}

func (c *Coinbase) handle(m message) error {
	now := c.cfg.Now()
	c.mu.Lock()
	c.lastMsg = now
	p := c.products[m.ProductID]
	if p != nil {
		p.lastMsg = now
	}
	switch m.Type {
	case "subscriptions":
		if c.sessions > 0 {
			c.reconnects++
		}
		c.sessions++
		c.connected, c.since = true, now
	case "error":
		c.mu.Unlock()
		return fmt.Errorf("exchange error: %s (%s)", m.Message, m.Reason)
	case "heartbeat":
		if p != nil && p.lastTradeID > 0 && m.LastTradeID > p.lastTradeID {
			c.gap(p, m.LastTradeID-p.lastTradeID)
			p.lastTradeID = m.LastTradeID
		}
	case "ticker":
		if p != nil {
			if bid, err := events.ParseDecimal(m.BestBid); err == nil {
				p.bid = &bid
			}
			if ask, err := events.ParseDecimal(m.BestAsk); err == nil {
				p.ask = &ask
			}
		}
	case "match", "last_match":
		if p == nil || m.TradeID <= 0 {
			break
		}
		if p.lastTradeID > 0 {
			if m.TradeID <= p.lastTradeID { // seen before (a last_match after a reconnect)
				break
			}
			if m.TradeID > p.lastTradeID+1 {
				c.gap(p, m.TradeID-p.lastTradeID-1)
			}
		}
		p.lastTradeID = m.TradeID
		q, ok := quoteOf(p, m, now)
		c.mu.Unlock()
		if ok {
			c.Publish(q)
		}
		return nil
	}
	c.mu.Unlock()
	return nil
}

func (c *Coinbase) gap(p *product, missed int64) {
	c.gaps++
	c.missed += missed
	slog.Warn("exchange: trades missed", "feed", c.Name(), "symbol", p.symbol, "missed", missed)
}

func quoteOf(p *product, m message, now time.Time) (market.Quote, bool) {
	price, err := events.ParseDecimal(m.Price)
	if err != nil || price.Sign() <= 0 {
		return market.Quote{}, false
	}
	size, err := events.ParseDecimal(m.Size)
	if err != nil || size.Sign() < 0 {
		return market.Quote{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, m.Time)
	if err != nil {
		at = now
	}
	q := market.Quote{Instrument: p.symbol, Bid: price, Ask: price, Last: price, Size: size, At: at.UTC()}
	if p.bid != nil && p.ask != nil {
		q.Bid, q.Ask = *p.bid, *p.ask
	}
	return q, true
}

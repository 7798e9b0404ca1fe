package tradovate

import (
	"fmt"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// market is one contract month's driven price and its minute bars. Bid, offer and last trade are
// all the driven price: the simulator keeps no book.
type market struct {
	price      *apd.Decimal
	open       *apd.Decimal // the session's first price
	high, low  *apd.Decimal
	settlement *apd.Decimal // the starting price, reported as SettlementPrice
	volume     int64        // contracts traded through the simulator's fills
	candles    []candle     // one-minute bars, oldest first, at most maxCandles
}

// candle is one bar in the provider's chart shape.
type candle struct {
	start                  time.Time
	open, high, low, close *apd.Decimal
	upVolume, downVolume   int64
	upTicks, downTicks     int64
	bidVolume, offerVolume int64
}

const maxCandles = 10000

func newMarket(price *apd.Decimal, now time.Time, history int) *market {
	m := &market{price: price, open: price, high: price, low: price, settlement: price}
	start := now.Truncate(time.Minute)
	for i := history; i > 0; i-- {
		m.candles = append(m.candles, candle{start: start.Add(-time.Duration(i) * time.Minute),
			open: price, high: price, low: price, close: price})
	}
	m.candles = append(m.candles, candle{start: start, open: price, high: price, low: price, close: price})
	return m
}

// current is the bar of now, opened at the last close when the minute is new.
func (m *market) current(now time.Time) *candle {
	start := now.Truncate(time.Minute)
	if n := len(m.candles); n > 0 && !m.candles[n-1].start.Before(start) {
		return &m.candles[n-1]
	}
	p := m.price
	m.candles = append(m.candles, candle{start: start, open: p, high: p, low: p, close: p})
	if len(m.candles) > maxCandles {
		m.candles = m.candles[len(m.candles)-maxCandles:]
	}
	return &m.candles[len(m.candles)-1]
}

// move sets the price and records it in the bar of now.
func (m *market) move(p *apd.Decimal, now time.Time) {
	c := m.current(now)
	switch p.Cmp(m.price) {
	case 1:
		c.upTicks++
	case -1:
		c.downTicks++
	}
	m.price = p
	c.close = p
	if p.Cmp(c.high) > 0 {
		c.high = p
	}
	if p.Cmp(c.low) < 0 {
		c.low = p
	}
	if p.Cmp(m.high) > 0 {
		m.high = p
	}
	if p.Cmp(m.low) < 0 {
		m.low = p
	}
}

// trade adds a fill's contracts to the bar of now: a buy lifts the offer, a sell hits the bid.
func (m *market) trade(qty int64, buy bool, now time.Time) {
	c := m.current(now)
	m.volume += qty
	if buy {
		c.upVolume += qty
		c.offerVolume += qty
	} else {
		c.downVolume += qty
		c.bidVolume += qty
	}
}

// bars folds the minute bars into bars of size minutes (daily when daily), oldest first, keeping the
// last n (all when n <= 0) that start at or before closest (when not zero) and at or after asFar.
func (m *market) bars(size int, daily bool, n int, closest, asFar time.Time) []candle {
	var out []candle
	for _, c := range m.candles {
		var b time.Time
		if daily {
			b = c.start.Truncate(24 * time.Hour)
		} else {
			b = c.start.Truncate(time.Duration(size) * time.Minute)
		}
		if !closest.IsZero() && b.After(closest) {
			continue
		}
		if !asFar.IsZero() && b.Before(asFar.Truncate(time.Minute)) {
			continue
		}
		if k := len(out); k > 0 && out[k-1].start.Equal(b) {
			o := &out[k-1]
			o.close = c.close
			if c.high.Cmp(o.high) > 0 {
				o.high = c.high
			}
			if c.low.Cmp(o.low) < 0 {
				o.low = c.low
			}
			o.upVolume += c.upVolume
			o.downVolume += c.downVolume
			o.upTicks += c.upTicks
			o.downTicks += c.downTicks
			o.bidVolume += c.bidVolume
			o.offerVolume += c.offerVolume
			continue
		}
		cc := c
		cc.start = b
		out = append(out, cc)
	}
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// SetPrice drives a contract month's price ("ESZ6", or a product name for its month to trade now):
// bid, offer and last trade become price, quote and chart subscribers hear of it, and working orders
// of the month fill or trigger against it. The price must be a multiple of the product's tick.
func (s *Sim) SetPrice(symbol, price string) error {
	p, ok := dec.Parse(price)
	if !ok || p.Negative || p.IsZero() {
		return fmt.Errorf("price: %q is not a positive decimal", price)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c := s.lookupContract(symbol, now)
	if c == nil {
		return fmt.Errorf("price: no contract %q", symbol)
	}
	if !dec.IsMultiple(p, c.prod.tick) {
		return fmt.Errorf("price: %s is not a multiple of %s's tick %s", price, c.prod.spec.Name, c.prod.spec.TickSize)
	}
	c.mkt.move(p, now)
	s.publishQuote(c, now)
	s.publishChart(c, now)
	s.match(c, now)
	return nil
}

// Price is a contract month's driven price, "" for an unknown symbol.
func (s *Sim) Price(symbol string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.lookupContract(symbol, s.now())
	if c == nil {
		return ""
	}
	return dec.Plain(c.mkt.price)
}

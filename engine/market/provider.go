package market

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// PublicSource is a provider's public market data: its instruments with their
// filters and its streamed prices (provider.Provider has both).
type PublicSource interface {
	Instruments(ctx context.Context) ([]provider.Instrument, error)
	Quotes(ctx context.Context, symbols []string) (<-chan provider.Quote, error)
}

// ProviderFeedConfig configures a ProviderFeed.
type ProviderFeedConfig struct {
	Source   PublicSource
	Broker   string   // the accounts' broker the instruments belong to: "binance"
	Exchange string   // the instruments' exchange label: "BINANCE"
	Symbols  []string // the perpetuals to serve; empty: every trading perpetual the provider lists
	Now      func() time.Time
	// Retry is the first wait before reopening a cut price stream; it doubles up to a minute. 0: 1 s.
	Retry time.Duration
}

// ProviderFeed is one provider's public price feed for its perpetuals: the
// instruments come from the provider's exchange information (tick, lot step,
// minimum and maximum quantity, minimum notional), the quotes from its price
// streams (best bid and ask, the mark as the last price). It is a Feed, a
// HealthReporter, and lists its own symbols (Lists) so a Merged feed routes
// them here.
type ProviderFeed struct {
	*Hub
	cfg     ProviderFeedConfig
	list    []Instrument
	symbols map[string]bool

	mu     sync.Mutex
	health Health
}

// ErrNoInstruments is LoadProviderFeed's answer when none of the asked symbols is a trading perpetual.
var ErrNoInstruments = errors.New("market: the provider lists none of the asked perpetuals")

// LoadProviderFeed reads the provider's instruments (one public read) and
// makes the feed over the asked perpetuals. Run streams its prices.
func LoadProviderFeed(ctx context.Context, cfg ProviderFeedConfig) (*ProviderFeed, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	all, err := cfg.Source.Instruments(ctx)
	if err != nil {
		return nil, fmt.Errorf("provider instruments: %w", err)
	}
	want := map[string]bool{}
	for _, s := range cfg.Symbols {
		want[strings.ToUpper(strings.TrimSpace(s))] = true
	}
	f := &ProviderFeed{Hub: NewHub(), cfg: cfg, symbols: map[string]bool{}}
	for _, in := range all {
		if !in.Perpetual || !in.Trading || (len(want) > 0 && !want[in.Symbol]) {
			continue
		}
		f.list = append(f.list, Instrument{Symbol: in.Symbol, Name: in.Base + "/" + in.Quote + " perpetual",
			Exchange: cfg.Exchange, Type: "perpetual", AssetClass: "crypto", TickSize: in.TickSize, LotStep: in.LotStep,
			MinQuantity: in.MinQuantity, MaxQuantity: in.MaxQuantity, MinNotional: in.MinNotional,
			Multiplier: events.Int(1), Broker: cfg.Broker})
		f.symbols[in.Symbol] = true
	}
	if len(f.list) == 0 {
		return nil, ErrNoInstruments
	}
	f.health.Stale = []string{}
	return f, nil
}

// Name labels the feed by its broker.
func (f *ProviderFeed) Name() string { return f.cfg.Broker }

// Instruments lists the served perpetuals with the provider's filters, in the provider's order.
func (f *ProviderFeed) Instruments() []Instrument { return append([]Instrument(nil), f.list...) }

// Lists reports whether symbol is one of this feed's perpetuals.
func (f *ProviderFeed) Lists(symbol string) bool { return f.symbols[symbol] }

// Health reports the price stream's state.
func (f *ProviderFeed) Health() Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.health
	h.Stale = append([]string{}, f.health.Stale...)
	return h
}

// Run streams the provider's prices into the feed until ctx ends, reopening
// the stream after each cut (counted in Reconnects; a quote the provider
// marks stale counts a gap).
func (f *ProviderFeed) Run(ctx context.Context) {
	syms := make([]string, 0, len(f.list))
	for _, in := range f.list {
		syms = append(syms, in.Symbol)
	}
	wait, opened := f.cfg.Retry, false
	for ctx.Err() == nil {
		ch, err := f.cfg.Source.Quotes(ctx, syms)
		if err == nil {
			if opened {
				f.note(func(h *Health) { h.Reconnects++ })
			}
			opened = true
			f.note(func(h *Health) { h.Connected = true })
			if f.drain(ch) {
				wait = f.cfg.Retry
			}
			f.note(func(h *Health) { h.Connected = false })
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// drain publishes ch's quotes until it closes; it reports whether any came.
func (f *ProviderFeed) drain(ch <-chan provider.Quote) bool {
	any := false
	for q := range ch {
		any = true
		at := q.At
		if at.IsZero() {
			at = f.cfg.Now()
		}
		f.note(func(h *Health) {
			h.LastMessage = at
			if q.Stale {
				h.Gaps++
			}
		})
		if q.Bid == nil || q.Ask == nil || !f.symbols[q.Symbol] {
			continue // no touch yet: the mark alone prices nothing
		}
		last := q.Bid.Add(*q.Ask).Quo(events.Int(2))
		if q.Mark != nil {
			last = *q.Mark
		}
		f.Publish(Quote{Instrument: q.Symbol, Bid: *q.Bid, Ask: *q.Ask, Last: last, Size: events.Int(0), At: at})
	}
	return any
}

func (f *ProviderFeed) note(fn func(*Health)) {
	f.mu.Lock()
	fn(&f.health)
	f.mu.Unlock()
}

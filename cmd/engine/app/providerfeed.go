package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/provider/binance"
)

// providerFeedLoad bounds the start's read of the provider's instruments.
const providerFeedLoad = 10 * time.Second

// feedOn decides ENGINE_PROVIDER_FEED: on and off say it; auto turns the feed
// on when a Binance address or the testnet is set (a provider someone pointed
// the engine at), off with the built-in production defaults alone, so an
// engine that never trades at a provider never calls one.
func (c ProvidersConfig) feedOn() bool {
	switch c.Feed {
	case "on":
		return true
	case "off":
		return false
	}
	return c.BinanceREST != "" || c.Testnet
}

// openProviderFeed reads the built-in provider's instruments and makes its
// public price feed; nil when the feed is off. A feed that is on and cannot
// read the instruments stops the start: its perpetuals would be missing.
func openProviderFeed(ctx context.Context, cfg Config, provs *engine.ProvidersConfig) (*market.ProviderFeed, error) {
	if !cfg.Providers.feedOn() || provs == nil {
		return nil, nil
	}
	src, ok := provs.Providers[binance.Name].(market.PublicSource)
	if !ok {
		return nil, nil
	}
	var syms []string
	for _, s := range strings.Split(cfg.Providers.Symbols, ",") {
		if s = strings.TrimSpace(s); s != "" {
			syms = append(syms, s)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, providerFeedLoad)
	defer cancel()
	f, err := market.LoadProviderFeed(lctx, market.ProviderFeedConfig{Source: src, Broker: provs.Brokers[binance.Name], Exchange: "BINANCE", Symbols: syms})
	if err != nil {
		return nil, fmt.Errorf("ENGINE_PROVIDER_FEED: the Binance perpetuals %v: %w (ENGINE_PROVIDER_FEED=off starts without them)", syms, err)
	}
	slog.Info("provider feed", "provider", binance.Name, "instruments", len(f.Instruments()))
	return f, nil
}

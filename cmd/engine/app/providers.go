package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/egress"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/binance"
	"github.com/svc/engine/engine/provider/tradovate"
	"github.com/svc/engine/engine/seal"
)

// ProvidersConfig are the settings of accounts that live at a provider:
//
//	ENGINE_SEAL_KEYS                 the key-encryption keys sealing provider credentials (docs/secrets.md);
//	                                 production refuses to start without them, the sandbox makes an ephemeral one
//	ENGINE_BINANCE_REST_URL          Binance USDⓈ-M Futures REST base (default the exchange's production address)
//	ENGINE_BINANCE_WS_URL            its stream base
//	ENGINE_BINANCE_SPOT_URL          the spot API base the key-permission read uses
//	ENGINE_BINANCE_TESTNET           1: the exchange's testnet addresses for those left empty
//	ENGINE_PROVIDER_RECONCILE_EVERY  the period of each linked account's reconciliation (default 60s)
//	ENGINE_PROVIDER_ALLOW_PRIVATE    1: provider calls may reach private and loopback addresses (a local simulator); never in production
//	ENGINE_PROVIDER_FEED             on, off or auto (default): the provider's public price feed for its perpetuals (providerfeed.go)
//	ENGINE_BINANCE_SYMBOLS           the perpetuals that feed serves (default BTCUSDT,ETHUSDT,SOLUSDT)
//	ENGINE_TRADOVATE_*               the futures provider, a trader's own Tradovate login (tradovate.go)
type ProvidersConfig struct {
	ReconcileEvery time.Duration
	Feed           string
	Symbols        string
	SealKeys       string
	BinanceREST    string
	BinanceWS      string
	BinanceSpot    string
	Testnet        bool
	AllowPrivate   bool
	Tradovate      TradovateConfig
}

// providerFlags declares the provider settings on fs.
func providerFlags(fs *flag.FlagSet, c *ProvidersConfig, env func(string, string) string) {
	truth := func(v string) bool { return v == "1" || v == "true" }
	fs.StringVar(&c.SealKeys, "seal-keys", env("ENGINE_SEAL_KEYS", ""), "key-encryption keys sealing provider credentials, id:base64 of 32 bytes, comma-separated, the first seals (ENGINE_SEAL_KEYS)")
	fs.StringVar(&c.BinanceREST, "binance-rest-url", env("ENGINE_BINANCE_REST_URL", ""), "Binance USDⓈ-M Futures REST base; empty: the exchange's production address (ENGINE_BINANCE_REST_URL)")
	fs.StringVar(&c.BinanceWS, "binance-ws-url", env("ENGINE_BINANCE_WS_URL", ""), "Binance USDⓈ-M Futures stream base (ENGINE_BINANCE_WS_URL)")
	fs.StringVar(&c.BinanceSpot, "binance-spot-url", env("ENGINE_BINANCE_SPOT_URL", ""), "Binance spot API base for the key-permission read (ENGINE_BINANCE_SPOT_URL)")
	fs.BoolVar(&c.Testnet, "binance-testnet", truth(env("ENGINE_BINANCE_TESTNET", "")), "the exchange's testnet addresses for those left empty (ENGINE_BINANCE_TESTNET)")
	fs.StringVar(&c.Feed, "provider-feed", env("ENGINE_PROVIDER_FEED", "auto"), "the provider's public price feed: on, off, or auto (on when a Binance address or the testnet is set) (ENGINE_PROVIDER_FEED)")
	fs.StringVar(&c.Symbols, "binance-symbols", env("ENGINE_BINANCE_SYMBOLS", "BTCUSDT,ETHUSDT,SOLUSDT"), "the Binance perpetuals the provider feed serves, comma-separated (ENGINE_BINANCE_SYMBOLS)")
	every, _ := time.ParseDuration(env("ENGINE_PROVIDER_RECONCILE_EVERY", "60s"))
	fs.DurationVar(&c.ReconcileEvery, "provider-reconcile-every", every, "the period of each linked provider account's reconciliation besides those at a start and after a stream gap (ENGINE_PROVIDER_RECONCILE_EVERY)")
	tradovateFlags(fs, &c.Tradovate, env)
	fs.BoolVar(&c.AllowPrivate, "provider-allow-private", truth(env("ENGINE_PROVIDER_ALLOW_PRIVATE", "")), "let provider calls reach private and loopback addresses, for a local simulator; refused in production (ENGINE_PROVIDER_ALLOW_PRIVATE)")
}

func (c ProvidersConfig) validate(envName string) error {
	var errs []error
	if envName == "production" && c.AllowPrivate {
		errs = append(errs, errors.New("ENGINE_PROVIDER_ALLOW_PRIVATE is for a local simulator and never set in production"))
	}
	switch c.Feed {
	case "", "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("ENGINE_PROVIDER_FEED %q is none of on, off, auto", c.Feed))
	}
	if err := c.Tradovate.validate(); err != nil {
		errs = append(errs, err)
	}
	if envName == "production" && c.SealKeys == "" {
		errs = append(errs, errors.New("ENGINE_ENV=production needs ENGINE_SEAL_KEYS: provider credentials are sealed under it (an entry is an id and 32 random bytes in base64: k1:$(openssl rand -base64 32); see docs/secrets.md)"))
	}
	return errors.Join(errs...)
}

// openProviders makes the built-in providers and the vault of their sealed credentials.
func openProviders(ctx context.Context, cfg Config, log *eventlog.Log) (*engine.ProvidersConfig, error) {
	pc := cfg.Providers
	setting := pc.SealKeys
	if setting == "" {
		var err error
		if setting, err = seal.NewKeySetting("ephemeral"); err != nil {
			return nil, err
		}
		slog.Warn("providers: ENGINE_SEAL_KEYS is not set: provider credentials are sealed under an ephemeral key made for this run; " +
			"after a restart no linked account can be traded until it is linked again. Set ENGINE_SEAL_KEYS to keep them")
	}
	keys, err := seal.ParseKeys(setting)
	if err != nil {
		return nil, fmt.Errorf("ENGINE_SEAL_KEYS: %w", err)
	}
	vault, err := seal.NewVault(ctx, seal.Config{JS: log.JetStream(), Bucket: seal.BucketName(log.StreamName()),
		Replicas: log.Durability().Replicas, Keys: keys})
	if err != nil {
		return nil, fmt.Errorf("provider credentials vault: %w", err)
	}
	if pc.SealKeys != "" {
		// A start re-wraps every data key not under the first KEK of the
		// setting: rotating a KEK is putting the new one first and starting
		// (docs/secrets.md). A data key under a KEK the setting lacks is
		// left as it is and named; its account cannot trade until it is back.
		n, err := vault.Rotate(ctx)
		switch {
		case err != nil:
			slog.Error("providers: re-wrapping data keys under the current KEK did not finish; put the KEK it names back in ENGINE_SEAL_KEYS and start again", "rewrapped", n, "err", err)
		case n > 0:
			slog.Info("providers: data keys re-wrapped under the current KEK; the old KEK may now be removed from ENGINE_SEAL_KEYS", "rewrapped", n)
		}
	}
	if pc.AllowPrivate {
		slog.Warn("providers: ENGINE_PROVIDER_ALLOW_PRIVATE is set: provider calls may reach private and loopback addresses")
	}
	bn, err := binance.New(binance.Options{RestURL: pc.BinanceREST, WSURL: pc.BinanceWS, SpotURL: pc.BinanceSpot, Testnet: pc.Testnet,
		HTTP: egress.NewTransport(egress.Options{AllowPrivate: pc.AllowPrivate, MaxIdleConnsPerHost: 64})})
	if err != nil {
		return nil, fmt.Errorf("ENGINE_BINANCE_*: %w", err)
	}
	tv, tvLogins, err := openTradovate(pc.Tradovate, pc.AllowPrivate) // tradovate.go
	if err != nil {
		return nil, err
	}
	return &engine.ProvidersConfig{Providers: map[string]provider.Provider{binance.Name: bn, tradovate.Name: tv},
		Brokers: map[string]string{binance.Name: "binance", tradovate.Name: "tradovate"}, Vault: vault, ReconcileEvery: cfg.Providers.ReconcileEvery,
		LiveTrading: cfg.liveByDefault(), Logins: map[string]engine.LoginProvider{tradovate.Name: tvLogins}}, nil
}

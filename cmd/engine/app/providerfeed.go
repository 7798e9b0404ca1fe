package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/provider"
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
	cached := &cachedInstruments{PublicSource: src, path: filepath.Join(cfg.DataDir, "providers", binance.Name+"-instruments.json")}
	f, err := market.LoadProviderFeed(lctx, market.ProviderFeedConfig{Source: cached, Broker: provs.Brokers[binance.Name], Exchange: "BINANCE", Symbols: syms})
	if err != nil {
		return nil, fmt.Errorf("ENGINE_PROVIDER_FEED: the Binance perpetuals %v: %w (ENGINE_PROVIDER_FEED=off starts without them)", syms, err)
	}
	slog.Info("provider feed", "provider", binance.Name, "instruments", len(f.Instruments()))
	return f, nil
}

// cachedInstruments is a provider's public source whose instruments are
// kept in a file after each read (path, in the data directory), and read
// from it when the provider cannot be read: an engine that restarts while
// the exchange is unreachable (its maintenance, a network cut) starts with
// the instruments it read last, instead of not starting at all, and its
// price stream opens once the exchange answers. Only an engine that never
// read them stops its start. The file holds the exchange's public
// information only.
type cachedInstruments struct {
	market.PublicSource
	path string
}

// instrumentsFile is the file's content.
type instrumentsFile struct {
	ReadAt      time.Time             `json:"readAt"`
	Instruments []provider.Instrument `json:"instruments"`
}

// maxInstrumentsFile bounds the file read back (the exchange lists a few
// hundred perpetuals, about 300 bytes each).
const maxInstrumentsFile = 16 << 20

func (c *cachedInstruments) Instruments(ctx context.Context) ([]provider.Instrument, error) {
	ins, err := c.PublicSource.Instruments(ctx)
	if err == nil {
		if werr := c.write(ins); werr != nil {
			slog.Warn("provider feed: the instruments read could not be kept for a start while the exchange is unreachable", "path", c.path, "err", werr)
		}
		return ins, nil
	}
	kept, kerr := c.read()
	if kerr != nil {
		if !errors.Is(kerr, fs.ErrNotExist) {
			slog.Warn("provider feed: the instruments kept from an earlier read are unreadable", "path", c.path, "err", kerr)
		}
		return nil, err
	}
	slog.Warn("provider feed: the exchange's instruments are unreadable; starting with those read earlier, its prices follow once it answers",
		"readAt", kept.ReadAt, "instruments", len(kept.Instruments), "err", err)
	return kept.Instruments, nil
}

func (c *cachedInstruments) write(ins []provider.Instrument) error {
	b, err := json.Marshal(instrumentsFile{ReadAt: time.Now().UTC(), Instruments: ins})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.path)
}

func (c *cachedInstruments) read() (instrumentsFile, error) {
	var kept instrumentsFile
	f, err := os.Open(c.path)
	if err != nil {
		return kept, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInstrumentsFile+1))
	if err != nil {
		return kept, err
	}
	if len(b) > maxInstrumentsFile {
		return kept, fmt.Errorf("larger than %d bytes", maxInstrumentsFile)
	}
	if err := json.Unmarshal(b, &kept); err != nil {
		return kept, err
	}
	if len(kept.Instruments) == 0 {
		return kept, errors.New("no instruments in it")
	}
	return kept, nil
}

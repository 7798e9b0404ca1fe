package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/bars"
	"github.com/svc/engine/engine/market/exchange"
	"github.com/svc/engine/engine/market/news"
	"github.com/svc/engine/engine/market/replay"
	"github.com/svc/engine/engine/market/userfeed"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// Market is the market-data side of a running service: the crypto feed the
// engine and the routes read, the bars aggregated from it (persisted in
// their own JetStream streams), and the futures prices each trader gets
// from their own futures login (Futures).
//
// Settings come from the environment:
//
//	ENGINE_MARKET_FEED            simulated (the sandbox's default), replay or coinbase; production needs it set (checkFeed)
//	ENGINE_MARKET_REPLAY          replay: the CSV recording to play
//	ENGINE_MARKET_REPLAY_SPEED    replay: pace multiplier (default 1; 0 as fast as possible)
//	ENGINE_MARKET_REPLAY_REBASE   replay: 1 (default) stamps ticks from the start of playback; 0 keeps recorded times
//	ENGINE_MARKET_REPLAY_LOOP     replay: 1 starts over at the end
//	ENGINE_COINBASE_URL           coinbase: the websocket feed (default wss://ws-feed.exchange.coinbase.com)
//	ENGINE_COINBASE_PRODUCTS      coinbase: PRODUCT=SYMBOL pairs (default BTC-USD=BTC-PERP,ETH-USD=ETH-PERP,SOL-USD=SOL-PERP)
//	ENGINE_NEWS_FEEDS             comma-separated RSS or Atom URLs (default none)
//	ENGINE_NEWS_POLL              between feed fetches (default 5m)
//	ENGINE_NEWS_SAMPLE            1 loads the shipped sample headlines and calendar (default: in the sandbox)
type Market struct {
	Feed   market.Feed
	Replay *replay.Feed // with ENGINE_MARKET_FEED=replay
	// Exchange is the Coinbase Exchange adapter, with ENGINE_MARKET_FEED=coinbase.
	Exchange *exchange.Coinbase
	// Provider is the provider's public feed of its perpetuals, merged into Feed (ENGINE_PROVIDER_FEED).
	Provider *market.ProviderFeed
	Bars     *bars.Service
	// Futures serves each trader's futures prices from the futures login
	// that trader linked (engine/market/userfeed), never another's.
	Futures *userfeed.Source
	News    *news.Service
	saver   *bars.JetStream
	stop    context.CancelFunc
}

// checkFeed refuses a production engine whose prices nobody chose: with
// ENGINE_ENV=production, ENGINE_MARKET_FEED must name the feed, and a
// simulated one, named, is said loudly at start (orders fill at invented
// prices). The sandbox simulates by default.
func checkFeed(cfg Config) error {
	if cfg.Env != "production" {
		return nil
	}
	switch cfg.Market.Feed {
	case "":
		return errors.New("ENGINE_ENV=production needs ENGINE_MARKET_FEED: coinbase for real prices (or replay for a recording); " +
			"ENGINE_MARKET_FEED=simulated only if this production engine is meant to fill orders at invented prices")
	case "simulated", "sim":
		slog.Warn("market feed: ENGINE_MARKET_FEED=simulated in production: every price is invented by the engine's simulator and orders fill at those prices; set ENGINE_MARKET_FEED=coinbase for real ones",
			"env", cfg.Env, "feed", cfg.Market.Feed)
	}
	return nil
}

// openMarket selects the feed, opens the bar streams and loads bar history.
func openMarket(ctx context.Context, a *App, sim *market.Sim, pfeed *market.ProviderFeed) (*Market, error) {
	m := &Market{Provider: pfeed}
	switch kind := a.Cfg.Market.Feed; kind {
	case "", "simulated", "sim":
		m.Feed = sim
	case "replay":
		path := a.Cfg.Market.Replay
		if path == "" {
			return nil, errors.New("ENGINE_MARKET_FEED=replay needs ENGINE_MARKET_REPLAY, the recording to play")
		}
		rows, err := replay.ReadFile(path)
		if err != nil {
			return nil, err
		}
		opts := replay.Options{Speed: events.Int(1), Rebase: a.Cfg.Market.ReplayRebase != "0", Loop: a.Cfg.Market.ReplayLoop == "1", Now: a.Now}
		if s := a.Cfg.Market.ReplaySpeed; s != "" {
			if opts.Speed, err = events.ParseDecimal(s); err != nil || opts.Speed.Sign() < 0 {
				return nil, fmt.Errorf("ENGINE_MARKET_REPLAY_SPEED %q is not a pace of 0 or more", s)
			}
		}
		if opts.Loop && opts.Speed.IsZero() {
			return nil, errors.New("a looping replay needs a pace: set ENGINE_MARKET_REPLAY_SPEED above 0")
		}
		m.Replay = replay.New(rows, opts)
		m.Feed = m.Replay
	case "coinbase":
		products := map[string]string{}
		spec := a.Cfg.Market.CoinbaseProducts
		if spec == "" {
			spec = "BTC-USD=BTC-PERP,ETH-USD=ETH-PERP,SOL-USD=SOL-PERP"
		}
		for _, pair := range strings.Split(spec, ",") {
			id, sym, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || id == "" || sym == "" {
				return nil, fmt.Errorf("ENGINE_COINBASE_PRODUCTS entry %q is not PRODUCT=SYMBOL", pair)
			}
			products[id] = sym
		}
		m.Exchange = exchange.New(exchange.Config{URL: a.Cfg.Market.CoinbaseURL, Products: products, Now: a.Now})
		m.Feed = m.Exchange
	default:
		return nil, fmt.Errorf("ENGINE_MARKET_FEED %q is none of simulated, replay, coinbase", kind)
	}
	if pfeed != nil {
		m.Feed = market.Merge(m.Feed, pfeed)
	}
	var err error
	m.saver, err = bars.OpenJetStream(ctx, a.Log.JetStream(), a.marketNames(), bars.DefaultRetention)
	if err != nil {
		return nil, err
	}
	m.Bars = bars.NewService(bars.DefaultRetention, m.saver)
	n, err := m.saver.Load(ctx, m.Bars.Store)
	if err != nil {
		return nil, fmt.Errorf("load bar history: %w", err)
	}
	if n > 0 {
		slog.Info("bar history loaded", "bars", n)
	}
	m.Bars.Attach(m.Feed)

	ncfg := news.Config{Sample: a.Cfg.Env == "sandbox", Now: a.Now}
	if v := a.Cfg.Market.NewsSample; v != "" {
		ncfg.Sample = v == "1"
	}
	for _, u := range strings.Split(a.Cfg.Market.NewsFeeds, ",") {
		if u = strings.TrimSpace(u); u != "" {
			ncfg.Feeds = append(ncfg.Feeds, u)
		}
	}
	if v := a.Cfg.Market.NewsPoll; v != "" {
		if ncfg.Poll, err = time.ParseDuration(v); err != nil || ncfg.Poll < time.Second {
			return nil, fmt.Errorf("ENGINE_NEWS_POLL %q is not a duration of 1s or more", v)
		}
	}
	if ncfg.Store, err = news.OpenJetStream(ctx, a.Log.JetStream(), a.marketNames()); err != nil {
		return nil, err
	}
	if m.News, err = news.New(ncfg); err != nil {
		return nil, err
	}
	// Thumbnails reach only the public internet, by the webhooks' rules.
	m.News.Images = news.NewPublicImages(a.Cfg.Firm.WebhookAllowPrivate)
	// Futures prices come from each trader's own futures login, which the engine keeps.
	if m.Futures, err = userfeed.New(userfeed.Config{Logins: engineLogins{a}, Products: market.Products(), Now: a.Now}); err != nil {
		return nil, err
	}
	return m, nil
}

// start runs the bar fan-out, the bar saver and (unless manual) the feed.
func (m *Market) start(bg context.Context, manual bool) {
	sctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	m.saver.Start(sctx)
	go m.Bars.Run(bg)
	go m.News.Run(bg)
	if m.Exchange != nil {
		go m.Exchange.Run(bg)
	}
	if m.Provider != nil {
		go m.Provider.Run(bg)
	}
	if !manual && m.Replay != nil {
		go m.Replay.Run(bg)
	}
}

// Close closes the traders' futures feeds, saves the open bars and waits
// for the saver.
func (m *Market) Close() {
	if m.Futures != nil {
		m.Futures.Close()
	}
	if m.Bars != nil {
		m.Bars.Store.FlushOpen()
	}
	if m.stop != nil {
		m.stop()
		m.saver.Close()
	}
}

// marketNames names the market-data streams, at the commit stream's replicas.
func (a *App) marketNames() market.Names {
	n := a.Cfg.Deployment.Market()
	n.Replicas = a.Cfg.Replicas
	return n
}

// engineLogins are the futures logins the traders linked, as the engine
// keeps them; none before the engine exists.
type engineLogins struct{ a *App }

func (l engineLogins) FuturesLogin(ctx context.Context, userID string) (provider.Token, bool, error) {
	if l.a.Engine == nil {
		return provider.Token{}, false, nil
	}
	return l.a.Engine.FuturesLogin(ctx, userID)
}

func (l engineLogins) FuturesData() (provider.TokenProvider, bool) {
	if l.a.Engine == nil {
		return nil, false
	}
	return l.a.Engine.FuturesData()
}

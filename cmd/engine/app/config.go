package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/engine/cluster"
)

// Config is every setting, from the environment with flags of the same meaning.
type Config struct {
	Listen         string
	DataDir        string
	NatsURL        string
	DatabaseURL    string
	Env            string
	AllowedOrigins string
	Sync           string
	CommitEncoding string
	Challenges     bool
	Replicas       int
	Node           string        // this node's name among several (ENGINE_NODE); empty: the only node
	LeaseTTL       time.Duration // life of an ownership lease without renewal
	Snapshots      string        // on: aggregate snapshots seed the start and are taken in the background; off: neither
	SnapshotEvery  time.Duration // time between two snapshot rounds
	// ProjectorLinger: how long the projector holds a batch of read-model
	// writes open while no read waits for it; negative: the default for the
	// store (DefaultPGLinger with PostgreSQL, none in memory).
	ProjectorLinger time.Duration
	Stream          string
	Deployment      Deployment // names on the NATS server, from ENGINE_DEPLOYMENT (names.go)
	DemoAccounts    int
	RateLimit       float64
	RateBurst       int
	// TenantRateLimit and TenantRateBurst bound all one tenant's credentials
	// together; -1: twice RateLimit and RateBurst (tenantRate).
	TenantRateLimit float64
	TenantRateBurst int
	StreamsPerKey   int // concurrent SSE streams per credential
	FeedSeed        uint64
	LogLevel        string
	BaseURL         string
	SMTPURL         string // mail through SMTP; empty: .eml files under DataDir/mail
	MailFrom        string
	SessionKeys     string // hex keys signing session cookies, the first signs
	Market          MarketConfig
	Firm            FirmConfig      // the firm area (firm.go)
	Providers       ProvidersConfig // accounts at a provider (providers.go)
	LiveTrading     string          // the live trading switch's default: on, off or empty (live.go)
	Connect         ConnectConfig
}

// ConnectConfig shapes Connect (connect.go).
type ConnectConfig struct {
	DashboardOrigin string // the Connect dashboard's origin; empty: the engine's own
	StatementKey    string // production: hex Ed25519 seed signing statements; empty: derived from the secret key
	ProductionKey   string // sandbox: production's public statement key; empty: no exchange
	Audience        string // the sandbox's audience in statements
}

// MarketConfig selects the market-data feed and the news sources.
type MarketConfig struct {
	Feed             string // simulated, replay or coinbase
	Replay           string // recording the replay feed plays
	ReplayRebase     string // "0" keeps the recording's own times
	ReplayLoop       string // "1" loops the recording
	ReplaySpeed      string // pace: 1 real time, 0 as fast as possible
	CoinbaseProducts string // PRODUCT=SYMBOL pairs
	CoinbaseURL      string // websocket URL of the exchange feed
	NewsSample       string // "1" loads the shipped sample set, "0" does not; default in the sandbox
	NewsFeeds        string // comma-separated RSS/Atom URLs
	NewsPoll         string // poll interval of the feeds
}

// ParseConfig reads settings from getenv, then flags from args.
func ParseConfig(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	envInt := func(k string, def int) int {
		if n, err := strconv.Atoi(getenv(k)); err == nil {
			return n
		}
		return def
	}
	var c Config
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "Usage: engine [flags]      serves the engine; every flag also reads the environment variable named with it")
		fmt.Fprintln(out, "       engine log [flags]  prints the commit log as JSON lines (engine log -h)")
		fmt.Fprintln(out, "       engine backup -o FILE    writes a backup of the commit log (engine backup -h)")
		fmt.Fprintln(out, "       engine restore -i FILE   restores a backup into an empty log (engine restore -h)")
		fmt.Fprintln(out, "       engine rebuild-read-models  empties the PostgreSQL read models; the next start replays the log into them")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Listen, "listen", env("ENGINE_LISTEN", "127.0.0.1:8080"), "address to serve HTTP on (ENGINE_LISTEN)")
	fs.StringVar(&c.DataDir, "data-dir", env("ENGINE_DATA_DIR", "./data"), "data directory: embedded JetStream under nats/, dev-credentials.json (ENGINE_DATA_DIR)")
	fs.StringVar(&c.NatsURL, "nats-url", env("NATS_URL", ""), "external NATS server or cluster; empty: embedded (NATS_URL)")
	fs.StringVar(&c.DatabaseURL, "database-url", env("DATABASE_URL", ""), "PostgreSQL for read models; empty: in memory (DATABASE_URL)")
	fs.StringVar(&c.Env, "env", env("ENGINE_ENV", "sandbox"), "sandbox or production (ENGINE_ENV)")
	fs.StringVar(&c.AllowedOrigins, "allowed-origins", env("ENGINE_ALLOWED_ORIGINS", ""), "comma-separated browser origins allowed to call (ENGINE_ALLOWED_ORIGINS)")
	fs.StringVar(&c.Sync, "sync", env("ENGINE_SYNC", "always"), "always: fsync each commit before its ack; interval: fsync every 2 minutes, faster (ENGINE_SYNC)")
	fs.StringVar(&c.CommitEncoding, "commit-encoding", env("ENGINE_COMMIT_ENCODING", "msgpack"), "msgpack: new commits in MessagePack; json: in JSON, readable by engine builds from before the MessagePack log, for a deployment that may roll back to one; the log is read in either (ENGINE_COMMIT_ENCODING)")
	fs.BoolVar(&c.Challenges, "challenges", env("CHALLENGES_ENABLED", "") == "true" || env("CHALLENGES_ENABLED", "") == "1", "serve the challenge routes (CHALLENGES_ENABLED)")
	fs.IntVar(&c.Replicas, "stream-replicas", envInt("ENGINE_STREAM_REPLICAS", 1), "replicas of the commit stream on a cluster (ENGINE_STREAM_REPLICAS)")
	fs.StringVar(&c.Node, "node", env("ENGINE_NODE", ""), "this node's name (1-32 of a-z, 0-9, '-') when several engines share one NATS cluster and PostgreSQL; needs NATS_URL; empty: the only node (ENGINE_NODE)")
	ttl, _ := time.ParseDuration(env("ENGINE_LEASE_TTL", "2s"))
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", ttl, "how long a node's ownership of its accounts outlives its last renewal; a dead node's accounts move after it (ENGINE_LEASE_TTL)")
	fs.StringVar(&c.Snapshots, "snapshots", env("ENGINE_SNAPSHOTS", "on"), "on: the start seeds accounts and venues from their snapshots (a key-value bucket <stream>_SNAPSHOTS) and replays the log from the snapshots' mark only, and snapshots are taken in the background; off: neither, every start replays the whole log (ENGINE_SNAPSHOTS)")
	every, _ := time.ParseDuration(env("ENGINE_SNAPSHOT_EVERY", "10s"))
	fs.DurationVar(&c.SnapshotEvery, "snapshot-every", every, "time between two rounds of aggregate snapshots, each of the accounts and venues changed since their last (ENGINE_SNAPSHOT_EVERY)")
	linger := env("ENGINE_PROJECTOR_LINGER", "")
	fs.StringVar(&linger, "projector-linger", linger, "how long the projector holds a batch of read-model writes open for more while no read waits for them, at most 1s; a read after the caller's own write, a write answered from the read models and a streamed account end it at once; empty: 50ms with DATABASE_URL, 0 with memory read models (ENGINE_PROJECTOR_LINGER)")
	fs.StringVar(&c.Deployment.Name, "deployment", env("ENGINE_DEPLOYMENT", ""), "names this deployment's streams and subjects on the NATS server, so several share one: BLUE_EVT and blue.evt.> for blue; empty: EVT and evt.> (ENGINE_DEPLOYMENT)")
	fs.StringVar(&c.Deployment.Stream, "stream", env("ENGINE_STREAM", ""), "name of the commit stream; empty: derived from ENGINE_DEPLOYMENT, EVT by default (ENGINE_STREAM)")
	fs.IntVar(&c.DemoAccounts, "demo-accounts", envInt("ENGINE_DEMO_ACCOUNTS", 1), "demo paper accounts of the sandbox tenant (ENGINE_DEMO_ACCOUNTS)")
	rl, _ := strconv.ParseFloat(env("ENGINE_RATE_LIMIT", "200"), 64)
	fs.Float64Var(&c.RateLimit, "rate-limit", rl, "requests per second per credential; 0: unlimited (ENGINE_RATE_LIMIT)")
	fs.IntVar(&c.RateBurst, "rate-burst", envInt("ENGINE_RATE_BURST", 400), "burst of the per-credential rate limit (ENGINE_RATE_BURST)")
	trl, _ := strconv.ParseFloat(env("ENGINE_TENANT_RATE_LIMIT", "-1"), 64)
	fs.Float64Var(&c.TenantRateLimit, "tenant-rate-limit", trl, "requests per second of all one tenant's keys and sessions together; -1: twice -rate-limit; 0: unlimited (ENGINE_TENANT_RATE_LIMIT)")
	fs.IntVar(&c.TenantRateBurst, "tenant-rate-burst", envInt("ENGINE_TENANT_RATE_BURST", -1), "burst of the per-tenant rate limit; -1: twice -rate-burst (ENGINE_TENANT_RATE_BURST)")
	fs.IntVar(&c.StreamsPerKey, "streams-per-key", envInt("ENGINE_STREAMS_PER_KEY", 50), "concurrent SSE streams one credential may hold open, 1-100000; the next is 429 too_many_streams (ENGINE_STREAMS_PER_KEY)")
	seed, _ := strconv.ParseUint(env("ENGINE_FEED_SEED", "42"), 10, 64)
	fs.Uint64Var(&c.FeedSeed, "feed-seed", seed, "seed of the simulated price feed (ENGINE_FEED_SEED)")
	fs.StringVar(&c.LogLevel, "log-level", env("ENGINE_LOG_LEVEL", "info"), "debug, info, warn or error (ENGINE_LOG_LEVEL)")
	fs.BoolVar(&c.Firm.WebhookAllowPrivate, "webhook-allow-private", env("ENGINE_WEBHOOK_ALLOW_PRIVATE", "") == "true" || env("ENGINE_WEBHOOK_ALLOW_PRIVATE", "") == "1",
		"let webhooks and the news image proxy reach private, loopback and link-local addresses; local development only (ENGINE_WEBHOOK_ALLOW_PRIVATE)")
	backoff := env("ENGINE_WEBHOOK_BACKOFF", "")
	fs.StringVar(&backoff, "webhook-backoff", backoff, "the 5 waits between a webhook's 6 attempts, comma-separated durations (1m,5m,30m,2h,6h24m when empty) (ENGINE_WEBHOOK_BACKOFF)")
	fs.StringVar(&c.Firm.UsagePrice, "usage-price", env("ENGINE_USAGE_PRICE", "15"), "price per account that traded in a month, for partner usage (ENGINE_USAGE_PRICE)")
	fs.StringVar(&c.BaseURL, "base-url", env("ENGINE_BASE_URL", ""), "public base URL: written to dev-credentials.json and the mail links, and its origin (scheme, host, port) is the engine's own, trusted for cookie-borne writes from the engine's pages; set it to the address browsers use; default http://<listen> (ENGINE_BASE_URL)")
	fs.StringVar(&c.SMTPURL, "smtp-url", env("ENGINE_SMTP_URL", ""), "smtp://user:pass@host:587 (STARTTLS) or smtps://...:465 for mail; empty: .eml files under <data-dir>/mail (ENGINE_SMTP_URL)")
	fs.StringVar(&c.MailFrom, "mail-from", env("ENGINE_MAIL_FROM", ""), "From address of the engine's mail (ENGINE_MAIL_FROM)")
	fs.StringVar(&c.SessionKeys, "session-keys", env("ENGINE_SESSION_KEYS", ""), "comma-separated hex keys (32+ bytes) signing session cookies; the first signs, all verify; empty: derived from <data-dir>/secret.key (ENGINE_SESSION_KEYS)")
	providerFlags(fs, &c.Providers, env)
	fs.StringVar(&c.LiveTrading, "live-trading-default", env("ENGINE_LIVE_TRADING_DEFAULT", ""), "on or off: the live trading switch of a user who never set it; empty: off in production, on in the sandbox (ENGINE_LIVE_TRADING_DEFAULT)")
	for _, f := range []struct {
		p         *string
		name, env string
		usage     string
	}{
		{&c.Connect.DashboardOrigin, "connect-dashboard-origin", "ENGINE_CONNECT_DASHBOARD_ORIGIN", "origin of the Connect dashboard; empty: the engine's own"},
		{&c.Connect.StatementKey, "connect-statement-key", "ENGINE_CONNECT_STATEMENT_KEY", "production: hex 32-byte Ed25519 seed signing Connect account statements; empty: derived from <data-dir>/secret.key"},
		{&c.Connect.ProductionKey, "connect-production-key", "ENGINE_CONNECT_PRODUCTION_KEY", "sandbox: production's public statement key (base64url, hex or JWK; engine admin connect-public-key prints it); empty: statements are not exchanged"},
		{&c.Connect.Audience, "connect-audience", "ENGINE_CONNECT_AUDIENCE", "the sandbox's name in statements (default svc-sandbox)"},
		{&c.Market.Feed, "market-feed", "ENGINE_MARKET_FEED", "price feed: simulated, replay or coinbase"},
		{&c.Market.Replay, "market-replay", "ENGINE_MARKET_REPLAY", "recording of trades or quotes the replay feed plays"},
		{&c.Market.ReplayRebase, "market-replay-rebase", "ENGINE_MARKET_REPLAY_REBASE", "0 keeps the recording's own times"},
		{&c.Market.ReplayLoop, "market-replay-loop", "ENGINE_MARKET_REPLAY_LOOP", "1 loops the recording"},
		{&c.Market.ReplaySpeed, "market-replay-speed", "ENGINE_MARKET_REPLAY_SPEED", "replay pace: 1 real time, 0 as fast as possible"},
		{&c.Market.CoinbaseProducts, "coinbase-products", "ENGINE_COINBASE_PRODUCTS", "PRODUCT=SYMBOL pairs of the exchange feed"},
		{&c.Market.CoinbaseURL, "coinbase-url", "ENGINE_COINBASE_URL", "websocket URL of the exchange feed"},
		{&c.Market.NewsSample, "news-sample", "ENGINE_NEWS_SAMPLE", "1 loads the shipped sample news and calendar (default in the sandbox), 0 does not"},
		{&c.Market.NewsFeeds, "news-feeds", "ENGINE_NEWS_FEEDS", "comma-separated RSS/Atom feed URLs"},
		{&c.Market.NewsPoll, "news-poll", "ENGINE_NEWS_POLL", "poll interval of the news feeds"},
	} {
		fs.StringVar(f.p, f.name, env(f.env, ""), f.usage+" ("+f.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Stream = c.Deployment.CommitStream()
	c.ProjectorLinger = -1
	if linger != "" {
		d, err := time.ParseDuration(linger)
		if err != nil || d < 0 {
			return c, fmt.Errorf("ENGINE_PROJECTOR_LINGER: %q is not a duration of 0 or more", linger)
		}
		c.ProjectorLinger = d
	}
	if backoff != "" {
		for _, part := range strings.Split(backoff, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(part))
			if err != nil || d <= 0 {
				return c, fmt.Errorf("ENGINE_WEBHOOK_BACKOFF: %q is not a positive duration", part)
			}
			c.Firm.WebhookBackoff = append(c.Firm.WebhookBackoff, d)
		}
		if len(c.Firm.WebhookBackoff) != 5 {
			return c, fmt.Errorf("ENGINE_WEBHOOK_BACKOFF: %d waits, want 5 (between 6 attempts)", len(c.Firm.WebhookBackoff))
		}
	}
	if c.BaseURL == "" {
		c.BaseURL = "http://" + c.Listen
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var errs []error
	if c.Env != "sandbox" && c.Env != "production" {
		errs = append(errs, fmt.Errorf("ENGINE_ENV %q is neither sandbox nor production", c.Env))
	}
	if c.Sync != "always" && c.Sync != "interval" {
		errs = append(errs, fmt.Errorf("ENGINE_SYNC %q is neither always nor interval", c.Sync))
	}
	if c.CommitEncoding != "msgpack" && c.CommitEncoding != "json" {
		errs = append(errs, fmt.Errorf("ENGINE_COMMIT_ENCODING %q is neither msgpack nor json", c.CommitEncoding))
	}
	if c.Snapshots != "on" && c.Snapshots != "off" {
		errs = append(errs, fmt.Errorf("ENGINE_SNAPSHOTS %q is neither on nor off", c.Snapshots))
	}
	if c.ProjectorLinger > time.Second {
		errs = append(errs, fmt.Errorf("ENGINE_PROJECTOR_LINGER %s above 1s", c.ProjectorLinger))
	}
	if c.SnapshotEvery < time.Second || c.SnapshotEvery > time.Hour {
		errs = append(errs, fmt.Errorf("ENGINE_SNAPSHOT_EVERY %s outside 1s..1h", c.SnapshotEvery))
	}
	if c.DemoAccounts < 0 || c.DemoAccounts > 10000 {
		errs = append(errs, fmt.Errorf("ENGINE_DEMO_ACCOUNTS %d outside 0..10000", c.DemoAccounts))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("ENGINE_STREAM_REPLICAS %d outside 1..5", c.Replicas))
	}
	if c.Node != "" {
		if err := cluster.ValidNode(c.Node); err != nil {
			errs = append(errs, fmt.Errorf("ENGINE_NODE: %w", err))
		}
		if c.NatsURL == "" {
			errs = append(errs, errors.New("ENGINE_NODE needs NATS_URL: the nodes share one NATS (JetStream) cluster, never an embedded server"))
		}
		if c.LeaseTTL < 500*time.Millisecond || c.LeaseTTL > time.Minute {
			errs = append(errs, fmt.Errorf("ENGINE_LEASE_TTL %s outside 500ms..1m", c.LeaseTTL))
		}
	}
	if err := c.Deployment.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.RateLimit < 0 {
		errs = append(errs, errors.New("ENGINE_RATE_LIMIT must be 0 or more"))
	}
	if err := c.Providers.validate(c.Env); err != nil {
		errs = append(errs, err)
	}
	if c.LiveTrading != "" && c.LiveTrading != "on" && c.LiveTrading != "off" {
		errs = append(errs, fmt.Errorf("ENGINE_LIVE_TRADING_DEFAULT %q is none of on, off or empty", c.LiveTrading))
	}
	if c.StreamsPerKey < 1 || c.StreamsPerKey > 100000 {
		errs = append(errs, fmt.Errorf("ENGINE_STREAMS_PER_KEY %d outside 1..100000", c.StreamsPerKey))
	}
	return errors.Join(errs...)
}

// tenantRate is the per-tenant rate limit and burst: the settings, or twice
// the per-credential ones where they are -1.
func (c Config) tenantRate() (float64, int) {
	rate, burst := c.TenantRateLimit, c.TenantRateBurst
	if rate < 0 {
		rate = 2 * c.RateLimit
	}
	if burst < 0 {
		burst = 2 * c.RateBurst
	}
	return rate, burst
}

func (c Config) origins() []string {
	var out []string
	for _, o := range strings.Split(c.AllowedOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

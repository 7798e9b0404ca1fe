// Package app wires the engine, the read models and the gateway into one
// running service; main and the black-box tests start it the same way.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/docs"
	"github.com/svc/engine/gateway/exitplans"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/identity"
	riskgw "github.com/svc/engine/gateway/risk"
	"github.com/svc/engine/gateway/stream"
	"github.com/svc/engine/projections"
	chproj "github.com/svc/engine/projections/challenge"
	firmproj "github.com/svc/engine/projections/firm"
	"github.com/svc/engine/projections/memory"
	"github.com/svc/engine/schema"
)

// marks reads mark prices (the mid) from the feeds.
type marks struct{ feeds []market.Feed }

func (m marks) Mark(instrument string) (events.Decimal, bool) {
	for _, f := range m.feeds {
		if f == nil {
			continue
		}
		if q, ok := f.Quote(instrument); ok {
			return q.Mid(), true
		}
	}
	return events.Decimal{}, false
}

// App is a started service.
type App struct {
	Cfg       Config
	Deps      *api.Deps
	Handler   http.Handler
	Log       *eventlog.Log
	Store     projections.Store
	Engine    *engine.Engine
	Projector *projections.Projector
	Hub       *stream.Hub
	Sim       *market.Sim
	Market    *Market
	Registry  *prometheus.Registry
	Now       func() time.Time
	// storeAnswered is when the read-model store last answered the health
	// probe (unix nanoseconds): a node that lost it does not lead (nodes.go).
	storeAnswered atomic.Int64

	bootLast  uint64
	stopBG    context.CancelFunc
	projDone  chan error
	closeOnce sync.Once

	firm     *firmArea       // the firm area: secret key, webhook reactor (firm.go)
	mailer   identity.Mailer // mail of the identity routes (identity.go)
	previews *auth.Sealer    // exit-plan preview tokens
}

// Options override parts of the wiring (tests inject a clock or step the feed by hand).
type Options struct {
	Now        func() time.Time
	ManualFeed bool // do not step the simulated feed on a timer
	// RecordMoves has the paper book record every stop move in its account,
	// as before marks (engine.Config.RecordMoves): for the bench's comparison.
	RecordMoves bool
	// Phase, if set, is told what the start is doing each time it moves on
	// (Run shows it in /readyz's 503 while the engine starts).
	Phase func(what string)
}

// Start's phases, as Options.Phase is told them.
const (
	PhaseLog       = "waiting for the commit log (NATS)"
	PhaseStore     = "opening the read-model store"
	PhaseReplay    = "replaying the commit log"
	PhaseCluster   = "joining the cluster"
	PhaseReadModel = "catching the read models up"
	PhaseDemo      = "making the demo tenant"
)

// Start opens the log and the store, warms the engine, catches the read models
// up and, in the sandbox, makes the demo tenant. It does not listen.
func Start(ctx context.Context, cfg Config, o Options) (*App, error) {
	a := &App{Cfg: cfg, Now: o.Now, projDone: make(chan error, 1)}
	phase := func(what string) {
		if o.Phase != nil {
			o.Phase(what)
		}
	}
	if err := TuneGC(os.Getenv); err != nil {
		return nil, err
	}
	TuneProcs(os.Getenv)
	if a.Now == nil {
		a.Now = time.Now
	}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	var err error
	phase(PhaseLog)
	a.Log, err = eventlog.Open(ctx, eventlog.Config{URL: cfg.NatsURL, DataDir: cfg.DataDir, Sync: cfg.Sync, Replicas: cfg.Replicas, Stream: cfg.Stream, Prefix: cfg.Deployment.CommitPrefix(),
		Recent: events.NewRecent(16384), SoleWriter: cfg.Node == ""})
	if errors.Is(err, eventlog.ErrSubjectsTaken) {
		return nil, fmt.Errorf("%w (set ENGINE_DEPLOYMENT to a name of this deployment's own)", err)
	}
	if err != nil {
		return nil, err
	}
	phase(PhaseStore)
	a.Store, err = openStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := bindReadModels(ctx, cfg, a.Log, a.Store); err != nil { // bind.go: never serve another log's read models
		return nil, err
	}
	if sw, ok := a.Store.(interface{ SetSoleWriter(bool) }); ok && cfg.Node == "" {
		// One engine writes its read models: reads of the documents it
		// committed skip the database (the nodes of a cluster read it, as
		// their leader writes).
		sw.SetSoleWriter(true)
	}
	a.Registry = prometheus.NewRegistry()
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	provs, err := openProviders(ctx, cfg, a.Log) // providers.go
	if err != nil {
		return nil, err
	}
	pfeed, err := openProviderFeed(ctx, cfg, provs) // providerfeed.go
	if err != nil {
		return nil, err
	}
	listed := append(market.DefaultCrypto(), market.DefaultFutures()...)
	if pfeed != nil {
		listed = append(listed, pfeed.Instruments()...)
	}
	catalog := market.NewCatalog(listed)
	a.Sim = market.NewSim(market.DefaultCrypto(), cfg.FeedSeed, a.Now)
	if a.Market, err = openMarket(ctx, a, a.Sim, pfeed); err != nil {
		return nil, err
	}
	a.Engine, err = engine.New(engine.Config{Providers: provs, Log: a.Log, Feed: a.Market.Feed, Catalog: catalog, Now: a.Now, Metrics: engine.NewMetrics(a.Registry),
		CommitEncoding: cfg.CommitEncoding, Node: cfg.Node, Snapshots: engine.SnapshotConfig{On: cfg.Snapshots == "on", Every: cfg.SnapshotEvery},
		RecordMoves: o.RecordMoves})
	if err != nil {
		return nil, err
	}
	a.Engine.UseUserFutures(a.Market.Futures) // paper futures at each trader's own futures prices
	a.Projector = projections.NewProjector(a.Store, engine.Registry(), projections.Core, firmproj.Fold, chproj.Fold)
	a.Projector.UseRecent(a.Log.Recent())
	phase(PhaseReplay)
	if a.bootLast, err = a.warm(ctx); err != nil {
		return nil, err
	}
	if err := a.startFirm(ctx, cfg); err != nil {
		return nil, fmt.Errorf("firm area: %w", err)
	}

	a.Hub = stream.NewHub(a.Store, marks{feeds: []market.Feed{a.Market.Feed}}, a.Registry)
	a.Projector.Listen(a.Hub.OnCommit)
	a.Projector.SetUrgent(a.Hub.Watched)
	a.Projector.SetLinger(projectorLinger(cfg))
	riskgw.Wire(a.Engine, a.Hub)
	a.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "engine_projection_lag", Help: "Commits in the log not yet applied to the read models."}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		last, err := a.Log.LastSeq(ctx)
		if err != nil {
			return -1
		}
		return float64(last) - float64(a.Projector.Applied())
	}))

	if cfg.Node != "" {
		phase(PhaseCluster)
		if err := a.joinCluster(ctx); err != nil { // nodes.go
			return nil, err
		}
	}
	bg, stop := context.WithCancel(context.Background())
	a.stopBG = stop
	go func() { a.projDone <- a.runProjector(bg) }()
	go a.Hub.Run(bg)
	go a.watchHealth(bg, HealthEvery)
	if !o.ManualFeed {
		go a.Sim.Run(bg)
	}
	a.Market.start(bg, o.ManualFeed)

	sessions, err := newSessions(cfg)
	if err != nil {
		return nil, err
	}
	if a.mailer, err = newMailer(cfg, a); err != nil {
		return nil, err
	}
	if a.previews, err = exitplans.NewTokens(derive(a.firm.key, "exit-plan-preview")); err != nil {
		return nil, err
	}
	tenantRate, tenantBurst := cfg.tenantRate()
	au := auth.New(auth.Config{AllowedOrigins: cfg.origins(), PublicURL: cfg.BaseURL, RatePerSecond: cfg.RateLimit, Burst: cfg.RateBurst,
		TenantRatePerSecond: tenantRate, TenantBurst: tenantBurst, MaxStreams: cfg.StreamsPerKey, Sessions: sessions,
		DashboardOrigin: cfg.Connect.DashboardOrigin}, a.Store)
	a.Projector.Listen(au.OnCommit) // a revoked key's or ended session's streams end on every node
	a.Deps = &api.Deps{Engine: a.Engine, Projector: a.Projector, Store: a.Store, Auth: au, Hub: a.Hub, Env: cfg.Env}

	phase(PhaseReadModel)
	waitCtx, cancelWait := context.WithTimeout(ctx, 5*time.Minute)
	err = a.Projector.WaitFor(waitCtx, a.bootLast)
	cancelWait()
	if err != nil {
		return nil, fmt.Errorf("projections catching up: %w", err)
	}
	if cfg.Env == "sandbox" {
		phase(PhaseDemo)
		if err := retrySafely(ctx, time.Minute, func() error { return bootstrap(ctx, a.Deps, cfg) }); err != nil {
			return nil, fmt.Errorf("demo tenant: %w", err)
		}
	}
	ref, err := docs.New(schema.OpenAPI())
	if err != nil {
		return nil, err
	}
	ar, err := areas(a, cfg)
	if err != nil {
		return nil, err
	}
	a.Handler = gateway.Handler(a.Deps, gateway.Options{Ready: a.Ready, Registry: a.Registry, Areas: ar, Reference: ref})
	ok = true
	return a, nil
}

// runProjector runs the projector until ctx ends; one that stopped because
// the log could not be read (every NATS server restarted under it) or the
// read-model store failed (PostgreSQL went away) starts again from its
// checkpoint a second later, for as long as it takes (watchHealth tells of
// the stall), one that could not fold a commit ends the service (the commit
// is named in the error).
func (a *App) runProjector(ctx context.Context) error {
	for {
		err := a.Projector.Run(ctx, a.Log)
		switch {
		case ctx.Err() != nil:
			return err
		case errors.Is(err, projections.ErrSource):
			slog.Warn("projector: reading the log failed; starting again", "err", err)
		case errors.Is(err, projections.ErrStore):
			slog.Debug("projector: the read-model store failed; starting again from its checkpoint", "err", err)
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// warm replays the log once: the engine rebuilds its aggregates and the read
// models catch up from the same decoded commits, in batches; the replay
// starts at the earlier of the read models' checkpoint (0 in memory) and the
// aggregates' snapshot mark. The collector
// runs less often meanwhile (the replay allocates far more than it keeps).
func (a *App) warm(ctx context.Context) (uint64, error) {
	defer RelaxGC()()
	tap, flush, err := a.Projector.Feed(ctx)
	if err != nil {
		return 0, err
	}
	total, err := a.Log.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	checkpoint, err := a.Store.Checkpoint(ctx)
	if err != nil {
		return 0, err
	}
	slog.Info("replaying the log", "commits", total, "readModelsAt", checkpoint)
	last, err := a.Engine.StartFrom(ctx, checkpoint, replayProgress(total, ProgressEvery, tap))
	if err == nil {
		err = flush()
	}
	if err != nil {
		return 0, fmt.Errorf("warm aggregates and read models: %w", err)
	}
	return last, nil
}

// ReadyWait is how long /readyz waits for the read models to show the
// newest write this engine answered before it says they are behind.
var ReadyWait = time.Second

// Ready reports the log connected, the read-model store reachable, the
// projector writing it, and the read models caught up with the log as of
// start and with every write answered from its decision (within
// ReadyWait); when not, why names which.
func (a *App) Ready() (bool, string) {
	if !a.Log.Connected() {
		return false, "the commit log (NATS) is not connected"
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReadyWait)
	defer cancel()
	if _, err := a.Store.Checkpoint(ctx); err != nil {
		return false, "the read-model store is unreachable"
	}
	if since, _ := a.Projector.Stalled(); !since.IsZero() {
		return false, fmt.Sprintf("the read models stopped at log sequence %d: the read-model store failed %s ago; the projector folds again from its checkpoint",
			a.Projector.Applied(), time.Since(since).Round(time.Second))
	}
	if a.Projector.Applied() < a.bootLast {
		return false, "the read models are catching up with the log"
	}
	if a.Deps != nil {
		if last := a.Deps.LastWrite(); a.Projector.WaitFor(ctx, last) != nil {
			return false, fmt.Sprintf("the read models are at log sequence %d, behind the acknowledged write at %d", a.Projector.Applied(), last)
		}
	}
	return true, ""
}

// Close stops everything; safe to call more than once.
func (a *App) Close() {
	a.closeOnce.Do(func() {
		if a.Hub != nil {
			a.Hub.Close()
		}
		if a.Engine != nil {
			a.stopFirm()
			a.Engine.Close()
		}
		if a.Deps != nil && a.Projector != nil {
			// Orders are answered from their decision: let the read models
			// show every acknowledged write before they stop.
			if err := a.Deps.Projected(5 * time.Second); err != nil {
				slog.Warn("stopping with the read models behind the last acknowledged write; they catch up from the log at the next start", "err", err)
			}
		}
		if a.stopBG != nil {
			a.stopBG()
		}
		if a.Market != nil {
			a.Market.Close()
		}
		if a.Store != nil {
			a.Store.Close()
		}
		if a.Log != nil {
			a.Log.Close()
		}
	})
}

// Limits of the HTTP server. Writing a response is bounded per request by the
// gateway (gateway.DefaultWriteTimeout), not by http.Server.WriteTimeout, which
// would end streams too; a stream lifts it (httpx.StartSSE).
const (
	// ReadHeaderTimeout closes a connection stalled inside a request's headers.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds reading a whole request, body included, from its
	// first byte; net/http lifts it once the body is read.
	ReadTimeout = 30 * time.Second
	// IdleTimeout closes a keep-alive connection idle between requests.
	IdleTimeout = 120 * time.Second
	// MaxHeaderBytes bounds a request's line and headers; past it net/http
	// answers 431 (it allows 4 KiB of slack beyond).
	MaxHeaderBytes = 32 << 10
	// shutdownTimeout bounds the drain of in-flight requests.
	shutdownTimeout = 20 * time.Second
)

// NewServer is the HTTP server Serve runs h with, with the limits above.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           httpx.NoSniff(h),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// Serve listens on cfg.Listen until ctx ends, then drains: new writes answer
// 503 engine_draining, streams end, in-flight commits finish; nil on a clean stop.
func (a *App) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.Cfg.Listen)
	if err != nil {
		return err
	}
	srv := NewServer(a.Handler)
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	return a.serveOn(ctx, srv, srvErr)
}

// serveOn runs until ctx ends (then drains srv) or the server or the projector stops.
func (a *App) serveOn(ctx context.Context, srv *http.Server, srvErr <-chan error) error {
	select {
	case err := <-srvErr:
		return err
	case err := <-a.projDone:
		return fmt.Errorf("projector stopped: %w", err)
	case <-ctx.Done():
	}
	slog.Info("draining")
	a.Deps.Auth.Drain()
	a.Hub.Close()
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		slog.Warn("shutdown", "err", err)
	}
	a.Close()
	slog.Info("stopped")
	return nil
}

func storeName(url string) string {
	if url == "" {
		return "memory"
	}
	return "postgres"
}

func openStore(ctx context.Context, url string) (projections.Store, error) {
	if url == "" {
		return memory.New(), nil
	}
	return openPostgres(ctx, url)
}

// DefaultPGLinger is how long the projector holds a batch of PostgreSQL
// writes open while nobody waits for them, unless ENGINE_PROJECTOR_LINGER
// says otherwise: with 64 clients placing market orders it took PostgreSQL
// read models from 0.66-0.74x to 0.80-0.89x the memory read models' rate;
// 100 and 200 ms measured the same, since batches then reach MaxBatch
// (docs/performance.md "Write-behind").
const DefaultPGLinger = 50 * time.Millisecond

// projectorLinger is the projector's linger for cfg's store.
func projectorLinger(cfg Config) time.Duration {
	switch {
	case cfg.ProjectorLinger >= 0:
		return cfg.ProjectorLinger
	case cfg.DatabaseURL != "" && cfg.Node == "":
		// Not on a node of several: a read on a node that is not the
		// leader waits for the leader's writes, which cannot see it wait.
		return DefaultPGLinger
	}
	return 0
}

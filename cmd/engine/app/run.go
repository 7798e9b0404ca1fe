package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
)

// ProgressEvery is how often a long replay reports its progress.
var ProgressEvery = 5 * time.Second

// Run is the service as the binary runs it: the port opens at once and
// answers while the engine warms up (/healthz 200, /readyz and every other
// route 503 with Retry-After: 1), the replay reports its progress, and once
// started the real handler takes over until ctx ends and the service drains.
func Run(ctx context.Context, cfg Config, o Options) error {
	began := time.Now()
	if err := checkFeed(cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	var current atomic.Pointer[http.Handler]
	var phase atomic.Pointer[string]
	phase.Store(new(PhaseLog))
	var starting http.Handler = startingAnswer(&phase)
	current.Store(&starting)
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	slog.Info("starting", "addr", ln.Addr().String(), "env", cfg.Env, "store", storeName(cfg.DatabaseURL), "embedded", cfg.NatsURL == "")

	tell := o.Phase
	o.Phase = func(what string) {
		phase.Store(&what)
		if tell != nil {
			tell(what)
		}
	}
	a, err := Start(ctx, cfg, o)
	if err != nil {
		_ = srv.Close()
		return err
	}
	defer a.Close()
	// The lines go out before the handler flips, so an operator (or a test)
	// that sees /readyz answer 200 finds "serving" already in the log.
	logDurability(a)
	slog.Info("serving", "addr", ln.Addr().String(), "env", cfg.Env, "store", storeName(cfg.DatabaseURL),
		"startSeconds", time.Since(began).Round(time.Millisecond).Seconds(), "commits", a.bootLast)
	current.Store(&a.Handler)
	defer a.serveAdmin()() // adminsock.go: engine admin while the engine runs
	return a.serveOn(ctx, srv, srvErr)
}

// startingAnswer is every answer before the engine has started: /readyz
// says what the start is doing (Options.Phase).
func startingAnswer(phase *atomic.Pointer[string]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		w.Header().Set("Retry-After", "1")
		if r.URL.Path == "/readyz" {
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting", "error": "the engine is starting: " + *phase.Load()})
			return
		}
		httpx.WriteError(w, r, httpx.Trading, httpx.Unavailable(commands.CodeEngineStarting, "the engine is starting; nothing was recorded; retry after the Retry-After seconds"))
	})
}

// replayProgress passes every replayed commit to tap and logs, every interval,
// how far the replay is, its rate and the time left. It runs in the replay's
// one consumer goroutine.
func replayProgress(total uint64, every time.Duration, tap func(events.Committed) error) func(events.Committed) error {
	began := time.Now()
	next := began.Add(every)
	var seen uint64
	return func(c events.Committed) error {
		seen++
		if now := time.Now(); now.After(next) {
			next = now.Add(every)
			rate := float64(seen) / now.Sub(began).Seconds()
			left := time.Duration(0)
			if rate > 0 && c.Seq < total {
				left = time.Duration(float64(total-c.Seq) / rate * float64(time.Second))
			}
			slog.Info("replay progress", "seq", c.Seq, "of", total, "commitsPerSecond", int(rate), "secondsLeft", int(left.Seconds()))
		}
		return tap(c)
	}
}

// logDurability says what is true about durability: on the embedded server
// the engine's own fsync setting; on an external server whatever that server
// does, which the client cannot read, so it says so; and why group commit is
// on or off.
func logDurability(a *App) {
	d := a.Log.Durability()
	attrs := []any{"stream", a.Log.StreamName(), "server", d.Server, "storage", d.Storage, "replicas", d.Replicas,
		"groupCommit", d.GroupCommit, "groupCommitReason", d.GroupCommitReason}
	if a.Cfg.NatsURL == "" {
		slog.Info("durability", append(attrs, "sync", a.Cfg.Sync)...)
		if a.Cfg.Sync != "always" {
			slog.Warn("durability: ENGINE_SYNC=interval acknowledges commits before they are fsynced; a machine crash may lose up to 2 minutes of acknowledged writes")
		}
		return
	}
	slog.Info("durability", append(attrs, "sync", "set by the external server (ENGINE_SYNC applies only to the embedded one)")...)
	slog.Warn("durability: on an external NATS server an acknowledged commit is fsynced only as that server's sync_interval says (default: every 2 minutes); set `sync_interval: always` in its jetstream block and run the stream at 3 replicas, see the README's Durability section")
	if d.Replicas < 3 {
		slog.Warn("durability: the commit stream has fewer than 3 replicas; the loss of one server's disk loses acknowledged writes", "replicas", d.Replicas)
	}
}

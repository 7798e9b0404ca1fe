package app

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc/engine/events"
)

// HealthEvery is how often the dependencies are probed.
var HealthEvery = time.Second

// watchHealth probes the commit log's connection and the read-model store
// every interval until ctx ends: it keeps the engine_dependency_up gauges,
// the time of the store's last successful write and the log's reconnect
// count in /metrics, and logs one line per change of state, not per request.
func (a *App) watchHealth(ctx context.Context, every time.Duration) {
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "engine_dependency_up",
		Help: "1 while a dependency answers: log (the NATS connection) and store (the read models)."}, []string{"dependency"})
	var lastWrite atomic.Int64
	lastWrite.Store(time.Now().UnixNano())
	a.Projector.Listen(func(events.Committed) { lastWrite.Store(time.Now().UnixNano()) })
	a.Registry.MustRegister(up,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "engine_store_last_write_age_seconds",
			Help: "Seconds since the read models last applied a commit."}, func() float64 {
			return time.Since(time.Unix(0, lastWrite.Load())).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "engine_projector_stalled_seconds",
			Help: "Seconds since the projector last failed to write the read-model store, for as long as it has not written it again; 0 while it writes."}, func() float64 {
			if since, _ := a.Projector.Stalled(); !since.IsZero() {
				return max(time.Since(since).Seconds(), 1e-3)
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "engine_log_reconnects_total",
			Help: "Reconnects of the commit log's NATS connection."}, func() float64 {
			return float64(a.Log.Conn().Stats().Reconnects)
		}))
	state := map[string]bool{"log": true, "store": true}
	var stalled time.Time // the projector's stall this probe last told of
	probe := func() {
		since, why := a.Projector.Stalled()
		switch {
		case !since.IsZero() && since != stalled:
			slog.Warn("read models stalled: the projector cannot write the read-model store; it folds again from its checkpoint every second until it can, reads waiting for a write answer 503 read_models_behind",
				"appliedSeq", a.Projector.Applied(), "err", why)
		case since.IsZero() && !stalled.IsZero():
			slog.Warn("read models resumed: the projector writes the read-model store again", "appliedSeq", a.Projector.Applied(),
				"stalledSeconds", time.Since(stalled).Round(time.Millisecond).Seconds())
		}
		stalled = since
		now := map[string]bool{"log": a.Log.Connected()}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := a.Store.Checkpoint(pctx)
		cancel()
		now["store"] = err == nil
		if err == nil {
			a.storeAnswered.Store(time.Now().UnixNano())
		}
		for dep, ok := range now {
			v := 0.0
			if ok {
				v = 1
			}
			up.WithLabelValues(dep).Set(v)
			if ok != state[dep] {
				if ok {
					slog.Info("dependency back", "dependency", dep)
				} else {
					slog.Warn("dependency down", "dependency", dep)
				}
				state[dep] = ok
			}
		}
	}
	probe()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			probe()
		}
	}
}

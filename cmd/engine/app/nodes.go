package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/cluster"
)

// joinCluster makes this engine one node of several (ENGINE_NODE): it joins
// the deployment's membership, and while it holds the leader lease it runs
// the duties the cluster runs once: webhook delivery and, with PostgreSQL
// read models, the projector's writes (the other nodes' projectors follow
// the leader's checkpoint). A starting node has brought the shared read
// models up to the log it replayed already, under the checkpoint's row lock,
// folding only what they lacked.
func (a *App) joinCluster(ctx context.Context) error {
	shared := a.Cfg.DatabaseURL != ""
	if shared {
		a.Projector.SetWriting(false)
	}
	// A term that ends may finish after the next one began (its webhook
	// reactor drains for up to 2 s): only the newest term's end stops the
	// projector's writes, or no node would write at all.
	var mu sync.Mutex
	term := 0
	a.storeAnswered.Store(time.Now().UnixNano()) // it answered the start
	var fit func() bool
	if shared {
		fit = a.fitToLead
	}
	_, err := a.Engine.JoinCluster(ctx, engine.ClusterConfig{Replicas: a.Cfg.Replicas, TTL: a.Cfg.LeaseTTL, Fit: fit, Lead: func(lctx context.Context) {
		mu.Lock()
		term++
		mine := term
		if shared {
			a.Projector.SetWriting(true)
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			if shared && term == mine {
				a.Projector.SetWriting(false)
			}
			mu.Unlock()
		}()
		a.deliverWebhooks(lctx)
	}})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cl := a.Engine.Cluster()
	gauge := func(name, help string, v func(s cluster.Status) float64) {
		a.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help,
			ConstLabels: prometheus.Labels{"node": a.Cfg.Node}}, func() float64 { return v(cl.Status()) }))
	}
	gauge("engine_cluster_leader", "1 while this node holds the leader lease (webhook delivery, the PostgreSQL projector's writes).",
		func(s cluster.Status) float64 { return b2f(s.Leading) })
	gauge("engine_cluster_partitions_owned", "Account partitions this node owns now.", func(s cluster.Status) float64 { return float64(s.Owned) })
	gauge("engine_cluster_live_nodes", "Nodes this node sees announcing themselves.", func(s cluster.Status) float64 { return float64(len(s.Live)) })
	slog.Info("joined the cluster", "node", a.Cfg.Node)
	return nil
}

// fitToLead reports whether this node can write the shared read models:
// its store answered the health probe in the last three probes and its
// projector is not stalled. A leader cut from PostgreSQL (or with the
// server paused) would otherwise keep the lease, and with it the only
// projector that writes: every node's reads and write answers wait for
// read models nobody moves. It hands the lease to a node that reaches
// the database instead (engine/cluster: Config.Fit).
func (a *App) fitToLead() bool {
	if since, _ := a.Projector.Stalled(); !since.IsZero() {
		return false
	}
	return time.Since(time.Unix(0, a.storeAnswered.Load())) < 3*HealthEvery+time.Second
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// deliverWebhooks runs a webhook reactor until ctx ends (a single engine
// for its life, a node while it leads): it rebuilds what is due from the
// log's delivery ledger, so a new leader resumes where the last one recorded.
func (a *App) deliverWebhooks(ctx context.Context) {
	for ctx.Err() == nil {
		r, err := a.newWebhooks()
		if err == nil {
			err = r.Start(ctx)
		}
		if err == nil {
			<-ctx.Done()
			r.Close(2 * time.Second)
			return
		}
		if ctx.Err() != nil {
			return // stopped while it read the log
		}
		slog.Warn("webhook delivery did not start; trying again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus instruments.
type Metrics struct {
	commitLatency *prometheus.HistogramVec
	commands      *prometheus.CounterVec
	leases        *prometheus.CounterVec
	forwards      *prometheus.CounterVec
}

// NewMetrics registers the engine's instruments with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "engine_commit_latency_seconds",
			Help:    "Time from append to JetStream acknowledgement of one commit.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}, []string{"aggregate"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engine_commands_total",
			Help: "Commands by aggregate and outcome (committed, unchanged, refused, conflict, unknown, unavailable, panic).",
		}, []string{"aggregate", "outcome"}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engine_cluster_lease_moves_total",
			Help: "Leases this node took (acquired, leader), handed over (released) or lost (lost).",
		}, []string{"move"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "engine_cluster_forwards_total",
			Help: "Account commands this node forwarded to their owner, by outcome (ok, refused: no owner in time, unknown, failed).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.commitLatency, m.commands, m.leases, m.forwards)
	return m
}

// Command records one command's outcome; implements mailbox.Observer.
func (m *Metrics) Command(kind, outcome string, commit time.Duration) {
	if m == nil {
		return
	}
	m.commands.WithLabelValues(kind, outcome).Inc()
	if commit > 0 && (outcome == "committed" || outcome == "conflict") {
		m.commitLatency.WithLabelValues(kind).Observe(commit.Seconds())
	}
}

func (m *Metrics) leaseMoved(kind string) {
	if m != nil {
		m.leases.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) forwarded(outcome string) {
	if m != nil {
		m.forwards.WithLabelValues(outcome).Inc()
	}
}

package main

import (
	"strings"
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 37 ticks.
	line := "4242 (eng (x) y) S 1 4242 4242 0 -1 4194560 1500 0 0 0 250 37 0 0 20 0 9 0 123 456 789"
	if got, want := statCPU([]byte(line)), 2870*time.Millisecond; got != want {
		t.Fatalf("statCPU = %v, want %v", got, want)
	}
	if got := statCPU([]byte("garbage")); got != 0 {
		t.Fatalf("statCPU of garbage = %v, want 0", got)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP engine_cluster_forwards_total Account commands forwarded.
# TYPE engine_cluster_forwards_total counter
engine_cluster_forwards_total{outcome="ok"} 120
engine_cluster_forwards_total{outcome="refused"} 3
engine_cluster_live_nodes{node="n1"} 3
go_goroutines 57
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{
		"engine_cluster_forwards_total":                    123,
		`engine_cluster_forwards_total{outcome="ok"}`:      120,
		`engine_cluster_forwards_total{outcome="refused"}`: 3,
		"engine_cluster_live_nodes":                        3,
		"go_goroutines":                                    57,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	moves := counterMoves(map[string]float64{`engine_cluster_forwards_total{outcome="ok"}`: 100}, m)
	if want := `cluster_forwards{outcome="ok"}+20 cluster_forwards{outcome="refused"}+3`; moves != want {
		t.Errorf("counterMoves = %q, want %q", moves, want)
	}
}

// Three nodes renewing 32 partitions and the leader lease every 500 ms
// (TTL 2 s) write 66 leases and 6 announcements a second.
func TestLeaseWrites(t *testing.T) {
	leases, announce := leaseWrites(3, 32, 2*time.Second)
	if leases != 66 || announce != 6 {
		t.Fatalf("leaseWrites = %v, %v; want 66, 6", leases, announce)
	}
}

package clustertest

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/clusterkit"
)

// TestRestartTimes measures how long a killed node takes to answer /readyz
// 200 again, over ENGINE_RESTART_KILLS kills (2 when unset; each within 8 s, no 10 s wait), on a
// cluster of two nodes under a live feed, and logs the distribution
// (docs/performance.md):
//
//	ENGINE_RESTART_KILLS=20 go test -run TestRestartTimes -v ./cmd/engine/clustertest/
func TestRestartTimes(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("ENGINE_RESTART_KILLS"))
	if kills <= 0 {
		kills = 2 // one kill of each node in the suite; ENGINE_RESTART_KILLS for a distribution
	}
	x := clusterkit.StartExchange(t)
	x.Quote("BTC-USD", "65000", "65001")
	d := startDeployment(t, 2, "", 100, x.Env())
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a quote every 50 ms, as a live feed
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			bid := 65000 + i%20
			x.Quote("BTC-USD", strconv.Itoa(bid), strconv.Itoa(bid+1))
		}
	}()
	var took []time.Duration
	for k := range kills {
		i := k % 2
		d.engines[i].Kill()
		start := time.Now()
		d.engines[i].Start(t)
		took = append(took, time.Since(start))
		if took[len(took)-1] > 8*time.Second {
			t.Errorf("restart %d took %v to /readyz 200 (a start must not wait in 10 s steps)", k+1, took[len(took)-1])
		}
		d.waitOwned(t, []int{0, 1})
	}
	slices.Sort(took)
	q := func(p float64) time.Duration {
		return took[min(len(took)-1, int(p*float64(len(took))))].Round(10 * time.Millisecond)
	}
	t.Logf("%d restarts to /readyz 200: min %v, p50 %v, p90 %v, max %v; all %v", len(took), took[0].Round(10*time.Millisecond),
		q(0.5), q(0.9), took[len(took)-1].Round(10*time.Millisecond), took)
}

package userfeed_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/userfeed"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// BenchmarkQuoteToSubscriber measures a trader's futures quote from the
// provider to that trader's subscriber: the simulator publishes a price on
// the login's market data socket, the adapter reads it, the feed hands it
// to the subscriber. It reports the p50 and p99 in microseconds.
//
//	go test -run '^$' -bench QuoteToSubscriber -benchtime 2000x ./engine/market/userfeed/
func BenchmarkQuoteToSubscriber(b *testing.B) {
	e := newEnv(b, newSim(b), false, userfeed.Config{})
	e.link(b, "alice", tradovatesim.Login{Name: "alice-live", Kind: "live", MarketData: []string{"ES"}})
	es := e.sim.FrontContract("ES")
	got := make(chan market.Quote, 1024)
	cancel, err := e.src.Watch(context.Background(), "alice", "ES", func(q market.Quote) { got <- q })
	if err != nil {
		b.Fatal(err)
	}
	defer cancel()
	<-got
	prices := []string{"5000.25", "5000.5"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		want := dec(prices[i%2])
		t0 := time.Now()
		if err := e.sim.SetPrice(es, prices[i%2]); err != nil {
			b.Fatal(err)
		}
		for q := range got {
			if q.Last.Cmp(want) == 0 {
				break
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	// Durations, not float metrics: the percentiles are logged as they are.
	b.Logf("provider quote to subscriber over %d quotes: p50 %v, p99 %v", len(lat), lat[len(lat)/2], lat[len(lat)*99/100])
}

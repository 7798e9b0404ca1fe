package paper_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/engine/paper"
)

// BenchmarkQuoteWakingEveryTrailingStop is one quote at a new high over
// 10,000 idle accounts, each with a stop and a trailing level the quote
// crosses: the time the reactor's lock is held for it, which every commit's
// Track waits behind.
func BenchmarkQuoteWakingEveryTrailingStop(b *testing.B) {
	const n = 10000
	stop := d("90")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("acct-%05d", i)
	}
	for range b.N {
		b.StopTimer()
		block := make(chan struct{})
		r := paper.New(func(string, string, paper.Touch) { <-block })
		for _, id := range ids {
			r.Track(id, map[string][]paper.Trigger{"X": {sellLimit("100", true), {Side: "sell", OrderType: "stop", StopPrice: &stop}}})
		}
		b.StartTimer()
		r.OnQuote("X", d("101"), d("102"))
		b.StopTimer()
		close(block)
		r.Close()
	}
}

// BenchmarkTrackBesideAQuoteWakingEveryTrailingStop is what an unrelated
// account's commit waits in Track while such a quote is being handled: the
// longest Track call during the quote (max-track-ms) is the delay added to
// that order's answer.
func BenchmarkTrackBesideAQuoteWakingEveryTrailingStop(b *testing.B) {
	const n = 10000
	stop := d("90")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("acct-%05d", i)
	}
	var worst time.Duration
	var waits []time.Duration
	for range b.N {
		block := make(chan struct{})
		r := paper.New(func(string, string, paper.Touch) { <-block })
		for _, id := range ids {
			r.Track(id, map[string][]paper.Trigger{"X": {sellLimit("100", true), {Side: "sell", OrderType: "stop", StopPrice: &stop}}})
		}
		done := make(chan struct{})
		go func() { r.OnQuote("X", d("101"), d("102")); close(done) }()
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			t := time.Now()
			r.Track("other", map[string][]paper.Trigger{})
			waits = append(waits, time.Since(t))
			worst = max(worst, waits[len(waits)-1])
		}
		close(block)
		r.Close()
	}
	slices.Sort(waits)
	b.ReportMetric(float64(waits[len(waits)*99/100])/1e6, "p99-track-ms")
	b.ReportMetric(float64(worst)/1e6, "max-track-ms")
}

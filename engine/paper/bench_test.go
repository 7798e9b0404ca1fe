package paper_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/engine/paper"
)

// trailingBook is a reactor over n idle accounts, each with a stop and a
// trailing level that a quote at 101 crosses; its wakes stay in flight
// until done, which also closes it.
func trailingBook(n int) (r *paper.Reactor, done func()) {
	stop := d("90")
	block := make(chan struct{})
	r = paper.New(func(string, string, paper.Touch) { <-block })
	for i := range n {
		r.Track(fmt.Sprintf("acct-%05d", i), map[string][]paper.Trigger{"X": {sellLimit("100", true), {Side: "sell", OrderType: "stop", StopPrice: &stop}}})
	}
	return r, func() { close(block); r.Close() }
}

// BenchmarkQuoteWakingEveryTrailingStop is one quote at a new high over
// 10,000 idle accounts, each with a stop and a trailing level the quote
// crosses: the time the reactor's lock is held for it, which every commit's
// Track waits behind.
func BenchmarkQuoteWakingEveryTrailingStop(b *testing.B) {
	for range b.N {
		b.StopTimer()
		r, done := trailingBook(10000)
		b.StartTimer()
		r.OnQuote("X", d("101"), d("102"))
		b.StopTimer()
		done()
	}
}

// BenchmarkTrackBesideAQuoteWakingEveryTrailingStop is what an unrelated
// account's commit waits in Track while such a quote is being handled: the
// p99 and the longest Track call during the quote, logged, are the delay
// added to that order's answer.
func BenchmarkTrackBesideAQuoteWakingEveryTrailingStop(b *testing.B) {
	var waits []time.Duration
	for range b.N {
		r, done := trailingBook(10000)
		quoted := make(chan struct{})
		go func() { r.OnQuote("X", d("101"), d("102")); close(quoted) }()
		for running := true; running; {
			select {
			case <-quoted:
				running = false
			default:
			}
			t := time.Now()
			r.Track("other", map[string][]paper.Trigger{})
			waits = append(waits, time.Since(t))
		}
		done()
	}
	slices.Sort(waits)
	b.Logf("Track beside the quote: p99 %v, longest %v (%d calls)", waits[len(waits)*99/100], waits[len(waits)-1], len(waits))
}

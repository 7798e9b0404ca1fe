package paper_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/paper"
	"github.com/svc/engine/events"
)

var d = events.MustDecimal

func sellLimit(px string, move bool) paper.Trigger {
	p := d(px)
	return paper.Trigger{Side: "sell", OrderType: "limit", LimitPrice: &p, Move: move}
}

// At most Workers wakes are in flight however many accounts a quote crosses;
// wakes that may fill go before wakes that only move a stop.
func TestWakesAreBoundedAndFillsGoFirst(t *testing.T) {
	release := make(chan struct{})
	var inflight, most atomic.Int64
	var mu sync.Mutex
	var order []string
	r := paper.New(func(acct, _ string, _, _ events.Decimal) {
		n := inflight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		mu.Lock()
		order = append(order, acct)
		mu.Unlock()
		inflight.Add(-1)
	})
	defer r.Close()
	for i := 0; i < 100; i++ {
		r.Track(fmt.Sprintf("move-%03d", i), map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	}
	r.OnQuote("X", d("101"), d("101.5"))
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if inflight.Load() != paper.Workers {
			return fmt.Errorf("%d in flight", inflight.Load())
		}
		return nil
	})
	r.Track("fill", map[string][]paper.Trigger{"X": {sellLimit("100", false)}})
	r.OnQuote("X", d("101"), d("101.5"))
	close(release)
	enginetest.WaitFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		// 100 moves, the fill, and again the moves in flight when the second quote came.
		if len(order) != 101+paper.Workers {
			return fmt.Errorf("%d woken", len(order))
		}
		return nil
	})
	if most.Load() > paper.Workers {
		t.Fatalf("%d wakes in flight at once, at most %d", most.Load(), paper.Workers)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, a := range order {
		if a == "fill" && i > 2*paper.Workers {
			t.Fatalf("the fill woke %dth, behind queued moves", i)
		}
	}
}

// A queued wake decides on the newest quote; a quote that crosses while a
// wake is in flight wakes the account again after it, on that quote.
func TestWakesDecideOnTheNewestQuote(t *testing.T) {
	block := make(chan struct{})
	got := make(chan string, 10)
	first := true
	r := paper.New(func(acct, _ string, bid, _ events.Decimal) {
		if first {
			first = false
			<-block
		}
		got <- acct + "@" + bid.String()
	})
	defer r.Close()
	r.Track("a", map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	r.OnQuote("X", d("101"), d("101.5")) // in flight, blocked
	time.Sleep(20 * time.Millisecond)
	r.OnQuote("X", d("102"), d("102.5")) // during the wake
	r.OnQuote("X", d("103"), d("103.5")) // conflated into the one after
	close(block)
	if a, b := <-got, <-got; a != "a@101" || b != "a@103" {
		t.Fatalf("wakes %s then %s", a, b)
	}
	select {
	case extra := <-got:
		t.Fatalf("a third wake %s", extra)
	case <-time.After(50 * time.Millisecond):
	}
}

// The index wakes exactly the accounts a quote crosses, in each direction.
func TestQuotesWakeOnlyWhatTheyCross(t *testing.T) {
	p := func(s string) *events.Decimal { v := d(s); return &v }
	cases := []struct {
		name     string
		trigger  paper.Trigger
		bid, ask string
		wake     bool
	}{
		{"a sell limit below the bid", paper.Trigger{Side: "sell", OrderType: "limit", LimitPrice: p("100")}, "100", "101", true},
		{"a sell limit above the bid", paper.Trigger{Side: "sell", OrderType: "limit", LimitPrice: p("100.5")}, "100", "101", false},
		{"a buy limit at the ask", paper.Trigger{Side: "buy", OrderType: "limit", LimitPrice: p("101")}, "100", "101", true},
		{"a buy limit below the ask", paper.Trigger{Side: "buy", OrderType: "limit", LimitPrice: p("100.5")}, "100", "101", false},
		{"a sell stop at the bid", paper.Trigger{Side: "sell", OrderType: "stop", StopPrice: p("100")}, "100", "101", true},
		{"a sell stop below the bid", paper.Trigger{Side: "sell", OrderType: "stop", StopPrice: p("99")}, "100", "101", false},
		{"a buy stop below the ask", paper.Trigger{Side: "buy", OrderType: "stop", StopPrice: p("100")}, "100", "101", true},
		{"a buy stop above the ask", paper.Trigger{Side: "buy", OrderType: "stop", StopPrice: p("102")}, "100", "101", false},
		{"a triggered stop-limit rests as its limit", paper.Trigger{Side: "sell", OrderType: "stop_limit", StopPrice: p("90"), LimitPrice: p("99"), Triggered: true}, "100", "101", true},
		{"a resting market order wakes on any quote", paper.Trigger{Side: "buy", OrderType: "market"}, "100", "101", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			woke := make(chan string, 4)
			r := paper.New(func(acct, _ string, _, _ events.Decimal) { woke <- acct })
			defer r.Close()
			r.Track("a", map[string][]paper.Trigger{"X": {tc.trigger}})
			r.OnQuote("X", d(tc.bid), d(tc.ask))
			select {
			case <-woke:
				if !tc.wake {
					t.Fatal("woken")
				}
			case <-time.After(100 * time.Millisecond):
				if tc.wake {
					t.Fatal("not woken")
				}
			}
		})
	}
}

package paper_test

import (
	"fmt"
	"github.com/cockroachdb/apd/v3"
	"math/rand/v2"
	"slices"
	"strings"
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

// At most Workers wakes are in flight however many accounts a quote crosses,
// and of those at most MovesInFlight only move a stop (a stream of moves
// holds one place in the log's queue); wakes that may fill go before wakes
// that only move a stop.
func TestWakesAreBoundedAndFillsGoFirst(t *testing.T) {
	release := make(chan struct{})
	var inflight, most, moving, mostMoving atomic.Int64
	high := func(m *atomic.Int64, n int64) {
		for v := m.Load(); n > v && !m.CompareAndSwap(v, n); v = m.Load() {
		}
	}
	var mu sync.Mutex
	var order, started []string // wakes as they end, as they begin
	r := paper.New(func(acct, _ string, _ paper.Touch) {
		move := strings.HasPrefix(acct, "move")
		mu.Lock()
		started = append(started, acct)
		mu.Unlock()
		high(&most, inflight.Add(1))
		if move {
			high(&mostMoving, moving.Add(1))
		}
		<-release
		if move {
			// A move takes a while, as a commit does: a fill whose worker
			// the machine holds back a moment between taking it and
			// starting it still starts before the moves behind it.
			time.Sleep(2 * time.Millisecond)
		}
		mu.Lock()
		order = append(order, acct)
		mu.Unlock()
		if move {
			moving.Add(-1)
		}
		inflight.Add(-1)
	})
	defer r.Close()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before Close: a failed check must not leave the wakes blocked
	for i := 0; i < 100; i++ {
		r.Track(fmt.Sprintf("move-%03d", i), map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	}
	r.OnQuote("X", d("101"), d("101.5"))
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if moving.Load() != paper.MovesInFlight {
			return fmt.Errorf("%d moves in flight", moving.Load())
		}
		return nil
	})
	time.Sleep(50 * time.Millisecond) // idle workers must not take more moves meanwhile
	if n := moving.Load(); n != paper.MovesInFlight {
		t.Fatalf("%d moves in flight while they wait, want %d", n, paper.MovesInFlight)
	}
	const fills = 10
	for i := 0; i < fills; i++ {
		r.Track(fmt.Sprintf("fill-%02d", i), map[string][]paper.Trigger{"X": {sellLimit("100", false)}})
	}
	r.OnQuote("X", d("101"), d("101.5"))
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if inflight.Load() != paper.Workers {
			return fmt.Errorf("%d in flight", inflight.Load())
		}
		return nil
	})
	free()
	enginetest.WaitFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		// 100 moves, the fills, and again the moves in flight when the second quote came.
		if len(order) != 100+fills+paper.MovesInFlight {
			return fmt.Errorf("%d woken", len(order))
		}
		return nil
	})
	if most.Load() > paper.Workers || mostMoving.Load() > paper.MovesInFlight {
		t.Fatalf("%d wakes and %d moves in flight at once, at most %d and %d", most.Load(), mostMoving.Load(), paper.Workers, paper.MovesInFlight)
	}
	mu.Lock()
	defer mu.Unlock()
	// Every fill begins before the moves queued ahead of it: after the move
	// in flight, give or take the workers' race to record their start.
	for i, a := range started {
		if strings.HasPrefix(a, "fill") && i > paper.MovesInFlight+fills+paper.Workers {
			t.Fatalf("%s began %dth, behind queued moves: %v", a, i, started)
		}
	}
}

// A queued wake decides on the newest quote; a quote that crosses while a
// wake is in flight wakes the account again after it, on that quote.
func TestWakesDecideOnTheNewestQuote(t *testing.T) {
	block := make(chan struct{})
	got := make(chan string, 10)
	first := true
	r := paper.New(func(acct, _ string, q paper.Touch) {
		bid := q.Bid
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
			r := paper.New(func(acct, _ string, _ paper.Touch) { woke <- acct })
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

// A wake queued only to move a stop goes to the fills when a later quote
// crosses one of the account's orders: the stop that triggers does not wait
// behind every other account's move (issue 14's trigger-to-fill tail).
func TestAQueuedMoveIsUpgradedWhenItsStopTriggers(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 200)
	r := paper.New(func(acct, _ string, _ paper.Touch) {
		started <- acct
		if strings.HasPrefix(acct, "move") {
			<-release // the move slot stays taken
		}
	})
	defer r.Close()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	for i := range 50 {
		r.Track(fmt.Sprintf("move-%02d", i), map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	}
	stop := d("95")
	r.Track("stop-acct", map[string][]paper.Trigger{"X": {sellLimit("100", true), {Side: "sell", OrderType: "stop", StopPrice: &stop}}})
	r.OnQuote("X", d("101"), d("102")) // every account's trailing level: 51 move wakes, one in flight
	if first := <-started; first != "move-00" {
		t.Fatalf("first wake %s", first)
	}
	r.OnQuote("X", d("94"), d("95")) // through stop-acct's stop
	select {
	case acct := <-started:
		if acct != "stop-acct" {
			t.Fatalf("woke %s while the move slot is taken", acct)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the triggered stop waits behind the queued moves")
	}
	free()
	seen := map[string]bool{}
	for len(seen) < 49 {
		select {
		case acct := <-started:
			seen[acct] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of the 49 other moves woke after the release", len(seen))
		}
	}
	if seen["stop-acct"] {
		t.Error("stop-acct woke twice from one queue entry")
	}
}

// holdingFirstWake is a reactor whose wakes report their touch on got and
// whose first wake stays in flight until release (which a cleanup calls too).
func holdingFirstWake(t *testing.T) (r *paper.Reactor, got <-chan paper.Touch, release func()) {
	held := make(chan struct{})
	touches := make(chan paper.Touch, 10)
	first := true
	r = paper.New(func(_, _ string, tc paper.Touch) {
		touches <- tc
		if first {
			first = false
			<-held
		}
	})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(r.Close)
	t.Cleanup(release) // before Close, which waits for the wake in flight
	return r, touches, release
}

// A wake carries the best touches since the quote the account last decided
// on: a high that came and went while the wake waited still moves its
// trailing stop (the quote it decides on is the newest).
func TestAWakeCarriesTheBestTouchSinceItsLast(t *testing.T) {
	r, got, release := holdingFirstWake(t)
	r.Track("a", map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	r.OnQuote("X", d("101"), d("101.5")) // in flight, held
	one := <-got
	r.OnQuote("X", d("105"), d("105.5")) // a high during the wake
	r.OnQuote("X", d("102"), d("99"))    // back down: the newest quote (and the lowest ask)
	release()
	two := <-got
	if one.Bid.String() != "101" || one.HighBid.String() != "101" || one.LowAsk.String() != "101.5" {
		t.Fatalf("first wake %+v", one)
	}
	if two.Bid.String() != "102" || two.HighBid.String() != "105" || two.LowAsk.String() != "99" {
		t.Fatalf("second wake: bid %s high %s low ask %s, want 102, 105, 99", two.Bid, two.HighBid, two.LowAsk)
	}
	// and the path of quotes those bests come from, in order, for the rules
	// of a bracket's stop to be walked quote by quote
	if path := fmt.Sprint(one.Path); path != "[{101 101.5}]" {
		t.Fatalf("first wake's path %s", path)
	}
	if path := fmt.Sprint(two.Path); path != "[{105 105.5} {102 99}]" {
		t.Fatalf("second wake's path %s, want the high, then the newest quote", path)
	}
}

// A wake queued long ago gets the newest few thousand quotes of its path,
// in order, ending at the quote it decides on; the path a wake was handed
// stays as it was while newer quotes arrive.
func TestAWakesPathIsTheNewestQuotesInOrder(t *testing.T) {
	r, got, release := holdingFirstWake(t)
	r.Track("a", map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	r.OnQuote("X", d("101"), d("101.5")) // in flight, held
	one := <-got
	const n = 20000
	for i := 1; i <= n; i++ {
		bid := events.Int(int64(100 + i))
		r.OnQuote("X", bid, bid.Add(d("0.5")))
	}
	release()
	two := <-got
	if len(two.Path) < 4096 || len(two.Path) > 2*4096 {
		t.Fatalf("path of %d quotes", len(two.Path))
	}
	for i, q := range two.Path { // consecutive, ending at the newest
		want := events.Int(int64(100 + n - len(two.Path) + 1 + i))
		if q.Bid.Cmp(want) != 0 {
			t.Fatalf("path[%d] bid %s, want %s", i, q.Bid, want)
		}
	}
	if len(one.Path) != 1 || one.Path[0].Bid.String() != "101" {
		t.Fatalf("the first wake's path changed: %v", one.Path)
	}
}

// A wake tells, by stop, where in its path the stop began resting where it
// is: a stop set anew while the wake waited (a trader's change, a move)
// starts its walk at the first quote after, so an earlier dip never
// triggers it.
func TestAWakesPathStartsForEachStopWhereItRests(t *testing.T) {
	r, got, release := holdingFirstWake(t)
	limit, stop, moved := d("101"), d("95"), d("97")
	r.Track("a", map[string][]paper.Trigger{"X": {
		{Side: "sell", OrderType: "limit", LimitPrice: &limit, ID: "lim"},
		{Side: "sell", OrderType: "stop", StopPrice: &stop, ID: "stop"},
	}})
	r.OnQuote("X", d("101"), d("102")) // quote 1 crosses the limit: a wake, held
	<-got
	r.OnQuote("X", d("94"), d("95"))               // 2: a dip
	r.OnQuote("X", d("99"), d("100"))              // 3
	r.Track("a", map[string][]paper.Trigger{"X": { // the stop set at 97: rests from quote 4
		{Side: "sell", OrderType: "limit", LimitPrice: &limit, ID: "lim"},
		{Side: "sell", OrderType: "stop", StopPrice: &moved, ID: "stop"},
	}})
	r.OnQuote("X", d("101"), d("102")) // 4 crosses the limit again
	release()
	two := <-got
	if len(two.Path) != 3 || two.Path[0].Bid.String() != "94" {
		t.Fatalf("second wake's path %v, want the quotes 2 to 4", two.Path)
	}
	if from, ok := two.PathFrom["stop"]; !ok || from != 2 {
		t.Fatalf("the stop's walk starts at %d (%v), want 2: quote 4, the first after it was set", from, ok)
	}
}

// A quote that crosses more accounts than the reactor wakes under one hold
// of its lock (it lets go between chunks so commits' Track calls get in)
// still wakes each of them once, and accounts Track changes meanwhile are
// judged by what they hold then.
func TestAQuoteWakesEveryCrossedAccountOnceAcrossChunks(t *testing.T) {
	var mu sync.Mutex
	woke := map[string]int{}
	r := paper.New(func(acct, _ string, _ paper.Touch) {
		mu.Lock()
		woke[acct]++
		mu.Unlock()
	})
	defer r.Close()
	const n = 1000
	for i := range n {
		r.Track(fmt.Sprintf("a-%04d", i), map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	}
	done := make(chan struct{})
	go func() { r.OnQuote("X", d("101"), d("102")); close(done) }()
	// Meanwhile the last accounts' levels move above the quote: whichever
	// way the race goes, none is woken twice and none that still crosses is missed.
	for i := n - 10; i < n; i++ {
		r.Track(fmt.Sprintf("a-%04d", i), map[string][]paper.Trigger{"X": {sellLimit("200", true)}})
	}
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := len(woke)
		mu.Unlock()
		if got >= n-10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a second wake, were there one, would have come by now
	mu.Lock()
	defer mu.Unlock()
	for i := range n - 10 {
		if c := woke[fmt.Sprintf("a-%04d", i)]; c != 1 {
			t.Errorf("a-%04d woke %d times", i, c)
		}
	}
	for i := n - 10; i < n; i++ {
		if c := woke[fmt.Sprintf("a-%04d", i)]; c > 1 {
			t.Errorf("a-%04d woke %d times", i, c)
		}
	}
}

// A stop that a quote trades through while its account's wake is in flight
// (or queued) is named in the account's next wake even when the quotes came
// back above it before that wake: a resting stop triggers on any quote that
// trades through it. A stop placed after the dip is not named.
func TestAStopTradedThroughDuringAWakeIsNamedInTheNext(t *testing.T) {
	r, got, release := holdingFirstWake(t)
	stop, later := d("95"), d("96")
	limit := d("101")
	r.Track("a", map[string][]paper.Trigger{"X": {
		{Side: "sell", OrderType: "limit", LimitPrice: &limit, ID: "lim"},
		{Side: "sell", OrderType: "stop", StopPrice: &stop, ID: "stop-1"},
	}})
	r.OnQuote("X", d("101"), d("102")) // crosses the limit: a wake, held in flight
	if tc := <-got; len(tc.TradedThrough) != 0 {
		t.Fatalf("first wake names %v", tc.TradedThrough)
	}
	r.OnQuote("X", d("94"), d("95"))  // through the stop while the wake is in flight
	r.OnQuote("X", d("99"), d("100")) // and back above it
	// The wake's commit leaves the stop resting and adds one placed after the dip.
	r.Track("a", map[string][]paper.Trigger{"X": {
		{Side: "sell", OrderType: "stop", StopPrice: &stop, ID: "stop-1"},
		{Side: "sell", OrderType: "stop", StopPrice: &later, ID: "stop-2"},
	}})
	release()
	select {
	case tc := <-got:
		if len(tc.TradedThrough) != 1 || tc.TradedThrough[0] != "stop-1" {
			t.Fatalf("second wake names %v, want [stop-1]", tc.TradedThrough)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stop traded through during the wake woke nothing")
	}
}

// A stop that moved (a trailing rule) rests anew from its move: a dip before
// the move, under the new level but above the old, is not taken for a quote
// that traded through it.
func TestAMovedStopIsNotTriggeredByADipBeforeItsMove(t *testing.T) {
	r, got, release := holdingFirstWake(t)
	low, high, limit, target := d("90"), d("97"), d("101"), d("105")
	r.Track("a", map[string][]paper.Trigger{"X": {
		{Side: "sell", OrderType: "limit", LimitPrice: &limit, ID: "lim"},
		{Side: "sell", OrderType: "stop", StopPrice: &low, ID: "stop"},
	}})
	r.OnQuote("X", d("101"), d("102")) // a wake, held in flight
	<-got
	r.OnQuote("X", d("94"), d("95"))               // above the stop at 90
	r.OnQuote("X", d("99"), d("100"))              // back
	r.Track("a", map[string][]paper.Trigger{"X": { // the wake moved the stop up to 97
		{Side: "sell", OrderType: "limit", LimitPrice: &target, ID: "tp"},
		{Side: "sell", OrderType: "stop", StopPrice: &high, ID: "stop"},
	}})
	release()
	r.OnQuote("X", d("105"), d("106")) // the target: a wake
	select {
	case tc := <-got:
		if len(tc.TradedThrough) != 0 {
			t.Fatalf("the wake names %v: the dip came before the stop moved to 97", tc.TradedThrough)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wake for the target")
	}
}

// trailing is a long bracket's move trigger with its trailing rule: the
// stop rests at stored and trails dist behind the best bid, on a 0.5 tick,
// once the bid reaches act ("" : at once); wake is where a bid would move it.
func trailing(stop, stored, dist, act, wake string) []paper.Trigger {
	w, s, dd := d(wake), d(stored), d(dist)
	tr := &paper.Trail{Stop: stop, Long: true, Distance: dd, Tick: d("0.5"),
		LevelAt: func(best events.Decimal) (events.Decimal, bool) {
			if act != "" && best.Cmp(d(act)) < 0 {
				return s, false
			}
			lv := best.Sub(dd).Steps(d("0.5"), apd.RoundHalfUp)
			return lv, lv.Cmp(s) > 0
		}}
	if act != "" {
		a := d(act)
		tr.Activation = &a
	}
	return []paper.Trigger{
		{Side: "sell", OrderType: "limit", LimitPrice: &w, Move: true, Trail: tr},
		{Side: "sell", OrderType: "stop", StopPrice: &s, ID: stop},
	}
}

// movesHeld is a reactor whose move wakes (accounts named move-...) hold the
// one move slot until release, with fifty of them queued behind the first
// by a bid of 100 or more; any other account's wake ends its triggers (as
// its stop's fill would); started names each account as its wake begins.
func movesHeld(t *testing.T) (r *paper.Reactor, started chan string) {
	release := make(chan struct{})
	started = make(chan string, 200)
	r = paper.New(func(acct, _ string, _ paper.Touch) {
		started <- acct
		if strings.HasPrefix(acct, "move") {
			<-release
			return
		}
		r.Track(acct, nil)
	})
	var once sync.Once
	t.Cleanup(r.Close)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before Close
	for i := range 50 {
		r.Track(fmt.Sprintf("move-%02d", i), map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	}
	return r, started
}

// wokeNext fails t unless the next wake to begin within a second is want's
// account ("": none begins); why says what the test expected.
func wokeNext(t *testing.T, started chan string, want, why string) {
	t.Helper()
	if got := woke(started); got != want {
		t.Fatalf("woke %q, want %q: %s", got, want, why)
	}
}

// woke reports the next account whose wake begins within a second ("" if none).
func woke(started chan string) string {
	select {
	case acct := <-started:
		return acct
	case <-time.After(time.Second):
		return ""
	}
}

// A trailing stop whose account waits among the queued moves goes to the
// fills when a quote reaches the level its rule has moved it to since, not
// only its recorded level: the stop fills when its rule says, not after
// every other account's move.
func TestAQueuedTrailingStopGoesToTheFillsAtItsRulesLevel(t *testing.T) {
	r, started := movesHeld(t)
	r.Track("trail", map[string][]paper.Trigger{"X": trailing("s1", "90", "10", "", "100.5")})
	r.OnQuote("X", d("101"), d("101.5")) // every account queued to move; move-00 in flight
	wokeNext(t, started, "move-00", "the first of the queued moves")
	r.OnQuote("X", d("110"), d("110.5")) // the rule's level is 100 now; 90 is recorded
	r.OnQuote("X", d("100.5"), d("101")) // above 100: nothing
	wokeNext(t, started, "", "nothing at a bid above the rule's level")
	r.OnQuote("X", d("100"), d("100.5")) // at the rule's level, ten above the recorded stop
	wokeNext(t, started, "trail", "the trailing stop's account ahead of the queued moves")
}

// Until the best bid reaches its activation a queued stop trails nothing,
// and a dip does not take it out of the queue; after, it does.
func TestAQueuedTrailingStopWaitsForItsActivation(t *testing.T) {
	r, started := movesHeld(t)
	r.Track("trail", map[string][]paper.Trigger{"X": trailing("s1", "90", "10", "115", "100.5")})
	r.OnQuote("X", d("101"), d("101.5"))
	wokeNext(t, started, "move-00", "the first of the queued moves")
	r.OnQuote("X", d("110"), d("110.5"))
	r.OnQuote("X", d("99.5"), d("100")) // below 110 - 10, but the rule is not active
	wokeNext(t, started, "", "nothing before the stop's activation")
	r.OnQuote("X", d("116"), d("116.5")) // activated: level 106
	r.OnQuote("X", d("106.5"), d("107"))
	wokeNext(t, started, "", "nothing above the level")
	r.OnQuote("X", d("105.5"), d("106"))
	wokeNext(t, started, "trail", "the activated stop's account")
}

// Stops queued by different quotes count from different bests until a
// quote betters both, after which they share it.
func TestQueuedTrailingStopsCountFromTheBestSinceTheirWake(t *testing.T) {
	r, started := movesHeld(t)
	r.Track("early", map[string][]paper.Trigger{"X": trailing("s1", "90", "10", "", "100.5")})
	r.OnQuote("X", d("110"), d("110.5")) // early and the moves queued; best 110
	wokeNext(t, started, "move-00", "the first of the queued moves")
	r.Track("late", map[string][]paper.Trigger{"X": trailing("s2", "80", "10", "", "90.5")})
	r.OnQuote("X", d("104"), d("104.5")) // late queued here: its best is 104, early's 110
	r.OnQuote("X", d("99.5"), d("100"))  // through early's 100, not late's 94
	wokeNext(t, started, "early", "early, through its level")
	wokeNext(t, started, "", "nothing else above its level")
	r.OnQuote("X", d("112"), d("112.5")) // both groups' best is 112 now
	r.OnQuote("X", d("101.5"), d("102")) // late's level 102
	wokeNext(t, started, "late", "late, through its level")
}

// A short's queued stop trails the lowest ask the same way, mirrored.
func TestAQueuedShortTrailingStopGoesToTheFillsAtItsRulesLevel(t *testing.T) {
	r, started := movesHeld(t)
	w, s, dist := d("99.5"), d("110"), d("10")
	tr := &paper.Trail{Stop: "s1", Distance: dist, Tick: d("0.5"),
		LevelAt: func(best events.Decimal) (events.Decimal, bool) {
			lv := best.Add(dist).Steps(d("0.5"), apd.RoundHalfUp)
			return lv, lv.Cmp(s) < 0
		}}
	r.Track("short", map[string][]paper.Trigger{"X": {
		{Side: "buy", OrderType: "limit", LimitPrice: &w, Move: true, Trail: tr},
		{Side: "buy", OrderType: "stop", StopPrice: &s, ID: "s1"},
	}})
	r.OnQuote("X", d("101"), d("101.5")) // the moves queued, move-00 in flight
	wokeNext(t, started, "move-00", "the first of the queued moves")
	r.OnQuote("X", d("98.5"), d("99")) // the short queued to move behind them
	r.OnQuote("X", d("89.5"), d("90")) // the rule's level is 100 now
	r.OnQuote("X", d("99"), d("99.5")) // below 100: nothing
	wokeNext(t, started, "", "nothing below the rule's level")
	r.OnQuote("X", d("99.5"), d("100"))
	wokeNext(t, started, "short", "the short's account")
}

// Past the few thousand quotes a book keeps, a queued stop's best counts
// from the oldest kept (never better than the truth), and a later high
// still moves it.
func TestAQueuedTrailingStopOutlivesTheBooksMemory(t *testing.T) {
	r, started := movesHeld(t)
	r.Track("trail", map[string][]paper.Trigger{"X": trailing("s1", "40", "10", "", "100.5")})
	r.OnQuote("X", d("101"), d("101.5"))
	wokeNext(t, started, "move-00", "the first of the queued moves")
	for i := range 10000 { // each bid lower than the last: the book keeps every one it can
		bid := d("100").Sub(d(fmt.Sprintf("%d.%03d", i/1000, i%1000)))
		r.OnQuote("X", bid, bid.Add(d("0.5")))
	}
	wokeNext(t, started, "", "nothing on a falling market above the stop")
	r.OnQuote("X", d("120"), d("120.5"))
	r.OnQuote("X", d("110"), d("110.5"))
	wokeNext(t, started, "trail", "the trailing stop's account")
}

// movingTo95 is a reactor whose account a, its stop at 90 trailing 10, has
// been woken by a bid of 105 to move it to 95; the move stays in flight
// until release, whose commit then records the stop at 95. touches has
// every wake's touch but the first's, already read.
func movingTo95(t *testing.T) (r *paper.Reactor, touches chan paper.Touch, release func()) {
	held := make(chan struct{})
	touches = make(chan paper.Touch, 10)
	var n atomic.Int32
	r = paper.New(func(_, _ string, tc paper.Touch) {
		touches <- tc
		if n.Add(1) == 1 {
			<-held
			// the move's commit: the stop at 95, which a bid of 105.5 moves
			r.Track("a", map[string][]paper.Trigger{"X": trailing("s1", "95", "10", "", "105.5")})
		}
	})
	t.Cleanup(r.Close)
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release) // before Close, which waits for the wake in flight
	r.Track("a", map[string][]paper.Trigger{"X": trailing("s1", "90", "10", "", "100.5")})
	r.OnQuote("X", d("105"), d("105.5"))
	<-touches
	return r, touches, release
}

// nextTouch is the next wake's touch; the test fails, saying why, when no
// wake comes within 5 s.
func nextTouch(t *testing.T, touches chan paper.Touch, why string) paper.Touch {
	t.Helper()
	select {
	case tc := <-touches:
		return tc
	case <-time.After(5 * time.Second):
		t.Fatal(why)
		return paper.Touch{}
	}
}

// A trailing stop its own move wake moves rests at its new level from the
// quote after the one the wake decided on, not from the move's commit: a dip
// through the new level while the move was in flight triggers it.
func TestADipWhileAStopsMoveIsInFlightTriggersItAtItsNewLevel(t *testing.T) {
	r, touches, release := movingTo95(t)
	r.OnQuote("X", d("94"), d("94.5"))   // through 95 while the move is in flight
	r.OnQuote("X", d("106"), d("106.5")) // and back
	release()
	tc := nextTouch(t, touches, "no wake after the dip through the moved stop's level")
	if !slices.Contains(tc.TradedThrough, "s1") {
		t.Fatalf("the next wake names %v traded through, want s1 (the dip to 94 after the move's quote)", tc.TradedThrough)
	}
}

// A stop whose wake waited past the quotes the book keeps gets the best
// touch of the quotes it no longer holds, where better than any of its
// path's (the stop's walk moves it there first); a path that still holds
// its best gets none.
func TestAWakeThatOutwaitedThePathCarriesTheBestBeforeIt(t *testing.T) {
	release := make(chan struct{})
	touches := make(chan paper.Touch, 10)
	r := paper.New(func(acct, _ string, tc paper.Touch) {
		if strings.HasPrefix(acct, "move") {
			<-release
			return
		}
		touches <- tc
	})
	t.Cleanup(r.Close)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	r.Track("move-0", map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	r.Track("move-1", map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	r.Track("trail", map[string][]paper.Trigger{"X": trailing("s1", "90", "10", "", "100.5")})
	r.OnQuote("X", d("101"), d("101.5")) // all three queued to move; move-0 holds the slot
	r.OnQuote("X", d("130"), d("130.5")) // the high: the rule's level 120
	for i := range 10000 {               // more than the book keeps, all above 120
		bid := d("121").Add(d(fmt.Sprint(i % 7)))
		r.OnQuote("X", bid, bid.Add(d("0.5")))
	}
	free()
	select {
	case tc := <-touches:
		if best, ok := tc.PathBest["s1"]; !ok || best.Cmp(d("130")) != 0 {
			t.Fatalf("PathBest %v, want s1 at 130", tc.PathBest)
		}
		if len(tc.Path) == 0 || len(tc.Path) > 8192 {
			t.Fatalf("path of %d quotes", len(tc.Path))
		}
		for _, q := range tc.Path {
			if q.Bid.Cmp(d("130")) == 0 {
				t.Fatal("the path still holds the high")
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the trailing stop's wake never ran")
	}
	// a wake whose path holds its best gets none
	r.Track("trail", map[string][]paper.Trigger{"X": trailing("s2", "118", "10", "", "128.5")})
	r.OnQuote("X", d("129"), d("129.5"))
	select {
	case tc := <-touches:
		if len(tc.PathBest) != 0 {
			t.Fatalf("PathBest %v for a path that holds its best", tc.PathBest)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second wake never ran")
	}
}

// A high while an account's move is in flight moves its stop again after,
// though the price came back under where it wakes before the move ended:
// the next wake carries that high.
func TestAHighWhileAMoveIsInFlightWakesItAgain(t *testing.T) {
	r, touches, release := movingTo95(t)
	r.OnQuote("X", d("112"), d("112.5")) // a high while the move is in flight
	r.OnQuote("X", d("104"), d("104.5")) // and back under 105.5
	release()
	tc := nextTouch(t, touches, "the high while the move was in flight woke nothing")
	if tc.HighBid.Cmp(d("112")) != 0 {
		t.Fatalf("the next wake's best bid %s, want 112", tc.HighBid)
	}
}

// Over random quote walks, the accounts whose queued trailing stop the
// reactor sends to the fills are exactly those a brute force over every
// quote finds: a quote at or under the level the stop's rule puts it at by
// the best bid since the account was queued (the walk stays above every
// recorded stop, so nothing else sends one there).
func TestPropertyQueuedTrailingStopsWakeExactlyWhenTheirRuleSays(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 22))
	half := d("0.5")
	steps := func(n int) events.Decimal { return d(fmt.Sprint(n)).Mul(half) }
	for round := range 20 {
		release := make(chan struct{})
		started := make(chan struct{})
		var once sync.Once
		var mu sync.Mutex
		woken := map[string]bool{}
		var r *paper.Reactor
		r = paper.New(func(acct, _ string, _ paper.Touch) {
			if acct == "move-0" {
				once.Do(func() { close(started) }) // woken again after the release
				<-release
				return
			}
			mu.Lock()
			woken[acct] = true
			mu.Unlock()
			r.Track(acct, nil)
		})
		r.Track("move-0", map[string][]paper.Trigger{"X": {sellLimit("1", true)}})
		r.OnQuote("X", d("100"), d("100.5")) // move-0 takes the one move slot
		<-started

		type acct struct {
			stored, dist, wake events.Decimal
			act                string
		}
		accts := map[string]acct{}
		show := func(a acct) string {
			return fmt.Sprintf("stop %s trailing %s from %q, wakes at %s", a.stored, a.dist, a.act, a.wake)
		}
		for i := range 100 {
			// distances off the 0.5 tick: levels round to it, up to a quarter
			// above best - distance
			a := acct{stored: steps(160 + rng.IntN(30)), dist: d(fmt.Sprintf("%d.%d", 1+rng.IntN(9), rng.IntN(10)))}
			a.wake = a.stored.Add(a.dist).Add(half)
			if rng.IntN(3) == 0 {
				a.act = steps(200 + rng.IntN(20)).String()
				if act := d(a.act); act.Cmp(a.wake) > 0 {
					a.wake = act
				}
			}
			name := fmt.Sprintf("a%03d", i)
			accts[name] = a
			r.Track(name, map[string][]paper.Trigger{"X": trailing("s-"+name, a.stored.String(), a.dist.String(), a.act, a.wake.String())})
		}
		// The brute force, quote by quote: each account idle until a bid
		// reaches where it wakes, then queued with the best bid since.
		type state struct {
			queued, due bool
			best        events.Decimal
			levelAt     func(events.Decimal) (events.Decimal, bool)
		}
		states := map[string]*state{}
		for name, a := range accts {
			states[name] = &state{levelAt: trailing("s", a.stored.String(), a.dist.String(), a.act, a.wake.String())[0].Trail.LevelAt}
		}
		isWoken := func(name string) bool {
			mu.Lock()
			defer mu.Unlock()
			return woken[name]
		}
		bid := 200
		for q := range 1500 {
			bid += rng.IntN(7) - 3
			if rng.IntN(50) == 0 {
				bid -= 10 + rng.IntN(20) // now and then a drop
			}
			bid = max(196, min(bid, 260)) // above every recorded stop: only a rule sends one to the fills
			b := steps(bid)
			r.OnQuote("X", b, b.Add(half))
			for name, st := range states {
				a := accts[name]
				switch {
				case st.due:
				case !st.queued:
					if b.Cmp(a.wake) >= 0 {
						st.queued, st.best = true, b
					}
				default:
					if b.Cmp(st.best) > 0 {
						st.best = b
					}
					if level, moved := st.levelAt(st.best); moved && b.Cmp(level) <= 0 {
						st.due = true
						// the reactor moved it to the fills in this OnQuote: its wake follows
						deadline := time.Now().Add(5 * time.Second)
						for !isWoken(name) && time.Now().Before(deadline) {
							time.Sleep(time.Millisecond)
						}
						if !isWoken(name) {
							t.Errorf("round %d, quote %d (bid %s): %s (%s; best %s: level %s) should have gone to the fills", round, q, b, name, show(a), st.best, level)
						}
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // a wake too many would show by now
		mu.Lock()
		for name := range woken {
			if !states[name].due {
				t.Errorf("round %d: %s (%s) went to the fills with no quote through its stop", round, name, show(accts[name]))
			}
		}
		mu.Unlock()
		close(release)
		r.Close()
		if t.Failed() {
			return
		}
	}
}

// A clean stop decides the wakes the reactor has queued instead of dropping
// them: with the first move held, Drain reports it and the 49 queued behind
// it at its deadline; released, every one of the 50 wakes once during Drain,
// which then reports none left.
func TestDrainDecidesTheQueuedWakes(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	woken := map[string]int{}
	var r *paper.Reactor
	r = paper.New(func(acct, _ string, _ paper.Touch) {
		mu.Lock()
		woken[acct]++
		first := len(woken) == 1 && woken[acct] == 1
		mu.Unlock()
		if first {
			<-release
		}
		r.Track(acct, nil) // its stop moved: the quote crosses nothing of it any more
	})
	t.Cleanup(r.Close)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before Close
	for i := range 50 {
		r.Track(fmt.Sprintf("move-%02d", i), map[string][]paper.Trigger{"X": {sellLimit("100", true)}})
	}
	r.OnQuote("X", events.MustDecimal("101"), events.MustDecimal("102")) // crosses all 50
	count := func() (accounts, wakes int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range woken {
			accounts, wakes = accounts+1, wakes+n
		}
		return accounts, wakes
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if a, _ := count(); a > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no move woke")
		}
		time.Sleep(time.Millisecond)
	}
	if n := r.Drain(50 * time.Millisecond); n != 50 {
		t.Fatalf("Drain with the first move held reports %d wakes left, want 50 (one in flight, 49 queued)", n)
	}
	once.Do(func() { close(release) })
	if n := r.Drain(5 * time.Second); n != 0 {
		t.Fatalf("Drain after the release reports %d wakes left", n)
	}
	if a, w := count(); a != 50 || w != 50 {
		t.Fatalf("%d accounts woke %d times during the drain, want 50 once each", a, w)
	}
}

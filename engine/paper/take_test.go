package paper_test

import (
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/engine/paper"
)

// takeRig is a reactor whose wakes are reported, not decided.
func takeRig(t *testing.T) (*paper.Reactor, chan paper.Touch) {
	t.Helper()
	got := make(chan paper.Touch, 16)
	r := paper.New(func(_, _ string, tc paper.Touch) { got <- tc })
	t.Cleanup(r.Close)
	return r, got
}

func buyLimit(id, px string, since time.Time) paper.Trigger {
	p := d(px)
	return paper.Trigger{Side: "buy", OrderType: "limit", LimitPrice: &p, ID: id, TimeInForce: "gtc", Since: since}
}

func expectWake(t *testing.T, got chan paper.Touch, why string) paper.Touch {
	t.Helper()
	select {
	case tc := <-got:
		return tc
	case <-time.After(5 * time.Second):
		t.Fatalf("no wake: %s", why)
	}
	return paper.Touch{}
}

func expectNoWake(t *testing.T, got chan paper.Touch, why string) {
	t.Helper()
	select {
	case tc := <-got:
		t.Fatalf("a wake %+v: %s", tc, why)
	case <-time.After(100 * time.Millisecond):
	}
}

// An account taken over is decided at once on the newest quote the book
// holds, not on the next quote: a node that gains it acts on the prices it
// already has.
func TestATakenAccountIsWokenOnTheNewestQuote(t *testing.T) {
	r, got := takeRig(t)
	r.OnQuote("X", d("94"), d("95")) // before the node owns the account
	r.Take("a", map[string][]paper.Trigger{"X": {buyLimit("l1", "96", time.Time{})}}, time.Now())
	tc := expectWake(t, got, "the newest ask is below the limit")
	if tc.Ask.Cmp(d("95")) != 0 {
		t.Fatalf("the wake decides on ask %s, want 95", tc.Ask)
	}
	// Track (an ordinary commit) does not wake: the next quote does.
	r.Track("b", map[string][]paper.Trigger{"X": {buyLimit("l2", "96", time.Time{})}})
	expectNoWake(t, got, "Track waits for a quote")
}

// A dip through a resting limit while no node owned the account, gone
// before the takeover, fills it at its limit: the wake names it as touched.
// A dip before the gap began, or before the order was set where it rests,
// does not.
func TestATakeoverCountsTheTouchesOfTheGap(t *testing.T) {
	r, got := takeRig(t)
	r.OnQuote("X", d("99"), d("100"))
	time.Sleep(2 * time.Millisecond) // the quotes' times tell the gap's start from before it
	early := time.Now()
	time.Sleep(2 * time.Millisecond)
	r.OnQuote("X", d("94"), d("95")) // the dip, in the gap
	time.Sleep(2 * time.Millisecond)
	afterDip := time.Now()
	r.OnQuote("X", d("99"), d("100")) // and back
	r.Take("a", map[string][]paper.Trigger{"X": {buyLimit("l1", "96", early.Add(-time.Hour)), buyLimit("l2", "94", time.Time{})}}, early)
	tc := expectWake(t, got, "the dip touched l1 in the gap")
	if !slices.Equal(tc.Touched, []string{"l1"}) {
		t.Fatalf("the wake names %v touched, want [l1]", tc.Touched)
	}

	r.Take("b", map[string][]paper.Trigger{"X": {buyLimit("l3", "96", time.Time{})}}, afterDip)
	expectNoWake(t, got, "the dip came before the gap")
	r.Take("c", map[string][]paper.Trigger{"X": {buyLimit("l4", "96", afterDip)}}, early)
	expectNoWake(t, got, "the dip came before the order rested where it is")
}

// A stop a quote of the gap traded through is named as such by the wake of
// the takeover.
func TestATakeoverCountsTheStopsTheGapTradedThrough(t *testing.T) {
	r, got := takeRig(t)
	stop := d("95")
	since := time.Now()
	time.Sleep(2 * time.Millisecond)
	r.OnQuote("X", d("94"), d("94.5"))
	r.OnQuote("X", d("99"), d("100"))
	r.Take("a", map[string][]paper.Trigger{"X": {{Side: "sell", OrderType: "stop", StopPrice: &stop, ID: "s1"}}}, since)
	tc := expectWake(t, got, "the dip traded through the stop in the gap")
	if !slices.Equal(tc.TradedThrough, []string{"s1"}) {
		t.Fatalf("the wake names %v traded through, want [s1]", tc.TradedThrough)
	}
}

// In ordinary running too, a limit a quote touched while its account's wake
// was in flight is named touched by the next wake, though the quote came back.
func TestALimitTouchedDuringAWakeIsNamedInTheNext(t *testing.T) {
	r, got, release := holdingFirstWake(t)
	sl := d("101")
	lim := d("95")
	r.Track("a", map[string][]paper.Trigger{"X": {
		{Side: "sell", OrderType: "limit", LimitPrice: &sl, ID: "sell"},
		{Side: "buy", OrderType: "limit", LimitPrice: &lim, ID: "buy"},
	}})
	r.OnQuote("X", d("101"), d("102")) // crosses the sell: a wake, held in flight
	<-got
	r.OnQuote("X", d("94"), d("95"))  // touches the buy while the wake is in flight
	r.OnQuote("X", d("99"), d("100")) // and back
	r.Track("a", map[string][]paper.Trigger{"X": {{Side: "buy", OrderType: "limit", LimitPrice: &lim, ID: "buy"}}})
	release()
	select {
	case tc := <-got:
		if !slices.Equal(tc.Touched, []string{"buy"}) {
			t.Fatalf("second wake names %v touched, want [buy]", tc.Touched)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the limit touched during the wake woke nothing")
	}
}

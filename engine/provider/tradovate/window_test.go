package tradovate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	tradovate "github.com/svc/engine/engine/provider/tradovate"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// A login places orders as fast as it can until its hour's limit: every
// order before it is sent and taken; the next is refused at once by the
// engine with the time until the first leaves the hour, and never sent.
// (The limit is small here; the defaults are the published 5000, checked
// in the package's own tests. Writes leave a twentieth of it to reads.)
func TestOrdersUpToTheHour(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{Limits: tradovate.Limits{PerHour: 40}, RequestTimeout: 2 * time.Minute})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "hourly", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	side := [2]provider.Side{provider.Buy, provider.Sell}
	began := time.Now()
	placed := 0
	var err error
	var refusedIn time.Duration
	for ; placed <= 40; placed++ {
		at := time.Now()
		_, err = s.Place(ctx, provider.Order{ClientOrderID: clientID(fmt.Sprint("w-", placed)), Instrument: es,
			Side: side[placed%2], Type: provider.Market, Quantity: dec("1")})
		if err != nil {
			refusedIn = time.Since(at)
			break
		}
	}
	took := time.Since(began)
	t.Logf("%d orders in %s", placed, took)
	// The session's own reads spent a few of the 40.
	if placed < 30 || placed > 39 {
		t.Fatalf("%d orders placed before the refusal (%v)", placed, err)
	}
	var rl *provider.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter > time.Hour || rl.RetryAfter < time.Hour-took-4*time.Minute {
		t.Fatalf("the order past the hour's limit: %v, want RateLimited about %s", err, time.Hour-took)
	}
	if refusedIn > 100*time.Millisecond {
		t.Fatalf("the refused order took %s in the engine", refusedIn)
	}
	if n := e.sim.RequestCount("order/placeorder"); n != placed {
		t.Fatalf("the simulator saw %d orders, want %d", n, placed)
	}
}

// The published limits themselves: a login places 950 orders in a second
// (the default PerSecond of 1000 less the twentieth writes leave to reads),
// all taken without a 429 from the simulator, which holds the published
// limits too; the 951st is refused at once with the time until the second
// has passed, unsent. The simulator and the adapter share one clock that
// stands still while the orders go, so however long they take here they
// are one second's.
func TestOrdersUpToThePublishedSecond(t *testing.T) {
	c := &sharedClock{t: time.Now()}
	e := newEnv(t, tradovatesim.Options{Now: c.now}, tradovate.Options{Now: c.now, RequestTimeout: 2 * time.Minute})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "fast", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	side := [2]provider.Side{provider.Buy, provider.Sell}
	c.advance(time.Second) // the session's reads out of the second
	for i := range 950 {
		if _, err := s.Place(ctx, provider.Order{ClientOrderID: clientID(fmt.Sprint("s-", i)), Instrument: es,
			Side: side[i%2], Type: provider.Market, Quantity: dec("1")}); err != nil {
			t.Fatalf("order %d: %v", i+1, err)
		}
	}
	began := time.Now()
	_, err := s.Place(ctx, provider.Order{ClientOrderID: clientID("s-over"), Instrument: es, Side: provider.Buy,
		Type: provider.Market, Quantity: dec("1")})
	var rl *provider.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("order 951 in the second: %v, want RateLimited 1s", err)
	}
	if waited := time.Since(began); waited > 200*time.Millisecond {
		t.Fatalf("the refused order took %s in the engine", waited)
	}
	if n := e.sim.RequestCount("order/placeorder"); n != 950 {
		t.Fatalf("the simulator saw %d orders, want 950", n)
	}
}

// sharedClock is a clock the test moves, for a simulator and an adapter.
type sharedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *sharedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *sharedClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

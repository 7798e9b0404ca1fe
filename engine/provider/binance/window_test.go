package binance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/binance"
	binancesim "github.com/svc/engine/sim/binance"
)

// longCalls is an env whose calls may last two minutes, so a write is
// refused by its own bound, never by its call's end.
func longCalls(t *testing.T, so binancesim.Options, l binance.Limits) *env {
	t.Helper()
	sim := binancesim.New(so)
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	p, err := binance.New(binance.Options{RestURL: sim.URL(), WSURL: sim.WSURL(), SpotURL: sim.URL(),
		Limits: l, RequestTimeout: 2 * time.Minute, Reconnect: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sim: sim, p: p}
}

// placeUntilRefused places market orders on s as fast as it can, buying and
// selling in turn, n of them, and then one more. It returns how long the n
// took and the error of the one more.
func placeUntilRefused(t *testing.T, s provider.Session, n int) (time.Duration, error) {
	t.Helper()
	ctx := context.Background()
	side := [2]provider.Side{provider.Buy, provider.Sell}
	began := time.Now()
	for i := range n {
		if _, err := s.Place(ctx, market(fmt.Sprint("w-", i), side[i%2], "0.01")); err != nil {
			t.Fatalf("order %d of %d: %v", i+1, n, err)
		}
	}
	took := time.Since(began)
	_, err := s.Place(ctx, market("w-over", provider.Buy, "0.01"))
	return took, err
}

// A credential places orders as fast as it can with the exchange's
// published limits (the defaults): the simulator, counting as the exchange
// does, takes every one sent (no 429), at least the 300 of the first ten
// seconds go, and the first order the window holds back is refused at once
// with a wait within the ten seconds, and never sent. However fast this
// machine places them, the window starts empty, so the first 300 always fit.
func TestOrdersUpToThePublishedTenSeconds(t *testing.T) {
	e := longCalls(t, binancesim.Options{}, binance.Limits{})
	s := e.link(t, binancesim.Account{APIKey: "burst"})
	ctx := context.Background()
	side := [2]provider.Side{provider.Buy, provider.Sell}
	placed := 0
	var err error
	var refusedIn time.Duration
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); placed++ {
		at := time.Now()
		if _, err = s.Place(ctx, market(fmt.Sprint("w-", placed), side[placed%2], "0.01")); err != nil {
			refusedIn = time.Since(at)
			break
		}
	}
	t.Logf("%d orders before the first refusal", placed)
	var rl *provider.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter <= 250*time.Millisecond || rl.RetryAfter > 10*time.Second {
		t.Fatalf("after %d orders: %v, want RateLimited within the ten seconds", placed, err)
	}
	if placed < 300 {
		t.Fatalf("refused after %d orders, fewer than the published 300 in ten seconds", placed)
	}
	if refusedIn > 200*time.Millisecond {
		t.Fatalf("the refused order took %s in the engine", refusedIn)
	}
	if n := e.sim.RequestCount("POST /fapi/v1/order"); n != placed {
		t.Fatalf("the simulator saw %d orders, want the %d taken", n, placed)
	}
}

// The minute's order limit likewise, with a small one on both sides.
func TestOrdersUpToTheMinute(t *testing.T) {
	e := longCalls(t, binancesim.Options{OrderLimit1m: 20}, binance.Limits{OrdersPerMinute: 20})
	s := e.link(t, binancesim.Account{APIKey: "minute"})
	began := time.Now()
	took, err := placeUntilRefused(t, s, 20)
	refusedIn := time.Since(began) - took
	var rl *provider.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter > time.Minute || rl.RetryAfter < time.Minute-took-3*time.Second {
		t.Fatalf("order 21: %v, want RateLimited within the minute's remaining %s", err, time.Minute-took)
	}
	if refusedIn > 100*time.Millisecond {
		t.Fatalf("the refused order took %s in the engine", refusedIn)
	}
	if n := e.sim.RequestCount("POST /fapi/v1/order"); n != 20 {
		t.Fatalf("the simulator saw %d orders, want 20", n)
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	copiercmd "github.com/svc/engine/commands/copier"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evcopier "github.com/svc/engine/events/copier"
)

// The copier phase (issue 45): one in-process engine per size, a leader
// demo account and 10, 100 or 1,000 demo followers in one copier group
// (multiplier 1). The leader places market orders paced at copierPace;
// each is mirrored on every follower. Measured: leader acceptance (the
// commit the copier's hook sees) to each follower's order committed, and
// the leader's own order latency with the group against the same paced
// orders before the group existed.

// copierSizes are the group sizes measured: 10, 100 and 1,000 followers,
// or those BENCH_COPIER_SIZES lists (comma-separated, e.g. "10,100").
func copierSizes() ([]int, error) {
	env := os.Getenv("BENCH_COPIER_SIZES")
	if env == "" {
		return []int{10, 100, 1000}, nil
	}
	var out []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > copiercmd.MaxFollowers {
			return nil, fmt.Errorf("BENCH_COPIER_SIZES: %q is not a group size (1 to %d)", f, copiercmd.MaxFollowers)
		}
		out = append(out, n)
	}
	return out, nil
}

// copierResult is one group size's figures.
type copierResult struct {
	followers int
	orders    int
	mirror    sample // leader acceptance to follower order committed
	alone     sample // the leader's order latency, no group
	led       sample // the leader's order latency, mirrored on the followers
	missing   int    // follower orders not committed within the wait
}

// copierPace is the pause between two leader orders, by group size: the
// mirrors of one order end before the next, so the figures are the
// copier's latency, not a queue's.
func copierPace(followers int) time.Duration {
	switch {
	case followers >= 1000:
		return 400 * time.Millisecond
	case followers >= 100:
		return 60 * time.Millisecond
	}
	return 20 * time.Millisecond
}

// copierOrders is how many leader orders each size places.
func copierOrders(followers int) int {
	if followers >= 1000 {
		return 25
	}
	return 100
}

func copierPhase(ctx context.Context, o opts, t *table) error {
	sizes, err := copierSizes()
	if err != nil {
		return err
	}
	for _, n := range sizes {
		r, err := profiled(o, fmt.Sprintf("copier-%d", n), func() (copierResult, error) { return runCopier(ctx, o, n) })
		if err != nil {
			return fmt.Errorf("copier %d: %w", n, err)
		}
		goal, pass := "-", "-"
		if n == 100 {
			goal, pass = "p99 <= 50 ms", passIf(r.mirror.P99 <= 50*time.Millisecond && r.missing == 0)
		}
		t.add(row{fmt.Sprintf("copier: leader acceptance to follower order committed, %d followers, p50 / p99 (%d leader orders, %d mirrors, %d missing)",
			n, r.orders, r.mirror.N, r.missing), "", fmt.Sprintf("%s / %s", ms(r.mirror.P50), ms(r.mirror.P99)), "", goal, pass})
		t.add(row{fmt.Sprintf("copier: the leader's own order p50 / p99, without the group (baseline) and led by %d followers", n),
			fmt.Sprintf("%s / %s", ms(r.alone.P50), ms(r.alone.P99)), fmt.Sprintf("%s / %s", ms(r.led.P50), ms(r.led.P99)),
			fmt.Sprintf("%.2fx", float64(r.led.P99)/float64(max(r.alone.P99, 1))), "unchanged", "-"})
	}
	return nil
}

// runCopier measures one group size on an engine of its own.
func runCopier(ctx context.Context, o opts, followers int) (copierResult, error) {
	r := copierResult{followers: followers, orders: copierOrders(followers)}
	s, err := startService(ctx, o, o.sync, followers+1, false, "")
	if err != nil {
		return r, err
	}
	defer s.Close()
	e := s.App.Engine
	leader := s.Accounts[0].AccountID
	p := events.Principal{TenantID: app.DemoTenant, KeyID: "bench"}
	pace := copierPace(followers)

	// The leader's orders alone.
	lead := func(tag string) (sample, error) {
		var lats []time.Duration
		for i := range r.orders {
			coid := fmt.Sprintf("%s-%d", tag, i)
			env := e.Envelope(p, coid, &trading.PlaceOrder{ClientOrderID: coid, Instrument: "BTC-PERP", Side: side(i), OrderType: "market", Quantity: qty})
			start := time.Now()
			if _, err := e.Account(ctx, leader, env); err != nil {
				return sample{}, err
			}
			lats = append(lats, time.Since(start))
			time.Sleep(pace)
		}
		var out sample
		summarize(&out, lats)
		return out, nil
	}
	if r.alone, err = lead("alone"); err != nil {
		return r, err
	}

	c := &copiercmd.CreateGroup{Leader: leader}
	one := events.Int(1)
	on := true
	for _, a := range s.Accounts[1:] {
		c.Followers = append(c.Followers, copiercmd.FollowerSpec{AccountID: a.AccountID,
			Sizing: &evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: one}, Enabled: &on})
	}
	env := e.Envelope(p, "bench-group", c)
	env.Digest = "bench-group"
	if _, err := e.Copier(ctx, "cg_bench", env); err != nil {
		return r, err
	}

	var mu sync.Mutex
	var lats []time.Duration
	e.ObserveCopier(func(_ uint64, seen time.Time) {
		d := time.Since(seen)
		mu.Lock()
		lats = append(lats, d)
		mu.Unlock()
	})
	defer e.ObserveCopier(nil)
	base := e.CopierMirrored()
	if r.led, err = lead("led"); err != nil {
		return r, err
	}
	want := base + int64(r.orders*followers)
	deadline := time.Now().Add(60 * time.Second)
	for e.CopierMirrored() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.missing = int(want - e.CopierMirrored())
	mu.Lock()
	summarize(&r.mirror, lats)
	mu.Unlock()
	return r, nil
}

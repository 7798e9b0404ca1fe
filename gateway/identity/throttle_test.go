package identity

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBucketsTakeAndRefill(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	bs := newBuckets(3, time.Minute)
	for i := range 3 {
		if wait := bs.take(t0, "a"); wait != 0 {
			t.Fatalf("take %d of a full bucket waits %v", i+1, wait)
		}
	}
	if wait := bs.take(t0, "a"); wait != time.Minute {
		t.Fatalf("an empty bucket waits %v, want 1m", wait)
	}
	if wait := bs.take(t0, "b"); wait != 0 {
		t.Fatalf("another name's bucket waits %v", wait)
	}
	if wait := bs.take(t0.Add(30*time.Second), "a"); wait != 30*time.Second {
		t.Fatalf("half refilled, it waits %v, want 30s", wait)
	}
	if wait := bs.take(t0.Add(time.Minute), "a"); wait != 0 {
		t.Fatalf("refilled by one, it waits %v", wait)
	}
	if wait := bs.take(t0.Add(time.Hour), "a"); wait != 0 || bs.level(bs.m["a"], t0.Add(time.Hour)) != 2 {
		t.Fatalf("an hour later the bucket holds %v after a take, want 2 (it never exceeds its size)", bs.level(bs.m["a"], t0.Add(time.Hour)))
	}
}

func TestBackOffCountsPairsAndAddresses(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimiter()
	locked := func(email, addr string) bool { return l.wait(now, pairName(email, addr), addrName(addr)) > 0 }
	for range freeFailures + 1 {
		l.fail(now, "owner@x.example", "10.0.0.1")
	}
	if !locked("owner@x.example", "10.0.0.1") {
		t.Fatal("six failures of one email from one address do not lock that pair")
	}
	if locked("owner@x.example", "10.0.0.2") {
		t.Fatal("failures at one address lock the email out at another")
	}
	if locked("other@x.example", "10.0.0.1") {
		t.Fatal("one email's failures lock another email out at that address")
	}
	for i := range addrFreeFailures - freeFailures - 1 {
		l.fail(now, string(rune('a'+i))+"@x.example", "10.0.0.1")
	}
	if locked("other@x.example", "10.0.0.1") {
		t.Fatalf("%d failures of an address lock it", addrFreeFailures)
	}
	l.fail(now, "z@x.example", "10.0.0.1")
	if !locked("other@x.example", "10.0.0.1") {
		t.Fatalf("%d failures of an address do not lock it", addrFreeFailures+1)
	}
	l.succeed("owner@x.example", "10.0.0.1")
	if l.wait(now, pairName("owner@x.example", "10.0.0.1")) != 0 {
		t.Fatal("a success does not clear its pair")
	}
}

func TestHashGateBoundsItsSlots(t *testing.T) {
	g := newHashGate(1, 50*time.Millisecond)
	hold, held := make(chan struct{}), make(chan struct{})
	go func() { _ = g.run(context.Background(), func() { close(held); <-hold }) }()
	<-held
	start := time.Now()
	ran := false
	if err := g.run(context.Background(), func() { ran = true }); !errors.Is(err, errHashBusy) || ran {
		t.Fatalf("a full gate: %v (ran %v), want errHashBusy", err, ran)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("a full gate answered after %v, before its wait", d)
	}
	close(hold)
	if err := g.run(context.Background(), func() { ran = true }); err != nil || !ran {
		t.Fatalf("a freed gate: %v (ran %v)", err, ran)
	}
}

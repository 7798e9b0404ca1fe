package challenge_test

import (
	"context"
	"testing"
	"time"

	"github.com/svc/engine/engine/challenge"
)

// A node that has just begun to own an evaluated account checks it against
// the marks it holds (Check), not only at the next quote: a mark through its
// drawdown floor that came while another node owned it wakes it at once.
func TestCheckWakesOnTheMarksHeld(t *testing.T) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	woke := make(chan string, 4)
	r := challenge.NewReactor(func() time.Time { return at }, func(_ context.Context, id string) error { woke <- id; return nil })
	defer r.Close()
	r.Mark("BTC-PERP", dec("65000")) // above the floor: Check wakes nothing
	r.Track("a", enrolled("a", at))
	r.Check("a")
	select {
	case id := <-woke:
		t.Fatalf("%s woken above its floor", id)
	case <-time.After(100 * time.Millisecond):
	}
	r.Mark("BTC-PERP", dec("59000")) // through the 5% daily floor (the account is not woken by a mark alone)
	r.Check("a")
	select {
	case id := <-woke:
		if id != "a" {
			t.Fatalf("woke %s, want a", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Check did not wake the account its held mark takes through its floor")
	}
}

package tradovate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/tradovate"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// The month to trade now is the provider's roll, which moves on before
// the front month expires; an unknown product is NotFound.
func TestFrontIsTheProvidersRoll(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "roller", Kind: "live"})
	rs := e.session(t, tok, acct, nil).(provider.RollSession)
	ctx := context.Background()
	for _, p := range []string{"ES", "ZN"} {
		if got, err := rs.Front(ctx, p); err != nil || got != e.sim.FrontContract(p) {
			t.Fatalf("%s: %q %v, want %q", p, got, err, e.sim.FrontContract(p))
		}
	}
	months := e.sim.Contracts("ES")
	front := e.sim.FrontContract("ES")
	if err := e.sim.SetRollDate(front, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got, err := rs.Front(ctx, "ES")
	if err != nil || got == front {
		t.Fatalf("after the roll: %q %v (months %v)", got, err, months)
	}
	if _, err := rs.Front(ctx, "NOPE"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("unknown product: %v", err)
	}
}

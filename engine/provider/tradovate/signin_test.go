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

// Signing in is limited per login, as the provider limits its access token
// request per user and per address (counting only failures), not per
// application: 64 logins sign in at once at the provider's published
// limits, and one login that signs in again and again waits on its own
// budget while another signs in at once.
func TestSignInBudgetPerLogin(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{MaxSessions: -1}, tradovate.Options{})
	const n = 64
	for i := range n {
		if _, _, err := e.sim.AddLogin(tradovatesim.Login{Name: fmt.Sprint("many", i), Password: password, Kind: "demo"}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := e.p.Login(ctx, fmt.Sprint("many", i), []byte(password)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a sign-in: %v", err)
	}
	d := time.Since(began)
	t.Logf("%d logins signed in in %v", n, d)
	if d > 5*time.Second {
		t.Fatalf("64 logins signed in in %v; the old engine-wide budget (10 a minute) took 6 minutes", d)
	}
	// One login's own budget: 10 in any minute (one spent above).
	for i := range 9 {
		if _, err := e.p.Login(ctx, "many0", []byte(password)); err != nil {
			t.Fatalf("sign-in %d of many0: %v", i, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var rl *provider.RateLimited
	sent := e.sim.RequestCount("auth/accesstokenrequest")
	if _, err := e.p.Login(short, "many0", []byte(password)); !errors.As(err, &rl) || rl.RetryAfter < 50*time.Second || e.sim.RequestCount("auth/accesstokenrequest") != sent {
		t.Fatalf("a login's eleventh sign-in within the minute: %v, want RateLimited (its own budget spent)", err)
	}
	if _, err := e.p.Login(ctx, "many1", []byte(password)); err != nil {
		t.Fatalf("another login meanwhile: %v", err)
	}
}

// The provider's penalty on the token request is the address's: once it
// answers one (five failed sign-ins in the hour), every login's token
// request waits for it or is RateLimited, and none is sent meanwhile.
func TestSignInPenaltyIsTheAddresss(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{MaxSessions: -1, LoginFailures: -1}, tradovate.Options{})
	if _, _, err := e.sim.AddLogin(tradovatesim.Login{Name: "b", Password: password, Kind: "demo"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 5 { // five names, so no login's own budget holds them up
		if _, err := e.p.Login(ctx, fmt.Sprint("nobody", i), []byte("wrong")); !errors.Is(err, provider.ErrUnauthorized) {
			t.Fatalf("wrong password %d: %v", i, err)
		}
	}
	var rl *provider.RateLimited
	if _, err := e.p.Login(ctx, "b", []byte(password)); !errors.As(err, &rl) || rl.RetryAfter < 10*time.Second {
		t.Fatalf("another login after the address's five failures: %v, want RateLimited for the 15 s back-off", err)
	}
	before := e.sim.RequestCount("auth/accesstokenrequest")
	if _, err := e.p.Login(ctx, "b", []byte(password)); !errors.As(err, &rl) {
		t.Fatalf("again within the back-off: %v", err)
	}
	if after := e.sim.RequestCount("auth/accesstokenrequest"); after != before {
		t.Fatalf("%d token requests sent within the back-off", after-before)
	}
}

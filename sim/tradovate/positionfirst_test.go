package tradovate_test

import (
	"testing"
	"time"

	tradovate "github.com/svc/engine/sim/tradovate"
)

// roundTrip buys one ES, moves the price and sells it back with the user
// socket open, and answers where each entity type first went out on it,
// once one of until's type has.
func roundTrip(t *testing.T, e *env, until string) map[string]int {
	t.Helper()
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	e.place(tok, order(acct, "Buy", "ESZ6", 1, "Market", nil))
	if err := e.sim.SetPrice("ESZ6", "5001"); err != nil {
		t.Fatal(err)
	}
	s, _ := e.userSocket(tok)
	e.place(tok, order(acct, "Sell", "ESZ6", 1, "Market", nil))
	at := map[string]int{}
	waitFor(t, 5*time.Second, func() bool {
		for i, p := range s.props() {
			if _, seen := at[p.EntityType]; !seen {
				at[p.EntityType] = i
			}
		}
		_, done := at[until]
		return done
	})
	return at
}

// A fill's position goes out after the fill, its cash after both; with
// PositionBeforeFill the position goes out before the fill, the cash still
// after both.
func TestPositionBeforeFill(t *testing.T) {
	for _, first := range []bool{false, true} {
		at := roundTrip(t, newEnv(t, tradovate.Options{PositionBeforeFill: first}), "cashBalance")
		fill, pos, cash := at["fill"], at["position"], at["cashBalance"]
		if first && !(pos < fill && fill < cash) || !first && !(fill < pos && pos < cash) {
			t.Fatalf("PositionBeforeFill %v: fill at %d, position at %d, cash at %d", first, fill, pos, cash)
		}
	}
}

// Under the balanceFirst socket fault a closing fill's cash balance goes out
// before the fill and its order, and the fill still comes.
func TestBalanceFirst(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	e.sim.SetStreamFaults(tradovate.StreamFaults{BalanceFirst: true})
	at := roundTrip(t, e, "fill")
	if cash, ok := at["cashBalance"]; !ok || cash > at["fill"] {
		t.Fatalf("cash at %d (%v), fill at %d: want the cash first", cash, ok, at["fill"])
	}
}

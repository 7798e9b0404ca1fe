package tradovate_test

import (
	"testing"
	"time"

	tradovate "github.com/svc/engine/sim/tradovate"
)

// A fill's position goes out after the fill, its cash after both; with
// PositionBeforeFill the position goes out before the fill, the cash still
// after both.
func TestPositionBeforeFill(t *testing.T) {
	for _, first := range []bool{false, true} {
		e := newEnv(t, tradovate.Options{PositionBeforeFill: first})
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
			_, cash := at["cashBalance"]
			return cash
		})
		fill, pos, cash := at["fill"], at["position"], at["cashBalance"]
		if first && !(pos < fill && fill < cash) || !first && !(fill < pos && pos < cash) {
			t.Fatalf("PositionBeforeFill %v: fill at %d, position at %d, cash at %d", first, fill, pos, cash)
		}
	}
}

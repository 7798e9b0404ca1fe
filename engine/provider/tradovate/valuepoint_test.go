package tradovate_test

import (
	"context"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/tradovate"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// What the adapter reports of a position and an order carries the
// contract's value per point from the provider's own product (MES: 5, a
// product no catalog of the engine's need list): the stream's fill and
// position, a lookup and the snapshot.
func TestPositionsAndOrdersCarryTheProductsValuePerPoint(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "trader", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	mes := e.sim.FrontContract("MES")
	if err := e.sim.SetPrice(mes, "5000"); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	buy := provider.Order{ClientOrderID: clientID("mes"), Instrument: mes, Side: provider.Buy, Type: provider.Market, Quantity: dec("1")}
	if _, err := s.Place(ctx, buy); err != nil {
		t.Fatal(err)
	}
	five := dec("5")
	u := next(t, evs, 5*time.Second, func(u *provider.OrderUpdate) bool { return u.Execution != nil })
	if u.Order.ValuePerPoint.Cmp(five) != 0 {
		t.Fatalf("the fill's order %+v, want value per point 5", u.Order)
	}
	pos := next(t, evs, 5*time.Second, func(a *provider.AccountUpdate) bool { return len(a.Positions) > 0 })
	if pos.Positions[0].Instrument != mes || pos.Positions[0].ValuePerPoint.Cmp(five) != 0 {
		t.Fatalf("position update %+v, want value per point 5", pos.Positions)
	}
	if got, err := s.Lookup(ctx, mes, buy.ClientOrderID); err != nil || got.ValuePerPoint.Cmp(five) != 0 {
		t.Fatalf("lookup %+v %v", got, err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Positions) != 1 || snap.Positions[0].ValuePerPoint.Cmp(five) != 0 {
		t.Fatalf("snapshot %+v %v", snap, err)
	}
}

package binance_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/adshao/go-binance/v2/common"
	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/binance"
	binancesim "github.com/svc/engine/sim/binance"
)

// connect opens another session on an account already at the simulator:
// one that has met none of its orders.
func (e *env) connect(t testing.TB, key string) provider.Session {
	t.Helper()
	s, err := e.p.Connect(context.Background(), creds(key))
	if err != nil {
		t.Fatalf("connect %s: %v", key, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func stopOrder(id string, side provider.Side, qty, trigger string) provider.Order {
	return provider.Order{ClientOrderID: provider.ClientOrderID("acc", id), Instrument: "BTCUSDT", Side: side,
		Type: provider.Stop, Quantity: d(qty), StopPrice: pd(trigger)}
}

func stopLimitOrder(id string, side provider.Side, qty, trigger, price string) provider.Order {
	return provider.Order{ClientOrderID: provider.ClientOrderID("acc", id), Instrument: "BTCUSDT", Side: side,
		Type: provider.StopLimit, TIF: provider.GTC, Quantity: d(qty), StopPrice: pd(trigger), LimitPrice: pd(price)}
}

// A conditional order goes to the exchange's algo service under the
// engine's derived id as its clientAlgoId, never to the order route (which
// refuses it -4120 since 2025-12-09); it is one working order of the
// snapshot, is read back by that id, and cancels there.
func TestConditionalOrdersGoToTheAlgoService(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	sl, sb := stopOrder("s-1", provider.Sell, "0.01", "59000"), stopLimitOrder("sb-1", provider.Buy, "0.01", "61000", "61100")
	for _, o := range []provider.Order{sl, sb} {
		st, err := s.Place(ctx, o)
		if err != nil || st.Status != provider.StatusWorking || st.ClientOrderID != o.ClientOrderID || st.Type != o.Type ||
			st.StopPrice.Cmp(*o.StopPrice) != 0 || !strings.HasPrefix(st.ProviderOrderID, "algo-") || st.Quantity.Cmp(d("0.01")) != 0 {
			t.Fatalf("Place %s = %+v, %v", o.Type, st, err)
		}
		if n := e.sim.OrdersByClientID("k1", o.ClientOrderID); n != 1 {
			t.Fatalf("the exchange took %d orders of %s", n, o.Type)
		}
	}
	if st, err := s.Lookup(ctx, "BTCUSDT", sb.ClientOrderID); err != nil || st.LimitPrice == nil || st.LimitPrice.Cmp(d("61100")) != 0 ||
		st.TIF != provider.GTC || st.Type != provider.StopLimit {
		t.Fatalf("Lookup of the stop-limit = %+v, %v", st, err)
	}
	if n := e.sim.RequestCount("POST /fapi/v1/order"); n != 0 {
		t.Fatalf("%d conditional orders went to the order route", n)
	}
	open := e.sim.OpenOrders("k1", "BTCUSDT")
	if len(open) != 2 || !open[0].Algo || open[0].ClientOrderID != sl.ClientOrderID || open[0].Type != "STOP_MARKET" ||
		open[1].Type != "STOP" || open[1].Price != "61100.00" {
		t.Fatalf("at the exchange: %+v", open)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Orders) != 2 {
		t.Fatalf("Snapshot orders = %+v, %v", snap.Orders, err)
	}
	st, err := s.Cancel(ctx, "BTCUSDT", sl.ClientOrderID)
	if err != nil || st.Status != provider.StatusCanceled || st.ClientOrderID != sl.ClientOrderID || st.Type != provider.Stop {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	if _, err := s.Cancel(ctx, "BTCUSDT", sl.ClientOrderID); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("a second cancel: %v", err)
	}
	// A session that has not met the order finds it by its id all the same.
	fresh := e.connect(t, "k1")
	if st, err := fresh.Lookup(ctx, "BTCUSDT", sl.ClientOrderID); err != nil || st.Status != provider.StatusCanceled || st.Type != provider.Stop {
		t.Fatalf("Lookup from a new session = %+v, %v", st, err)
	}
	if st, err := fresh.Cancel(ctx, "BTCUSDT", sb.ClientOrderID); err != nil || st.Status != provider.StatusCanceled {
		t.Fatalf("Cancel from a new session = %+v, %v", st, err)
	}
	if open := e.sim.OpenOrders("k1", "BTCUSDT"); len(open) != 0 {
		t.Fatalf("left at the exchange: %+v", open)
	}
	// Whoever sends a conditional type to the order route meets -4120, a
	// rejection for the engine.
	c := futures.NewClient("k1", "secret-of-k1")
	c.BaseURL = e.sim.URL()
	_, err = c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeSell).Type("STOP_MARKET").
		Quantity("0.01").StopPrice("59000").Do(ctx)
	var ae *common.APIError
	if !errors.As(err, &ae) || ae.Code != -4120 {
		t.Fatalf("a stop on the order route: %v", err)
	}
	if _, err := s.Lookup(ctx, "BTCUSDT", provider.ClientOrderID("acc", "never")); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("Lookup of an order never sent: %v", err)
	}
}

// A stop that triggers places a market order under the exchange's own ids;
// the engine sees its stop fill: the stream's updates and the trade are the
// stop's (its client id, its ProviderOrderID), as are the execution history
// and the lookup. Duplicated and reordered stream events change nothing; a
// placed order the stream tells of before the ALGO_UPDATE naming it is
// linked by reading the stop at the algo service.
func TestTriggeredStopFillsAsTheStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults binancesim.StreamFaults
		early  bool // the placed order's first report comes before TRIGGERED
	}{
		{"clean", binancesim.StreamFaults{}, false},
		{"duplicated and reordered", binancesim.StreamFaults{Duplicate: true, Reorder: true}, false},
		{"the placed order before its link", binancesim.StreamFaults{Reorder: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := tc.faults
			e := newEnv(t, binancesim.Options{}, binance.Limits{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := e.link(t, binancesim.Account{APIKey: "k1"})
			evs, err := s.Events(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Place(ctx, market("m-1", provider.Buy, "0.01")); err != nil {
				t.Fatal(err)
			}
			sl := stopOrder("sl", provider.Sell, "0.01", "59000")
			sl.ReduceOnly, sl.MarkTrigger = true, true
			placed, err := s.Place(ctx, sl)
			if err != nil {
				t.Fatal(err)
			}
			waitEvent(t, evs, func(ev provider.Event) bool { // the stop's NEW
				u, ok := ev.(*provider.OrderUpdate)
				return ok && u.Order.ClientOrderID == sl.ClientOrderID
			})
			e.sim.SetStreamFaults(faults)
			if tc.early {
				// One event ahead shifts the reordered pairs: TRIGGERING and
				// this one, then the placed order's NEW and TRIGGERED.
				if err := e.sim.SetLeverage("k1", "BTCUSDT", 10); err != nil {
					t.Fatal(err)
				}
			}
			lookups := e.sim.RequestCount("GET /fapi/v1/algoOrder")
			if err := e.sim.SetMarkPrice("BTCUSDT", "58900"); err != nil {
				t.Fatal(err)
			}
			// Nothing speaks of the placed order under the exchange's own id.
			foreign := func(ev provider.Event) {
				if u, ok := ev.(*provider.OrderUpdate); ok && !provider.Derived(u.Order.ClientOrderID) {
					t.Errorf("an order under the exchange's id: %+v", u.Order)
				}
			}
			u := waitEvent(t, evs, func(ev provider.Event) bool {
				foreign(ev)
				u, ok := ev.(*provider.OrderUpdate)
				return ok && u.Execution != nil && u.Execution.ClientOrderID == sl.ClientOrderID
			}).(*provider.OrderUpdate)
			x := u.Execution
			if u.Order.ClientOrderID != sl.ClientOrderID || u.Order.ProviderOrderID != placed.ProviderOrderID || u.Order.Type != provider.Stop ||
				x.ProviderOrderID != placed.ProviderOrderID || x.Quantity.Cmp(d("0.01")) != 0 || x.Price.Cmp(d("60000")) != 0 ||
				x.Side != provider.Sell || x.Fee.Sign() <= 0 {
				t.Fatalf("the stop's fill: %+v %+v", u.Order, x)
			}
			waitEvent(t, evs, func(ev provider.Event) bool {
				foreign(ev)
				u, ok := ev.(*provider.OrderUpdate)
				return ok && u.Order.ClientOrderID == sl.ClientOrderID && u.Order.Status == provider.StatusFilled &&
					u.Order.FilledQuantity.Cmp(d("0.01")) == 0 && u.Order.StopPrice.Cmp(d("59000")) == 0
			})
			if linked := e.sim.RequestCount("GET /fapi/v1/algoOrder") > lookups; linked != tc.early {
				t.Fatalf("the stop was read at the algo service to link its order: %v", linked)
			}
			e.sim.SetStreamFaults(binancesim.StreamFaults{})
			st, err := s.Lookup(ctx, "BTCUSDT", sl.ClientOrderID)
			if err != nil || st.Status != provider.StatusFilled || st.FilledQuantity.Cmp(d("0.01")) != 0 || st.AveragePrice.Cmp(d("60000")) != 0 {
				t.Fatalf("Lookup = %+v, %v", st, err)
			}
			// The history, read by a session that never met the stop.
			fresh := e.connect(t, "k1")
			ex, _, err := fresh.Executions(ctx, "BTCUSDT", "", 0)
			if err != nil || len(ex) != 2 || ex[0].ClientOrderID != "" || ex[1].ID != x.ID || ex[1].ClientOrderID != sl.ClientOrderID ||
				ex[1].ProviderOrderID != placed.ProviderOrderID {
				t.Fatalf("Executions = %+v, %v", ex, err)
			}
		})
	}
}

// A conditional order whose answer is lost was taken by the exchange: the
// lookup by its clientAlgoId settles it, and nothing is sent again.
func TestLostAlgoAnswerIsSettledByLookup(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	if err := e.sim.AddFault(binancesim.Fault{Route: "POST /fapi/v1/algoOrder", Drop: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	o := stopOrder("drop-1", provider.Buy, "0.01", "61000")
	_, err := s.Place(ctx, o)
	var unk *provider.Unknown
	if !errors.As(err, &unk) || unk.Op != "place" {
		t.Fatalf("Place with the answer dropped: %v", err)
	}
	for _, sess := range []provider.Session{s, e.connect(t, "k1")} {
		st, err := sess.Lookup(ctx, "BTCUSDT", o.ClientOrderID)
		if err != nil || st.Status != provider.StatusWorking || st.ClientOrderID != o.ClientOrderID || st.Type != provider.Stop {
			t.Fatalf("Lookup = %+v, %v", st, err)
		}
	}
	if n, sent := e.sim.OrdersByClientID("k1", o.ClientOrderID), e.sim.RequestCount("POST /fapi/v1/algoOrder"); n != 1 || sent != 1 {
		t.Fatalf("the exchange holds %d orders for the id after %d requests", n, sent)
	}
	// A 5xx on the algo route is an unknown outcome too.
	if err := e.sim.AddFault(binancesim.Fault{Route: "POST /fapi/v1/algoOrder", Status: 503, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, stopOrder("five-1", provider.Buy, "0.01", "61000")); !errors.Is(err, provider.ErrUnknown) {
		t.Fatalf("503 on an algo order: %v", err)
	}
	// The exchange's own refusal is a rejection with its code.
	var rej *provider.Rejected
	if _, err := s.Place(ctx, stopOrder("now-1", provider.Buy, "0.01", "59000")); !errors.As(err, &rej) || rej.Code != -2021 {
		t.Fatalf("a stop that would trigger at once: %v", err)
	}
}

// A triggered stop-limit's limit order rests on the book: it is the
// stop-limit in the snapshot (also of a session that never met it), it is
// changed and canceled through the stop-limit's id, on the order route.
func TestTriggeredStopLimitRestsAsTheStopLimit(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	sb := stopLimitOrder("sb-1", provider.Buy, "0.01", "61000", "60500")
	if _, err := s.Place(ctx, sb); err != nil {
		t.Fatal(err)
	}
	untriggered := provider.Replace{Instrument: "BTCUSDT", ClientOrderID: sb.ClientOrderID, Side: provider.Buy, Quantity: d("0.02"), LimitPrice: d("60400")}
	if _, err := s.Replace(ctx, untriggered); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("Replace of an untriggered stop-limit: %v", err)
	}
	if err := e.sim.SetPrice("BTCUSDT", "61000"); err != nil {
		t.Fatal(err)
	}
	fresh := e.connect(t, "k1")
	for _, sess := range []provider.Session{s, fresh} {
		snap, err := sess.Snapshot(ctx)
		if err != nil || len(snap.Orders) != 1 {
			t.Fatalf("Snapshot orders = %+v, %v", snap.Orders, err)
		}
		if o := snap.Orders[0]; o.ClientOrderID != sb.ClientOrderID || o.Type != provider.StopLimit || o.Status != provider.StatusWorking ||
			o.LimitPrice.Cmp(d("60500")) != 0 || o.StopPrice.Cmp(d("61000")) != 0 {
			t.Fatalf("the resting stop-limit: %+v", o)
		}
	}
	st, err := fresh.Replace(ctx, untriggered)
	if err != nil || st.ClientOrderID != sb.ClientOrderID || st.Quantity.Cmp(d("0.02")) != 0 || st.LimitPrice.Cmp(d("60400")) != 0 ||
		st.Status != provider.StatusWorking {
		t.Fatalf("Replace of the resting stop-limit = %+v, %v", st, err)
	}
	if open := e.sim.OpenOrders("k1", "BTCUSDT"); len(open) != 1 || open[0].Type != "LIMIT" || open[0].Price != "60400.00" || open[0].Quantity != "0.020" {
		t.Fatalf("at the exchange: %+v", open)
	}
	st, err = fresh.Cancel(ctx, "BTCUSDT", sb.ClientOrderID)
	if err != nil || st.Status != provider.StatusCanceled || st.ClientOrderID != sb.ClientOrderID || st.Type != provider.StopLimit {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	if open := e.sim.OpenOrders("k1", "BTCUSDT"); len(open) != 0 {
		t.Fatalf("left at the exchange: %+v", open)
	}
	if st, err := s.Lookup(ctx, "BTCUSDT", sb.ClientOrderID); err != nil || st.Status != provider.StatusCanceled {
		t.Fatalf("Lookup after the cancel = %+v, %v", st, err)
	}
}

// A conditional order the trader placed elsewhere is in the snapshot under
// its own clientAlgoId, as any order placed elsewhere.
func TestOutsideConditionalOrderInTheSnapshot(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	if _, err := e.sim.PlaceOutside("k1", map[string]string{"symbol": "BTCUSDT", "side": "BUY", "type": "STOP_MARKET",
		"quantity": "0.01", "triggerPrice": "62000", "clientAlgoId": "web_stop_1"}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Orders) != 1 || snap.Orders[0].ClientOrderID != "web_stop_1" || snap.Orders[0].Type != provider.Stop ||
		provider.Derived(snap.Orders[0].ClientOrderID) {
		t.Fatalf("Snapshot orders = %+v, %v", snap.Orders, err)
	}
}

package binance_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/sim/binance"
)

// userStream collects what the library's WsUserDataServe delivers.
type userStream struct {
	mu     sync.Mutex
	events []*futures.WsUserDataEvent
	errs   []error
	done   chan struct{}
	stop   chan struct{}
}

func serveUser(t *testing.T, c *futures.Client) *userStream {
	t.Helper()
	key, err := c.NewStartUserStreamService().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return serveUserKey(t, key)
}

func serveUserKey(t *testing.T, key string) *userStream {
	t.Helper()
	u := &userStream{}
	done, stop, err := futures.WsUserDataServe(key, func(e *futures.WsUserDataEvent) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.events = append(u.events, e)
	}, func(err error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.errs = append(u.errs, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	u.done, u.stop = done, stop
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			close(stop)
			<-done
		}
	})
	return u
}

func (u *userStream) snapshot() []*futures.WsUserDataEvent {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*futures.WsUserDataEvent(nil), u.events...)
}

func (u *userStream) count(typ futures.UserDataEventType) int {
	n := 0
	for _, e := range u.snapshot() {
		if e.Event == typ {
			n++
		}
	}
	return n
}

func TestUserStreamDeliversOrderAndAccountUpdates(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	pointStreams(t, sim)
	u := serveUser(t, c)
	_, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeMarket).Quantity("0.005").NewClientOrderID("ws-1").Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if u.count(futures.UserDataEventTypeOrderTradeUpdate) < 2 || u.count(futures.UserDataEventTypeAccountUpdate) < 1 {
			return fmt.Errorf("events so far: %d", len(u.snapshot()))
		}
		return nil
	})
	var trade, acct *futures.WsUserDataEvent
	for _, e := range u.snapshot() {
		if e.Event == futures.UserDataEventTypeOrderTradeUpdate && e.OrderTradeUpdate.ExecutionType == futures.OrderExecutionTypeTrade {
			trade = e
		}
		if e.Event == futures.UserDataEventTypeAccountUpdate {
			acct = e
		}
	}
	if trade == nil || acct == nil {
		t.Fatal("no TRADE or ACCOUNT_UPDATE")
	}
	o := trade.OrderTradeUpdate
	if o.ClientOrderID != "ws-1" || o.Status != futures.OrderStatusTypeFilled || o.LastFilledQty != "0.005" ||
		o.LastFilledPrice != "60000.00" || o.Commission != "0.12000000" || o.CommissionAsset != "USDT" {
		t.Fatalf("trade = %+v", o)
	}
	a := acct.AccountUpdate
	if a.Reason != futures.UserDataEventReasonTypeOrder || len(a.Balances) != 1 || a.Balances[0].Balance != "9999.88000000" ||
		len(a.Positions) != 1 || a.Positions[0].Amount != "0.005" || a.Positions[0].Side != futures.PositionSideTypeBoth {
		t.Fatalf("account update = %+v", a)
	}
}

func TestListenKeyExpires(t *testing.T) {
	sim, c := newSim(t, binance.Options{ListenKeyTTL: 300 * time.Millisecond})
	pointStreams(t, sim)
	key, err := c.NewStartUserStreamService().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u := serveUserKey(t, key)
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end")
	}
	if u.count(futures.UserDataEventTypeListenKeyExpired) != 1 {
		t.Fatalf("events = %+v", u.snapshot())
	}
	err = c.NewKeepaliveUserStreamService().ListenKey(key).Do(context.Background())
	if code := apiCode(t, err); code != -1125 {
		t.Fatalf("keepalive of an expired key: %d, want -1125", code)
	}
	// Kept alive, a key outlives its TTL.
	key2, err := c.NewStartUserStreamService().Do(context.Background())
	if err != nil || key2 == key {
		t.Fatalf("new key %q, %v", key2, err)
	}
	for i := 0; i < 4; i++ {
		time.Sleep(100 * time.Millisecond)
		if err := c.NewKeepaliveUserStreamService().ListenKey(key2).Do(context.Background()); err != nil {
			t.Fatalf("keepalive %d: %v", i, err)
		}
	}
}

func TestMultiAssetsSwitchedOutsideEmitsConfigUpdate(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	pointStreams(t, sim)
	u := serveUser(t, c)
	if err := sim.SetMultiAssetsMode(testKey, true); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetLeverage(testKey, "ETHUSDT", 7); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if n := u.count(futures.UserDataEventTypeAccountConfigUpdate); n != 2 {
			return fmt.Errorf("%d config updates", n)
		}
		return nil
	})
	ev := u.snapshot()
	// The multi-assets event carries "ai":{"j":true}, which the library's struct has no field for:
	// it decodes as ACCOUNT_CONFIG_UPDATE with an empty "ac".
	if ev[0].AccountConfigUpdate.Symbol != "" || ev[1].AccountConfigUpdate.Symbol != "ETHUSDT" || ev[1].AccountConfigUpdate.Leverage != 7 {
		t.Fatalf("events = %+v / %+v", ev[0].AccountConfigUpdate, ev[1].AccountConfigUpdate)
	}
	mode, err := c.NewGetMultiAssetModeService().Do(context.Background())
	if err != nil || !mode.MultiAssetsMargin {
		t.Fatalf("multi-assets mode = %+v, %v", mode, err)
	}
}

func TestHedgeModeSwitchedOutside(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	if err := sim.SetHedgeMode(testKey, true); err != nil {
		t.Fatal(err)
	}
	mode, err := c.NewGetPositionModeService().Do(ctx)
	if err != nil || !mode.DualSidePosition {
		t.Fatalf("position mode = %+v, %v", mode, err)
	}
	// A one-way order (no positionSide) now fails as on the exchange.
	_, err = c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeMarket).Quantity("0.002").Do(ctx)
	if code := apiCode(t, err); code != -4061 {
		t.Fatalf("code = %d, want -4061", code)
	}
	// Hedge-mode orders open LONG and SHORT side by side.
	for _, side := range []futures.PositionSideType{futures.PositionSideTypeLong, futures.PositionSideTypeShort} {
		s := futures.SideTypeBuy
		if side == futures.PositionSideTypeShort {
			s = futures.SideTypeSell
		}
		if _, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(s).PositionSide(side).
			Type(futures.OrderTypeMarket).Quantity("0.002").Do(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pos, err := c.NewGetPositionRiskService().Symbol("BTCUSDT").Do(ctx)
	if err != nil || len(pos) != 2 || pos[0].PositionAmt != "0.002" || pos[1].PositionAmt != "-0.002" {
		t.Fatalf("positions = %+v, %v", pos, err)
	}
	err = c.NewChangePositionModeService().DualSide(false).Do(ctx)
	if code := apiCode(t, err); code != -4068 {
		t.Fatalf("switching back with positions: %d, want -4068", code)
	}
}

func TestMarketStreams(t *testing.T) {
	sim, _ := newSim(t, binance.Options{})
	pointStreams(t, sim)
	marks := make(chan *futures.WsMarkPriceEvent, 16)
	done, stop, err := futures.WsMarkPriceServe("BTCUSDT", func(e *futures.WsMarkPriceEvent) { marks <- e }, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(stop); <-done }()
	books := make(chan *futures.WsBookTickerEvent, 16)
	done2, stop2, err := futures.WsCombinedBookTickerServe([]string{"BTCUSDT", "ETHUSDT"}, func(e *futures.WsBookTickerEvent) { books <- e }, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(stop2); <-done2 }()
	klines := make(chan *futures.WsKlineEvent, 16)
	done3, stop3, err := futures.WsKlineServe("BTCUSDT", "1m", func(e *futures.WsKlineEvent) { klines <- e }, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(stop3); <-done3 }()
	// The dials above returned after the handshake; give the server a moment to register them.
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if err := sim.SetPrice("BTCUSDT", "60100"); err != nil {
			return err
		}
		if len(marks) == 0 || len(books) == 0 || len(klines) == 0 {
			return fmt.Errorf("marks %d books %d klines %d", len(marks), len(books), len(klines))
		}
		return nil
	})
	if m := <-marks; m.Symbol != "BTCUSDT" || m.MarkPrice != "60100.00000000" {
		t.Fatalf("mark = %+v", m)
	}
	if b := <-books; b.Symbol != "BTCUSDT" || b.BestBidPrice != "60100.00" {
		t.Fatalf("book = %+v", b)
	}
	if k := <-klines; k.Kline.Close != "60100.00" || k.Kline.Interval != "1m" {
		t.Fatalf("kline = %+v", k)
	}
}

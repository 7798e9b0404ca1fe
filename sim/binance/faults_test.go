package binance_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	gobinance "github.com/adshao/go-binance/v2"
	"github.com/adshao/go-binance/v2/common"
	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/sim/binance"
)

func TestAcceptThenDrop(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	_, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeLimit).TimeInForce(futures.TimeInForceTypeGTC).Quantity("0.002").
		Price("59000").NewClientOrderID("lost-1").Do(ctx)
	if err == nil {
		t.Fatal("the client saw an answer")
	}
	if common.IsAPIError(err) {
		t.Fatalf("want a transport error, got %v", err)
	}
	o, err := c.NewGetOrderService().Symbol("BTCUSDT").OrigClientOrderID("lost-1").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != futures.OrderStatusTypeNew || o.Price != "59000.00" {
		t.Fatalf("order = %+v", o)
	}
	if n := sim.OrdersByClientID(testKey, "lost-1"); n != 1 {
		t.Fatalf("accepted %d times", n)
	}
}

func TestThrottleThenBan(t *testing.T) {
	sim, c := newSim(t, binance.Options{WeightLimit: 20, BanAfter: 2, BanFor: 30 * time.Second})
	ctx := context.Background()
	var throttled, banned *common.APIError
	for i := 0; i < 20 && banned == nil; i++ {
		_, err := c.NewGetAccountService().Do(ctx) // weight 5
		if err == nil {
			continue
		}
		ae, ok := err.(*common.APIError)
		if !ok {
			t.Fatal(err)
		}
		if ae.Code != -1003 {
			t.Fatalf("code = %d", ae.Code)
		}
		if throttled == nil {
			throttled = ae
		} else if len(ae.Message) > 3 && ae.Message[:3] == "Way" {
			banned = ae
		}
	}
	if throttled == nil || banned == nil {
		t.Fatalf("throttled %v banned %v", throttled, banned)
	}
	// The statuses and Retry-After, read raw.
	req, _ := http.NewRequest(http.MethodGet, sim.URL()+"/fapi/v1/time", nil)
	req.Header.Set("X-MBX-APIKEY", testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	if res.StatusCode != http.StatusTeapot || ra < 25 || ra > 30 || res.Header.Get("X-MBX-USED-WEIGHT-1M") == "" {
		t.Fatalf("status %d Retry-After %q weight %q", res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("X-MBX-USED-WEIGHT-1M"))
	}

	// Injected: one 429 with Retry-After 7 s, then a 418.
	sim.ClearFaults()
	if err := sim.AddFault(binance.Fault{Route: "GET /fapi/v1/ping", Times: 1, Throttle: 7 * time.Second}); err != nil {
		t.Fatal(err)
	}
	res, err = http.Get(sim.URL() + "/fapi/v1/ping")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "7" {
		t.Fatalf("status %d Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	sim.ClearFaults()
	if err := sim.AddFault(binance.Fault{Times: 1, Ban: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	err = c.NewPingService().Do(ctx)
	if code := apiCode(t, err); code != -1003 {
		t.Fatalf("ban code %d", code)
	}
}

func TestServerErrorAndLatency(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	if err := sim.AddFault(binance.Fault{Route: "GET /fapi/v2/account", Times: 1, Status: 503}); err != nil {
		t.Fatal(err)
	}
	_, err := c.NewGetAccountService().Do(ctx)
	if code := apiCode(t, err); code != -1001 {
		t.Fatalf("code %d", code)
	}
	if err := sim.AddFault(binance.Fault{Route: "GET /fapi/v1/time", Times: 1, Latency: 150 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.NewServerTimeService().Do(ctx); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("no latency")
	}
	if sim.RequestCount("GET /fapi/v2/account") != 1 {
		t.Fatalf("requests = %v", sim.Requests())
	}
}

func TestRestartDropsStreamsAndListenKeysKeepsState(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	pointStreams(t, sim)
	ctx := context.Background()
	if _, err := c.NewCreateOrderService().Symbol("SOLUSDT").Side(futures.SideTypeSell).
		Type(futures.OrderTypeMarket).Quantity("3").Do(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := c.NewStartUserStreamService().Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u := serveUserKey(t, key)
	sim.Restart()
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream survived the restart")
	}
	if err := c.NewKeepaliveUserStreamService().ListenKey(key).Do(ctx); apiCode(t, err) != -1125 {
		t.Fatalf("old key kept alive: %v", err)
	}
	if _, _, err := futures.WsUserDataServe(key, func(*futures.WsUserDataEvent) {}, func(error) {}); err == nil {
		t.Fatal("dialed a stream with a key from before the restart")
	}
	pos, err := c.NewGetPositionRiskService().Symbol("SOLUSDT").Do(ctx)
	if err != nil || pos[0].PositionAmt != "-3" {
		t.Fatalf("position after restart = %+v, %v", pos, err)
	}
}

func TestDuplicatedAndReorderedUserEvents(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	pointStreams(t, sim)
	ctx := context.Background()
	u := serveUser(t, c)
	sim.SetStreamFaults(binance.StreamFaults{Duplicate: true})
	if _, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeLimit).TimeInForce(futures.TimeInForceTypeGTC).Quantity("0.002").
		Price("50000").NewClientOrderID("dup-ev").Do(ctx); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if n := u.count(futures.UserDataEventTypeOrderTradeUpdate); n != 2 {
			return fmt.Errorf("%d order updates", n)
		}
		return nil
	})
	sim.SetStreamFaults(binance.StreamFaults{Reorder: true, ReorderHold: time.Second})
	if _, err := c.NewCancelOrderService().Symbol("BTCUSDT").OrigClientOrderID("dup-ev").Do(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeLimit).TimeInForce(futures.TimeInForceTypeGTC).Quantity("0.002").
		Price("50000").NewClientOrderID("after").Do(ctx); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if n := u.count(futures.UserDataEventTypeOrderTradeUpdate); n != 4 {
			return fmt.Errorf("%d order updates", n)
		}
		return nil
	})
	ev := u.snapshot()
	if ev[2].OrderTradeUpdate.ClientOrderID != "after" || ev[3].OrderTradeUpdate.Status != futures.OrderStatusTypeCanceled {
		t.Fatalf("not reordered: %s then %s", ev[2].OrderTradeUpdate.ClientOrderID, ev[3].OrderTradeUpdate.Status)
	}
}

func TestDisconnectStreams(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	pointStreams(t, sim)
	u := serveUser(t, c)
	sim.DisconnectStreams()
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
		t.Fatal("stream not dropped")
	}
	u.mu.Lock()
	n := len(u.errs)
	u.mu.Unlock()
	if n == 0 {
		t.Fatal("the library reported no error for the dropped stream")
	}
	// The listen key outlives the drop: the client reconnects with it.
	key, err := c.NewStartUserStreamService().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u2 := serveUserKey(t, key)
	if _, err := sim.PlaceOutside(testKey, map[string]string{"symbol": "BTCUSDT", "side": "BUY", "type": "MARKET", "quantity": "0.002"}); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		for _, e := range u2.snapshot() {
			if e.Event == futures.UserDataEventTypeOrderTradeUpdate && len(e.OrderTradeUpdate.ClientOrderID) > 4 &&
				e.OrderTradeUpdate.ClientOrderID[:4] == "web_" {
				return nil
			}
		}
		return fmt.Errorf("no outside order event yet")
	})
}

func TestPortfolioMarginAndWithdrawKeys(t *testing.T) {
	sim, _ := newSim(t, binance.Options{})
	if err := sim.AddAccount(binance.Account{APIKey: "pm-key", Secret: "pm-secret", PortfolioMargin: true, CanWithdraw: true}); err != nil {
		t.Fatal(err)
	}
	c := futures.NewClient("pm-key", "pm-secret")
	c.BaseURL = sim.URL()
	_, err := c.NewGetAccountService().Do(context.Background())
	if code := apiCode(t, err); code != -2015 {
		t.Fatalf("portfolio margin account on /fapi: %d, want -2015", code)
	}
	spot := gobinance.NewClient("pm-key", "pm-secret")
	spot.BaseURL = sim.URL()
	perm, err := spot.NewGetAPIKeyPermission().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if perm.EnableFutures || !perm.EnableWithdrawals || !perm.EnableReading {
		t.Fatalf("permissions = %+v", perm)
	}
	spot = gobinance.NewClient(testKey, testSecret)
	spot.BaseURL = sim.URL()
	perm, err = spot.NewGetAPIKeyPermission().Do(context.Background())
	if err != nil || !perm.EnableFutures || perm.EnableWithdrawals {
		t.Fatalf("trading key permissions = %+v, %v", perm, err)
	}
}

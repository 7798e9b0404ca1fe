package binance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adshao/go-binance/v2/common"
	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/sim/binance"
)

const algoOnlyMsg = "Order type not supported for this endpoint. Please use the Algo Order API endpoints instead."

// Conditional types are refused on the order route and in a batch with the exchange's -4120 and
// its sentence; the batch's other orders are placed.
func TestConditionalTypesRefusedOnTheOrderRoutes(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	for _, typ := range []futures.OrderType{"STOP", "STOP_MARKET", "TAKE_PROFIT", "TAKE_PROFIT_MARKET", "TRAILING_STOP_MARKET"} {
		_, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeSell).Type(typ).
			TimeInForce(futures.TimeInForceTypeGTC).Quantity("0.002").Price("58000").StopPrice("59000").Do(ctx)
		var ae *common.APIError
		if !errorsAs(err, &ae) || ae.Code != -4120 || ae.Message != algoOnlyMsg {
			t.Errorf("%s on POST /fapi/v1/order: %v", typ, err)
		}
	}
	batch, _ := json.Marshal([]map[string]string{
		{"symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "timeInForce": "GTC", "quantity": "0.002", "price": "50000", "newClientOrderId": "b-1"},
		{"symbol": "BTCUSDT", "side": "SELL", "type": "STOP_MARKET", "quantity": "0.002", "stopPrice": "59000", "newClientOrderId": "b-2"},
	})
	var got []map[string]any
	if err := json.Unmarshal(raw(t, sim, http.MethodPost, "/fapi/v1/batchOrders", url.Values{"batchOrders": {string(batch)}}), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0]["clientOrderId"] != "b-1" || got[0]["status"] != "NEW" || got[1]["code"] != float64(-4120) || got[1]["msg"] != algoOnlyMsg {
		t.Fatalf("batch answered %v", got)
	}
	if sim.OrdersByClientID(testKey, "b-1") != 1 || sim.OrdersByClientID(testKey, "b-2") != 0 {
		t.Fatal("the batch placed the wrong orders")
	}
}

func errorsAs(err error, ae **common.APIError) bool {
	e, ok := err.(*common.APIError)
	if ok {
		*ae = e
	}
	return ok
}

// A close-position stop goes through the algo service: NEW at placement; the price through its
// trigger places a market order under a new orderId (TRIGGERING, TRIGGERED naming it), which fills
// and closes the position, and the algo order is FINISHED; the user stream tells each step, the
// placed order's own ORDER_TRADE_UPDATE between TRIGGERED and FINISHED.
func TestAlgoStopTriggersAndPlacesAMarketOrder(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	pointStreams(t, sim)
	u := serveUser(t, c)
	ctx := context.Background()
	if _, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeMarket).Quantity("0.004").Do(ctx); err != nil {
		t.Fatal(err)
	}
	placed, err := c.NewCreateAlgoOrderService().Symbol("BTCUSDT").Side(futures.SideTypeSell).
		Type(futures.AlgoOrderTypeStopMarket).TriggerPrice("59000").ClosePosition(true).ClientAlgoId("sl-1").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if placed.AlgoStatus != "NEW" || placed.ClientAlgoId != "sl-1" || placed.AlgoType != futures.OrderAlgoTypeConditional ||
		placed.OrderType != futures.AlgoOrderTypeStopMarket || placed.TriggerPrice != "59000.00" || !placed.ClosePosition {
		t.Fatalf("placed = %+v", placed)
	}
	if open := sim.OpenOrders(testKey, "BTCUSDT"); len(open) != 1 || !open[0].Algo || open[0].ClientOrderID != "sl-1" ||
		open[0].Type != "STOP_MARKET" || open[0].StopPrice != "59000.00" || !open[0].ReduceOnly {
		t.Fatalf("open orders %+v", open)
	}
	if n := sim.OrdersByClientID(testKey, "sl-1"); n != 1 {
		t.Fatalf("OrdersByClientID = %d", n)
	}
	if err := sim.SetPrice("BTCUSDT", "58900"); err != nil {
		t.Fatal(err)
	}
	g, err := c.NewGetAlgoOrderService().ClientAlgoID("sl-1").Do(ctx)
	if err != nil || g.AlgoStatus != "FINISHED" || g.ActualOrderId == "" || g.AlgoId != placed.AlgoId {
		t.Fatalf("algo order = %+v, %v", g, err)
	}
	actual, _ := strconv.ParseInt(g.ActualOrderId, 10, 64)
	o, err := c.NewGetOrderService().Symbol("BTCUSDT").OrderID(actual).Do(ctx)
	if err != nil || o.Status != futures.OrderStatusTypeFilled || o.Type != futures.OrderTypeMarket || o.ExecutedQuantity != "0.004" ||
		o.ClientOrderID == "sl-1" || o.AvgPrice != "58900.00" {
		t.Fatalf("the placed order = %+v, %v", o, err)
	}
	if pos, err := c.NewGetPositionRiskService().Symbol("BTCUSDT").Do(ctx); err != nil || pos[0].PositionAmt != "0.000" {
		t.Fatalf("position = %+v, %v", pos, err)
	}
	if open := sim.OpenOrders(testKey, "BTCUSDT"); len(open) != 0 {
		t.Fatalf("open orders after the trigger %+v", open)
	}
	// The stream: NEW, TRIGGERING, TRIGGERED (ai), the order's NEW and TRADE, FINISHED.
	want := []string{"ALGO NEW", "ALGO TRIGGERING", "ALGO TRIGGERED " + g.ActualOrderId, "ORDER NEW " + g.ActualOrderId,
		"ORDER TRADE " + g.ActualOrderId, "ALGO FINISHED " + g.ActualOrderId}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		var seen []string
		for _, e := range u.snapshot() {
			switch e.Event {
			case futures.UserDataEventTypeAlgoUpdate:
				a := e.AlgoUpdate
				if a.ClientAlgoID != "sl-1" || a.AlgoID != placed.AlgoId {
					return fmt.Errorf("an ALGO_UPDATE of another order: %+v", a)
				}
				seen = append(seen, strings.TrimSpace("ALGO "+a.AlgoStatus+" "+a.OrderID))
			case futures.UserDataEventTypeOrderTradeUpdate:
				if o := e.OrderTradeUpdate; o.ID == actual {
					seen = append(seen, fmt.Sprintf("ORDER %s %d", o.ExecutionType, o.ID))
				}
			}
		}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			return fmt.Errorf("stream %v, want %v", seen, want)
		}
		return nil
	})
	for _, e := range u.snapshot() {
		if e.Event == futures.UserDataEventTypeAlgoUpdate && e.AlgoUpdate.AlgoStatus == "FINISHED" {
			if a := e.AlgoUpdate; a.ExecutedQuantity != "0.004" || a.AvgPrice != "58900.00" || a.ActualOrderType != "MARKET" || a.TriggerTime == 0 {
				t.Fatalf("FINISHED = %+v", a)
			}
		}
	}
}

// A stop-limit (STOP) places a LIMIT order at its price when triggered: one that does not cross
// rests on the book (the algo order TRIGGERED, no longer cancelable as an algo order) and fills
// when the price comes to it (FINISHED).
func TestAlgoStopLimitRestsAsALimitOrder(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	if _, err := c.NewCreateAlgoOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).Type(futures.AlgoOrderTypeStop).
		TriggerPrice("61000").Price("60500").TimeInForce(futures.TimeInForceTypeGTC).Quantity("0.002").ClientAlgoId("sb-1").Do(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetPrice("BTCUSDT", "61000"); err != nil {
		t.Fatal(err)
	}
	g, err := c.NewGetAlgoOrderService().ClientAlgoID("sb-1").Do(ctx)
	if err != nil || g.AlgoStatus != "TRIGGERED" || g.ActualOrderId == "" {
		t.Fatalf("algo order = %+v, %v", g, err)
	}
	open := sim.OpenOrders(testKey, "BTCUSDT")
	if len(open) != 1 || open[0].Algo || open[0].Type != "LIMIT" || open[0].Price != "60500.00" || open[0].ClientOrderID == "sb-1" {
		t.Fatalf("open orders %+v", open)
	}
	if _, err := c.NewCancelAlgoOrderService().ClientAlgoID("sb-1").Do(ctx); apiCode(t, err) != -2011 {
		t.Fatalf("cancel of a triggered algo order: %v", err)
	}
	if err := sim.SetPrice("BTCUSDT", "60500"); err != nil {
		t.Fatal(err)
	}
	if g, err := c.NewGetAlgoOrderService().AlgoID(g.AlgoId).Do(ctx); err != nil || g.AlgoStatus != "FINISHED" {
		t.Fatalf("algo order after the fill = %+v, %v", g, err)
	}
}

// Exit orders as the engine places them: reduce-only STOP_MARKET and TAKE_PROFIT_MARKET algo
// orders with a workingType. One on the mark triggers when the mark reaches it though the last
// price has not (and fills at the last price); one on the contract price ignores the mark. Once
// the position is gone the other reduce-only order expires by itself; one placed with no position
// to reduce is refused.
func TestAlgoExitsTriggerOnTheirWorkingPriceAndExpireWithThePosition(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	if _, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeMarket).Quantity("0.004").Do(ctx); err != nil {
		t.Fatal(err)
	}
	exit := func(cid string, typ futures.AlgoOrderType, trigger string, wt futures.WorkingType) *futures.CreateAlgoOrderService {
		return c.NewCreateAlgoOrderService().Symbol("BTCUSDT").Side(futures.SideTypeSell).Type(typ).Quantity("0.004").
			TriggerPrice(trigger).ReduceOnly(true).WorkingType(wt).ClientAlgoId(cid)
	}
	if _, err := exit("bad-wt", futures.AlgoOrderTypeStopMarket, "59000", "INDEX_PRICE").Do(ctx); apiCode(t, err) != -1130 {
		t.Fatalf("an unknown workingType: %v", err)
	}
	if _, err := exit("tp-m", futures.AlgoOrderTypeTakeProfitMarket, "62000", futures.WorkingTypeMarkPrice).Do(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := exit("sl-c", futures.AlgoOrderTypeStopMarket, "59000", futures.WorkingTypeContractPrice).Do(ctx); err != nil {
		t.Fatal(err)
	}
	status := func(cid string) *futures.GetAlgoOrderResp {
		t.Helper()
		g, err := c.NewGetAlgoOrderService().ClientAlgoID(cid).Do(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if err := sim.SetMarkPrice("BTCUSDT", "58000"); err != nil {
		t.Fatal(err)
	}
	if g := status("sl-c"); g.AlgoStatus != "NEW" || g.WorkingType != futures.WorkingTypeContractPrice {
		t.Fatalf("a contract-price stop under a mark of 58000: %+v", g)
	}
	if open := sim.OpenOrders(testKey, "BTCUSDT"); len(open) != 2 || open[0].ClientOrderID != "tp-m" || open[0].Type != "TAKE_PROFIT_MARKET" ||
		open[0].WorkingType != "MARK_PRICE" || !open[0].ReduceOnly || open[0].StopPrice != "62000.00" || open[1].Type != "STOP_MARKET" {
		t.Fatalf("open orders %+v", open)
	}
	listed, err := c.NewListOpenAlgoOrdersService().Symbol("BTCUSDT").Do(ctx)
	if err != nil || len(listed) != 2 || listed[0].ClientAlgoId != "tp-m" || listed[1].ClientAlgoId != "sl-c" {
		t.Fatalf("open algo orders = %+v, %v", listed, err)
	}
	if err := sim.SetMarkPrice("BTCUSDT", "62100"); err != nil {
		t.Fatal(err)
	}
	tp := status("tp-m")
	if tp.AlgoStatus != "FINISHED" || tp.ActualPrice != "60000.00" {
		t.Fatalf("a mark-price take profit with the mark at 62100: %+v", tp)
	}
	if g := status("sl-c"); g.AlgoStatus != "EXPIRED" || g.ActualOrderId != "" {
		t.Fatalf("a reduce-only stop once the position is gone: %+v", g)
	}
	pos, err := c.NewGetPositionRiskService().Symbol("BTCUSDT").Do(ctx)
	if err != nil || pos[0].PositionAmt != "0.000" {
		t.Fatalf("position = %+v, %v", pos, err)
	}
	if _, err := exit("sl-2", futures.AlgoOrderTypeStopMarket, "50000", futures.WorkingTypeMarkPrice).Do(ctx); apiCode(t, err) != -2022 {
		t.Fatalf("a reduce-only exit with no position: %v", err)
	}
	all, err := c.NewListAllAlgoOrdersService().Symbol("BTCUSDT").Do(ctx)
	if err != nil || len(all) != 2 || all[0].ClientAlgoId != "tp-m" || all[0].ActualOrderId == "" || all[1].AlgoStatus != "EXPIRED" {
		t.Fatalf("all algo orders = %+v, %v", all, err)
	}
}

// The algo service's refusals and its answers for orders it does not know.
func TestAlgoOrderRefusals(t *testing.T) {
	_, c := newSim(t, binance.Options{})
	ctx := context.Background()
	stop := func(cid string) *futures.CreateAlgoOrderService {
		return c.NewCreateAlgoOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).Type(futures.AlgoOrderTypeStopMarket).
			Quantity("0.002").TriggerPrice("61000").ClientAlgoId(cid)
	}
	if _, err := stop("dup-1").Do(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		svc  *futures.CreateAlgoOrderService
		want int64
	}{
		{"duplicate clientAlgoId of an open algo order", stop("dup-1"), -4116},
		{"clientAlgoId with a space", stop("bad id"), -4015},
		{"clientAlgoId over 36 characters", stop(strings.Repeat("a", 37)), -4015},
		{"another algoType", stop("t-1").AlgoType("VP"), -1130},
		{"a type the algo service does not take", stop("t-2").Type("LIMIT"), -1116},
		{"a stop that would trigger", stop("t-3").TriggerPrice("59000"), -2021},
		{"a price on a market trigger", stop("t-4").Price("61500"), -1106},
		{"close-all on a stop-limit", stop("t-5").Type(futures.AlgoOrderTypeStop).Price("61500").ClosePosition(true), -1106},
		{"a stop-limit without a price", stop("t-6").Type(futures.AlgoOrderTypeStop), -1102},
		{"a trigger off the tick", stop("t-7").TriggerPrice("61000.05"), -4014},
		{"notional under the minimum", stop("t-8").Quantity("0.001"), -4164},
		{"unknown symbol", stop("t-9").Symbol("DOGEUSDT"), -1121},
	}
	for _, tc := range cases {
		_, err := tc.svc.Do(ctx)
		if code := apiCode(t, err); code != tc.want {
			t.Errorf("%s: code %d, want %d (%v)", tc.name, code, tc.want, err)
		}
	}
	if _, err := c.NewGetAlgoOrderService().ClientAlgoID("never").Do(ctx); apiCode(t, err) != -2013 {
		t.Fatalf("GET of an unknown clientAlgoId: %v", err)
	}
	if _, err := c.NewGetAlgoOrderService().AlgoID(42).Do(ctx); apiCode(t, err) != -2013 {
		t.Fatalf("GET of an unknown algoId: %v", err)
	}
	if _, err := c.NewCancelAlgoOrderService().ClientAlgoID("never").Do(ctx); apiCode(t, err) != -2011 {
		t.Fatalf("DELETE of an unknown clientAlgoId: %v", err)
	}
	if _, err := c.NewGetAlgoOrderService().Do(ctx); apiCode(t, err) != -1102 {
		t.Fatalf("GET without an id: %v", err)
	}
	// Canceled, the id may be used again; the query answers the latest.
	if res, err := c.NewCancelAlgoOrderService().ClientAlgoID("dup-1").Do(ctx); err != nil || res.ClientAlgoId != "dup-1" || res.Message != "success" {
		t.Fatalf("cancel = %+v, %v", res, err)
	}
	if _, err := c.NewCancelAlgoOrderService().ClientAlgoID("dup-1").Do(ctx); apiCode(t, err) != -2011 {
		t.Fatalf("a second cancel: %v", err)
	}
	again, err := stop("dup-1").Do(ctx)
	if err != nil {
		t.Fatalf("the id again after its order ended: %v", err)
	}
	if g, err := c.NewGetAlgoOrderService().ClientAlgoID("dup-1").Do(ctx); err != nil || g.AlgoId != again.AlgoId || g.AlgoStatus != "NEW" {
		t.Fatalf("the latest = %+v, %v", g, err)
	}
	if err := c.NewCancelAllAlgoOpenOrdersService().Symbol("BTCUSDT").Do(ctx); err != nil {
		t.Fatal(err)
	}
	if open, err := c.NewListOpenAlgoOrdersService().Do(ctx); err != nil || len(open) != 0 {
		t.Fatalf("open after cancel-all: %+v, %v", open, err)
	}
}

// Margin is checked when a conditional order triggers, not when it is placed: one the account
// cannot carry is REJECTED then, and places nothing.
func TestAlgoOrderRejectedAtTrigger(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	pointStreams(t, sim)
	u := serveUser(t, c)
	ctx := context.Background()
	if _, err := c.NewCreateAlgoOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).Type(futures.AlgoOrderTypeStopMarket).
		Quantity("5").TriggerPrice("61000").ClientAlgoId("big-1").Do(ctx); err != nil {
		t.Fatalf("placing a stop beyond the margin: %v", err)
	}
	if err := sim.SetPrice("BTCUSDT", "61000"); err != nil {
		t.Fatal(err)
	}
	if g, err := c.NewGetAlgoOrderService().ClientAlgoID("big-1").Do(ctx); err != nil || g.AlgoStatus != "REJECTED" || g.ActualOrderId != "" {
		t.Fatalf("algo order = %+v, %v", g, err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		for _, e := range u.snapshot() {
			if e.Event == futures.UserDataEventTypeAlgoUpdate && e.AlgoUpdate.AlgoStatus == "REJECTED" && e.AlgoUpdate.FailedReason != "" {
				return nil
			}
		}
		return fmt.Errorf("no REJECTED with a reason among %d events", len(u.snapshot()))
	})
	if u.count(futures.UserDataEventTypeOrderTradeUpdate) != 0 {
		t.Fatal("a rejected algo order placed an order")
	}
}

// The REST faults reach the algo routes: an algo order whose answer is dropped was placed; a 5xx
// on its query is answered without handling; latency holds it.
func TestFaultsOnTheAlgoRoutes(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/algoOrder", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	_, err := c.NewCreateAlgoOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).Type(futures.AlgoOrderTypeStopMarket).
		Quantity("0.002").TriggerPrice("61000").ClientAlgoId("lost-1").Do(ctx)
	if err == nil || common.IsAPIError(err) {
		t.Fatalf("want a transport error, got %v", err)
	}
	if n := sim.OrdersByClientID(testKey, "lost-1"); n != 1 {
		t.Fatalf("accepted %d times", n)
	}
	if err := sim.AddFault(binance.Fault{Route: "GET /fapi/v1/algoOrder", Times: 1, Status: 503, Latency: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := c.NewGetAlgoOrderService().ClientAlgoID("lost-1").Do(ctx); err == nil || time.Since(began) < 100*time.Millisecond {
		t.Fatalf("the 5xx with latency: %v after %s", err, time.Since(began))
	}
	if g, err := c.NewGetAlgoOrderService().ClientAlgoID("lost-1").Do(ctx); err != nil || g.AlgoStatus != "NEW" {
		t.Fatalf("the lookup that settles it = %+v, %v", g, err)
	}
	if n := sim.RequestCount("GET /fapi/v1/algoOrder"); n != 2 {
		t.Fatalf("GET /fapi/v1/algoOrder counted %d", n)
	}
}

// An order the trader places on the exchange's own pages with a conditional type goes to the algo
// service.
func TestPlaceOutsideConditional(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	id, err := sim.PlaceOutside(testKey, map[string]string{"symbol": "btcusdt", "side": "BUY", "type": "TAKE_PROFIT_MARKET",
		"quantity": "0.002", "triggerPrice": "59000"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.NewGetAlgoOrderService().AlgoID(id).Do(context.Background())
	if err != nil || !strings.HasPrefix(g.ClientAlgoId, "web_") || g.OrderType != futures.AlgoOrderTypeTakeProfitMarket || g.AlgoStatus != "NEW" {
		t.Fatalf("outside algo order = %+v, %v", g, err)
	}
}

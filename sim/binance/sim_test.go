package binance_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/adshao/go-binance/v2/common"
	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/sim/binance"
)

const (
	testKey    = "test-key-0001"
	testSecret = "test-secret-0001"
)

// wsBase guards the library's package variables that hold the stream base URLs: tests that dial
// streams set them to their own simulator.
var wsBase sync.Mutex

// newSim starts a simulator with one funded account and a library client pointed at it.
func newSim(t *testing.T, opts binance.Options) (*binance.Sim, *futures.Client) {
	t.Helper()
	sim := binance.New(opts)
	srv := httptest.NewServer(sim)
	sim.SetBaseURL(srv.URL)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		_ = sim.Close()
		srv.Close()
	})
	if err := sim.AddAccount(binance.Account{APIKey: testKey, Secret: testSecret,
		Balances: map[string]string{"USDT": "10000"}}); err != nil {
		t.Fatal(err)
	}
	c := futures.NewClient(testKey, testSecret)
	c.BaseURL = sim.URL()
	return sim, c
}

// pointStreams points the library's stream base URLs at sim for the rest of the test.
func pointStreams(t *testing.T, sim *binance.Sim) {
	t.Helper()
	wsBase.Lock()
	oldWs, oldComb := futures.BaseWsMainUrl, futures.BaseCombinedMainURL
	futures.BaseWsMainUrl = sim.WSURL() + "/ws"
	futures.BaseCombinedMainURL = sim.WSURL() + "/stream?streams="
	t.Cleanup(func() {
		futures.BaseWsMainUrl, futures.BaseCombinedMainURL = oldWs, oldComb
		wsBase.Unlock()
	})
}

func apiCode(t *testing.T, err error) int64 {
	t.Helper()
	var ae *common.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an APIError, got %v", err)
	}
	return ae.Code
}

func TestExchangeInfoFiltersDecode(t *testing.T) {
	_, c := newSim(t, binance.Options{})
	info, err := c.NewExchangeInfoService().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Symbols) != 3 {
		t.Fatalf("symbols = %d, want 3", len(info.Symbols))
	}
	var btc *futures.Symbol
	for i := range info.Symbols {
		if info.Symbols[i].Symbol == "BTCUSDT" {
			btc = &info.Symbols[i]
		}
	}
	if btc == nil {
		t.Fatal("no BTCUSDT")
	}
	if f := btc.PriceFilter(); f == nil || f.TickSize != "0.10" {
		t.Fatalf("price filter = %+v", f)
	}
	if f := btc.LotSizeFilter(); f == nil || f.StepSize != "0.001" || f.MinQuantity != "0.001" {
		t.Fatalf("lot size = %+v", f)
	}
	if f := btc.MinNotionalFilter(); f == nil || f.Notional != "100" {
		t.Fatalf("min notional = %+v", f)
	}
	if btc.ContractType != futures.ContractTypePerpetual || btc.MarginAsset != "USDT" {
		t.Fatalf("symbol = %+v", btc)
	}
}

func TestSignedAccountRead(t *testing.T) {
	_, c := newSim(t, binance.Options{})
	acct, err := c.NewGetAccountService().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if acct.TotalWalletBalance != "10000.00000000" || acct.AvailableBalance != "10000.00000000" {
		t.Fatalf("account = %+v", acct)
	}
	v3, err := c.NewGetAccountV3Service().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(v3.Assets) != 1 || v3.Assets[0].Asset != "USDT" || len(v3.Positions) != 0 {
		t.Fatalf("v3 = %+v", v3)
	}
	bal, err := c.NewGetBalanceService().Do(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(bal) != 1 || bal[0].Balance != "10000.00000000" {
		t.Fatalf("balance = %+v", bal)
	}
}

func TestBadSignatureIsRefused(t *testing.T) {
	sim, _ := newSim(t, binance.Options{})
	c := futures.NewClient(testKey, "another-secret")
	c.BaseURL = sim.URL()
	_, err := c.NewGetAccountService().Do(context.Background())
	if code := apiCode(t, err); code != -1022 {
		t.Fatalf("code = %d, want -1022", code)
	}
	unknown := futures.NewClient("no-such-key", testSecret)
	unknown.BaseURL = sim.URL()
	_, err = unknown.NewGetAccountService().Do(context.Background())
	if code := apiCode(t, err); code != -2015 {
		t.Fatalf("code = %d, want -2015", code)
	}
}

func TestStaleTimestampIsRefused(t *testing.T) {
	_, c := newSim(t, binance.Options{})
	c.TimeOffset = 10_000 // the client's clock runs 10 s behind
	_, err := c.NewGetAccountService().Do(context.Background())
	if code := apiCode(t, err); code != -1021 {
		t.Fatalf("code = %d, want -1021", code)
	}
	_, err = c.NewGetAccountService().Do(context.Background(), futures.WithRecvWindow(20_000))
	if err != nil {
		t.Fatalf("a wider recvWindow admits it: %v", err)
	}
}

func TestMarketOrderFillsAndMovesPositionAndBalance(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	res, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeMarket).Quantity("0.010").NewClientOrderID("mkt-1").
		NewOrderResponseType(futures.NewOrderRespTypeRESULT).Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != futures.OrderStatusTypeFilled || res.AvgPrice != "60000.00" || res.ExecutedQuantity != "0.010" {
		t.Fatalf("order = %+v", res)
	}
	if res.RateLimitOrder1m != "1" {
		t.Fatalf("order count header = %q", res.RateLimitOrder1m)
	}
	pos, err := c.NewGetPositionRiskService().Symbol("BTCUSDT").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pos) != 1 || pos[0].PositionAmt != "0.010" || pos[0].EntryPrice != "60000.00000000" {
		t.Fatalf("position = %+v", pos[0])
	}
	// 600 USDT notional at 0.04% taker: 0.24 fee.
	bal, err := c.NewGetBalanceService().Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bal[0].Balance != "9999.76000000" {
		t.Fatalf("wallet = %s", bal[0].Balance)
	}
	if err := sim.SetPrice("BTCUSDT", "61000"); err != nil {
		t.Fatal(err)
	}
	acct, err := c.NewGetAccountService().Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if acct.TotalUnrealizedProfit != "10.00000000" {
		t.Fatalf("unrealized = %s", acct.TotalUnrealizedProfit)
	}
	// Closing realizes the 10 USDT.
	_, err = c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeSell).
		Type(futures.OrderTypeMarket).Quantity("0.010").ReduceOnly(true).Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trades, err := c.NewListAccountTradeService().Symbol("BTCUSDT").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(trades) != 2 || trades[1].RealizedPnl != "10.00000000" {
		t.Fatalf("trades = %+v", trades)
	}
	if sim.OrdersByClientID(testKey, "mkt-1") != 1 {
		t.Fatal("mkt-1 not counted once")
	}
}

func TestLimitRestsThenFillsWhenPriceCrosses(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	res, err := c.NewCreateOrderService().Symbol("ETHUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeLimit).TimeInForce(futures.TimeInForceTypeGTC).Quantity("1").
		Price("2900").NewClientOrderID("lim-1").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != futures.OrderStatusTypeNew {
		t.Fatalf("status = %s", res.Status)
	}
	open, err := c.NewListOpenOrdersService().Symbol("ETHUSDT").Do(ctx)
	if err != nil || len(open) != 1 {
		t.Fatalf("open = %v, %v", open, err)
	}
	if err := sim.SetPrice("ETHUSDT", "2950"); err != nil {
		t.Fatal(err)
	}
	o, err := c.NewGetOrderService().Symbol("ETHUSDT").OrigClientOrderID("lim-1").Do(ctx)
	if err != nil || o.Status != futures.OrderStatusTypeNew {
		t.Fatalf("before the cross: %+v, %v", o, err)
	}
	if err := sim.SetPrice("ETHUSDT", "2899.5"); err != nil {
		t.Fatal(err)
	}
	o, err = c.NewGetOrderService().Symbol("ETHUSDT").OrderID(res.OrderID).Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != futures.OrderStatusTypeFilled || o.AvgPrice != "2900.00" || o.ClientOrderID != "lim-1" {
		t.Fatalf("after the cross: %+v", o)
	}
}

func TestCancelAndQueryByClientID(t *testing.T) {
	_, c := newSim(t, binance.Options{})
	ctx := context.Background()
	_, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeSell).
		Type(futures.OrderTypeLimit).TimeInForce(futures.TimeInForceTypeGTC).Quantity("0.002").
		Price("65000").NewClientOrderID("cx-1").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel, err := c.NewCancelOrderService().Symbol("BTCUSDT").OrigClientOrderID("cx-1").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cancel.Status != futures.OrderStatusTypeCanceled {
		t.Fatalf("cancel = %+v", cancel)
	}
	_, err = c.NewCancelOrderService().Symbol("BTCUSDT").OrigClientOrderID("cx-1").Do(ctx)
	if code := apiCode(t, err); code != -2011 {
		t.Fatalf("second cancel code = %d, want -2011", code)
	}
	o, err := c.NewGetOrderService().Symbol("BTCUSDT").OrigClientOrderID("cx-1").Do(ctx)
	if err != nil || o.Status != futures.OrderStatusTypeCanceled {
		t.Fatalf("query = %+v, %v", o, err)
	}
	_, err = c.NewGetOrderService().Symbol("BTCUSDT").OrigClientOrderID("never-sent").Do(ctx)
	if code := apiCode(t, err); code != -2013 {
		t.Fatalf("unknown query code = %d, want -2013", code)
	}
}

func TestOrderRefusals(t *testing.T) {
	_, c := newSim(t, binance.Options{})
	ctx := context.Background()
	limit := func(cid, qty, price string) *futures.CreateOrderService {
		return c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
			Type(futures.OrderTypeLimit).TimeInForce(futures.TimeInForceTypeGTC).Quantity(qty).
			Price(price).NewClientOrderID(cid)
	}
	if _, err := limit("dup-1", "0.002", "50000").Do(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		svc  *futures.CreateOrderService
		want int64
	}{
		{"duplicate client id of an open order", limit("dup-1", "0.002", "50000"), -4116},
		{"client id with a space", limit("bad id", "0.002", "50000"), -4015},
		{"quantity finer than the lot", limit("p-1", "0.0021", "50000"), -1111},
		{"price finer than its precision", limit("p-2", "0.002", "50000.001"), -1111},
		{"price off the tick", limit("p-2", "0.002", "50000.05"), -4014},
		{"notional under the minimum", limit("p-3", "0.001", "50000"), -4164},
		{"margin insufficient", limit("p-4", "5", "50000"), -2019},
		{"position side in one-way mode", limit("p-5", "0.002", "50000").PositionSide(futures.PositionSideTypeLong), -4061},
		{"unknown symbol", limit("p-6", "0.002", "50000").Symbol("DOGEUSDT"), -1121},
		{"a conditional type on the order route", c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeSell).
			Type("STOP_MARKET").Quantity("0.002").StopPrice("59000"), -4120},
	}
	for _, tc := range cases {
		_, err := tc.svc.Do(ctx)
		if code := apiCode(t, err); code != tc.want {
			t.Errorf("%s: code %d, want %d (%v)", tc.name, code, tc.want, err)
		}
	}
}

func TestModifyLimitOrder(t *testing.T) {
	sim, c := newSim(t, binance.Options{})
	ctx := context.Background()
	lim, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).
		Type(futures.OrderTypeLimit).TimeInForce(futures.TimeInForceTypeGTC).Quantity("0.002").
		Price("55000").NewClientOrderID("mod-1").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := c.NewModifyOrderService().Symbol("BTCUSDT").OrderID(lim.OrderID).Side(futures.SideTypeBuy).
		Quantity("0.003").Price("56000").Do(ctx)
	if err != nil || mod.OriginalQuantity != "0.003" || mod.Price != "56000.00" {
		t.Fatalf("modify = %+v, %v", mod, err)
	}
	if err := sim.SetPrice("BTCUSDT", "56000"); err != nil {
		t.Fatal(err)
	}
	o, err := c.NewGetOrderService().Symbol("BTCUSDT").OrigClientOrderID("mod-1").Do(ctx)
	if err != nil || o.Status != futures.OrderStatusTypeFilled || o.ExecutedQuantity != "0.003" {
		t.Fatalf("modified limit = %+v, %v", o, err)
	}
}

package binance_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adshao/go-binance/v2/futures"
	"github.com/coder/websocket"

	"github.com/svc/engine/sim/binance"
	"github.com/svc/engine/sim/internal/simtest"
)

// librarySample reads the first JSON literal (data := []byte(`...`)) of a test function in the
// go-binance module's own futures tests, from the module cache.
func librarySample(t *testing.T, file, fn string) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/adshao/go-binance/v2").Output()
	if err != nil {
		t.Fatalf("locating go-binance: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "futures", file))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	i := strings.Index(text, ") "+fn+"(")
	if i < 0 {
		t.Fatalf("%s: no %s", file, fn)
	}
	j := strings.Index(text[i:], "[]byte(`")
	if j < 0 {
		t.Fatalf("%s: %s has no sample", file, fn)
	}
	start := i + j + len("[]byte(`")
	end := strings.Index(text[start:], "`")
	return []byte(text[start : start+end])
}

// raw sends a signed request as the library would and returns the body.
func raw(t *testing.T, sim *binance.Sim, method, path string, p url.Values) []byte {
	t.Helper()
	if p == nil {
		p = url.Values{}
	}
	p.Set("timestamp", strconv.FormatInt(time.Now().UnixMilli(), 10))
	q := p.Encode()
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write([]byte(q))
	req, err := http.NewRequest(method, sim.URL()+path+"?"+q+"&signature="+hex.EncodeToString(mac.Sum(nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-MBX-APIKEY", testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return b
}

// TestAnswersMatchLibrarySamples holds the simulator's answers to the response samples in
// go-binance's own futures tests: every key of the sample is present with the same JSON kind, and
// both decode into the library's type. Checked samples: order_service_test.go TestCreateOrder,
// TestGetOrder, TestCancelOrder; account_service_test.go TestGetAccount, TestGetAccountV3,
// TestGetBalance; position_risk_test.go TestGetPositionRiskV2, TestGetPositionRisk (v3); mark_price_test.go
// TestGetPremiumIndex; ticker_service_test.go TestListBookTickers; exchange_info_service_test.go
// TestExchangeInfo; position_service_test.go TestGetPositionMode, TestGetMultiAssetMode;
// trade_service_test.go TestAccountTradeList; user_stream_service_test.go TestStartUserStream;
// algo_order_service_test.go TestCreateAlgoOrderService, TestGetAlgoOrderService,
// TestGetOpenAlgoOrdersService, TestGetAllAlgoOrdersService, TestCancelAlgoOrderService,
// TestCancelAllAlgoOpenOrdersService; websocket_service_test.go TestWsUserDataServeOrderTradeUpdate,
// TestWsUserDataServeAccountUpdate, TestWsUserDataServeAccountConfigUpdate,
// TestWsUserDataServeAlgoUpdate, TestWsUserDataServeStreamExpired, testMarkPriceServe,
// TestBookTickerServe, TestKlineServe.
func TestAnswersMatchLibrarySamples(t *testing.T) {
	sim, c := newSim(t, binance.Options{ListenKeyTTL: 2 * time.Second})
	ctx := context.Background()
	// Trailing-stop-only fields the simulator does not offer.
	trailing := map[string]bool{"activatePrice": true, "priceRate": true, "AP": true, "cr": false}

	check := func(file, fn string, ours []byte, typ any, skip map[string]bool) {
		t.Helper()
		sample := librarySample(t, file, fn)
		simtest.Shape{Skip: skip}.SameShape(t, fn, simtest.DecodeAny(t, sample), simtest.DecodeAny(t, ours))
		for _, b := range [][]byte{sample, ours} {
			v := reflect.New(reflect.TypeOf(typ)).Interface()
			if err := json.Unmarshal(b, v); err != nil {
				t.Errorf("%s: decoding into %T: %v", fn, typ, err)
			}
		}
	}

	key, err := c.NewStartUserStreamService().Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.Dial(ctx, sim.WSURL()+"/ws/"+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	market, _, err := websocket.Dial(ctx, sim.WSURL()+"/stream?streams=btcusdt@markPrice/btcusdt@bookTicker/btcusdt@kline_1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer market.CloseNow()

	placed := raw(t, sim, http.MethodPost, "/fapi/v1/order", url.Values{"symbol": {"BTCUSDT"}, "side": {"SELL"},
		"type": {"LIMIT"}, "timeInForce": {"GTC"}, "quantity": {"0.010"}, "price": {"70000"},
		"newClientOrderId": {"sample-1"}, "newOrderRespType": {"RESULT"}})
	check("order_service_test.go", "TestCreateOrder", placed, futures.CreateOrderResponse{}, trailing)
	got := raw(t, sim, http.MethodGet, "/fapi/v1/order", url.Values{"symbol": {"BTCUSDT"}, "origClientOrderId": {"sample-1"}})
	check("order_service_test.go", "TestGetOrder", got, futures.Order{}, trailing)
	canceled := raw(t, sim, http.MethodDelete, "/fapi/v1/order", url.Values{"symbol": {"BTCUSDT"}, "origClientOrderId": {"sample-1"}})
	check("order_service_test.go", "TestCancelOrder", canceled, futures.CancelOrderResponse{}, trailing)

	if _, err := c.NewCreateOrderService().Symbol("BTCUSDT").Side(futures.SideTypeBuy).Type(futures.OrderTypeMarket).
		Quantity("0.010").Do(ctx); err != nil {
		t.Fatal(err)
	}
	check("account_service_test.go", "TestGetAccount", raw(t, sim, http.MethodGet, "/fapi/v2/account", nil), futures.Account{}, nil)
	check("account_service_test.go", "TestGetAccountV3", raw(t, sim, http.MethodGet, "/fapi/v3/account", nil), futures.AccountV3{}, nil)
	check("account_service_test.go", "TestGetBalance", raw(t, sim, http.MethodGet, "/fapi/v3/balance", nil), []futures.Balance{}, nil)
	check("position_risk_test.go", "TestGetPositionRiskV2", raw(t, sim, http.MethodGet, "/fapi/v2/positionRisk", nil), []futures.PositionRisk{}, nil)
	check("position_risk_test.go", "TestGetPositionRisk", raw(t, sim, http.MethodGet, "/fapi/v3/positionRisk", nil), []futures.PositionRiskV3{}, nil)
	check("mark_price_test.go", "TestGetPremiumIndex", raw(t, sim, http.MethodGet, "/fapi/v1/premiumIndex", nil), []futures.PremiumIndex{}, nil)
	check("ticker_service_test.go", "TestListBookTickers", raw(t, sim, http.MethodGet, "/fapi/v1/ticker/bookTicker", nil), []futures.BookTicker{}, nil)
	check("exchange_info_service_test.go", "TestExchangeInfo", raw(t, sim, http.MethodGet, "/fapi/v1/exchangeInfo", nil), futures.ExchangeInfo{}, nil)
	check("position_service_test.go", "TestGetPositionMode", raw(t, sim, http.MethodGet, "/fapi/v1/positionSide/dual", nil), futures.PositionMode{}, nil)
	check("position_service_test.go", "TestGetMultiAssetMode", raw(t, sim, http.MethodGet, "/fapi/v1/multiAssetsMargin", nil), futures.MultiAssetMode{}, nil)
	check("trade_service_test.go", "TestAccountTradeList", raw(t, sim, http.MethodGet, "/fapi/v1/userTrades", url.Values{"symbol": {"BTCUSDT"}}), []futures.AccountTrade{}, nil)
	check("user_stream_service_test.go", "TestStartUserStream", raw(t, sim, http.MethodPost, "/fapi/v1/listenKey", nil), struct {
		ListenKey string `json:"listenKey"`
	}{}, nil)

	algo := url.Values{"algoType": {"CONDITIONAL"}, "symbol": {"BTCUSDT"}, "side": {"SELL"}, "type": {"TAKE_PROFIT"},
		"timeInForce": {"GTC"}, "quantity": {"0.010"}, "price": {"75000"}, "triggerPrice": {"75000"}, "clientAlgoId": {"sample-algo-1"}}
	check("algo_order_service_test.go", "TestCreateAlgoOrderService", raw(t, sim, http.MethodPost, "/fapi/v1/algoOrder", algo),
		futures.CreateAlgoOrderResp{}, nil)
	check("algo_order_service_test.go", "TestGetAlgoOrderService", raw(t, sim, http.MethodGet, "/fapi/v1/algoOrder",
		url.Values{"clientAlgoId": {"sample-algo-1"}}), futures.GetAlgoOrderResp{}, nil)
	check("algo_order_service_test.go", "TestGetOpenAlgoOrdersService", raw(t, sim, http.MethodGet, "/fapi/v1/openAlgoOrders", nil),
		[]futures.GetAlgoOrderResp{}, nil)
	check("algo_order_service_test.go", "TestGetAllAlgoOrdersService", raw(t, sim, http.MethodGet, "/fapi/v1/allAlgoOrders",
		url.Values{"symbol": {"BTCUSDT"}}), []futures.GetAlgoOrderResp{}, nil)
	check("algo_order_service_test.go", "TestCancelAlgoOrderService", raw(t, sim, http.MethodDelete, "/fapi/v1/algoOrder",
		url.Values{"clientAlgoId": {"sample-algo-1"}}), futures.CancelAlgoOrderResp{}, nil)
	check("algo_order_service_test.go", "TestCancelAllAlgoOpenOrdersService", raw(t, sim, http.MethodDelete, "/fapi/v1/algoOpenOrders",
		url.Values{"symbol": {"BTCUSDT"}}), futures.CancelAllAlgoOpenOrdersResp{}, nil)

	if err := sim.SetLeverage(testKey, "BTCUSDT", 25); err != nil {
		t.Fatal(err)
	}
	events := map[string][]byte{}
	readCtx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	for len(events) < 5 { // ORDER_TRADE_UPDATE, ACCOUNT_UPDATE, ALGO_UPDATE, ACCOUNT_CONFIG_UPDATE, then expiry
		_, msg, err := ws.Read(readCtx)
		if err != nil {
			t.Fatalf("user stream: %v (have %d kinds)", err, len(events))
		}
		var head struct {
			E string `json:"e"`
			O struct {
				X string `json:"x"`
			} `json:"o"`
		}
		_ = json.Unmarshal(msg, &head)
		if head.E == "ORDER_TRADE_UPDATE" && head.O.X != "TRADE" {
			continue
		}
		events[head.E] = msg
	}
	check("websocket_service_test.go", "TestWsUserDataServeOrderTradeUpdate", events["ORDER_TRADE_UPDATE"], futures.WsUserDataEvent{}, map[string]bool{"AP": true, "cr": true})
	check("websocket_service_test.go", "TestWsUserDataServeAccountUpdate", events["ACCOUNT_UPDATE"], futures.WsUserDataEvent{}, nil)
	check("websocket_service_test.go", "TestWsUserDataServeAccountConfigUpdate", events["ACCOUNT_CONFIG_UPDATE"], futures.WsUserDataEvent{}, nil)
	check("websocket_service_test.go", "TestWsUserDataServeAlgoUpdate", events["ALGO_UPDATE"], futures.WsUserDataEvent{}, nil)
	check("websocket_service_test.go", "TestWsUserDataServeStreamExpired", events["listenKeyExpired"], futures.WsUserDataEvent{}, nil)

	if err := sim.SetPrice("BTCUSDT", "60500"); err != nil {
		t.Fatal(err)
	}
	streams := map[string][]byte{}
	for len(streams) < 3 {
		_, msg, err := market.Read(readCtx)
		if err != nil {
			t.Fatalf("market stream: %v", err)
		}
		var env struct {
			Stream string          `json:"stream"`
			Data   json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(msg, &env); err != nil || env.Stream == "" {
			t.Fatalf("combined frame %s", msg)
		}
		streams[strings.SplitN(env.Stream, "@", 2)[1]] = env.Data
	}
	check("websocket_service_test.go", "testMarkPriceServe", streams["markprice"], futures.WsMarkPriceEvent{}, nil)
	check("websocket_service_test.go", "TestBookTickerServe", streams["bookticker"], futures.WsBookTickerEvent{}, nil)
	check("websocket_service_test.go", "TestKlineServe", streams["kline_1m"], futures.WsKlineEvent{}, nil)
}

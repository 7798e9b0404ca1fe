package tradovate_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svc/engine/sim/tradovate"
)

func order(acct int64, action, symbol string, qty int, typ string, extra map[string]any) map[string]any {
	m := map[string]any{"accountSpec": "", "accountId": acct, "action": action, "symbol": symbol, "orderQty": qty,
		"orderType": typ, "isAutomated": true}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestMarketOrderFillsAndMovesPositionAndCash(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	ans := e.place(tok, order(acct, "Buy", "ESZ6", 2, "Market", map[string]any{"clOrdId": "c-1", "text": "tag-1"}))
	id := ans["orderId"]
	if id == nil || ans["failureReason"] != nil {
		t.Fatalf("place = %v", ans)
	}
	if st := e.orderStatus(tok, id); st != "Filled" {
		t.Fatalf("status %s", st)
	}
	fills := e.list(tok, "fill/deps?masterid="+idText(id))
	if len(fills) != 1 || fills[0]["qty"] != float64(2) || fills[0]["price"] != float64(5000) || fills[0]["action"] != "Buy" {
		t.Fatalf("fills = %v", fills)
	}
	if err := e.sim.SetPrice("ESZ6", "5010.25"); err != nil {
		t.Fatal(err)
	}
	// Open P&L: (5010.25 - 5000) × 2 × 50 = 1025.
	st, b := e.call(tok, "cashBalance/getcashbalancesnapshot", map[string]any{"accountId": acct})
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, b)
	}
	if got := numText(t, b, "openPnL"); got != "1025" {
		t.Fatalf("openPnL = %s in %s", got, b)
	}
	if got := numText(t, b, "netLiq"); got != "101025" {
		t.Fatalf("netLiq = %s in %s", got, b)
	}
	if strings.Contains(string(b), "realizedPnL") {
		t.Fatalf("realizedPnL without a closed trade: %s", b)
	}
	// Sell 2 at 5010.25: realized 1025 into the cash balance, position flat, one fill pair.
	e.place(tok, order(acct, "Sell", "ESZ6", 2, "Market", nil))
	st, b = e.call(tok, "cashBalance/getcashbalancesnapshot", map[string]any{"accountId": acct})
	if got := numText(t, b, "totalCashValue"); got != "101025" {
		t.Fatalf("totalCashValue = %s in %s", got, b)
	}
	if got := numText(t, b, "realizedPnL"); got != "1025" {
		t.Fatalf("realizedPnL = %s in %s", got, b)
	}
	if strings.Contains(string(b), "openPnL") {
		t.Fatalf("openPnL while flat: %s", b)
	}
	pos := e.list(tok, "position/list")
	if len(pos) != 1 || pos[0]["netPos"] != float64(0) || pos[0]["bought"] != float64(2) || pos[0]["sold"] != float64(2) {
		t.Fatalf("positions = %v", pos)
	}
	pairs := e.list(tok, "fillPair/list")
	if len(pairs) != 1 || pairs[0]["qty"] != float64(2) || pairs[0]["buyPrice"] != float64(5000) || pairs[0]["sellPrice"] != 5010.25 {
		t.Fatalf("fill pairs = %v", pairs)
	}
	cash := e.list(tok, "cashBalance/list")
	if len(cash) != 1 || cash[0]["amount"] != float64(101025) {
		t.Fatalf("cash balances = %v", cash)
	}
	// The clOrdId sits on the order's New command; the text on its version.
	cmds := e.list(tok, "command/deps?masterid="+idText(id))
	if len(cmds) != 1 || cmds[0]["clOrdId"] != "c-1" || cmds[0]["commandType"] != "New" || cmds[0]["isAutomated"] != true {
		t.Fatalf("commands = %v", cmds)
	}
	vers := e.list(tok, "orderVersion/deps?masterid="+idText(id))
	if len(vers) != 1 || vers[0]["text"] != "tag-1" || vers[0]["orderQty"] != float64(2) || vers[0]["orderType"] != "Market" {
		t.Fatalf("versions = %v", vers)
	}
	if n := e.sim.OrdersByClOrdID(liveAcct, "c-1"); n != 1 {
		t.Fatalf("OrdersByClOrdID = %d", n)
	}
	if n := e.sim.OrdersByText(liveAcct, "tag-1"); n != 1 {
		t.Fatalf("OrdersByText = %d", n)
	}
}

func TestLimitRestsThenFillsAtItsPrice(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	id := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4990.5, "timeInForce": "GTC"}))["orderId"]
	if st := e.orderStatus(tok, id); st != "Working" {
		t.Fatalf("status %s", st)
	}
	must(t, e.sim.SetPrice("ESZ6", "4995"))
	if st := e.orderStatus(tok, id); st != "Working" {
		t.Fatalf("filled above its limit: %s", st)
	}
	must(t, e.sim.SetPrice("ESZ6", "4980")) // gaps through: a resting order fills at its own price
	fills := e.list(tok, "fill/list")
	if len(fills) != 1 || fills[0]["price"] != 4990.5 {
		t.Fatalf("fills = %v", fills)
	}
	// A limit that crosses at placement fills at the market.
	e.place(tok, order(acct, "Sell", "ESZ6", 1, "Limit", map[string]any{"price": 4970}))
	if fills := e.list(tok, "fill/list"); len(fills) != 2 || fills[1]["price"] != float64(4980) {
		t.Fatalf("fills = %v", fills)
	}
}

func TestStopTriggersAndStopThroughMarketIsRejected(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	stop := e.place(tok, order(acct, "Sell", "ESZ6", 1, "Stop", map[string]any{"stopPrice": 4990}))["orderId"]
	stopLimit := e.place(tok, order(acct, "Sell", "ESZ6", 1, "StopLimit", map[string]any{"stopPrice": 4990, "price": 4989}))["orderId"]
	must(t, e.sim.SetPrice("ESZ6", "4989.75"))
	if st := e.orderStatus(tok, stop); st != "Filled" {
		t.Fatalf("stop: %s", st)
	}
	if st := e.orderStatus(tok, stopLimit); st != "Filled" {
		t.Fatalf("stop limit: %s", st)
	}
	// A buy stop at or below the market is accepted and then rejected by the exchange.
	bad := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Stop", map[string]any{"stopPrice": 4980}))
	if bad["orderId"] == nil {
		t.Fatalf("place = %v", bad)
	}
	if st := e.orderStatus(tok, bad["orderId"]); st != "Rejected" {
		t.Fatalf("stop through the market: %s", st)
	}
	cmds := e.list(tok, "command/deps?masterid="+idText(bad["orderId"]))
	reports := e.list(tok, "commandReport/deps?masterid="+idText(cmds[0]["id"]))
	execs := e.list(tok, "executionReport/deps?masterid="+idText(cmds[0]["id"]))
	if len(reports) != 1 || reports[0]["commandStatus"] != "ExecutionRejected" || reports[0]["rejectReason"] != "InvalidPrice" {
		t.Fatalf("command reports = %v", reports)
	}
	if len(execs) != 1 || execs[0]["execType"] != "Rejected" || execs[0]["ordStatus"] != "Rejected" {
		t.Fatalf("execution reports = %v", execs)
	}
}

func TestModifyAndCancel(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	id := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900}))["orderId"]
	mod := e.ok(tok, "order/modifyorder", map[string]any{"orderId": id, "orderQty": 3, "orderType": "Limit", "price": 4950.25, "isAutomated": true})
	if mod["commandId"] == nil {
		t.Fatalf("modify = %v", mod)
	}
	vers := e.list(tok, "orderVersion/deps?masterid="+idText(id))
	if len(vers) != 2 || vers[1]["price"] != 4950.25 || vers[1]["orderQty"] != float64(3) {
		t.Fatalf("versions = %v", vers)
	}
	// A price off the tick is refused at the request.
	if ans := e.ok(tok, "order/modifyorder", map[string]any{"orderId": id, "orderQty": 3, "orderType": "Limit", "price": 4950.1}); ans["failureReason"] != "InvalidPrice" {
		t.Fatalf("off-tick modify = %v", ans)
	}
	can := e.ok(tok, "order/cancelorder", map[string]any{"orderId": id, "isAutomated": true})
	if can["commandId"] == nil || e.orderStatus(tok, id) != "Canceled" {
		t.Fatalf("cancel = %v", can)
	}
	// Canceling or modifying an order no longer working is too late.
	if ans := e.ok(tok, "order/cancelorder", map[string]any{"orderId": id}); ans["failureReason"] != "TooLate" || ans["commandId"] != nil {
		t.Fatalf("second cancel = %v", ans)
	}
	if ans := e.ok(tok, "order/modifyorder", map[string]any{"orderId": id, "orderQty": 1, "orderType": "Limit", "price": 4900}); ans["failureReason"] != "TooLate" {
		t.Fatalf("modify of a canceled order = %v", ans)
	}
	// Another login's order is not to be touched.
	other := e.token(plainLogin)
	if ans := e.ok(other, "order/cancelorder", map[string]any{"orderId": id}); ans["failureText"] != "Access is denied" {
		t.Fatalf("foreign cancel = %v", ans)
	}
	if st, _ := e.call(other, "order/item?id="+idText(id), nil); st != http.StatusNotFound {
		t.Fatalf("foreign order visible: %d", st)
	}
}

func TestPlacementFailures(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	for _, c := range []struct {
		name   string
		body   map[string]any
		reason string
	}{
		{"unknown symbol", order(acct, "Buy", "ESX9", 1, "Market", nil), "InvalidContract"},
		{"product name is not a contract", order(acct, "Buy", "ES", 1, "Market", nil), "InvalidContract"},
		{"limit without price", order(acct, "Buy", "ESZ6", 1, "Limit", nil), "InvalidPrice"},
		{"off the tick", order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4999.9}), "InvalidPrice"},
		{"ZN off the 64th", order(acct, "Buy", "ZNZ6", 1, "Limit", map[string]any{"price": 110.51}), "InvalidPrice"},
		{"zero quantity", order(acct, "Buy", "ESZ6", 0, "Market", nil), "UnknownReason"},
		{"trailing stop", order(acct, "Buy", "ESZ6", 1, "TrailingStop", nil), "Unsupported"},
		{"good till date", order(acct, "Buy", "ESZ6", 1, "Market", map[string]any{"timeInForce": "GTD"}), "Unsupported"},
		{"another login's account", order(e.ids[demoAcct], "Buy", "ESZ6", 1, "Market", nil), "UnknownReason"},
	} {
		ans := e.place(tok, c.body)
		if ans["failureReason"] != c.reason || ans["failureText"] == "" || ans["orderId"] != nil {
			t.Errorf("%s: %v", c.name, ans)
		}
	}
	// A missing required field is a 400, as the provider's JSON binding answers.
	st, b := e.call(tok, "order/placeorder", map[string]any{"accountId": acct, "action": "Buy", "orderQty": 1, "orderType": "Market"})
	if st != http.StatusBadRequest || !strings.Contains(string(b), "symbol") {
		t.Fatalf("missing symbol: %d %s", st, b)
	}
	// accountSpec alone names the account (or, as the login name, its first account).
	if ans := e.place(tok, map[string]any{"accountSpec": liveLogin, "action": "Buy", "symbol": "ESZ6", "orderQty": 1, "orderType": "Market"}); ans["orderId"] == nil {
		t.Fatalf("accountSpec = %v", ans)
	}
	e.sim.SetSessionOpen(false)
	if ans := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Market", nil)); ans["failureReason"] != "SessionClosed" {
		t.Fatalf("closed session = %v", ans)
	}
}

func TestMaxPositionAndQueuedRejection(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	_, accts, err := e.sim.AddLogin(tradovate.Login{Name: "limited", Password: password, Kind: "live",
		Accounts: []tradovate.AccountSpec{{Name: "LIMITED1", MaxPosition: 2}}})
	must(t, err)
	tok := e.token("limited")
	acct := accts["LIMITED1"]
	e.place(tok, order(acct, "Buy", "ESZ6", 2, "Market", nil))
	if ans := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Market", nil)); ans["failureReason"] != "MaxPosLimitReached" {
		t.Fatalf("beyond the limit = %v", ans)
	}
	must(t, e.sim.RejectNext("LIMITED1", tradovate.Rejection{Reason: "NotEnoughLiquidity", Text: "no"}))
	ans := e.place(tok, order(acct, "Sell", "ESZ6", 1, "Market", nil))
	if ans["orderId"] == nil || e.orderStatus(tok, ans["orderId"]) != "Rejected" {
		t.Fatalf("queued rejection = %v", ans)
	}
	if ans := e.place(tok, order(acct, "Sell", "ESZ6", 1, "Market", nil)); e.orderStatus(tok, ans["orderId"]) != "Filled" {
		t.Fatal("the rejection applied twice")
	}
}

func TestOSOBracketAndOCO(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	oso := e.ok(tok, "order/placeoso", order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4990,
		"bracket1": map[string]any{"action": "Sell", "orderType": "Limit", "price": 5010},
		"bracket2": map[string]any{"action": "Sell", "orderType": "Stop", "stopPrice": 4980}}))
	entry, tp, sl := oso["orderId"], oso["oso1Id"], oso["oso2Id"]
	if entry == nil || tp == nil || sl == nil {
		t.Fatalf("placeoso = %v", oso)
	}
	for id, want := range map[any]string{entry: "Working", tp: "Suspended", sl: "Suspended"} {
		if st := e.orderStatus(tok, id); st != want {
			t.Fatalf("order %v: %s, want %s", id, st, want)
		}
	}
	tpOrder := e.ok(tok, "order/item?id="+idText(tp), nil)
	if tpOrder["parentId"] != entry || tpOrder["linkedId"] != sl {
		t.Fatalf("bracket = %v", tpOrder)
	}
	must(t, e.sim.SetPrice("ESZ6", "4990")) // entry fills; brackets go to work
	if e.orderStatus(tok, entry) != "Filled" || e.orderStatus(tok, tp) != "Working" || e.orderStatus(tok, sl) != "Working" {
		t.Fatal("brackets not working after the entry filled")
	}
	must(t, e.sim.SetPrice("ESZ6", "5010")) // take profit fills; the stop is canceled
	if e.orderStatus(tok, tp) != "Filled" || e.orderStatus(tok, sl) != "Canceled" {
		t.Fatalf("tp %s sl %s", e.orderStatus(tok, tp), e.orderStatus(tok, sl))
	}
	// Canceling an entry cancels its held brackets.
	oso = e.ok(tok, "order/placeoso", order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4000,
		"bracket1": map[string]any{"action": "Sell", "orderType": "Limit", "price": 5100}}))
	e.ok(tok, "order/cancelorder", map[string]any{"orderId": oso["orderId"]})
	if st := e.orderStatus(tok, oso["oso1Id"]); st != "Canceled" {
		t.Fatalf("held bracket after entry cancel: %s", st)
	}
	// OCO: either filling cancels the other; ocoId is the other order.
	oco := e.ok(tok, "order/placeoco", order(acct, "Sell", "ESZ6", 1, "Limit", map[string]any{"price": 5020,
		"other": map[string]any{"action": "Sell", "orderType": "Stop", "stopPrice": 5000}}))
	if oco["orderId"] == nil || oco["ocoId"] == nil {
		t.Fatalf("placeoco = %v", oco)
	}
	must(t, e.sim.SetPrice("ESZ6", "4999.75"))
	if e.orderStatus(tok, oco["ocoId"]) != "Filled" || e.orderStatus(tok, oco["orderId"]) != "Canceled" {
		t.Fatalf("oco: %s %s", e.orderStatus(tok, oco["orderId"]), e.orderStatus(tok, oco["ocoId"]))
	}
	pos := e.list(tok, "position/list")
	if len(pos) != 1 || pos[0]["netPos"] != float64(-1) {
		t.Fatalf("positions = %v", pos)
	}
}

func TestIOCAndFOKThatDoNotCrossAreCanceled(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	for _, tif := range []string{"IOC", "FOK"} {
		id := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900, "timeInForce": tif}))["orderId"]
		if st := e.orderStatus(tok, id); st != "Canceled" {
			t.Fatalf("%s: %s", tif, st)
		}
	}
	id := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 5000, "timeInForce": "IOC"}))["orderId"]
	if st := e.orderStatus(tok, id); st != "Filled" {
		t.Fatalf("crossing IOC: %s", st)
	}
}

func TestThirtySecondsProduct(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	st, b := e.call(tok, "product/find?name=ZN", nil)
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, b)
	}
	var p map[string]any
	must(t, json.Unmarshal(b, &p))
	if p["priceFormatType"] != "Fractional" || p["valuePerPoint"] != float64(1000) || numText(t, b, "tickSize") != "0.015625" {
		t.Fatalf("ZN = %s", b)
	}
	acct := e.ids[liveAcct]
	must(t, e.sim.SetPrice("ZNZ6", "110.515625")) // 110-16.5
	e.place(tok, order(acct, "Buy", "ZNZ6", 1, "Market", nil))
	must(t, e.sim.SetPrice("ZNZ6", "110.59375")) // 110-19: up 2.5 32nds = 78.125
	_, b = e.call(tok, "cashBalance/getcashbalancesnapshot", map[string]any{"accountId": acct})
	if got := numText(t, b, "openPnL"); got != "78.125" {
		t.Fatalf("openPnL = %s in %s", got, b)
	}
	if err := e.sim.SetPrice("ZNZ6", "110.52"); err == nil {
		t.Fatal("an off-tick price was driven")
	}
}

func TestEndOfDayExpiresDayOrders(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	day := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900}))["orderId"]
	gtc := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900, "timeInForce": "GTC"}))["orderId"]
	e.sim.EndOfDay()
	if e.orderStatus(tok, day) != "Expired" || e.orderStatus(tok, gtc) != "Working" {
		t.Fatalf("day %s gtc %s", e.orderStatus(tok, day), e.orderStatus(tok, gtc))
	}
}

func TestLiquidatePosition(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	acct := e.ids[liveAcct]
	e.place(tok, order(acct, "Sell", "NQZ6", 3, "Market", nil))
	work := e.place(tok, order(acct, "Sell", "NQZ6", 1, "Limit", map[string]any{"price": 18100}))["orderId"]
	contract := e.ok(tok, "contract/find?name=NQZ6", nil)
	ans := e.ok(tok, "order/liquidateposition", map[string]any{"accountId": acct, "contractId": contract["id"], "admin": false})
	if ans["orderId"] == nil || e.orderStatus(tok, work) != "Canceled" {
		t.Fatalf("liquidate = %v", ans)
	}
	if pos := e.list(tok, "position/list"); pos[0]["netPos"] != float64(0) {
		t.Fatalf("positions = %v", pos)
	}
}

func TestPlaceOutsideAppearsLikeAnyOrder(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	id, err := e.sim.PlaceOutside(liveAcct, map[string]any{"action": "Buy", "symbol": "ESZ6", "orderQty": 1, "orderType": "Limit", "price": 4800})
	must(t, err)
	tok := e.token(liveLogin)
	orders := e.list(tok, "order/list")
	if len(orders) != 1 || idText(orders[0]["id"]) != idText(id) || orders[0]["ordStatus"] != "Working" {
		t.Fatalf("orders = %v", orders)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

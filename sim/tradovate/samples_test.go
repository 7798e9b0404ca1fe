package tradovate_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/sim/internal/simtest"
	"github.com/svc/engine/sim/tradovate"
)

// The samples below are the JSON examples of the provider's public documentation, trimmed to their
// field sets (values are the documentation's own, or placeholders of the same JSON kind where the
// documentation elides them). Sources: the API reference at api.tradovate.com (its OpenAPI document's
// sections Access, WebSockets and Market Data, and the operations placeOrder, placeOCO), and
// partner.tradovate.com (Penalty Tickets, Roll Contract). The simulator's answers must carry every
// key of a sample with the same JSON kind.
const (
	// Access: "Get An Access Token Using Client Credentials", the answer of the cURL example.
	sampleAccessToken = `{"accessToken":"t","mdAccessToken":"t","expirationTime":"2021-06-15T15:40:30.056Z",
		"userStatus":"Active","userId":15460,"name":"alennert02","hasLive":true,"outdatedTaC":false,"hasFunded":true,
		"hasMarketData":true,"outdatedLiquidationPolicy":false}`
	// Access: "Using Your Access Token", the answer of /account/list.
	sampleAccountList = `[{"id":33,"name":"X0314","userId":90,"accountType":"Customer","active":true,"clearingHouseId":1,
		"riskCategoryId":5,"autoLiqProfileId":1,"marginAccountType":"Speculator","legalStatus":"Individual"}]`
	// WebSockets: "Decoding Server Frames", a response and a props event.
	sampleResponseFrame = `a[{"s":200,"i":23,"d":{"id":65543,"name":"CLZ6","contractMaturityId":6727}}]`
	samplePropsFrame    = `a[{"e":"props","d":{"entityType":"order","eventType":"Created","entity":{"id":210518,"accountId":25,
		"contractId":560901,"timestamp":"2016-11-04T00:02:36.626Z","action":"Sell","ordStatus":"PendingNew","admin":false}}}]`
	// WebSockets: "Authorization", the answer of authorize.
	sampleAuthorized = `a[{"s":200,"i":2}]`
	// Market Data: "Subscribe Quote", the data message.
	sampleQuote = `{"e":"md","d":{"quotes":[{"timestamp":"2021-04-13T04:59:06.588Z","contractId":123456,"entries":{
		"Bid":{"price":18405.123,"size":7.123},"TotalTradeVolume":{"size":4118.123},"Offer":{"price":18410.012,"size":12.35},
		"LowPrice":{"price":18355.23},"Trade":{"price":18405.023,"size":2.10},"OpenInterest":{"size":40702.024},
		"OpeningPrice":{"price":18515.123},"HighPrice":{"price":18520.125},"SettlementPrice":{"price":18520.257}}}]}}`
	// Market Data: "Subscribe DOM", the data message (one level of each side).
	sampleDOM = `{"e":"md","d":{"doms":[{"contractId":123456,"timestamp":"2021-04-13T11:33:57.488Z",
		"bids":[{"price":2335.25,"size":33.54}],"offers":[{"price":2335.5,"size":255.12}]}]}}`
	// Market Data: "Get Chart", the response and the data message.
	sampleChartResponse = `{"s":200,"i":13,"d":{"historicalId":32,"realtimeId":31}}`
	sampleChart         = `{"e":"chart","d":{"charts":[{"id":9,"td":20170413,"bars":[{"timestamp":"2017-04-13T11:00:00.000Z",
		"open":2334.25,"high":2334.5,"low":2333,"close":2333.75,"upVolume":4712.234,"downVolume":201.124,"upTicks":1333.567,
		"downTicks":82.890,"bidVolume":2857.123,"offerVolume":2056.224}]}]}}`
	// placeOrder and placeOCO: the answers in their examples ({ orderId: 0000000, ocoId: 0000000 }).
	samplePlaced = `{"orderId":1}`
	sampleOCO    = `{"orderId":1,"ocoId":2}`
	// Penalty Tickets: the fields of a time penalty answer (HTTP 200).
	samplePenalty = `{"p-ticket":"t","p-time":15,"p-captcha":true}`
	// Roll Contract: the example answer.
	sampleRoll = `{"errorText":"","contract":{"name":"ESM24","contractMaturityId":987654321,"timestamp":"2024-06-21T14:30:00Z","id":123456789}}`
)

// required are the required properties of the provider's entity schemas (its OpenAPI document):
// every answer carrying such an entity must have them.
var required = map[string][]string{
	"Account":          {"name", "userId", "accountType", "active", "clearingHouseId", "riskCategoryId", "autoLiqProfileId", "marginAccountType", "legalStatus", "timestamp"},
	"CashBalance":      {"accountId", "timestamp", "tradeDate", "currencyId", "amount"},
	"Position":         {"accountId", "contractId", "timestamp", "tradeDate", "netPos", "bought", "boughtValue", "sold", "soldValue", "prevPos"},
	"Order":            {"accountId", "timestamp", "action", "ordStatus", "admin"},
	"OrderVersion":     {"orderId", "orderQty", "orderType"},
	"Fill":             {"orderId", "contractId", "timestamp", "tradeDate", "action", "qty", "price", "active", "finallyPaired"},
	"FillPair":         {"positionId", "buyFillId", "sellFillId", "qty", "buyPrice", "sellPrice", "active"},
	"Command":          {"orderId", "timestamp", "commandType", "commandStatus"},
	"CommandReport":    {"commandId", "timestamp", "commandStatus"},
	"ExecutionReport":  {"commandId", "name", "accountId", "contractId", "timestamp", "orderId", "execType", "action"},
	"Contract":         {"name", "contractMaturityId"},
	"ContractMaturity": {"productId", "expirationMonth", "expirationDate", "isFront"},
	"Product":          {"name", "currencyId", "productType", "description", "exchangeId", "contractGroupId", "status", "valuePerPoint", "priceFormatType", "priceFormat", "tickSize"},
	"User":             {"name", "timestamp", "email", "status", "professional"},
	"SyncMessage":      {"users", "contractGroups"},
}

func hasRequired(t *testing.T, schema string, ent json.RawMessage) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ent, &m); err != nil {
		t.Fatalf("%s: %v: %s", schema, err, ent)
	}
	for _, k := range required[schema] {
		if _, ok := m[k]; !ok {
			t.Errorf("%s without required %q: %s", schema, k, ent)
		}
	}
}

func frameMessage(t *testing.T, frame string) any {
	t.Helper()
	if !strings.HasPrefix(frame, "a") {
		t.Fatalf("not an a frame: %q", frame)
	}
	var arr []any
	if err := json.Unmarshal([]byte(frame[1:]), &arr); err != nil || len(arr) != 1 {
		t.Fatalf("frame %q: %v", frame, err)
	}
	return arr[0]
}

func findFrame(s *sock, f func(string) bool) string { return s.waitFrame(f) }

func TestAnswersMatchDocumentedSamples(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	check := func(name, sample string, ours []byte, skip map[string]bool) {
		t.Helper()
		simtest.Shape{Skip: skip, NonEmpty: true}.SameShape(t, name, simtest.DecodeAny(t, []byte(sample)), simtest.DecodeAny(t, ours))
	}
	ans := e.login(liveLogin)
	raw, _ := json.Marshal(ans)
	check("accessTokenRequest", sampleAccessToken, raw, nil)
	tok := ans["accessToken"].(string)
	acct := e.ids[liveAcct]

	_, b := e.call(tok, "account/list", nil)
	check("account/list", sampleAccountList, b, nil)
	_, b = e.call(tok, "order/placeorder", order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900}))
	check("placeorder", samplePlaced, b, nil)
	_, b = e.call(tok, "order/placeoco", order(acct, "Sell", "ESZ6", 1, "Limit", map[string]any{"price": 5100,
		"other": map[string]any{"action": "Sell", "orderType": "Stop", "stopPrice": 4950}}))
	check("placeoco", sampleOCO, b, nil)
	_, b = e.call(tok, "contract/rollcontract", map[string]any{"name": "ES", "forward": true})
	// The simulator leaves out an empty errorText, as the provider's other answers do.
	check("rollcontract", sampleRoll, b, map[string]bool{"errorText": true})
	must(t, e.sim.AddFault(tradovate.Fault{Endpoint: "order/cancelorder", Times: 1, Captcha: true}))
	_, b = e.call(tok, "order/cancelorder", map[string]any{"orderId": 1})
	check("penalty", samplePenalty, b, nil)

	// The user data socket: authorize, a REST read, the sync snapshot and props events.
	s := dial(t, e.sim.WSURL())
	s.write("authorize\n2\n\n" + tok)
	auth := findFrame(s, func(f string) bool { return strings.Contains(f, `"i":2`) })
	check("authorize", sampleAuthorized[1:], []byte(auth[1:]), nil)
	if auth != sampleAuthorized {
		t.Errorf("authorize answered %s, the docs show %s", auth, sampleAuthorized)
	}
	s.write("contract/find\n23\nname=ESZ6\n")
	resp := findFrame(s, func(f string) bool { return strings.Contains(f, `"i":23`) })
	check("socket response", sampleResponseFrame[1:], []byte(resp[1:]), nil)
	r := s.request("user/syncrequest", "", map[string]any{"users": []any{ans["userId"]}})
	hasRequired(t, "SyncMessage", r.D)
	var snap map[string][]json.RawMessage
	must(t, json.Unmarshal(r.D, &snap))
	for key, schema := range map[string]string{"accounts": "Account", "cashBalances": "CashBalance", "orders": "Order",
		"orderVersions": "OrderVersion", "commands": "Command", "commandReports": "CommandReport",
		"executionReports": "ExecutionReport", "contracts": "Contract", "contractMaturities": "ContractMaturity",
		"products": "Product", "users": "User"} {
		if len(snap[key]) == 0 {
			t.Errorf("snapshot has no %s", key)
			continue
		}
		hasRequired(t, schema, snap[key][0])
	}
	e.place(tok, order(acct, "Buy", "ESZ6", 1, "Market", nil))
	must(t, e.sim.SetPrice("ESZ6", "5001"))
	e.place(tok, order(acct, "Sell", "ESZ6", 1, "Market", nil))
	props := findFrame(s, func(f string) bool { return strings.Contains(f, `"entityType":"order","eventType":"Created"`) })
	raw, _ = json.Marshal(frameMessage(t, props))
	// The sample's order is not linked to another: parentId, ocoId and linkedId are optional.
	check("props", samplePropsFrame[2:len(samplePropsFrame)-1], raw, nil)
	waitFor(t, 5*time.Second, func() bool {
		for _, p := range s.props() {
			if p.EntityType == "fillPair" {
				return true
			}
		}
		return false
	})
	schemas := map[string]string{"order": "Order", "orderVersion": "OrderVersion", "fill": "Fill", "fillPair": "FillPair",
		"position": "Position", "cashBalance": "CashBalance", "command": "Command", "commandReport": "CommandReport",
		"executionReport": "ExecutionReport"}
	seen := map[string]bool{}
	for _, p := range s.props() {
		if schema, ok := schemas[p.EntityType]; ok {
			hasRequired(t, schema, p.Entity)
			seen[p.EntityType] = true
		}
	}
	for k := range schemas {
		if !seen[k] {
			t.Errorf("no %s event", k)
		}
	}

	// The market data socket: quote, DOM and chart.
	md := dial(t, e.sim.MDURL())
	md.request("authorize", "", ans["mdAccessToken"])
	md.request("md/subscribequote", "", map[string]any{"symbol": "ESZ6"})
	md.request("md/subscribedom", "", map[string]any{"symbol": "ESZ6"})
	md.write(`md/getchart` + "\n13\n\n" + `{"symbol":"ESZ6","chartDescription":{"underlyingType":"MinuteBar","elementSize":15,"elementSizeUnit":"UnderlyingUnits","withHistogram":false},"timeRange":{"asMuchAsElements":66}}`)
	chartResp := findFrame(md, func(f string) bool { return strings.Contains(f, `"i":13`) })
	raw, _ = json.Marshal(frameMessage(t, chartResp))
	check("getchart response", sampleChartResponse, raw, nil)
	for name, c := range map[string]struct {
		sample, marker string
	}{
		"quote": {sampleQuote, `"quotes"`},
		"dom":   {sampleDOM, `"doms"`},
		"chart": {sampleChart, `"bars"`},
	} {
		f := findFrame(md, func(f string) bool { return strings.Contains(f, c.marker) })
		raw, _ = json.Marshal(frameMessage(t, f))
		// Sizes and volumes are whole contracts in the simulator; the samples show fractions of a
		// JSON number, which is the same JSON kind.
		check(name, c.sample, raw, nil)
	}
}

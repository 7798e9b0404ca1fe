package tradovate_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/sim/tradovate"
)

// mdSocket dials the market data socket and authorizes it with the login's md access token.
func (e *env) mdSocket(login string) *sock {
	e.t.Helper()
	ans := e.login(login)
	s := dial(e.t, e.sim.MDURL())
	if r := s.request("authorize", "", ans["mdAccessToken"]); r.S != 200 {
		e.t.Fatalf("authorize md: %+v", r)
	}
	return s
}

type quote struct {
	Timestamp  string `json:"timestamp"`
	ContractID int64  `json:"contractId"`
	Entries    map[string]struct {
		Price *json.Number `json:"price"`
		Size  *json.Number `json:"size"`
	} `json:"entries"`
}

func (s *sock) quotes() []quote {
	var out []quote
	for _, m := range s.messages() {
		if m.E != "md" {
			continue
		}
		var d struct {
			Quotes []quote `json:"quotes"`
		}
		if err := json.Unmarshal(m.D, &d); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, d.Quotes...)
	}
	return out
}

type chart struct {
	ID   int64            `json:"id"`
	TD   int              `json:"td"`
	EOH  bool             `json:"eoh"`
	Bars []map[string]any `json:"bars"`
}

func (s *sock) charts() []chart {
	var out []chart
	for _, m := range s.messages() {
		if m.E != "chart" {
			continue
		}
		var d struct {
			Charts []chart `json:"charts"`
		}
		if err := json.Unmarshal(m.D, &d); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, d.Charts...)
	}
	return out
}

func TestQuotesForAnEntitledLiveLogin(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	s := e.mdSocket(liveLogin)
	r := s.request("md/subscribeQuote", "", map[string]any{"symbol": "ESZ6"})
	if r.S != 200 || !strings.Contains(string(r.D), `"mode":"RealTime"`) {
		t.Fatalf("subscribeQuote: %+v %s", r, r.D)
	}
	tok := e.token(liveLogin)
	es := e.ok(tok, "contract/find?name=ESZ6", nil)
	waitFor(t, 5*time.Second, func() bool { return len(s.quotes()) == 1 })
	q := s.quotes()[0]
	if q.ContractID != int64(es["id"].(float64)) || q.Entries["Bid"].Price.String() != "5000" || q.Entries["Offer"].Price == nil {
		t.Fatalf("first quote = %+v", q)
	}
	must(t, e.sim.SetPrice("ESZ6", "5001.75"))
	waitFor(t, 5*time.Second, func() bool { return len(s.quotes()) == 2 })
	if got := s.quotes()[1].Entries["Trade"].Price.String(); got != "5001.75" {
		t.Fatalf("trade price %s", got)
	}
	// By contract id too; and no quotes for a month not subscribed.
	nq := e.ok(tok, "contract/find?name=NQZ6", nil)
	if r := s.request("md/subscribequote", "", map[string]any{"symbol": nq["id"]}); r.S != 200 {
		t.Fatalf("by id: %+v", r)
	}
	must(t, e.sim.SetPrice("ESH7", "5050"))
	time.Sleep(50 * time.Millisecond)
	for _, q := range s.quotes() {
		if q.ContractID != int64(es["id"].(float64)) && q.ContractID != int64(nq["id"].(float64)) {
			t.Fatalf("quote of an unsubscribed month: %+v", q)
		}
	}
	if r := s.request("md/unsubscribequote", "", map[string]any{"symbol": "ESZ6"}); r.S != 200 {
		t.Fatalf("unsubscribe: %+v", r)
	}
	n := len(s.quotes())
	must(t, e.sim.SetPrice("ESZ6", "5002"))
	time.Sleep(50 * time.Millisecond)
	if len(s.quotes()) != n {
		t.Fatal("quotes after unsubscribe")
	}
}

func TestMarketDataRefusedWithoutEntitlement(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	chartBody := map[string]any{"symbol": "ESZ6", "chartDescription": map[string]any{"underlyingType": "MinuteBar",
		"elementSize": 1, "elementSizeUnit": "UnderlyingUnits", "withHistogram": false}, "timeRange": map[string]any{"asMuchAsElements": 10}}
	for _, login := range []string{demoLogin, plainLogin} {
		s := e.mdSocket(login)
		for _, ep := range []string{"md/subscribequote", "md/subscribedom"} {
			if r := s.request(ep, "", map[string]any{"symbol": "ESZ6"}); r.S != 403 {
				t.Errorf("%s %s: %+v", login, ep, r)
			}
		}
		if r := s.request("md/getchart", "", chartBody); r.S != 403 {
			t.Errorf("%s getchart: %+v", login, r)
		}
		must(t, e.sim.SetPrice("ESZ6", "5000.25"))
		time.Sleep(30 * time.Millisecond)
		if len(s.quotes())+len(s.charts()) != 0 {
			t.Fatalf("%s got market data", login)
		}
	}
	// A live login is refused a product its subscription does not cover.
	s := e.mdSocket(liveLogin)
	if r := s.request("md/subscribequote", "", map[string]any{"symbol": "MESZ6"}); r.S != 403 {
		t.Fatalf("MES: %+v", r)
	}
	// Market data requests are for the market data socket only.
	u, _ := e.userSocket(e.token(liveLogin))
	if r := u.request("md/getchart", "", chartBody); r.S != 404 {
		t.Fatalf("getchart on the user socket: %+v", r)
	}
	if r := s.request("user/syncrequest", "", map[string]any{}); r.S != 404 {
		t.Fatalf("syncrequest on the md socket: %+v", r)
	}
}

func TestSubscriptionStopsWhenEntitlementIsRemoved(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	s := e.mdSocket(liveLogin)
	s.request("md/subscribequote", "", map[string]any{"symbol": "ESZ6"})
	waitFor(t, 5*time.Second, func() bool { return len(s.quotes()) == 1 })
	must(t, e.sim.SetMarketData(liveLogin, []string{"NQ"}))
	if n := e.sim.MDSubscriptions(liveLogin); n != 0 {
		t.Fatalf("%d subscriptions left", n)
	}
	must(t, e.sim.SetPrice("ESZ6", "5003"))
	time.Sleep(50 * time.Millisecond)
	if len(s.quotes()) != 1 {
		t.Fatal("quotes after the subscription ended")
	}
	if r := s.request("md/subscribequote", "", map[string]any{"symbol": "ESZ6"}); r.S != 403 {
		t.Fatalf("resubscribe: %+v", r)
	}
}

func TestDelayedInsteadOfRefusal(t *testing.T) {
	e := newEnv(t, tradovate.Options{DelayedWithoutSubscription: true})
	s := e.mdSocket(plainLogin)
	r := s.request("md/subscribequote", "", map[string]any{"symbol": "ESZ6"})
	if r.S != 200 || !strings.Contains(string(r.D), `"mode":"Delayed"`) {
		t.Fatalf("subscribe: %+v %s", r, r.D)
	}
	must(t, e.sim.SetPrice("ESZ6", "5000.25"))
	time.Sleep(30 * time.Millisecond)
	if len(s.quotes()) != 0 {
		t.Fatal("delayed mode sent data")
	}
}

func TestGetChartHistoryThenRealtime(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	s := e.mdSocket(liveLogin)
	r := s.request("md/getChart", "", map[string]any{"symbol": "ZNZ6", "chartDescription": map[string]any{
		"underlyingType": "MinuteBar", "elementSize": 5, "elementSizeUnit": "UnderlyingUnits", "withHistogram": false},
		"timeRange": map[string]any{"asMuchAsElements": 4}})
	var ids struct {
		HistoricalID int64 `json:"historicalId"`
		RealtimeID   int64 `json:"realtimeId"`
	}
	if r.S != 200 || json.Unmarshal(r.D, &ids) != nil || ids.HistoricalID == 0 || ids.RealtimeID == 0 {
		t.Fatalf("getchart: %+v %s", r, r.D)
	}
	waitFor(t, 5*time.Second, func() bool {
		c := s.charts()
		return len(c) >= 2 && c[len(c)-1].EOH
	})
	hist := s.charts()[0]
	if hist.ID != ids.HistoricalID || len(hist.Bars) != 4 || hist.TD != 20261104 {
		t.Fatalf("history = %+v", hist)
	}
	for _, k := range []string{"timestamp", "open", "high", "low", "close", "upVolume", "downVolume", "upTicks", "downTicks", "bidVolume", "offerVolume"} {
		if _, ok := hist.Bars[0][k]; !ok {
			t.Fatalf("bar without %s: %v", k, hist.Bars[0])
		}
	}
	if s.charts()[1].ID != ids.HistoricalID || !s.charts()[1].EOH {
		t.Fatalf("end of history = %+v", s.charts()[1])
	}
	must(t, e.sim.SetPrice("ZNZ6", "110.53125"))
	waitFor(t, 5*time.Second, func() bool { return len(s.charts()) == 3 })
	rt := s.charts()[2]
	if rt.ID != ids.RealtimeID || len(rt.Bars) != 1 || rt.Bars[0]["close"] != 110.53125 || rt.Bars[0]["open"] != 110.5 {
		t.Fatalf("real-time bar = %+v", rt)
	}
	if r := s.request("md/cancelChart", "", map[string]any{"subscriptionId": ids.RealtimeID}); r.S != 200 {
		t.Fatalf("cancel: %+v", r)
	}
	must(t, e.sim.SetPrice("ZNZ6", "110.5"))
	time.Sleep(30 * time.Millisecond)
	if len(s.charts()) != 3 {
		t.Fatal("chart data after cancel")
	}
	if r := s.request("md/getchart", "", map[string]any{"symbol": "ZNZ6", "chartDescription": map[string]any{
		"underlyingType": "Tick", "elementSize": 1, "elementSizeUnit": "UnderlyingUnits"}, "timeRange": map[string]any{"asMuchAsElements": 4}}); r.S != 400 {
		t.Fatalf("tick chart: %+v", r)
	}
}

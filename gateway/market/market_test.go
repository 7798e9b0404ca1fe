package market_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

const origin = "https://charts.example.test"

func start(t *testing.T, replay bool) *apptest.Env {
	t.Helper()
	if replay {
		t.Setenv("ENGINE_MARKET_FEED", "replay")
		t.Setenv("ENGINE_MARKET_REPLAY", "../../engine/market/replay/testdata/session.csv")
		t.Setenv("ENGINE_MARKET_REPLAY_REBASE", "0")
	}
	return apptest.Start(t, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) { c.AllowedOrigins = origin }})
}

func wantError(t *testing.T, r *apptest.Resp, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	m := r.Map(t)
	if m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.Body)
	}
	return m
}

func get(e *apptest.Env, path string) *apptest.Resp { return e.Get(path) }

func q(s string) string { return url.QueryEscape(s) }

func TestMarketRoutesAndRefusals(t *testing.T) {
	e := start(t, false)

	// the futures product catalog
	var cat struct {
		Instruments []struct {
			Root          string `json:"root"`
			TickSize      string `json:"tickSize"`
			TickValue     string `json:"tickValue"`
			Multiplier    string `json:"multiplier"`
			PriceFraction *struct {
				Denominator int `json:"denominator"`
				SubFraction int `json:"subFraction"`
			} `json:"priceFraction"`
		} `json:"instruments"`
	}
	r := get(e, "/api/instruments")
	r.JSON(t, &cat)
	roots := map[string]int{}
	for i, in := range cat.Instruments {
		roots[in.Root] = i
	}
	for _, root := range []string{"ES", "NQ", "YM", "RTY", "CL", "GC", "ZN", "ZB", "ZF", "6E"} {
		if _, ok := roots[root]; !ok {
			t.Fatalf("catalog lacks %s", root)
		}
	}
	es, zn, zf := cat.Instruments[roots["ES"]], cat.Instruments[roots["ZN"]], cat.Instruments[roots["ZF"]]
	if es.TickSize != "0.25" || es.TickValue != "12.50" || es.Multiplier != "50" || es.PriceFraction != nil {
		t.Fatalf("ES row %+v", es)
	}
	if zn.PriceFraction == nil || zn.PriceFraction.Denominator != 32 || zn.PriceFraction.SubFraction != 2 || zn.TickSize != "0.015625" {
		t.Fatalf("ZN row %+v", zn)
	}
	if zf.PriceFraction == nil || zf.PriceFraction.SubFraction != 4 {
		t.Fatalf("ZF row %+v", zf)
	}

	cfg := get(e, "/api/market/config").Map(t)
	if lim := cfg["limits"].(map[string]any); lim["subscriptions"] != float64(24) || lim["spreadLegs"] != float64(4) {
		t.Fatalf("limits %v", lim)
	}
	if fmt.Sprint(cfg["assetClasses"]) != "[crypto]" {
		t.Fatalf("asset classes %v", cfg["assetClasses"])
	}

	// search lists no futures
	if got := get(e, "/api/market/search?query=btc").Map(t)["symbols"].([]any); len(got) != 1 || got[0].(map[string]any)["symbol"] != "BTC-PERP" {
		t.Fatalf("search btc: %v", got)
	}
	for _, qq := range []string{"ES", "E-mini", "gold"} {
		if got := get(e, "/api/market/search?query="+q(qq)).Map(t)["symbols"].([]any); len(got) != 0 {
			t.Fatalf("search %s lists futures: %v", qq, got)
		}
	}
	if got := get(e, "/api/market/search").Map(t)["symbols"].([]any); len(got) != 3 {
		t.Fatalf("empty query lists every served symbol: %v", got)
	}

	// symbol info
	info := get(e, "/api/market/symbol-info?symbol=BTC-PERP").Map(t)
	if info["type"] != "perpetual" || info["priceFormat"].(map[string]any)["tickSize"] != "0.5" || info["sessionCalendar"] == nil {
		t.Fatalf("symbol info %v", info)
	}
	sp := get(e, "/api/market/symbol-info?symbol="+q("BTC-PERP-ETH-PERP")).Map(t)
	if sp["type"] != "spread" || fmt.Sprint(sp["legs"]) != "[BTC-PERP ETH-PERP]" {
		t.Fatalf("spread info %v", sp)
	}
	wantError(t, get(e, "/api/market/symbol-info?symbol=NOPE"), 404, "unknown_symbol")
	wantError(t, get(e, "/api/market/symbol-info?symbol=ES"), 503, "feed_requires_connection")
	wantError(t, get(e, "/api/market/symbol-info?symbol=ESZ5"), 503, "feed_requires_connection")
	// instrument, as on the order routes, names the same thing as symbol; both at once is refused.
	if byInstrument := get(e, "/api/market/symbol-info?instrument=BTC-PERP").Map(t); byInstrument["symbol"] != "BTC-PERP" {
		t.Fatalf("symbol info by instrument %v", byInstrument)
	}
	wantError(t, get(e, "/api/market/symbol-info?instrument=BTC-PERP&symbol=BTC-PERP"), 400, "invalid_request")

	// quotes
	var quotes struct {
		Quotes []struct{ Symbol, Bid, Ask string } `json:"quotes"`
	}
	get(e, "/api/market/quotes?symbols=BTC-PERP,ETH-PERP").JSON(t, &quotes)
	if len(quotes.Quotes) != 2 || quotes.Quotes[0].Symbol != "BTC-PERP" || quotes.Quotes[0].Bid == "" {
		t.Fatalf("quotes %+v", quotes)
	}
	m := wantError(t, get(e, "/api/market/quotes?symbols=BTC-PERP,ES"), 503, "feed_requires_connection")
	if m["params"].(map[string]any)["instrument"] != "ES" {
		t.Fatalf("params %v", m)
	}
	wantError(t, get(e, "/api/market/quotes?symbols=BTC-PERP,NOPE"), 404, "unknown_symbol")
	wantError(t, get(e, "/api/market/quotes?symbols="+strings.Repeat("BTC-PERP,", 51)), 400, "too_many_symbols")
	wantError(t, get(e, "/api/market/quotes"), 400, "invalid_request")
	get(e, "/api/market/quotes?instruments=ETH-PERP,BTC-PERP").JSON(t, &quotes)
	if len(quotes.Quotes) != 2 || quotes.Quotes[0].Symbol != "ETH-PERP" {
		t.Fatalf("quotes by instruments %+v", quotes)
	}
	wantError(t, get(e, "/api/market/quotes?instruments=BTC-PERP&symbols=BTC-PERP"), 400, "invalid_request")

	if tm := get(e, "/api/market/time").Map(t); tm["unix"] == nil {
		t.Fatalf("time %v", tm)
	}

	// history refusals
	for _, tf := range []string{"", "1x", "0m", "60s", "1440m", "1M", "m", "01m", "1.5h", "-1m"} {
		wantError(t, get(e, "/api/market/history?instrument=BTC-PERP&tf="+q(tf)), 400, "invalid_timeframe")
	}
	wantError(t, get(e, "/api/market/history?instrument=ES&tf=1m"), 503, "feed_requires_connection")
	wantError(t, get(e, "/api/market/history?instrument="+q("BTC-PERP - NQ")+"&tf=1m"), 503, "feed_requires_connection")
	wantError(t, get(e, "/api/market/history?instrument=NOPE&tf=1m"), 404, "unknown_symbol")
	bad := wantError(t, get(e, "/api/market/history?instrument="+q("BTC-PERP * (ETH-PERP +")+"&tf=1m"), 400, "invalid_expression")
	if bad["params"].(map[string]any)["position"] != float64(23) || !strings.Contains(bad["error"].(string), "position 23") {
		t.Fatalf("position: %v", bad)
	}
	legs := wantError(t, get(e, "/api/market/history?instrument="+q("BTC-PERP+ETH-PERP+SOL-PERP+2*ETH-PERP+ES+NQ")+"&tf=1m"), 400, "invalid_expression")
	if !strings.Contains(legs["error"].(string), "more than 4 legs") {
		t.Fatalf("legs: %v", legs)
	}
	wantError(t, get(e, "/api/market/history?instrument=BTC-PERP&tf=1m&countBack=0"), 400, "invalid_request")
	wantError(t, get(e, "/api/market/history?instrument=BTC-PERP&tf=1m&countBack=10001"), 400, "invalid_request")
	wantError(t, get(e, "/api/market/history?instrument=BTC-PERP&tf=1m&countBack=x"), 400, "invalid_request")

	// history of the simulated feed
	for i := 0; i < 20; i++ {
		e.App.Sim.Step()
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		var h struct {
			Instrument, TF string
			Bars           []map[string]any
		}
		get(e, "/api/market/history?instrument=BTC-PERP&tf=1m&countBack=5").JSON(t, &h)
		if h.Instrument != "BTC-PERP" || h.TF != "1m" || len(h.Bars) == 0 {
			return fmt.Errorf("history %+v", h)
		}
		return nil
	})

	// live-stream refusals before the stream opens
	wantError(t, get(e, "/api/market/stream?instrument=ES&tf=1m"), 503, "feed_requires_connection")
	wantError(t, get(e, "/api/market/stream?instrument=BTC-PERP&tf=7y"), 400, "invalid_timeframe")
	wantError(t, get(e, "/api/market/streams?subs="), 400, "invalid_request")
}

func TestMarketAdmission(t *testing.T) {
	e := start(t, false)
	paths := []string{"/api/instruments", "/api/market/config", "/api/market/time", "/api/market/search?query=eth",
		"/api/market/quotes?symbols=BTC-PERP", "/api/market/history?instrument=BTC-PERP&tf=1m"}
	for _, p := range paths {
		wantError(t, e.Do(apptest.Req{Method: "GET", Path: p, Key: "-"}), 401, "invalid_key")
		wantError(t, e.Do(apptest.Req{Method: "GET", Path: p, Key: "svc_sk_notakeyatallreally"}), 401, "invalid_key")
		if r := e.Do(apptest.Req{Method: "GET", Path: p, Key: "-", Headers: map[string]string{"Origin": origin}}); r.Status != 200 {
			t.Fatalf("%s from a registered origin: %d %s", p, r.Status, r.Body)
		}
		if r := e.Do(apptest.Req{Method: "GET", Path: p, Key: "-", Headers: map[string]string{"Origin": "https://evil.example"}}); r.Status != 403 {
			t.Fatalf("%s from another origin: %d", p, r.Status)
		}
		if r := e.Do(apptest.Req{Method: "GET", Path: p, Key: "svc_sk_notakeyatallreally", Headers: map[string]string{"Origin": origin}}); r.Status != 200 {
			t.Fatalf("%s from a registered origin with a stale key: %d", p, r.Status)
		}
	}
}

type event = apptest.Event

func openSSE(t *testing.T, e *apptest.Env, path string) <-chan event {
	t.Helper()
	return e.Stream(path)
}

func next(t *testing.T, ch <-chan event) event {
	t.Helper()
	return apptest.Next(t, ch)
}

func barJSON(ev event) string {
	b, _ := json.Marshal(ev.Data["bar"])
	return string(b)
}

func TestReplayDrivesHistoryAndStreams(t *testing.T) {
	e := start(t, true)
	rp := e.App.Market.Replay
	one := openSSE(t, e, "/api/market/stream?instrument=BTC-PERP&tf=1m")
	subs := "BTC-PERP~1m," + q("BTC-PERP - 10*ETH-PERP") + "~1m,ES~1m,BTC-PERP~1x,NOPE~1m,BTC-PERP"
	multi := openSSE(t, e, "/api/market/streams?subs="+subs)

	// refused subscriptions come first, tagged, and the rest stream
	refused := map[string]string{}
	for i := 0; i < 4; i++ {
		ev := next(t, multi)
		if ev.Name != "error" {
			t.Fatalf("event %d: %s %v", i, ev.Name, ev.Data)
		}
		refused[ev.Data["sub"].(string)] = ev.Data["code"].(string)
	}
	want := map[string]string{"ES~1m": "feed_requires_connection", "BTC-PERP~1x": "invalid_timeframe", "NOPE~1m": "unknown_symbol", "BTC-PERP": "invalid_subscription"}
	if fmt.Sprint(refused) != fmt.Sprint(want) {
		t.Fatalf("refusals %v", refused)
	}

	for rp.Step() {
		e.App.Market.Bars.Live.Flush()
	}
	// the single stream ends on the newest bar of the recording
	final := `{"close":"65015","high":"65015","low":"65015","open":"65015","time":1717408920,"volume":"1"}`
	for {
		ev := next(t, one)
		if ev.Name != "bar" || ev.Data["instrument"] != "BTC-PERP" || ev.Data["tf"] != "1m" {
			t.Fatalf("event %v", ev)
		}
		if barJSON(ev) == final {
			break
		}
	}
	// the multiplexed stream carries each subscription's instrument and tf
	lastOf := map[string]string{}
	for lastOf["BTC-PERP"] != final || lastOf["BTC-PERP - 10*ETH-PERP"] != `{"close":"32985","high":"32985","low":"32970","open":"32970","time":1717408860,"volume":"0"}` {
		ev := next(t, multi)
		if ev.Name != "bar" || ev.Data["tf"] != "1m" {
			t.Fatalf("event %v", ev)
		}
		lastOf[ev.Data["instrument"].(string)] = barJSON(ev)
	}

	// history of the recording, exact
	r := get(e, "/api/market/history?instrument=BTC-PERP&tf=1m&countBack=10")
	wantHist := `{"instrument":"BTC-PERP","tf":"1m","bars":[{"time":1717408800,"open":"65000","high":"65010.5","low":"64990","close":"64990","volume":"3.5"},{"time":1717408860,"open":"65005","high":"65020","low":"65005","close":"65020","volume":"1.25"},{"time":1717408920,"open":"65015","high":"65015","low":"65015","close":"65015","volume":"1"}]}`
	if strings.TrimSpace(string(r.Body)) != wantHist {
		t.Fatalf("history:\n%s", r.Body)
	}
	r = get(e, "/api/market/history?instrument="+q("BTC-PERP-10*ETH-PERP")+"&tf=1m&countBack=10")
	wantSpread := `{"instrument":"BTC-PERP-10*ETH-PERP","tf":"1m","bars":[{"time":1717408800,"open":"33000","high":"33000","low":"32935","close":"32935","volume":"0"},{"time":1717408860,"open":"32970","high":"32985","low":"32970","close":"32985","volume":"0"}]}`
	if strings.TrimSpace(string(r.Body)) != wantSpread {
		t.Fatalf("spread history:\n%s", r.Body)
	}

	// history survives a restart
	e2 := e.Restart()
	r = get(e2, "/api/market/history?instrument=BTC-PERP&tf=1m&countBack=10")
	if strings.TrimSpace(string(r.Body)) != wantHist {
		t.Fatalf("history after restart:\n%s", r.Body)
	}
}

func TestTwentyFifthSubscriptionIsRefused(t *testing.T) {
	e := start(t, true)
	var toks []string
	for i := 1; i <= 25; i++ {
		toks = append(toks, fmt.Sprintf("BTC-PERP~%dm", i))
	}
	ch := openSSE(t, e, "/api/market/streams?subs="+strings.Join(toks, ","))
	ev := next(t, ch)
	if ev.Name != "error" || ev.Data["sub"] != "BTC-PERP~25m" || ev.Data["code"] != "subscription_limit" {
		t.Fatalf("first event %v", ev)
	}
	e.App.Market.Replay.Step()
	e.App.Market.Bars.Live.Flush()
	seen := map[string]bool{}
	for len(seen) < 24 {
		ev := next(t, ch)
		if ev.Name != "bar" {
			t.Fatalf("event %v", ev)
		}
		seen[ev.Data["tf"].(string)] = true
	}
	if seen["25m"] {
		t.Fatal("the 25th subscription streamed")
	}
}

func TestExchangeFeedDownAnswers503WithRetryAfter(t *testing.T) {
	t.Setenv("ENGINE_MARKET_FEED", "coinbase")
	t.Setenv("ENGINE_COINBASE_URL", "ws://127.0.0.1:1/") // nothing listens: the adapter keeps redialling
	e := start(t, false)
	if src := get(e, "/api/market/config").Map(t)["source"]; src != "coinbase" {
		t.Fatalf("source %v", src)
	}
	r := get(e, "/api/market/quotes?symbols=BTC-PERP")
	wantError(t, r, 503, "feed_unavailable")
	if r.Header.Get("Retry-After") != "5" {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
}

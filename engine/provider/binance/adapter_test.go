package binance_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/binance"
	"github.com/svc/engine/events"
	binancesim "github.com/svc/engine/sim/binance"
)

type env struct {
	sim *binancesim.Sim
	p   *binance.Provider
}

func newEnv(t testing.TB, opts binancesim.Options, limits binance.Limits) *env {
	return newEnvWith(t, opts, binance.Options{Limits: limits})
}

func newEnvWith(t testing.TB, opts binancesim.Options, po binance.Options) *env {
	t.Helper()
	sim := binancesim.New(opts)
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	po.RestURL, po.WSURL, po.SpotURL = sim.URL(), sim.WSURL(), sim.URL()
	po.Reconnect, po.RequestTimeout = 20*time.Millisecond, 3*time.Second
	p, err := binance.New(po)
	if err != nil {
		t.Fatal(err)
	}
	return &env{sim: sim, p: p}
}

func creds(key string) provider.Credentials {
	return provider.Credentials{APIKey: key, Secret: []byte("secret-of-" + key)}
}

// link adds the account to the simulator and connects to it.
func (e *env) link(t testing.TB, a binancesim.Account) provider.Session {
	t.Helper()
	if a.Secret == "" {
		a.Secret = "secret-of-" + a.APIKey
	}
	if err := e.sim.AddAccount(a); err != nil {
		t.Fatal(err)
	}
	s, err := e.p.Connect(context.Background(), provider.Credentials{APIKey: a.APIKey, Secret: []byte(a.Secret)})
	if err != nil {
		t.Fatalf("connect %s: %v", a.APIKey, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func d(s string) events.Decimal { return events.MustDecimal(s) }
func pd(s string) *events.Decimal {
	v := d(s)
	return &v
}

func market(id string, side provider.Side, qty string) provider.Order {
	return provider.Order{ClientOrderID: provider.ClientOrderID("acc", id), Instrument: "BTCUSDT", Side: side,
		Type: provider.Market, Quantity: d(qty)}
}

func limit(id string, side provider.Side, qty, price string) provider.Order {
	return provider.Order{ClientOrderID: provider.ClientOrderID("acc", id), Instrument: "BTCUSDT", Side: side,
		Type: provider.Limit, TIF: provider.GTC, Quantity: d(qty), LimitPrice: pd(price)}
}

func TestConnectRefuses(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	for _, a := range []binancesim.Account{
		{APIKey: "good", Secret: "right"},
		{APIKey: "withdraws", Secret: "s", CanWithdraw: true},
		{APIKey: "nofutures", Secret: "s", NoFutures: true},
	} {
		if err := e.sim.AddAccount(a); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		c      provider.Credentials
		is     error
		reason string
	}{
		{"wrong secret", provider.Credentials{APIKey: "good", Secret: []byte("wrong")}, provider.ErrUnauthorized, ""},
		{"unknown key", provider.Credentials{APIKey: "nobody", Secret: []byte("s")}, provider.ErrUnauthorized, ""},
		{"empty secret", provider.Credentials{APIKey: "good"}, provider.ErrUnauthorized, ""},
		{"key that can withdraw", provider.Credentials{APIKey: "withdraws", Secret: []byte("s")}, provider.ErrKeyRefused, provider.KeyCanWithdraw},
		{"key without futures", provider.Credentials{APIKey: "nofutures", Secret: []byte("s")}, provider.ErrKeyRefused, provider.KeyNoFutures},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := e.p.Connect(ctx, tt.c)
			if !errors.Is(err, tt.is) || s != nil {
				t.Fatalf("Connect = %v, %v; want %v", s, err, tt.is)
			}
			var kr *provider.KeyRefused
			if tt.reason != "" && (!errors.As(err, &kr) || kr.Reason != tt.reason) {
				t.Fatalf("reason: %v", err)
			}
		})
	}
	s, err := e.p.Connect(ctx, provider.Credentials{APIKey: "good", Secret: []byte("right")})
	if err != nil {
		t.Fatalf("the right key: %v", err)
	}
	_ = s.Close()
}

func TestSettingsAreRead(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	plain := e.link(t, binancesim.Account{APIKey: "plain"})
	hedge := e.link(t, binancesim.Account{APIKey: "hedge", HedgeMode: true})
	multi := e.link(t, binancesim.Account{APIKey: "multi", MultiAssets: true})
	pm := e.link(t, binancesim.Account{APIKey: "pm", PortfolioMargin: true})
	for _, tt := range []struct {
		s       provider.Session
		want    provider.Settings
		setting string
	}{
		{plain, provider.Settings{}, ""},
		{hedge, provider.Settings{HedgeMode: true}, provider.SettingHedgeMode},
		{multi, provider.Settings{MultiAssets: true}, provider.SettingMultiAssets},
		{pm, provider.Settings{PortfolioMargin: true}, provider.SettingPortfolioMargin},
	} {
		got, err := tt.s.Settings(ctx)
		if err != nil || got != tt.want {
			t.Fatalf("Settings = %+v, %v; want %+v", got, err, tt.want)
		}
		var m *provider.ModeUnsupported
		if err := got.Supported(); tt.setting != "" && (!errors.As(err, &m) || m.Setting != tt.setting) {
			t.Fatalf("Supported: %v", err)
		}
	}
	// Switched at the exchange: read again, never assumed.
	if err := e.sim.SetHedgeMode("plain", true); err != nil {
		t.Fatal(err)
	}
	if got, err := plain.Settings(ctx); err != nil || !got.HedgeMode {
		t.Fatalf("after the switch: %+v, %v", got, err)
	}
	// A portfolio-margin account's orders are refused without a request.
	before := e.sim.RequestCount("POST /fapi/v1/order")
	if _, err := pm.Place(ctx, market("pm-1", provider.Buy, "0.01")); !errors.Is(err, provider.ErrModeUnsupported) {
		t.Fatalf("Place under portfolio margin: %v", err)
	}
	if n := e.sim.RequestCount("POST /fapi/v1/order"); n != before {
		t.Fatalf("%d order requests reached the exchange", n-before)
	}
}

func TestInstruments(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ins, err := e.p.Instruments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.Symbol != "BTCUSDT" {
			continue
		}
		if in.TickSize.Cmp(d("0.1")) != 0 || in.LotStep.Cmp(d("0.001")) != 0 || in.MinQuantity.Cmp(d("0.001")) != 0 ||
			in.MinNotional.Cmp(d("100")) != 0 || !in.Perpetual || !in.Trading || in.Base != "BTC" || in.Quote != "USDT" {
			t.Fatalf("BTCUSDT: %+v", in)
		}
		return
	}
	t.Fatalf("no BTCUSDT in %d instruments", len(ins))
}

func TestMarketOrderFillsOnTheStream(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := market("m-1", provider.Buy, "0.01")
	st, err := s.Place(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != provider.StatusFilled || st.ClientOrderID != o.ClientOrderID || st.FilledQuantity.Cmp(d("0.01")) != 0 {
		t.Fatalf("answer: %+v", st)
	}
	fill := waitEvent(t, evs, func(ev provider.Event) bool {
		u, ok := ev.(*provider.OrderUpdate)
		return ok && u.Order.ClientOrderID == o.ClientOrderID && u.Execution != nil
	}).(*provider.OrderUpdate)
	if fill.Execution.Quantity.Cmp(d("0.01")) != 0 || fill.Execution.Price.Sign() <= 0 || fill.Order.Status != provider.StatusFilled {
		t.Fatalf("fill: %+v %+v", fill.Order, fill.Execution)
	}
	waitEvent(t, evs, func(ev provider.Event) bool {
		u, ok := ev.(*provider.AccountUpdate)
		return ok && len(u.Positions) == 1 && u.Positions[0].Quantity.Cmp(d("0.01")) == 0
	})
	// The fill is in the execution history too, once.
	ex, cur, err := s.Executions(ctx, "BTCUSDT", "", 0)
	if err != nil || len(ex) != 1 || ex[0].ID != fill.Execution.ID || ex[0].Quantity.Cmp(d("0.01")) != 0 {
		t.Fatalf("Executions = %+v, %v", ex, err)
	}
	if more, _, err := s.Executions(ctx, "BTCUSDT", cur, 0); err != nil || len(more) != 0 {
		t.Fatalf("after the cursor: %+v, %v", more, err)
	}
}

func waitEvent(t *testing.T, evs <-chan provider.Event, match func(provider.Event) bool) provider.Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatal("stream closed")
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching event within 5s")
		}
	}
}

func TestLimitRestsAndCancels(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	o := limit("l-1", provider.Buy, "0.01", "50000")
	st, err := s.Place(ctx, o)
	if err != nil || st.Status != provider.StatusWorking || st.LimitPrice.Cmp(d("50000")) != 0 {
		t.Fatalf("Place = %+v, %v", st, err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Orders) != 1 || snap.Orders[0].ClientOrderID != o.ClientOrderID {
		t.Fatalf("Snapshot orders = %+v, %v", snap.Orders, err)
	}
	// Replaced in place: a new price, the same client order id.
	st, err = s.Replace(ctx, provider.Replace{Instrument: "BTCUSDT", ClientOrderID: o.ClientOrderID, Side: provider.Buy,
		Quantity: d("0.02"), LimitPrice: d("51000")})
	if err != nil || st.LimitPrice.Cmp(d("51000")) != 0 || st.Quantity.Cmp(d("0.02")) != 0 || st.Status != provider.StatusWorking {
		t.Fatalf("Replace = %+v, %v", st, err)
	}
	st, err = s.Cancel(ctx, "BTCUSDT", o.ClientOrderID)
	if err != nil || st.Status != provider.StatusCanceled {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	if st, err := s.Lookup(ctx, "BTCUSDT", o.ClientOrderID); err != nil || st.Status != provider.StatusCanceled {
		t.Fatalf("Lookup = %+v, %v", st, err)
	}
	if _, err := s.Cancel(ctx, "BTCUSDT", o.ClientOrderID); !errors.Is(err, provider.ErrRejected) && !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := s.Lookup(ctx, "BTCUSDT", provider.ClientOrderID("acc", "never")); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("Lookup of an order never sent: %v", err)
	}
	if _, err := s.Cancel(ctx, "BTCUSDT", provider.ClientOrderID("acc", "never")); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("Cancel of an order never sent: %v", err)
	}
	// The exchange's own rejection: a price off the tick.
	var rej *provider.Rejected
	if _, err := s.Place(ctx, limit("l-2", provider.Buy, "0.01", "50000.05")); !errors.As(err, &rej) || rej.Code == 0 {
		t.Fatalf("off-tick price: %v", err)
	}
}

func TestSnapshotIsComplete(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1", Balances: map[string]string{"USDT": "5000"}})
	if _, err := s.Place(ctx, market("m-1", provider.Sell, "0.01")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Place(ctx, limit(fmt.Sprint("l-", i), provider.Buy, "0.01", fmt.Sprint(50000+i*100))); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Orders) != 3 || len(snap.Positions) != 1 || snap.Positions[0].Quantity.Cmp(d("-0.01")) != 0 ||
		snap.Positions[0].MarkPrice.Sign() <= 0 {
		t.Fatalf("snapshot: orders %+v positions %+v", snap.Orders, snap.Positions)
	}
	var usdt *provider.Balance
	for i := range snap.Balances {
		if snap.Balances[i].Asset == "USDT" {
			usdt = &snap.Balances[i]
		}
	}
	if usdt == nil || usdt.Wallet.Sign() <= 0 || usdt.Wallet.Cmp(d("5000")) > 0 {
		t.Fatalf("balances: %+v", snap.Balances)
	}
	// A read that fails partway fails the snapshot: no partial answer.
	if err := e.sim.AddFault(binancesim.Fault{Route: "GET /fapi/v1/openOrders", Status: 502, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.Snapshot(ctx); !errors.Is(err, provider.ErrUnavailable) || snap.Orders != nil || snap.Balances != nil {
		t.Fatalf("partial snapshot: %+v, %v", snap, err)
	}
}

func TestLostAnswerIsSettledByLookup(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	if err := e.sim.AddFault(binancesim.Fault{Route: "POST /fapi/v1/order", Drop: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	o := limit("drop-1", provider.Buy, "0.01", "50000")
	_, err := s.Place(ctx, o)
	var unk *provider.Unknown
	if !errors.As(err, &unk) || unk.Op != "place" {
		t.Fatalf("Place with the answer dropped: %v", err)
	}
	st, err := s.Lookup(ctx, "BTCUSDT", o.ClientOrderID)
	if err != nil || st.Status != provider.StatusWorking || st.ClientOrderID != o.ClientOrderID {
		t.Fatalf("Lookup = %+v, %v", st, err)
	}
	if n := e.sim.OrdersByClientID("k1", o.ClientOrderID); n != 1 {
		t.Fatalf("the exchange holds %d orders for the id", n)
	}
	// A 5xx on a write is an unknown outcome too, never a plain failure.
	if err := e.sim.AddFault(binancesim.Fault{Route: "POST /fapi/v1/order", Status: 503, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, limit("five-1", provider.Buy, "0.01", "50000")); !errors.Is(err, provider.ErrUnknown) {
		t.Fatalf("503 on place: %v", err)
	}
	// Nothing listening: refused before sending, safe to retry.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	closed := newEnvWith(t, binancesim.Options{}, binance.Options{HTTP: tr})
	cs := closed.link(t, binancesim.Account{APIKey: "k1"})
	_ = closed.sim.Close()
	tr.CloseIdleConnections()
	if _, err := cs.Place(ctx, limit("down-1", provider.Buy, "0.01", "50000")); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("simulator down: %v", err)
	}
}

func TestRateLimitBacksOffPerCredential(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	a := e.link(t, binancesim.Account{APIKey: "storm"})
	b := e.link(t, binancesim.Account{APIKey: "calm"})
	if err := e.sim.AddFault(binancesim.Fault{Route: "POST /fapi/v1/order", Throttle: 2 * time.Second, Times: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Place(ctx, market("r-1", provider.Buy, "0.01"))
	var rl *provider.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter < time.Second || rl.RetryAfter > 2*time.Second {
		t.Fatalf("429: %v", err)
	}
	before := e.sim.Requests()
	for i := range 5 {
		if _, err := a.Place(ctx, market(fmt.Sprint("r-x", i), provider.Buy, "0.01")); !errors.As(err, &rl) || rl.RetryAfter <= 0 {
			t.Fatalf("during the back-off: %v", err)
		}
	}
	if after := e.sim.Requests(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("calls reached the exchange during the back-off: %v then %v", before, after)
	}
	// The other credential's budget is its own.
	if st, err := b.Place(ctx, market("c-1", provider.Buy, "0.01")); err != nil || st.Status != provider.StatusFilled {
		t.Fatalf("the calm credential: %+v, %v", st, err)
	}
	enginetest.WaitFor(t, 4*time.Second, func() error {
		_, err := a.Place(ctx, market("r-2", provider.Buy, "0.01"))
		return err
	})
}

func TestBanStopsEveryCall(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	a := e.link(t, binancesim.Account{APIKey: "banned"})
	b := e.link(t, binancesim.Account{APIKey: "other"})
	if err := e.sim.AddFault(binancesim.Fault{Route: "GET /fapi/v1/openOrders", Ban: 2 * time.Second, Times: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Snapshot(ctx)
	var bn *provider.Banned
	if !errors.As(err, &bn) || time.Until(bn.Until) <= 0 || time.Until(bn.Until) > 3*time.Second {
		t.Fatalf("418: %v", err)
	}
	before := e.sim.Requests()
	if _, err := a.Place(ctx, market("b-1", provider.Buy, "0.01")); !errors.Is(err, provider.ErrBanned) {
		t.Fatalf("place while banned: %v", err)
	}
	if _, err := a.Lookup(ctx, "BTCUSDT", "x"); !errors.Is(err, provider.ErrBanned) {
		t.Fatalf("lookup while banned: %v", err)
	}
	if _, err := a.Settings(ctx); !errors.Is(err, provider.ErrBanned) {
		t.Fatalf("settings while banned: %v", err)
	}
	if after := e.sim.Requests(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("calls reached the exchange during the ban: %v then %v", before, after)
	}
	if _, err := b.Snapshot(ctx); err != nil {
		t.Fatalf("another credential during the ban: %v", err)
	}
	time.Sleep(time.Until(bn.Until))
	if _, err := a.Place(ctx, market("b-2", provider.Buy, "0.01")); err != nil {
		t.Fatalf("after the ban: %v", err)
	}
}

func TestStreamCutGivesGapThenResumes(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.sim.DisconnectStreams()
	gap := waitEvent(t, evs, func(ev provider.Event) bool { _, ok := ev.(*provider.Gap); return ok }).(*provider.Gap)
	if gap.Cause != "disconnected" || gap.At.Before(gap.Since) {
		t.Fatalf("gap: %+v", gap)
	}
	o := market("after-gap", provider.Buy, "0.01")
	if _, err := s.Place(ctx, o); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, evs, func(ev provider.Event) bool {
		u, ok := ev.(*provider.OrderUpdate)
		return ok && u.Order.ClientOrderID == o.ClientOrderID && u.Execution != nil
	})
	// A multi-assets switch at the exchange arrives as a config update.
	if err := e.sim.SetMultiAssetsMode("k1", true); err != nil {
		t.Fatal(err)
	}
	cu := waitEvent(t, evs, func(ev provider.Event) bool { _, ok := ev.(*provider.ConfigUpdate); return ok }).(*provider.ConfigUpdate)
	if cu.MultiAssets == nil || !*cu.MultiAssets {
		t.Fatalf("config update: %+v", cu)
	}
	// Close ends the stream.
	_ = s.Close()
	for range evs {
	}
}

func TestExpiredListenKeyGivesGap(t *testing.T) {
	// Keys live 300 ms and the adapter keeps them alive every 30 min: each
	// expires, and the stream comes back on a new key after a Gap.
	e := newEnv(t, binancesim.Options{ListenKeyTTL: 300 * time.Millisecond}, binance.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gap := waitEvent(t, evs, func(ev provider.Event) bool { _, ok := ev.(*provider.Gap); return ok }).(*provider.Gap)
	if gap.Cause != "expired" && gap.Cause != "disconnected" {
		t.Fatalf("gap: %+v", gap)
	}
	o := market("after-expiry", provider.Buy, "0.01")
	if _, err := s.Place(ctx, o); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, evs, func(ev provider.Event) bool {
		u, ok := ev.(*provider.OrderUpdate)
		return ok && u.Order.ClientOrderID == o.ClientOrderID
	})
}

func TestQuotes(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	qs, err := e.p.Quotes(ctx, []string{"BTCUSDT"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SetPrice("BTCUSDT", "61000"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case q := <-qs:
			if q.Symbol == "BTCUSDT" && q.Mark != nil && q.Mark.Cmp(d("61000")) == 0 {
				e.sim.DisconnectStreams()
				// Prices move on while the feed is cut; the first quote
				// after it says it may have missed some.
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case q := <-qs:
						if q.Stale {
							return
						}
					case <-tick.C:
						_ = e.sim.SetPrice("BTCUSDT", "62000")
					case <-timeout:
						t.Fatal("no stale quote after the cut")
					}
				}
			}
		case <-timeout:
			t.Fatal("no quote at the new price")
		}
	}
}

// An exit plan's legs as the engine sends them: a reduce-only stop and a
// reduce-only take profit, both on the mark price. They rest with the
// exchange's algo service (in its snapshot, with their trigger levels); a
// mark through the take profit fills it on the stream, and the stop, its
// position gone, expires at the exchange; an exit that would trigger at
// once is the exchange's rejection.
func TestExitLegsRestAndTriggerOnTheMark(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	ctx := context.Background()
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, market("m-1", provider.Buy, "0.01")); err != nil {
		t.Fatal(err)
	}
	exit := func(id string, typ provider.OrderType, level string) provider.Order {
		return provider.Order{ClientOrderID: provider.ClientOrderID("acc", id), Instrument: "BTCUSDT", Side: provider.Sell, Type: typ,
			Quantity: d("0.01"), StopPrice: pd(level), ReduceOnly: true, MarkTrigger: true}
	}
	sl, tp := exit("sl", provider.Stop, "59000"), exit("tp", provider.TakeProfit, "61000")
	for _, o := range []provider.Order{sl, tp} {
		st, err := s.Place(ctx, o)
		if err != nil || st.Status != provider.StatusWorking || st.Type != o.Type || !st.ReduceOnly || st.StopPrice.Cmp(*o.StopPrice) != 0 ||
			st.LimitPrice != nil {
			t.Fatalf("Place %s = %+v, %v", o.Type, st, err)
		}
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Orders) != 2 {
		t.Fatalf("Snapshot orders = %+v, %v", snap.Orders, err)
	}
	var rej *provider.Rejected
	if _, err := s.Place(ctx, exit("sl-2", provider.Stop, "60500")); !errors.As(err, &rej) || rej.Code != -2021 {
		t.Fatalf("a stop above the mark: %v", err)
	}
	if err := e.sim.SetMarkPrice("BTCUSDT", "61000"); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, evs, func(ev provider.Event) bool {
		u, ok := ev.(*provider.OrderUpdate)
		return ok && u.Order.ClientOrderID == tp.ClientOrderID && u.Order.Status == provider.StatusFilled && u.Execution != nil
	})
	if st, err := s.Lookup(ctx, "BTCUSDT", sl.ClientOrderID); err != nil || st.Status != provider.StatusExpired || st.Type != provider.Stop {
		t.Fatalf("the stop after the take profit filled: %+v, %v", st, err)
	}
	if n := e.sim.OrdersByClientID("k1", tp.ClientOrderID); n != 1 {
		t.Fatalf("the exchange took %d take profits", n)
	}
}

// A write whose moment to leave passed (provider.WithSendBy) is signed by
// the library but never reaches the exchange: it is not sent (Unavailable,
// ErrSendByPassed), the exchange holds no order and saw no write; reads
// under the same context still go. One within its moment goes out once.
func TestAWritePastItsMomentIsNotSent(t *testing.T) {
	e := newEnv(t, binancesim.Options{}, binance.Limits{})
	s := e.link(t, binancesim.Account{APIKey: "k1"})
	late := provider.WithSendBy(context.Background(), time.Now().Add(-time.Millisecond))
	for _, o := range []provider.Order{market("late-1", provider.Buy, "0.01"), limit("late-2", provider.Buy, "0.01", "50000"),
		{ClientOrderID: provider.ClientOrderID("acc", "late-3"), Instrument: "BTCUSDT", Side: provider.Sell, Type: provider.Stop,
			Quantity: d("0.01"), StopPrice: pd("40000")}} {
		before := e.sim.Requests()
		_, err := s.Place(late, o)
		if !errors.Is(err, provider.ErrUnavailable) || !errors.Is(err, provider.ErrSendByPassed) {
			t.Fatalf("%s %s past its moment: %v", o.Type, o.ClientOrderID, err)
		}
		if after := e.sim.Requests(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("%s: a write reached the exchange: %v then %v", o.Type, before, after)
		}
		if n := e.sim.OrdersByClientID("k1", o.ClientOrderID); n != 0 {
			t.Fatalf("%s: the exchange holds %d orders", o.Type, n)
		}
		if _, err := s.Lookup(late, "BTCUSDT", o.ClientOrderID); !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("a read under the same context: %v", err)
		}
	}
	working := limit("in-time-1", provider.Buy, "0.01", "50000")
	if _, err := s.Place(provider.WithSendBy(context.Background(), time.Now().Add(time.Minute)), working); err != nil {
		t.Fatalf("within its moment: %v", err)
	}
	if n := e.sim.OrdersByClientID("k1", working.ClientOrderID); n != 1 {
		t.Fatalf("within its moment: the exchange holds %d orders", n)
	}
	if _, err := s.Cancel(late, "BTCUSDT", working.ClientOrderID); !errors.Is(err, provider.ErrSendByPassed) {
		t.Fatalf("a cancel past its moment: %v", err)
	}
	if st, err := s.Lookup(context.Background(), "BTCUSDT", working.ClientOrderID); err != nil || st.Status != provider.StatusWorking {
		t.Fatalf("after the cancel that was not sent: %+v, %v", st, err)
	}
}

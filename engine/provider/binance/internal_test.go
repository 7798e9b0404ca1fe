package binance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adshao/go-binance/v2/common"
	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
)

func TestMapCode(t *testing.T) {
	tests := []struct {
		op   op
		code int64
		want error
	}{
		{opPlace, -2019, provider.ErrRejected}, // margin is insufficient
		{opPlace, -4164, provider.ErrRejected}, // notional too small
		{opPlace, -1111, provider.ErrRejected}, // precision
		{opPlace, -2022, provider.ErrRejected}, // reduce-only rejected
		{opPlace, -2013, provider.ErrRejected}, // "no such order" on a placement is the exchange refusing it
		{opPlace, -4120, provider.ErrRejected}, // a conditional type on the order route: the algo service's
		{opPlace, -4116, provider.ErrRejected}, // a clientAlgoId (or client order id) in use
		{opCancel, -2011, provider.ErrNotFound},
		{opRead, -2013, provider.ErrNotFound},
		{opPlace, -2014, provider.ErrUnauthorized},
		{opRead, -2015, provider.ErrUnauthorized},
		{opRead, -1022, provider.ErrUnauthorized},
		{opPlace, -1003, provider.ErrRateLimited},
		{opPlace, -1015, provider.ErrRateLimited},
		{opPlace, -1007, provider.ErrUnknown}, // timeout: execution status unknown
		{opCancel, -1001, provider.ErrUnknown},
		{opRead, -1007, provider.ErrUnavailable},
		{opPlace, -1008, provider.ErrUnavailable}, // overloaded: not taken
		{opPlace, -1021, provider.ErrUnavailable}, // clock outside recvWindow: not taken
		{opRead, -4164, provider.ErrUnavailable},  // a read the exchange refused
	}
	for _, tt := range tests {
		err := mapCode(tt.op, tt.code)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s %d: %v, want %v", tt.op, tt.code, err, tt.want)
		}
	}
}

func TestMapErrorKeepsNoProviderText(t *testing.T) {
	secretURL := "https://fapi.binance.com/fapi/v1/order?signature=abcdef0123&timestamp=1"
	tests := []struct {
		name string
		op   op
		err  error
		want error
	}{
		{"api refusal", opPlace, &common.APIError{Code: -2019, Message: "Margin is insufficient. SECRET-TEXT"}, provider.ErrRejected},
		{"sent then dropped", opPlace, &url.Error{Op: "Post", URL: secretURL, Err: &adapterkit.SendError{Provider: "binance", Sent: true, Err: io.ErrUnexpectedEOF}}, provider.ErrUnknown},
		{"refused before sending", opPlace, &url.Error{Op: "Post", URL: secretURL, Err: &adapterkit.SendError{Provider: "binance", Sent: false, Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}}, provider.ErrUnavailable},
		{"read dropped", opRead, &url.Error{Op: "Get", URL: secretURL, Err: &adapterkit.SendError{Provider: "binance", Sent: true, Err: io.EOF}}, provider.ErrUnavailable},
		{"5xx on a write", opCancel, &url.Error{Op: "Delete", URL: secretURL, Err: &serverError{status: 503, code: -1001}}, provider.ErrUnknown},
		{"5xx overloaded", opPlace, &url.Error{Op: "Post", URL: secretURL, Err: &serverError{status: 503, code: -1008}}, provider.ErrUnavailable},
		{"5xx on a read", opRead, &url.Error{Op: "Get", URL: secretURL, Err: &serverError{status: 502}}, provider.ErrUnavailable},
		{"deadline on a write", opPlace, &url.Error{Op: "Post", URL: secretURL, Err: context.DeadlineExceeded}, provider.ErrUnknown},
		{"429", opPlace, &url.Error{Op: "Post", URL: secretURL, Err: &provider.RateLimited{RetryAfter: time.Second}}, provider.ErrRateLimited},
		{"418", opRead, &url.Error{Op: "Get", URL: secretURL, Err: &provider.Banned{Until: time.Now()}}, provider.ErrBanned},
		{"undecodable answer", opPlace, errors.New("json: cannot unmarshal SECRET-TEXT"), provider.ErrUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mapError(tt.op, tt.err)
			if !errors.Is(err, tt.want) {
				t.Fatalf("%v, want %v", err, tt.want)
			}
			if s := err.Error(); strings.Contains(s, "SECRET") || strings.Contains(s, "signature") || strings.Contains(s, "binance.com") {
				t.Fatalf("provider text in %q", s)
			}
			// Not even through the chain.
			for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), "signature") {
					t.Fatalf("the signed URL is in the chain: %q", e.Error())
				}
			}
		})
	}
}

func TestToRequest(t *testing.T) {
	px := func(s string) *events.Decimal { d := events.MustDecimal(s); return &d }
	q := events.MustDecimal("0.010")
	tests := []struct {
		name  string
		o     provider.Order
		want  request
		field string // the Unsupported field, when refused
	}{
		{"market ignores day", provider.Order{Side: provider.Buy, Type: provider.Market, TIF: provider.Day, Quantity: q},
			request{side: "BUY", typ: "MARKET", quantity: "0.01"}, ""},
		{"limit gtc", provider.Order{Side: provider.Sell, Type: provider.Limit, TIF: provider.GTC, Quantity: q, LimitPrice: px("60000.50")},
			request{side: "SELL", typ: "LIMIT", tif: "GTC", quantity: "0.01", price: "60000.5"}, ""},
		{"limit ioc", provider.Order{Side: provider.Buy, Type: provider.Limit, TIF: provider.IOC, Quantity: q, LimitPrice: px("1")},
			request{side: "BUY", typ: "LIMIT", tif: "IOC", quantity: "0.01", price: "1"}, ""},
		{"limit fok", provider.Order{Side: provider.Buy, Type: provider.Limit, TIF: provider.FOK, Quantity: q, LimitPrice: px("1")},
			request{side: "BUY", typ: "LIMIT", tif: "FOK", quantity: "0.01", price: "1"}, ""},
		{"post only is GTX", provider.Order{Side: provider.Buy, Type: provider.Limit, TIF: provider.PostOnly, Quantity: q, LimitPrice: px("1")},
			request{side: "BUY", typ: "LIMIT", tif: "GTX", quantity: "0.01", price: "1"}, ""},
		{"limit day is not offered", provider.Order{Side: provider.Buy, Type: provider.Limit, TIF: provider.Day, Quantity: q, LimitPrice: px("1")},
			request{}, "timeInForce"},
		{"stop is the algo service's STOP_MARKET", provider.Order{Side: provider.Sell, Type: provider.Stop, Quantity: q, StopPrice: px("59000"), ReduceOnly: true},
			request{side: "SELL", algo: "STOP_MARKET", quantity: "0.01", stopPrice: "59000", reduceOnly: true}, ""},
		{"stop_limit is the algo service's STOP", provider.Order{Side: provider.Sell, Type: provider.StopLimit, TIF: provider.GTC, Quantity: q, StopPrice: px("59000"), LimitPrice: px("58900")},
			request{side: "SELL", algo: "STOP", tif: "GTC", quantity: "0.01", stopPrice: "59000", price: "58900"}, ""},
		{"exit take profit closes the position", provider.Order{Side: provider.Sell, Type: provider.TakeProfit, StopPrice: px("65000"), ClosePosition: true, ReduceOnly: true},
			request{side: "SELL", algo: "TAKE_PROFIT_MARKET", stopPrice: "65000", closePosition: true}, ""},
		{"exit stop reduce-only", provider.Order{Side: provider.Buy, Type: provider.Stop, Quantity: q, StopPrice: px("61000"), ReduceOnly: true},
			request{side: "BUY", algo: "STOP_MARKET", quantity: "0.01", stopPrice: "61000", reduceOnly: true}, ""},
		{"exit stop on the mark price", provider.Order{Side: provider.Sell, Type: provider.Stop, Quantity: q, StopPrice: px("59000"), ReduceOnly: true, MarkTrigger: true},
			request{side: "SELL", algo: "STOP_MARKET", quantity: "0.01", stopPrice: "59000", reduceOnly: true, workingType: "MARK_PRICE"}, ""},
		{"exit take profit on the mark price", provider.Order{Side: provider.Sell, Type: provider.TakeProfit, Quantity: q, StopPrice: px("65000"), ReduceOnly: true, MarkTrigger: true},
			request{side: "SELL", algo: "TAKE_PROFIT_MARKET", quantity: "0.01", stopPrice: "65000", reduceOnly: true, workingType: "MARK_PRICE"}, ""},
		{"a mark trigger on a limit", provider.Order{Side: provider.Sell, Type: provider.Limit, TIF: provider.GTC, Quantity: q, LimitPrice: px("1"), MarkTrigger: true}, request{}, "markTrigger"},
		{"closePosition on a limit", provider.Order{Side: provider.Sell, Type: provider.Limit, TIF: provider.GTC, LimitPrice: px("1"), ClosePosition: true}, request{}, "closePosition"},
		{"limit without price", provider.Order{Side: provider.Buy, Type: provider.Limit, TIF: provider.GTC, Quantity: q}, request{}, "limitPrice"},
		{"stop without trigger", provider.Order{Side: provider.Buy, Type: provider.Stop, Quantity: q}, request{}, "stopPrice"},
		{"zero quantity", provider.Order{Side: provider.Buy, Type: provider.Market}, request{}, "quantity"},
		{"unknown side", provider.Order{Side: "long", Type: provider.Market, Quantity: q}, request{}, "side"},
		{"other type", provider.Order{Side: provider.Buy, Type: provider.TakeProfitLimit, Quantity: q}, request{}, "orderType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toRequest(tt.o)
			var u *provider.Unsupported
			if tt.field != "" {
				if !errors.As(err, &u) || u.Field != tt.field {
					t.Fatalf("err %v, want Unsupported %s", err, tt.field)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("toRequest = %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
	// Capabilities list exactly what toRequest takes of the engine's sets.
	c := capabilities()
	for _, tif := range c.TimeInForce {
		if _, ok := tifs[provider.TIF(tif)]; !ok {
			t.Errorf("capability timeInForce %s is not mapped", tif)
		}
	}
	for _, typ := range c.OrderTypes {
		_, plain := orderTypes[provider.OrderType(typ)]
		_, algo := algoTypes[provider.OrderType(typ)]
		if plain == algo {
			t.Errorf("capability orderType %s is mapped to the order route %v and to the algo service %v", typ, plain, algo)
		}
	}
}

func TestStatusesAndTypesRoundTrip(t *testing.T) {
	for eng, ex := range orderTypes {
		if fromType(ex) != eng {
			t.Errorf("%s → %s → %s", eng, ex, fromType(ex))
		}
	}
	for eng, ex := range algoTypes {
		if fromType(ex) != eng {
			t.Errorf("%s → %s → %s", eng, ex, fromType(ex))
		}
	}
	for eng, ex := range tifs {
		if fromTIF(ex) != eng {
			t.Errorf("%s → %s → %s", eng, ex, fromTIF(ex))
		}
	}
	if _, err := fromStatus("SOMETHING_NEW"); !errors.Is(err, errMalformed) {
		t.Errorf("an unknown status is taken: %v", err)
	}
	if s, _ := fromStatus(futures.OrderStatusTypeNew); s != provider.StatusWorking {
		t.Errorf("NEW is %s", s)
	}
}

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestBudgetBackOffAndBan(t *testing.T) {
	clk := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)}
	b := newBudget(Limits{}, clk.now)
	ctx := context.Background()
	h := http.Header{}
	h.Set("Retry-After", "3")
	var rl *provider.RateLimited
	if err := b.observe(http.StatusTooManyRequests, h); !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
		t.Fatalf("429: %v", err)
	}
	clk.t = clk.t.Add(time.Second)
	if err := b.admit(ctx, 1, true, true); !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Fatalf("during the back-off: %v", err)
	}
	clk.t = clk.t.Add(2 * time.Second)
	if err := b.admit(ctx, 1, true, true); err != nil {
		t.Fatalf("after the back-off: %v", err)
	}
	h.Set("Retry-After", "120")
	var bn *provider.Banned
	if err := b.observe(http.StatusTeapot, h); !errors.As(err, &bn) || !bn.Until.Equal(clk.t.Add(2*time.Minute)) {
		t.Fatalf("418: %v", err)
	}
	clk.t = clk.t.Add(119 * time.Second)
	if err := b.admit(ctx, 1, false, false); !errors.Is(err, provider.ErrBanned) {
		t.Fatalf("during the ban: %v", err)
	}
	clk.t = clk.t.Add(time.Second)
	if err := b.admit(ctx, 1, false, false); err != nil {
		t.Fatalf("after the ban: %v", err)
	}
	if b.sent.Load() != 2 {
		t.Fatalf("%d calls let through, want 2", b.sent.Load())
	}
}

func TestBudgetPausesAtTheExchangeCount(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	b := newBudget(Limits{WeightPerMinute: 100}, clk.now)
	h := http.Header{}
	h.Set("X-MBX-USED-WEIGHT-1M", "100") // as the exchange spells it
	if err := b.observe(http.StatusOK, h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	// The minute's weight is spent: the next call waits for the window,
	// and a caller that cannot wait so long is refused at once with the
	// wait, not sent.
	untilMinute := clk.t.Truncate(time.Minute).Add(time.Minute).Sub(clk.t)
	var rl *provider.RateLimited
	if err := b.admit(ctx, 1, false, false); !errors.As(err, &rl) || rl.RetryAfter != untilMinute {
		t.Fatalf("admit at the limit: %v, want RateLimited %s", err, untilMinute)
	}
	if err := b.admit(context.Background(), 1, true, true); !errors.As(err, &rl) || rl.RetryAfter != untilMinute {
		t.Fatalf("a write at the limit: %v, want RateLimited %s", err, untilMinute)
	}
	if b.sent.Load() != 0 {
		t.Fatal("a call went out past the exchange's count")
	}
}

// The exchange's order count at its limit holds orders until its window
// ends, and nothing else: the lookup that settles an order whose answer
// was lost is a read, and goes at once.
func TestOrderCountPausesOrdersOnly(t *testing.T) {
	clk := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 3, 0, time.UTC)}
	b := newBudget(Limits{}, clk.now)
	h := http.Header{}
	h.Set("X-MBX-ORDER-COUNT-10S", "300")
	if err := b.observe(http.StatusOK, h); err != nil {
		t.Fatal(err)
	}
	var rl *provider.RateLimited
	if err := b.admit(context.Background(), 1, true, true); !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("an order at the exchange's count: %v, want RateLimited 7s", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.admit(ctx, 1, false, false); err != nil {
		t.Fatalf("a read at the exchange's order count: %v", err)
	}
	if b.sent.Load() != 1 {
		t.Fatalf("%d calls went out, want the read alone", b.sent.Load())
	}
}

// The defaults are the exchange's published USDⓈ-M limits.
func TestLimitsDefaultToThePublishedOnes(t *testing.T) {
	l := Limits{}.withDefaults()
	if l != (Limits{WeightPerMinute: 2400, OrdersPerMinute: 1200, OrdersPer10s: 300, MaxWriteWait: 250 * time.Millisecond}) {
		t.Fatalf("defaults = %+v", l)
	}
	b := newBudget(Limits{}, time.Now)
	if b.weight.Limit() != 2400 || b.orders1m.Limit() != 1200 || b.orders10s.Limit() != 300 {
		t.Fatalf("windows %d %d %d", b.weight.Limit(), b.orders1m.Limit(), b.orders10s.Limit())
	}
}

// A credential gets every order the exchange would take at once: the
// published 300 in ten seconds go through without a wait; the 301st write
// is refused at once with the time until the first leaves the window, and
// a read (no order) still goes; 1200 a minute and 2400 weight likewise.
func TestBudgetAdmitsThePublishedWindows(t *testing.T) {
	clk := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)}
	b := newBudget(Limits{}, clk.now)
	ctx := context.Background()
	start := clk.t
	for i := range 300 {
		if err := b.admit(ctx, 1, true, true); err != nil {
			t.Fatalf("order %d: %v", i+1, err)
		}
	}
	clk.t = clk.t.Add(4 * time.Second)
	var rl *provider.RateLimited
	began := time.Now()
	if err := b.admit(ctx, 1, true, true); !errors.As(err, &rl) || rl.RetryAfter != 6*time.Second {
		t.Fatalf("order 301: %v, want RateLimited 6s", err)
	}
	if waited := time.Since(began); waited > 50*time.Millisecond {
		t.Fatalf("the refused write waited %s in the engine", waited)
	}
	if err := b.admit(ctx, 1, false, false); err != nil {
		t.Fatalf("a read beside the full order window: %v", err)
	}
	// Every ten seconds 300 more, up to 1200 in the minute.
	for w := 1; w < 4; w++ {
		clk.t = start.Add(time.Duration(w) * 10 * time.Second)
		for i := range 300 {
			if err := b.admit(ctx, 1, true, true); err != nil {
				t.Fatalf("window %d order %d: %v", w, i+1, err)
			}
		}
	}
	clk.t = start.Add(40 * time.Second)
	if err := b.admit(ctx, 1, true, true); !errors.As(err, &rl) || rl.RetryAfter != 20*time.Second {
		t.Fatalf("order 1201 in the minute: %v, want RateLimited 20s", err)
	}
	// Weight: 1200 orders and one read spent 1201; 1199 more fit.
	for i := range 1199 {
		if err := b.admit(ctx, 1, false, false); err != nil {
			t.Fatalf("weight %d: %v", 1201+i+1, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := b.admit(short, 1, false, false); !errors.As(err, &rl) || rl.RetryAfter != 20*time.Second {
		t.Fatalf("weight 2401: %v, want RateLimited 20s", err)
	}
	if got := b.sent.Load(); got != 2400 {
		t.Fatalf("%d calls let through, want 2400", got)
	}
}

// A write waits a short wait (within MaxWriteWait) and is sent; a read
// waits a longer one within its context.
func TestBudgetWaitsShortWaits(t *testing.T) {
	b := newBudget(Limits{OrdersPer10s: 1, MaxWriteWait: time.Second}, time.Now)
	ctx := context.Background()
	if err := b.admit(ctx, 1, true, true); err != nil {
		t.Fatal(err)
	}
	var rl *provider.RateLimited
	if err := b.admit(ctx, 1, true, true); !errors.As(err, &rl) || rl.RetryAfter < 9*time.Second {
		t.Fatalf("a write 10 s early: %v", err)
	}
	b = newBudget(Limits{WeightPerMinute: 1, MaxWriteWait: time.Second}, time.Now)
	b.weight = adapterkit.NewWindow(1, 200*time.Millisecond)
	if err := b.admit(ctx, 1, true, true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.admit(ctx, 1, true, true); err != nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("a write 200 ms early: %v after %s", err, time.Since(start))
	}
	b.weight = adapterkit.NewWindow(1, 2*time.Second)
	_ = b.admit(ctx, 1, false, false)
	start = time.Now()
	if err := b.admit(ctx, 1, false, false); err != nil || time.Since(start) < 1900*time.Millisecond {
		t.Fatalf("a read 2 s early: %v after %s", err, time.Since(start))
	}
}

func TestDecodeUser(t *testing.T) {
	s := &session{algos: newAlgoBook()}
	decode := func(msg string) ([]provider.Event, bool) {
		f := decodeUser([]byte(msg))
		return s.resolve(context.Background(), f), f.expired
	}
	order := `{"e":"ORDER_TRADE_UPDATE","E":1568879465651,"T":1568879465650,"o":{"s":"BTCUSDT","c":"sv2ynsdt32ahopchkbeb4yi4jdtcoi3zmy2d","S":"SELL","o":"LIMIT","f":"GTC","q":"0.001","p":"9910","ap":"9910","sp":"0","x":"TRADE","X":"FILLED","i":8886774,"l":"0.001","z":"0.001","L":"9910","N":"USDT","n":"0.00396","T":1568879465651,"t":42,"b":"0","a":"9.91","m":true,"R":false,"wt":"CONTRACT_PRICE","ot":"LIMIT","ps":"BOTH","cp":false,"rp":"0.5","pP":false,"si":0,"ss":0}}`
	evs, expired := decode(order)
	if expired || len(evs) != 1 {
		t.Fatalf("%v %v", evs, expired)
	}
	u := evs[0].(*provider.OrderUpdate)
	if u.Order.Status != provider.StatusFilled || u.Execution == nil || u.Execution.ID != "42" ||
		u.Execution.Price.Cmp(events.MustDecimal("9910")) != 0 || u.Execution.RealizedPnL.Cmp(events.MustDecimal("0.5")) != 0 || !u.Execution.Maker {
		t.Fatalf("%+v %+v", u.Order, u.Execution)
	}
	acct := `{"e":"ACCOUNT_UPDATE","E":1564745798939,"T":1564745798938,"a":{"m":"ORDER","B":[{"a":"USDT","wb":"122624.12345678","cw":"100.12345678","bc":"50.12345678"}],"P":[{"s":"BTCUSDT","pa":"-0.5","ep":"9000","cr":"200","up":"-1.2","mt":"cross","iw":"0","ps":"BOTH"}]}}`
	evs, _ = decode(acct)
	a := evs[0].(*provider.AccountUpdate)
	if a.Reason != "ORDER" || a.Balances[0].Wallet.Cmp(events.MustDecimal("122624.12345678")) != 0 || a.Positions[0].Quantity.Cmp(events.MustDecimal("-0.5")) != 0 {
		t.Fatalf("%+v", a)
	}
	cfg := `{"e":"ACCOUNT_CONFIG_UPDATE","E":1611646737479,"T":1611646737476,"ai":{"j":true}}`
	evs, _ = decode(cfg)
	if c := evs[0].(*provider.ConfigUpdate); c.MultiAssets == nil || !*c.MultiAssets {
		t.Fatalf("%+v", c)
	}
	if evs, _ := decode(`{"e":"ACCOUNT_CONFIG_UPDATE","E":1,"T":1,"ac":{"s":"BTCUSDT","l":25}}`); len(evs) != 0 {
		t.Fatalf("a leverage change: %v", evs)
	}
	if _, expired := decode(`{"e":"listenKeyExpired","E":1576653824250}`); !expired {
		t.Fatal("listenKeyExpired not seen")
	}
	for _, bad := range []string{`{`, `{"e":"SOMETHING"}`, `{"e":"ORDER_TRADE_UPDATE","E":1,"o":{"s":"X","S":"UP","X":"NEW"}}`,
		`{"e":"ORDER_TRADE_UPDATE","E":1,"o":{"s":"X","S":"BUY","X":"NEW","q":"1e999"}}`,
		`{"e":"ALGO_UPDATE","E":1,"o":{"caid":"x","aid":1,"o":"STOP_MARKET","s":"BTCUSDT","S":"SELL","q":"1","X":"SOMETHING"}}`,
		`{"e":"ALGO_UPDATE","E":1,"o":{"caid":"x","aid":1,"o":"STOP_MARKET","s":"BTCUSDT","S":"SELL","q":"1","X":"TRIGGERED","ai":"x1"}}`} {
		if evs, _ := decode(bad); len(evs) != 0 {
			t.Fatalf("%s gave %v", bad, evs)
		}
	}
}

// The engine's derived client order ids are clientAlgoIds the algo service
// takes: ^[\.A-Z\:/a-z0-9_-]{1,36}$.
func TestDerivedIDsAreClientAlgoIDs(t *testing.T) {
	pattern := regexp.MustCompile(`^[\.A-Z\:/a-z0-9_-]{1,36}$`)
	for _, pair := range [][2]string{{"acc", "c-1"}, {"", ""}, {"01J0ACCOUNT", strings.Repeat("ü", 64)}, {"a", "b\x00c"}} {
		id := provider.ClientOrderID(pair[0], pair[1])
		if !pattern.MatchString(id) || !provider.Derived(id) {
			t.Errorf("%q from %q: not a clientAlgoId", id, pair)
		}
	}
}

// A conditional order's ALGO_UPDATEs and the ORDER_TRADE_UPDATEs of the
// order it placed read as one order of the engine's client order id, in
// whatever order and however often they arrive: it works until its placed
// order fills, its trade is its execution, and an old report never moves
// it back.
func TestAlgoUpdatesAreTheConditionalOrders(t *testing.T) {
	cid := provider.ClientOrderID("acc", "sl-1")
	algo := func(status, ai, aq, ap string) string {
		return fmt.Sprintf(`{"e":"ALGO_UPDATE","T":1750515742297,"E":1750515742303,"o":{"caid":%q,"aid":2148719,"at":"CONDITIONAL","o":"STOP_MARKET","s":"BTCUSDT","S":"SELL","ps":"BOTH","f":"GTC","q":"0.010","X":%q,"ai":%q,"ap":%q,"aq":%q,"act":"MARKET","tp":"59000.00","p":"0.00","V":"EXPIRE_MAKER","wt":"MARK_PRICE","pm":"NONE","cp":false,"pP":false,"R":true,"tt":0,"gtd":0,"rm":""}}`,
			cid, status, ai, ap, aq)
	}
	placed := func(x, status, z, l string, trade int) string {
		return fmt.Sprintf(`{"e":"ORDER_TRADE_UPDATE","E":1750515742310,"T":1750515742310,"o":{"s":"BTCUSDT","c":"sim0a1b2c3d4e5f60718293","S":"SELL","o":"MARKET","f":"GTC","q":"0.010","p":"0","ap":"58990.00","sp":"0","x":%q,"X":%q,"i":8380000042,"l":%q,"z":%q,"L":"58990.00","N":"USDT","n":"0.23596000","T":1750515742310,"t":%d,"b":"0","a":"0","m":false,"R":true,"wt":"CONTRACT_PRICE","ot":"MARKET","ps":"BOTH","cp":false,"rp":"-1.5","pP":false,"si":0,"ss":0}}`,
			x, status, l, z, trade)
	}
	frames := map[string]string{
		"new":        algo("NEW", "", "0.000", "0.00"),
		"triggering": algo("TRIGGERING", "", "0.000", "0.00"),
		"triggered":  algo("TRIGGERED", "8380000042", "0.000", "0.00"),
		"placed":     placed("NEW", "NEW", "0.000", "0.000", 0),
		"trade":      placed("TRADE", "FILLED", "0.010", "0.010", 590000007),
		"finished":   algo("FINISHED", "8380000042", "0.010", "58990.00"),
	}
	tests := []struct {
		name  string
		order []string
	}{
		{"as sent", []string{"new", "triggering", "triggered", "placed", "trade", "finished"}},
		{"reordered", []string{"triggering", "new", "triggered", "finished", "trade", "placed"}},
		{"duplicated", []string{"new", "new", "triggering", "triggered", "triggered", "placed", "trade", "trade", "placed", "finished", "triggering"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &session{algos: newAlgoBook()}
			var filled *provider.OrderUpdate
			var last provider.OrderState
			for _, name := range tt.order {
				evs := s.resolve(context.Background(), decodeUser([]byte(frames[name])))
				if len(evs) != 1 {
					t.Fatalf("%s gave %v", name, evs)
				}
				u := evs[0].(*provider.OrderUpdate)
				if u.Order.ClientOrderID != cid || u.Order.ProviderOrderID != "algo-2148719" || u.Order.Type != provider.Stop ||
					u.Order.StopPrice == nil || u.Order.StopPrice.Cmp(events.MustDecimal("59000")) != 0 || !u.Order.ReduceOnly ||
					u.Order.Quantity.Cmp(events.MustDecimal("0.01")) != 0 {
					t.Fatalf("%s: %+v", name, u.Order)
				}
				if u.Order.FilledQuantity.Cmp(last.FilledQuantity) < 0 || last.Status.Final() && !u.Order.Status.Final() {
					t.Fatalf("%s moved the order back: %+v after %+v", name, u.Order, last)
				}
				last = u.Order
				if u.Execution != nil {
					filled = u
				}
			}
			if last.Status != provider.StatusFilled || last.FilledQuantity.Cmp(events.MustDecimal("0.01")) != 0 ||
				last.AveragePrice == nil || last.AveragePrice.Cmp(events.MustDecimal("58990")) != 0 {
				t.Fatalf("the order at the end: %+v", last)
			}
			if filled == nil || filled.Execution.ClientOrderID != cid || filled.Execution.ProviderOrderID != "algo-2148719" ||
				filled.Execution.ID != "590000007" || filled.Execution.Fee.Cmp(events.MustDecimal("0.23596")) != 0 {
				t.Fatalf("the trade: %+v", filled)
			}
		})
	}
}

// The exchange's capabilities give the exit plans the engine serves on its
// accounts: a stop loss, take profits, several of them and a runner (OCO kept
// by the engine: the exchange has none), never breakeven or a trailing stop;
// and the account frame says the same of a Binance account.
func TestExitPlanSupport(t *testing.T) {
	c := capabilities()
	want := []string{"stop_loss", "take_profit", "multiple_targets", "runner_leg"}
	if got := provider.ExitPlanSupport(c); !slices.Equal(got, want) {
		t.Fatalf("ExitPlanSupport = %v, want %v", got, want)
	}
	if c.NativeOco || !c.ReduceOnly {
		t.Fatalf("capabilities: nativeOco %v reduceOnly %v", c.NativeOco, c.ReduceOnly)
	}
	f := frames.CapabilitiesOf(projections.Account{Kind: frames.KindProvider, Broker: Broker})
	if !slices.Equal(f.ExitPlanSupport, want) || !slices.Equal(f.OrderTypes, c.OrderTypes) || !slices.Equal(f.TIFs, c.TimeInForce) ||
		f.ReduceOnly != c.ReduceOnly {
		t.Fatalf("the frame of a Binance account says %+v; the exchange's capabilities %+v", f, c)
	}
	for _, tt := range []struct {
		name string
		c    provider.Capabilities
		want []string
	}{
		{"no reduce-only: nothing", provider.Capabilities{Execution: true, OrderTypes: []string{"market", "limit", "stop"}}, []string{}},
		{"no execution: nothing", provider.Capabilities{ReduceOnly: true, OrderTypes: []string{"stop"}}, []string{}},
		{"stops only", provider.Capabilities{Execution: true, ReduceOnly: true, OrderTypes: []string{"market", "stop"}}, []string{"stop_loss", "runner_leg"}},
		{"limits only", provider.Capabilities{Execution: true, ReduceOnly: true, OrderTypes: []string{"market", "limit"}},
			[]string{"take_profit", "multiple_targets"}},
	} {
		if got := provider.ExitPlanSupport(tt.c); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

package tradovate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
	"github.com/svc/engine/events"
)

// The JSON samples below are the API documentation's (the REST reference's
// schemas and examples, the socket and market-data pages), with values
// filled in where the documentation writes "string" or 0.

func dec(s string) events.Decimal { return events.MustDecimal(s) }

func ptr(s string) *events.Decimal { d := dec(s); return &d }

// noNetwork fails every request: a unit test that reaches for the network
// fails instead of calling anyone.
type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network in unit tests")
}

func testProvider(t *testing.T, o Options) *Provider {
	t.Helper()
	if o.HTTP == nil {
		o.HTTP = noNetwork{}
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSocketFrames(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		kind     byte
		msgs     int
		bad      bool
	}{
		{name: "open", in: "o", kind: 'o'},
		{name: "heartbeat", in: "h", kind: 'h'},
		{name: "close", in: `c[1000,"Server shutdown"]`, kind: 'c'},
		{name: "authorize answer", in: `a[{"s":200,"i":0}]`, kind: 'a', msgs: 1},
		{name: "error answer with text data", in: `a[{"s":404,"i":1,"d":"\"Not found: quote/subscribe\""}]`, kind: 'a', msgs: 1},
		{name: "two events", in: `a[{"e":"props","d":{"entityType":"order","eventType":"Created","entity":{"id":1}}},{"e":"md","d":{"quotes":[]}}]`, kind: 'a', msgs: 2},
		{name: "not an array", in: `a{"s":200}`, bad: true},
		{name: "unknown kind", in: `x[]`, bad: true},
		{name: "empty", in: ``, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFrame([]byte(tc.in))
			if tc.bad {
				if !errors.Is(err, errMalformed) {
					t.Fatalf("parseFrame(%q) = %v, want errMalformed", tc.in, err)
				}
				return
			}
			if err != nil || f.kind != tc.kind || len(f.msgs) != tc.msgs {
				t.Fatalf("parseFrame(%q) = %c %d msgs, %v; want %c %d", tc.in, f.kind, len(f.msgs), err, tc.kind, tc.msgs)
			}
		})
	}
	f, _ := parseFrame([]byte(`a[{"s":200,"i":7,"d":{"x":1}},{"e":"props","d":{}}]`))
	if f.msgs[0].I == nil || *f.msgs[0].I != 7 || f.msgs[0].S != 200 || f.msgs[0].E != "" {
		t.Errorf("answer message = %+v", f.msgs[0])
	}
	if f.msgs[1].E != "props" || f.msgs[1].I != nil {
		t.Errorf("event message = %+v", f.msgs[1])
	}
}

func TestSocketRequestText(t *testing.T) {
	if got := string(encodeRequest("authorize", 0, "", []byte("tok"))); got != "authorize\n0\n\ntok" {
		t.Errorf("authorize = %q", got)
	}
	if got := string(encodeRequest("user/syncrequest", 3, "", []byte(`{"users":[5]}`))); got != "user/syncrequest\n3\n\n{\"users\":[5]}" {
		t.Errorf("syncrequest = %q", got)
	}
	if got := string(encodeRequest("md/getchart", 12, "a=1", nil)); got != "md/getchart\n12\na=1\n" {
		t.Errorf("with query = %q", got)
	}
}

func TestAccessTokenAnswer(t *testing.T) {
	const sample = `{"accessToken":"eyJhbGciOiJIUzI1NiJ9.e30.x","mdAccessToken":"md-token","expirationTime":"2024-01-15T09:30:00Z",
		"passwordExpirationTime":"2024-08-01T00:00:00Z","userStatus":"Active","userId":15460,"name":"trader1","hasLive":true}`
	var r accessTokenResponse
	if err := json.Unmarshal([]byte(sample), &r); err != nil {
		t.Fatal(err)
	}
	if r.AccessToken == "" || r.MDAccessToken != "md-token" || r.UserID != 15460 || r.Name != "trader1" || !r.HasLive ||
		!r.ExpirationTime.Equal(time.Date(2024, 1, 15, 9, 30, 0, 0, time.UTC)) {
		t.Errorf("decoded %+v", r)
	}
	var failed accessTokenResponse
	if err := json.Unmarshal([]byte(`{"errorText":"Incorrect username or password"}`), &failed); err != nil || failed.ErrorText == "" {
		t.Errorf("errorText answer: %+v %v", failed, err)
	}
}

// The token request's body holds the password exactly, whatever its
// characters, and the application's fields as the schema names them.
func TestTokenBody(t *testing.T) {
	pw := []byte("p\"a\\s\ns\x01w€rd\xff")
	body := tokenBody("trader1", pw, App{ID: "Engine", Version: "1.0", CID: "1234", Secret: "s3c", DeviceID: "dev-1"})
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	want := map[string]any{"name": "trader1", "password": "p\"a\\s\ns\x01w€rd\ufffd", "appId": "Engine", "appVersion": "1.0",
		"cid": "1234", "sec": "s3c", "deviceId": "dev-1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
}

func TestPenaltyAnswers(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ok      bool
		captcha bool
		wait    time.Duration
	}{
		{in: `{"p-ticket":"abc","p-time":15}`, ok: true, wait: 15 * time.Second},
		{in: `{"p-ticket":"abc","p-time":3600,"p-captcha":true}`, ok: true, captcha: true, wait: time.Hour},
		{in: `{"orderId":5}`},
		{in: `[{"id":1}]`},
		{in: `{"p-ticket":""}`},
	} {
		p, ok := penaltyOf([]byte(tc.in))
		if ok != tc.ok || p.Captcha != tc.captcha || (ok && seconds(p.Time) != tc.wait) {
			t.Errorf("penaltyOf(%s) = %+v %v", tc.in, p, ok)
		}
	}
	if got := string(withTicket([]byte(`{"orderId":5}`), "tk")); got != `{"p-ticket":"tk","orderId":5}` {
		t.Errorf("withTicket = %s", got)
	}
	if got := string(withTicket([]byte(`{}`), "tk")); got != `{"p-ticket":"tk"}` {
		t.Errorf("withTicket of {} = %s", got)
	}
	if got := string(withTicket([]byte(`{"a":1}`), "")); got != `{"a":1}` {
		t.Errorf("no ticket = %s", got)
	}
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBudgetPenaltiesAndLockOuts(t *testing.T) {
	c := &clock{t: time.Date(2025, 1, 2, 15, 0, 0, 0, time.UTC)}
	b := newBudget(Limits{MaxPenaltyWait: 50 * time.Millisecond}, c.now)
	ctx := context.Background()

	// A penalty on one endpoint holds that endpoint alone.
	err := b.penalize("/order/placeorder", penalty{Ticket: "tk", Time: numOf(dec("15"))})
	var rl *provider.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter != 15*time.Second {
		t.Fatalf("penalize = %v", err)
	}
	if _, err := b.admit(ctx, "/order/placeorder", true); !errors.As(err, &rl) || rl.RetryAfter != 15*time.Second {
		t.Fatalf("a write under penalty = %v, want RateLimited 15s", err)
	}
	if tk, err := b.admit(ctx, "/order/list", false); err != nil || tk != "" {
		t.Fatalf("another endpoint = %q %v", tk, err)
	}
	// Once p-time has passed, the next request carries the ticket until an
	// answer without a penalty takes it.
	c.t = c.t.Add(15 * time.Second)
	if tk, err := b.admit(ctx, "/order/placeorder", true); err != nil || tk != "tk" {
		t.Fatalf("after p-time = %q %v, want the ticket", tk, err)
	}
	b.served("/order/placeorder")
	if tk, _ := b.admit(ctx, "/order/placeorder", true); tk != "" {
		t.Fatalf("after the answer the ticket is still sent: %q", tk)
	}

	// A captcha locks the login out for LockOut.
	var bn *provider.Banned
	if err := b.penalize("/auth/accesstokenrequest", penalty{Ticket: "c", Captcha: true}); !errors.As(err, &bn) || !bn.Until.Equal(c.t.Add(time.Hour)) {
		t.Fatalf("captcha = %v", err)
	}
	if _, err := b.admit(ctx, "/order/list", false); !errors.As(err, &bn) {
		t.Fatalf("locked out, admit = %v", err)
	}
	c.t = c.t.Add(time.Hour)

	// 429 locks out for Retry-After (an hour without), 423 backs off.
	h := http.Header{}
	h.Set("Retry-After", "30")
	if err := b.observe(http.StatusTooManyRequests, h); !errors.As(err, &bn) || !bn.Until.Equal(c.t.Add(30*time.Second)) {
		t.Fatalf("429 = %v", err)
	}
	c.t = c.t.Add(31 * time.Second)
	if err := b.observe(http.StatusTooManyRequests, nil); !errors.As(err, &bn) || !bn.Until.Equal(c.t.Add(time.Hour)) {
		t.Fatalf("429 without Retry-After = %v", err)
	}
	c.t = c.t.Add(time.Hour)
	if err := b.observe(http.StatusLocked, nil); !errors.As(err, &rl) || rl.RetryAfter != time.Minute {
		t.Fatalf("423 = %v", err)
	}
	if _, err := b.admit(ctx, "/order/list", false); !errors.As(err, &rl) {
		t.Fatalf("backing off, admit = %v", err)
	}
}

// The defaults are the published limits.
func TestLimitsDefaultToThePublishedOnes(t *testing.T) {
	l := Limits{}.withDefaults()
	want := Limits{PerSecond: 1000, PerMinute: 5000, PerHour: 5000, LoginsPerMinute: 10,
		AnonPerSecond: 100, AnonPerMinute: 1000, AnonPerHour: 1000,
		LockOut: time.Hour, MaxPenaltyWait: 10 * time.Second, MaxWriteWait: 250 * time.Millisecond}
	if l != want {
		t.Fatalf("defaults = %+v", l)
	}
	limits := func(b *budget) []int {
		var out []int
		for _, w := range b.windows {
			out = append(out, w.Limit())
		}
		return out
	}
	if got := limits(newBudget(Limits{}, time.Now)); !slices.Equal(got, []int{1000, 5000, 5000}) {
		t.Errorf("a login's windows = %v", got)
	}
	if got := limits(newAddressBudget(Limits{}, time.Now)); !slices.Equal(got, []int{100, 1000, 1000}) {
		t.Errorf("the address's windows = %v", got)
	}
	if got := limits(newLoginBudget(Limits{}, time.Now, nil)); !slices.Equal(got, []int{10}) {
		t.Errorf("a login name's windows = %v", got)
	}
}

// A login gets every request the provider would take: 1000 in a second,
// then 5000 in the hour, with no wait; the next write is refused at once
// with the time until they leave the hour (the five seconds share one of
// the hour's 3-minute slots, which leaves with its latest), and so is a
// read that cannot wait so long.
func TestBudgetAdmitsThePublishedWindows(t *testing.T) {
	c := &clock{t: time.Date(2025, 1, 2, 15, 0, 0, 0, time.UTC)}
	b := newBudget(Limits{}, c.now)
	ctx := context.Background()
	// Writes take all but a twentieth of each window: 950 orders in the
	// second, and the 951st is refused at once for the second's end.
	for i := range 950 {
		if _, err := b.admit(ctx, "/order/placeorder", true); err != nil {
			t.Fatalf("order %d: %v", i+1, err)
		}
	}
	var rl *provider.RateLimited
	if _, err := b.admit(ctx, "/order/placeorder", true); !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("order 951 in the second: %v, want RateLimited 1s", err)
	}
	// The rest is the reads': the second's 1,000 in all.
	readsUpTo(t, b, 50, time.Second)
	// Four more seconds of orders spend the writes' share of the minute
	// and the hour: 4,750 requests with the first second's 50 reads.
	for s := 1; s < 5; s++ {
		c.t = c.t.Add(time.Second)
		n := 950
		if s == 4 {
			n = 900 // the hour's writes' share less the first second's reads
		}
		for i := range n {
			if _, err := b.admit(ctx, "/order/placeorder", true); err != nil {
				t.Fatalf("second %d order %d: %v", s, i+1, err)
			}
		}
	}
	c.t = c.t.Add(10 * time.Minute)
	began := time.Now()
	if _, err := b.admit(ctx, "/order/placeorder", true); !errors.As(err, &rl) || rl.RetryAfter != 50*time.Minute {
		t.Fatalf("an order past the writes' share of the hour: %v, want RateLimited 50m", err)
	}
	if waited := time.Since(began); waited > 50*time.Millisecond {
		t.Fatalf("the refused write waited %s in the engine", waited)
	}
	// A lookup still goes: the hour keeps its reserve for reads.
	readsUpTo(t, b, 250, 50*time.Minute)
	if b.idle() {
		t.Fatal("a spent budget reads as idle")
	}
	c.t = c.t.Add(50*time.Minute - time.Second)
	if _, err := b.admit(ctx, "/order/placeorder", true); !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("a second before the hour's first requests left it: %v", err)
	}
	c.t = c.t.Add(time.Second)
	if _, err := b.admit(ctx, "/order/placeorder", true); err != nil {
		t.Fatalf("once the hour's first requests left it: %v", err)
	}
}

// readsUpTo checks that b admits n reads at once and refuses the next
// with a wait of want (a read that cannot wait so long).
func readsUpTo(t *testing.T, b *budget, n int, want time.Duration) {
	t.Helper()
	for i := range n {
		if _, err := b.admit(context.Background(), "/order/list", false); err != nil {
			t.Fatalf("read %d of %d: %v", i+1, n, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var rl *provider.RateLimited
	if _, err := b.admit(ctx, "/order/list", false); !errors.As(err, &rl) || rl.RetryAfter != want {
		t.Fatalf("read %d: %v, want RateLimited %s", n+1, err, want)
	}
}

// A write waits a wait within MaxWriteWait and is sent; a read waits a
// longer one within its context (the clock is real here).
func TestBudgetWaitsShortWaits(t *testing.T) {
	b := newBudget(Limits{PerSecond: 1, MaxWriteWait: 2 * time.Second}, time.Now)
	ctx := context.Background()
	if _, err := b.admit(ctx, "/order/placeorder", true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.admit(ctx, "/order/placeorder", true); err != nil || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("a write a second early: %v after %s", err, time.Since(start))
	}
	b = newBudget(Limits{PerSecond: 1}, time.Now)
	_, _ = b.admit(ctx, "/order/placeorder", true)
	var rl *provider.RateLimited
	if _, err := b.admit(ctx, "/order/placeorder", true); !errors.As(err, &rl) || rl.RetryAfter < 900*time.Millisecond {
		t.Fatalf("a write past MaxWriteWait: %v", err)
	}
	start = time.Now()
	if _, err := b.admit(ctx, "/order/list", false); err != nil || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("a read a second early: %v after %s", err, time.Since(start))
	}
}

// A login name's token request spends its own window and the address's
// together, or neither: a name whose own window is full spends nothing of
// the address's.
func TestSignInBudgetsSpendTogether(t *testing.T) {
	c := &clock{t: time.Date(2025, 1, 2, 15, 0, 0, 0, time.UTC)}
	l := Limits{LoginsPerMinute: 2, AnonPerSecond: 3}
	addr := newAddressBudget(l, c.now)
	a, b := newLoginBudget(l, c.now, addr), newLoginBudget(l, c.now, addr)
	ctx := context.Background()
	for range 2 {
		if _, err := a.admit(ctx, "/auth/accesstokenrequest", true); err != nil {
			t.Fatal(err)
		}
	}
	var rl *provider.RateLimited
	if _, err := a.admit(ctx, "/auth/accesstokenrequest", true); !errors.As(err, &rl) || rl.RetryAfter != time.Minute {
		t.Fatalf("a's third: %v, want RateLimited 1m", err)
	}
	if _, err := b.admit(ctx, "/auth/accesstokenrequest", true); err != nil {
		t.Fatalf("b's first (the address had room for one): %v", err)
	}
	if _, err := b.admit(ctx, "/auth/accesstokenrequest", true); !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("b's second beyond the address's second: %v, want RateLimited 1s", err)
	}
	c.t = c.t.Add(time.Second)
	if _, err := b.admit(ctx, "/auth/accesstokenrequest", true); err != nil {
		t.Fatalf("b's second after a second: %v", err)
	}
	if a.idle() || !newLoginBudget(l, c.now, addr).idle() {
		t.Fatal("idle")
	}
	c.t = c.t.Add(time.Minute)
	if !a.idle() {
		t.Fatal("a login name's budget a minute on is not idle")
	}
}

// A read waits out a short penalty (the clock is real here) and then
// carries the ticket.
func TestBudgetReadWaitsAShortPenalty(t *testing.T) {
	b := newBudget(Limits{MaxPenaltyWait: time.Second}, time.Now)
	_ = b.penalize("/fill/list", penalty{Ticket: "tk", Time: numOf(dec("1"))})
	start := time.Now()
	tk, err := b.admit(context.Background(), "/fill/list", false)
	if err != nil || tk != "tk" || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("admit = %q %v after %s", tk, err, time.Since(start))
	}
}

func TestFailureReasons(t *testing.T) {
	type want int
	const (
		none want = iota
		rejected
		unknown
		unavailable
		unauthorized
	)
	for _, tc := range []struct {
		op     op
		reason string
		want   want
		code   int64
	}{
		{opPlace, "", none, 0},
		{opPlace, "Success", none, 0},
		{opPlace, "MaxPosLimitReached", rejected, 15},
		{opPlace, "InvalidPrice", rejected, 8},
		{opPlace, "SessionClosed", rejected, 24},
		{opPlace, "SomethingNew", rejected, 0},
		{opCancel, "TooLate", rejected, 26},
		{opPlace, "UnknownReason", unknown, 30},
		{opPlace, "RiskCheckTimeout", unknown, 22},
		{opRead, "UnknownReason", unavailable, 30},
		{opReplace, "AnotherCommandPending", unavailable, 3},
		{opPlace, "ExecutionProviderUnavailable", unavailable, 6},
		{opPlace, "Unauthorized", unauthorized, 29},
	} {
		err := mapFailure(tc.op, tc.reason)
		var (
			rej *provider.Rejected
			unk *provider.Unknown
			una *provider.Unavailable
			au  *provider.Unauthorized
		)
		var got want
		var code int64
		switch {
		case err == nil:
			got = none
		case errors.As(err, &rej):
			got, code = rejected, rej.Code
		case errors.As(err, &unk):
			got, code = unknown, unk.Code
		case errors.As(err, &una):
			got, code = unavailable, una.Code
		case errors.As(err, &au):
			got, code = unauthorized, au.Code
		}
		if got != tc.want || code != tc.code {
			t.Errorf("%s %q = %v, want kind %d code %d", tc.op, tc.reason, err, tc.want, tc.code)
		}
		if err != nil && strings.Contains(err.Error(), tc.reason) && tc.reason != "" {
			t.Errorf("%s %q: the error shows the API's word: %v", tc.op, tc.reason, err)
		}
	}
}

func TestTransportErrors(t *testing.T) {
	cause := errors.New("read tcp 10.0.0.1:443: connection reset; https://live.tradovateapi.com/v1/order/placeorder")
	for _, tc := range []struct {
		name string
		op   op
		err  error
		is   error
	}{
		{"lost after sending a write", opPlace, &adapterkit.SendError{Provider: "tradovate", Sent: true, Err: cause}, provider.ErrUnknown},
		{"lost before sending a write", opPlace, &adapterkit.SendError{Provider: "tradovate", Err: cause}, provider.ErrUnavailable},
		{"lost read", opRead, &adapterkit.SendError{Provider: "tradovate", Sent: true, Err: cause}, provider.ErrUnavailable},
		{"5xx on a write", opCancel, &statusError{status: 502}, provider.ErrUnknown},
		{"5xx on a read", opRead, &statusError{status: 500}, provider.ErrUnavailable},
		{"404 on a cancel", opCancel, &statusError{status: 404}, provider.ErrNotFound},
		{"400 on a place", opPlace, &statusError{status: 400}, provider.ErrRejected},
		{"403", opPlace, &statusError{status: 403}, provider.ErrUnauthorized},
		{"401", opRead, errExpired, provider.ErrUnauthorized},
		{"deadline on a write", opReplace, context.DeadlineExceeded, provider.ErrUnknown},
		{"deadline on a read", opRead, context.DeadlineExceeded, provider.ErrUnavailable},
		{"undecodable write answer", opPlace, errMalformed, provider.ErrUnknown},
		{"budget refusal of a write", opPlace, &provider.RateLimited{RetryAfter: time.Second}, provider.ErrRateLimited},
	} {
		got := mapError(tc.op, tc.err)
		if !errors.Is(got, tc.is) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.is)
		}
		if strings.Contains(got.Error(), "tradovateapi.com") || strings.Contains(got.Error(), "10.0.0.1") {
			t.Errorf("%s: the error shows the address: %v", tc.name, got)
		}
	}
}

func TestOrdersAsSent(t *testing.T) {
	acct := account{ID: 700001, Name: "DEMO700001"}
	base := provider.Order{ClientOrderID: provider.ClientOrderID("acct", "c1"), Instrument: "ZNH6", Side: provider.Buy, Quantity: dec("2")}
	for _, tc := range []struct {
		name  string
		edit  func(*provider.Order)
		json  string
		field string // an Unsupported's field; "" when sent
	}{
		{name: "market", edit: func(o *provider.Order) { o.Type = provider.Market },
			json: `"action":"Buy","symbol":"ZNH6","orderQty":2,"orderType":"Market","isAutomated":true`},
		{name: "limit in 32nds, exact", edit: func(o *provider.Order) {
			o.Type, o.TIF, o.LimitPrice = provider.Limit, provider.GTC, ptr("110.515625")
		}, json: `"orderType":"Limit","price":110.515625,"timeInForce":"GTC"`},
		{name: "stop limit", edit: func(o *provider.Order) {
			o.Side, o.Type, o.TIF, o.LimitPrice, o.StopPrice = provider.Sell, provider.StopLimit, provider.Day, ptr("4500.25"), ptr("4500.5")
		}, json: `"action":"Sell","symbol":"ZNH6","orderQty":2,"orderType":"StopLimit","price":4500.25,"stopPrice":4500.5,"timeInForce":"Day"`},
		{name: "stop", edit: func(o *provider.Order) { o.Type, o.StopPrice = provider.Stop, ptr("109.5") },
			json: `"orderType":"Stop","stopPrice":109.5`},
		{name: "post-only", edit: func(o *provider.Order) { o.Type, o.TIF, o.LimitPrice = provider.Limit, provider.PostOnly, ptr("1") }, field: "timeInForce"},
		{name: "take profit", edit: func(o *provider.Order) { o.Type, o.StopPrice = provider.TakeProfit, ptr("1") }, field: "orderType"},
		{name: "close position", edit: func(o *provider.Order) { o.Type, o.StopPrice, o.ClosePosition = provider.Stop, ptr("1"), true }, field: "closePosition"},
		{name: "mark-price trigger", edit: func(o *provider.Order) { o.Type, o.StopPrice, o.MarkTrigger = provider.Stop, ptr("1"), true }, field: "markTrigger"},
		{name: "part of a contract", edit: func(o *provider.Order) { o.Type, o.Quantity = provider.Market, dec("1.5") }, field: "quantity"},
		{name: "limit without price", edit: func(o *provider.Order) { o.Type = provider.Limit }, field: "limitPrice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			r, err := toPlace(o, acct)
			if tc.field != "" {
				var un *provider.Unsupported
				if !errors.As(err, &un) || un.Field != tc.field {
					t.Fatalf("toPlace = %v, want Unsupported %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(r)
			if !strings.Contains(string(b), tc.json) {
				t.Errorf("body %s\nwant it to hold %s", b, tc.json)
			}
			if !strings.Contains(string(b), `"accountSpec":"DEMO700001","accountId":700001,"clOrdId":"`+o.ClientOrderID+`"`) {
				t.Errorf("body %s lacks the account and clOrdId", b)
			}
		})
	}
}

func TestOrderStateFromEntities(t *testing.T) {
	const (
		orderJSON   = `{"id":2001,"accountId":700001,"contractId":3001,"timestamp":"2025-03-03T14:30:00Z","action":"Buy","ordStatus":"%s","admin":false}`
		versionJSON = `{"id":4001,"orderId":2001,"orderQty":3,"orderType":"Limit","price":110.515625,"timeInForce":"GTC"}`
	)
	fills := []string{
		`{"id":5001,"orderId":2001,"contractId":3001,"timestamp":"2025-03-03T14:31:00Z","tradeDate":{"year":2025,"month":3,"day":3},"action":"Buy","qty":1,"price":110.5,"active":true,"finallyPaired":0}`,
		`{"id":5002,"orderId":2001,"contractId":3001,"timestamp":"2025-03-03T14:32:00Z","tradeDate":{"year":2025,"month":3,"day":3},"action":"Buy","qty":2,"price":110.515625,"active":true,"finallyPaired":0}`,
		`{"id":5003,"orderId":2001,"contractId":3001,"timestamp":"2025-03-03T14:33:00Z","tradeDate":{"year":2025,"month":3,"day":3},"action":"Buy","qty":5,"price":1,"active":false,"finallyPaired":0}`,
	}
	build := func(status string, nFills int) provider.OrderState {
		t.Helper()
		p := &orderParts{name: "ZNH6", clOrdID: "svabc"}
		if err := json.Unmarshal([]byte(strings.Replace(orderJSON, "%s", status, 1)), &p.o); err != nil {
			t.Fatal(err)
		}
		var v orderVersion
		if err := json.Unmarshal([]byte(versionJSON), &v); err != nil {
			t.Fatal(err)
		}
		p.version(v)
		for _, f := range fills[:nFills] {
			var x fill
			if err := json.Unmarshal([]byte(f), &x); err != nil {
				t.Fatal(err)
			}
			p.fill(x)
		}
		st, err := p.state()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := build("Working", 0)
	if st.Status != provider.StatusWorking || st.Type != provider.Limit || st.TIF != provider.GTC || st.Quantity.Cmp(dec("3")) != 0 ||
		st.LimitPrice == nil || st.LimitPrice.String() != "110.515625" || st.StopPrice != nil || st.AveragePrice != nil ||
		st.ProviderOrderID != "2001" || st.ClientOrderID != "svabc" || st.Instrument != "ZNH6" || st.Side != provider.Buy {
		t.Errorf("working: %+v", st)
	}
	st = build("Working", 1)
	if st.Status != provider.StatusPartiallyFilled || st.FilledQuantity.Cmp(dec("1")) != 0 {
		t.Errorf("partial: %+v", st)
	}
	// The busted fill (active false) is not counted; the average is exact.
	st = build("Filled", 3)
	if st.Status != provider.StatusFilled || st.FilledQuantity.Cmp(dec("3")) != 0 || st.AveragePrice == nil ||
		st.AveragePrice.Cmp(dec("110.5104166666666666666666666666667")) != 0 || !st.UpdatedAt.Equal(time.Date(2025, 3, 3, 14, 32, 0, 0, time.UTC)) {
		t.Errorf("filled: %+v avg %v", st, st.AveragePrice)
	}
	if st := build("Completed", 1); st.Status != provider.StatusCanceled {
		t.Errorf("completed partly: %s", st.Status)
	}
	if st := build("Completed", 2); st.Status != provider.StatusFilled {
		t.Errorf("completed whole: %s", st.Status)
	}
	for status, want := range map[string]provider.Status{"Canceled": provider.StatusCanceled, "Rejected": provider.StatusRejected,
		"Expired": provider.StatusExpired, "PendingCancel": provider.StatusWorking, "Suspended": provider.StatusWorking} {
		if st := build(status, 0); st.Status != want {
			t.Errorf("%s = %s, want %s", status, st.Status, want)
		}
	}
}

func TestFractions(t *testing.T) {
	prod := func(typ, tick string) product {
		var p product
		if err := json.Unmarshal([]byte(`{"id":1,"name":"ZN","currencyId":1,"productType":"Futures","status":"ReadyToTrade",
			"valuePerPoint":1000,"priceFormatType":"`+typ+`","priceFormat":-5,"tickSize":`+tick+`}`), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		typ, tick string
		want      *provider.PriceFraction
	}{
		{"Decimal", "0.25", nil},
		{"Fractional", "0.03125", &provider.PriceFraction{Denominator: 32}},
		{"Fractional", "0.015625", &provider.PriceFraction{Denominator: 32, SubFraction: 2}},
		{"Fractional", "0.0078125", &provider.PriceFraction{Denominator: 32, SubFraction: 4}},
		{"Fractional", "0.125", &provider.PriceFraction{Denominator: 8}},
	} {
		got, err := fractionOf(prod(tc.typ, tc.tick))
		if err != nil || (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s %s = %+v %v, want %+v", tc.typ, tc.tick, got, err, tc.want)
		}
	}
	if _, err := fractionOf(prod("Fractional", "0.01")); err == nil {
		t.Errorf("a fractional tick of 1/100 was taken")
	}

	halves := &provider.PriceFraction{Denominator: 32, SubFraction: 2}
	quarters := &provider.PriceFraction{Denominator: 32, SubFraction: 4}
	whole := &provider.PriceFraction{Denominator: 32}
	for _, tc := range []struct {
		f     *provider.PriceFraction
		price string
		text  string
	}{
		{halves, "110.515625", "110'16.5"},
		{halves, "110.5", "110'16"},
		{halves, "110.03125", "110'01"},
		{whole, "118.96875", "118'31"},
		{whole, "-0.125", "-0'04"},
		{quarters, "107.5234375", "107'16.75"},
		{nil, "4512.25", "4512.25"},
	} {
		got, err := FormatPrice(dec(tc.price), tc.f)
		if err != nil || got != tc.text {
			t.Errorf("FormatPrice(%s) = %q %v, want %q", tc.price, got, err, tc.text)
		}
		back, err := ParsePrice(tc.text, tc.f)
		if err != nil || back.Cmp(dec(tc.price)) != 0 {
			t.Errorf("ParsePrice(%q) = %s %v, want %s", tc.text, back, err, tc.price)
		}
	}
	for _, bad := range []struct {
		f    *provider.PriceFraction
		text string
	}{
		{halves, "110'16.25"}, {halves, "110'32"}, {whole, "110'16.5"}, {whole, "110.01"}, {nil, "110'16"}, {halves, "x'1"}, {halves, "1'-1"},
	} {
		if _, err := ParsePrice(bad.text, bad.f); !errors.Is(err, ErrPrice) {
			t.Errorf("ParsePrice(%q) = %v, want ErrPrice", bad.text, err)
		}
	}
	if _, err := FormatPrice(dec("107.51171875"), quarters); !errors.Is(err, ErrPrice) {
		t.Errorf("a price off the grid was written: %v", err)
	}
	// The wire's number is read exactly, never through float.
	var n num
	if err := json.Unmarshal([]byte(`110.515625000000000001`), &n); err != nil || n.dec().String() != "110.515625000000000001" {
		t.Errorf("num = %s %v", n.dec(), err)
	}
}

func TestContractFromEntities(t *testing.T) {
	var k contract
	var m contractMaturity
	var p product
	for raw, v := range map[string]any{
		`{"id":3001,"name":"ZNH6","contractMaturityId":40001,"timestamp":"2025-01-01T00:00:00Z"}`:                  &k,
		`{"id":40001,"productId":1001,"expirationMonth":3,"expirationDate":"2026-03-20T17:01:00Z","isFront":true}`: &m,
		`{"id":1001,"name":"ZN","currencyId":1,"productType":"Futures","description":"10 Year Treasury Note","exchangeId":10,
			"contractGroupId":1,"status":"ReadyToTrade","months":"HMUZ","valuePerPoint":1000,"priceFormatType":"Fractional",
			"priceFormat":-5,"tickSize":0.015625}`: &p,
	} {
		if err := json.Unmarshal([]byte(raw), v); err != nil {
			t.Fatal(err)
		}
	}
	c, err := contractOf(k, m, p, "USD")
	if err != nil {
		t.Fatal(err)
	}
	if c.Symbol != "ZNH6" || c.ContractID != "3001" || c.Product != "ZN" || c.Currency != "USD" || c.ValuePerPoint.Cmp(dec("1000")) != 0 ||
		c.TickSize.Cmp(dec("0.015625")) != 0 || c.Fraction == nil || *c.Fraction != (provider.PriceFraction{Denominator: 32, SubFraction: 2}) ||
		c.LotStep.Cmp(dec("1")) != 0 || !c.Trading || !c.Expiration.Equal(time.Date(2026, 3, 20, 17, 1, 0, 0, time.UTC)) {
		t.Errorf("contract %+v", c)
	}
}

// The documentation's quote sample, folded into each contract's latest
// quote: bid, offer and last trade exactly as written.
func TestMarketDataQuotes(t *testing.T) {
	const sample = `{"quotes":[{"timestamp":"2021-04-13T04:59:06.588Z","contractId":123456,"entries":{
		"Bid":{"price":18405.123,"size":7.123},"TotalTradeVolume":{"size":4118.123},"Offer":{"price":18410.012,"size":12.35},
		"LowPrice":{"price":18355.23},"Trade":{"price":18405.023,"size":2.10},"OpenInterest":{"size":40702.024},
		"OpeningPrice":{"price":18515.123},"HighPrice":{"price":18520.125},"SettlementPrice":{"price":18520.257}}},
		{"timestamp":"2021-04-13T04:59:06.588Z","contractId":999,"entries":{"Bid":{"price":1}}}]}`
	names := map[eid]string{123456: "NQM1"}
	last := map[eid]*provider.Quote{}
	qs := quotesOf(json.RawMessage(sample), names, last)
	if len(qs) != 1 {
		t.Fatalf("quotes %+v, want the one asked for", qs)
	}
	q := qs[0]
	if q.Symbol != "NQM1" || q.Bid.String() != "18405.123" || q.Ask.String() != "18410.012" || q.Mark.String() != "18405.023" ||
		!q.At.Equal(time.Date(2021, 4, 13, 4, 59, 6, 588e6, time.UTC)) {
		t.Errorf("quote %+v", q)
	}
	qs = quotesOf(json.RawMessage(`{"quotes":[{"timestamp":"2021-04-13T04:59:07Z","contractId":123456,"entries":{"Offer":{"price":18410.25}}}]}`), names, last)
	if len(qs) != 1 || qs[0].Bid.String() != "18405.123" || qs[0].Ask.String() != "18410.25" {
		t.Errorf("a later offer alone: %+v", qs)
	}
}

func TestSubscriptionRefusals(t *testing.T) {
	b := newBudget(Limits{}, time.Now)
	for _, tc := range []struct {
		status int
		data   string
		is     error
	}{
		{200, `{}`, nil},
		{200, ``, nil},
		{200, `{"mode":"RealTime","subscriptionId":3}`, nil},
		{200, `{"mode":"Delayed","subscriptionId":4}`, provider.ErrNotEntitled},
		{200, `{"errorText":"No market data subscription"}`, provider.ErrNotEntitled},
		{403, `"Access is denied"`, provider.ErrNotEntitled},
		{401, ``, provider.ErrNotEntitled},
		{404, `"Not found"`, provider.ErrUnsupported},
		{200, `{"p-ticket":"x","p-time":5}`, provider.ErrRateLimited},
	} {
		err := subscribeError(b, "ESH6", reply{status: tc.status, data: json.RawMessage(tc.data)})
		if tc.is == nil && err != nil || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%d %s = %v, want %v", tc.status, tc.data, err, tc.is)
		}
	}
}

// The public calls need a trader's own login.
func TestProviderAloneListsAndStreamsNothing(t *testing.T) {
	p := testProvider(t, Options{})
	if _, err := p.Quotes(context.Background(), []string{"ESH6"}); !errors.Is(err, provider.ErrNotEntitled) {
		t.Errorf("Quotes = %v", err)
	}
	if _, err := p.Instruments(context.Background()); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Instruments = %v", err)
	}
	if p.Environment() != provider.EnvLive || testProvider(t, Options{Demo: true}).Environment() != provider.EnvDemo {
		t.Errorf("environments")
	}
	if s := (App{ID: "a", Secret: "the-secret"}).String(); strings.Contains(s, "the-secret") {
		t.Errorf("App prints its secret: %s", s)
	}
	if err := (Options{RestURL: "ftp://x", WSURL: "http://x"}).Validate(); err == nil || !strings.Contains(err.Error(), "RestURL") || !strings.Contains(err.Error(), "WSURL") {
		t.Errorf("Validate = %v", err)
	}
}

// A token of the other environment, or without a user, is refused before
// anything is sent.
func TestTokensOfAnotherEnvironmentAreRefused(t *testing.T) {
	p := testProvider(t, Options{})
	demo := provider.Token{Access: "a", UserID: "5", Environment: provider.EnvDemo}
	if _, err := p.Resume(context.Background(), demo, "1", nil); !errors.Is(err, provider.ErrUnauthorized) {
		t.Errorf("Resume of a demo token on live = %v", err)
	}
	if _, err := p.Accounts(context.Background(), provider.Token{Access: "a", Environment: provider.EnvLive}); !errors.Is(err, provider.ErrUnauthorized) {
		t.Errorf("Accounts without a user = %v", err)
	}
}

package tradovate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/tradovate"
	"github.com/svc/engine/events"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

func dec(s string) events.Decimal { return events.MustDecimal(s) }

func ptr(s string) *events.Decimal { d := dec(s); return &d }

const password = "pa$$-word-123"

type env struct {
	sim *tradovatesim.Sim
	p   *tradovate.Provider
}

func newSim(t testing.TB, so tradovatesim.Options) *tradovatesim.Sim {
	t.Helper()
	sim, err := tradovatesim.New(so)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// adapter is an adapter pointed at the simulator.
func adapter(t testing.TB, sim *tradovatesim.Sim, po tradovate.Options) *tradovate.Provider {
	t.Helper()
	po.RestURL, po.WSURL, po.MDURL, po.AllowPrivate = sim.URL(), sim.WSURL(), sim.MDURL(), true
	if po.Reconnect == 0 {
		po.Reconnect = 20 * time.Millisecond
	}
	if po.RequestTimeout == 0 {
		po.RequestTimeout = 3 * time.Second
	}
	po.App = tradovate.App{ID: "engine-test", Version: "1.0", CID: "8", Secret: "app-secret", DeviceID: "device-1"}
	p, err := tradovate.New(po)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newEnv(t testing.TB, so tradovatesim.Options, po tradovate.Options) *env {
	sim := newSim(t, so)
	return &env{sim: sim, p: adapter(t, sim, po)}
}

// login adds a login of one account to the simulator and signs in to it:
// its token, its account's id and name.
func (e *env) login(t testing.TB, l tradovatesim.Login) (tok provider.Token, id, name string) {
	t.Helper()
	l.Password = password
	_, accts, err := e.sim.AddLogin(l)
	if err != nil {
		t.Fatal(err)
	}
	if len(accts) != 1 {
		t.Fatalf("accounts %v", accts)
	}
	tok, err = e.p.Login(context.Background(), l.Name, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	for n, i := range accts {
		id, name = fmt.Sprint(i), n
	}
	return tok, id, name
}

func (e *env) session(t testing.TB, tok provider.Token, acct string, renewed func(provider.Token)) provider.Session {
	t.Helper()
	s, err := e.p.Resume(context.Background(), tok, acct, renewed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func clientID(n string) string { return provider.ClientOrderID("acct-1", n) }

// The trader's password goes in once: a wrong one is Unauthorized (its
// text nowhere in the error), the right one gives tokens that open the
// login's accounts; the adapter keeps only the tokens.
func TestLoginGivesTokensThatOpenTheLoginsAccounts(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{Demo: true})
	if _, _, err := e.sim.AddLogin(tradovatesim.Login{Name: "trader1", Password: password, Kind: "demo",
		Accounts: []tradovatesim.AccountSpec{{Name: "DEMO1", Balance: "25000"}, {Name: "DEMO2"}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := e.p.Login(ctx, "trader1", []byte("wrong-"+password))
	if !errors.Is(err, provider.ErrUnauthorized) || strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "Incorrect") {
		t.Fatalf("wrong password: %v", err)
	}
	tok, err := e.p.Login(ctx, "trader1", []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Valid() || tok.Environment != provider.EnvDemo || tok.Login != "trader1" || tok.MarketData == "" || !tok.ExpiresAt.After(time.Now()) {
		t.Fatalf("token %+v", tok.ID())
	}
	accts, err := e.p.Accounts(ctx, tok)
	if err != nil || len(accts) != 2 {
		t.Fatalf("accounts %+v %v", accts, err)
	}
	byName := map[string]provider.LoginAccount{}
	for _, a := range accts {
		byName[a.Name] = a
	}
	if !byName["DEMO1"].Active || !byName["DEMO2"].Active {
		t.Fatalf("accounts %+v", accts)
	}
	s := e.session(t, tok, byName["DEMO1"].ID, nil)
	if st, err := s.Settings(ctx); err != nil || st != (provider.Settings{}) || st.Supported() != nil {
		t.Fatalf("settings %+v %v", st, err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Balances) != 1 || snap.Balances[0].Asset != "USD" || snap.Balances[0].Wallet.Cmp(dec("25000")) != 0 ||
		len(snap.Positions) != 0 || len(snap.Orders) != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	if _, err := e.p.Resume(ctx, tok, "999", nil); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("an account of no login: %v", err)
	}
}

// The token is renewed before it expires (at half its life when that comes
// before RenewBefore), the caller is handed each renewed token, and the
// session goes on past the first token's expiry.
func TestTokensAreRenewedBeforeTheyExpire(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{TokenLifetime: 2 * time.Second}, tradovate.Options{})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "renewer", Kind: "live"})
	var mu sync.Mutex
	var got []provider.Token
	s := e.session(t, tok, acct, func(t provider.Token) {
		mu.Lock()
		got = append(got, t)
		mu.Unlock()
	})
	enginetest.WaitFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return errors.New("no renewal yet")
		}
		return nil
	})
	mu.Lock()
	first := got[0]
	mu.Unlock()
	if first.Access == tok.Access || !first.ExpiresAt.After(tok.ExpiresAt) || first.ID() != tok.ID() || first.Environment != provider.EnvLive {
		t.Fatalf("renewed token is not a later one of the same login")
	}
	time.Sleep(time.Until(tok.ExpiresAt) + 200*time.Millisecond)
	if _, err := s.Snapshot(context.Background()); err != nil {
		t.Fatalf("after the first token expired: %v", err)
	}
	if n := e.sim.RequestCount("auth/accesstokenrequest"); n != 1 {
		t.Fatalf("the password was sent %d times", n)
	}
}

// A token the provider expires mid-session cannot be renewed: reads and
// writes answer Unauthorized and no order is placed.
func TestATokenExpiredMidSessionIsUnauthorized(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, name := e.login(t, tradovatesim.Login{Name: "expiring", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	if _, err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	e.sim.ExpireTokens()
	if _, err := s.Snapshot(ctx); !errors.Is(err, provider.ErrUnauthorized) {
		t.Fatalf("snapshot after expiry: %v", err)
	}
	front := e.sim.FrontContract("ES")
	_, err := s.Place(ctx, provider.Order{ClientOrderID: clientID("x"), Instrument: front, Side: provider.Buy, Type: provider.Market, Quantity: dec("1")})
	if !errors.Is(err, provider.ErrUnauthorized) {
		t.Fatalf("place after expiry: %v", err)
	}
	if n := e.sim.OrdersByClOrdID(name, clientID("x")); n != 0 {
		t.Fatalf("%d orders placed", n)
	}
}

// next reads the next event of a kind the test waits for, skipping the
// others.
func next[T provider.Event](t *testing.T, ch <-chan provider.Event, d time.Duration, ok func(T) bool) T {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case e, open := <-ch:
			if !open {
				t.Fatal("the stream closed")
			}
			if x, is := e.(T); is && (ok == nil || ok(x)) {
				return x
			}
		case <-timeout:
			var zero T
			t.Fatalf("no %T within %s", zero, d)
			return zero
		}
	}
}

// An order's life at the provider: a market order placed once fills (the
// stream reports its execution), a limit rests, is modified in place and
// canceled; the snapshot, lookups and executions read it all back.
func TestPlaceFillModifyCancel(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, name := e.login(t, tradovatesim.Login{Name: "trader", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	if err := e.sim.SetPrice(es, "5000"); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}

	buy := provider.Order{ClientOrderID: clientID("buy"), Instrument: es, Side: provider.Buy, Type: provider.Market, Quantity: dec("2")}
	st, err := s.Place(ctx, buy)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClientOrderID != buy.ClientOrderID || st.ProviderOrderID == "" || st.Status.Final() {
		t.Fatalf("placed %+v", st)
	}
	u := next(t, evs, 5*time.Second, func(u *provider.OrderUpdate) bool { return u.Execution != nil })
	if u.Execution.ClientOrderID != buy.ClientOrderID || u.Execution.Quantity.Cmp(dec("2")) != 0 || u.Execution.Price.Cmp(dec("5000")) != 0 ||
		u.Execution.Side != provider.Buy || u.Execution.Instrument != es || u.Order.Status != provider.StatusFilled {
		t.Fatalf("fill %+v of %+v", u.Execution, u.Order)
	}
	got, err := s.Lookup(ctx, es, buy.ClientOrderID)
	if err != nil || got.Status != provider.StatusFilled || got.AveragePrice == nil || got.AveragePrice.Cmp(dec("5000")) != 0 ||
		got.ProviderOrderID != st.ProviderOrderID || got.Type != provider.Market {
		t.Fatalf("lookup %+v %v", got, err)
	}
	pos := next(t, evs, 5*time.Second, func(a *provider.AccountUpdate) bool { return len(a.Positions) > 0 })
	if pos.Positions[0].Instrument != es || pos.Positions[0].Quantity.Cmp(dec("2")) != 0 {
		t.Fatalf("position update %+v", pos.Positions)
	}

	limit := provider.Order{ClientOrderID: clientID("limit"), Instrument: es, Side: provider.Buy, Type: provider.Limit, TIF: provider.GTC,
		Quantity: dec("1"), LimitPrice: ptr("4990")}
	if _, err := s.Place(ctx, limit); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Positions) != 1 || snap.Positions[0].Quantity.Cmp(dec("2")) != 0 || snap.Positions[0].EntryPrice.Cmp(dec("5000")) != 0 ||
		len(snap.Orders) != 1 || snap.Orders[0].ClientOrderID != limit.ClientOrderID || snap.Orders[0].LimitPrice.Cmp(dec("4990")) != 0 ||
		snap.Orders[0].TIF != provider.GTC {
		t.Fatalf("snapshot %+v", snap)
	}
	rep, err := s.Replace(ctx, provider.Replace{Instrument: es, ClientOrderID: limit.ClientOrderID, Side: provider.Buy, Quantity: dec("3"), LimitPrice: dec("4995.25")})
	if err != nil || rep.Quantity.Cmp(dec("3")) != 0 || rep.LimitPrice == nil || rep.LimitPrice.Cmp(dec("4995.25")) != 0 || rep.Status != provider.StatusWorking {
		t.Fatalf("replace %+v %v", rep, err)
	}
	cn, err := s.Cancel(ctx, es, limit.ClientOrderID)
	if err != nil || cn.Status != provider.StatusCanceled || cn.ClientOrderID != limit.ClientOrderID {
		t.Fatalf("cancel %+v %v", cn, err)
	}
	if _, err := s.Cancel(ctx, es, clientID("never")); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("cancel of an order never placed: %v", err)
	}
	ex, cur, err := s.Executions(ctx, es, "", 0)
	if err != nil || len(ex) != 1 || ex[0].ClientOrderID != buy.ClientOrderID || ex[0].Quantity.Cmp(dec("2")) != 0 {
		t.Fatalf("executions %+v %v", ex, err)
	}
	if more, cur2, err := s.Executions(ctx, es, cur, 0); err != nil || len(more) != 0 || cur2 != cur {
		t.Fatalf("executions after the cursor %+v %q %v", more, cur2, err)
	}
	for _, id := range []string{buy.ClientOrderID, limit.ClientOrderID} {
		if n := e.sim.OrdersByClOrdID(name, id); n != 1 {
			t.Fatalf("%d orders of %s", n, id)
		}
	}
}

// An answer lost after the provider placed the order is Unknown; Lookup
// finds the order by its clOrdId; nothing is ever sent again.
func TestALostPlaceAnswerIsSettledByLookup(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, name := e.login(t, tradovatesim.Login{Name: "dropped", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	if err := e.sim.AddFault(tradovatesim.Fault{Endpoint: "order/placeorder", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	o := provider.Order{ClientOrderID: clientID("lost"), Instrument: es, Side: provider.Sell, Type: provider.Limit, TIF: provider.Day,
		Quantity: dec("1"), LimitPrice: ptr("6000")}
	if _, err := s.Place(ctx, o); !errors.Is(err, provider.ErrUnknown) {
		t.Fatalf("place with its answer lost: %v", err)
	}
	// A fresh session (a restarted engine) knows nothing of the order.
	other := e.session(t, tok, acct, nil)
	st, err := other.Lookup(ctx, es, o.ClientOrderID)
	if err != nil || st.Status != provider.StatusWorking || st.ClientOrderID != o.ClientOrderID || st.Side != provider.Sell ||
		st.LimitPrice.Cmp(dec("6000")) != 0 || st.Quantity.Cmp(dec("1")) != 0 {
		t.Fatalf("lookup %+v %v", st, err)
	}
	if n, sent := e.sim.OrdersByClOrdID(name, o.ClientOrderID), e.sim.RequestCount("order/placeorder"); n != 1 || sent != 1 {
		t.Fatalf("%d orders, %d placements sent", n, sent)
	}
	if _, err := other.Lookup(ctx, es, clientID("never")); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("lookup of an order never placed: %v", err)
	}
}

// The provider's failures as the engine's typed errors: a refusal, a 5xx
// on a write (unknown), a penalty ticket (nothing sent until its p-time,
// then the ticket goes along), a lock-out (nothing sent).
func TestProviderFailures(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, name := e.login(t, tradovatesim.Login{Name: "failing", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	order := func(n string) provider.Order {
		return provider.Order{ClientOrderID: clientID(n), Instrument: es, Side: provider.Buy, Type: provider.Limit, TIF: provider.Day,
			Quantity: dec("1"), LimitPrice: ptr("4000")}
	}

	bad := order("off-tick")
	bad.LimitPrice = ptr("4000.1")
	var rej *provider.Rejected
	if _, err := s.Place(ctx, bad); !errors.As(err, &rej) || rej.Code != 8 {
		t.Fatalf("a price off the tick: %v", err)
	}

	if err := e.sim.AddFault(tradovatesim.Fault{Endpoint: "order/placeorder", Times: 1, Status: 503}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, order("5xx")); !errors.Is(err, provider.ErrUnknown) {
		t.Fatalf("503 on a place: %v", err)
	}

	if err := e.sim.AddFault(tradovatesim.Fault{Endpoint: "order/placeorder", Times: 1, Penalty: time.Second}); err != nil {
		t.Fatal(err)
	}
	var rl *provider.RateLimited
	if _, err := s.Place(ctx, order("penalized")); !errors.As(err, &rl) || rl.RetryAfter < 900*time.Millisecond {
		t.Fatalf("a penalty: %v", err)
	}
	sent := e.sim.RequestCount("order/placeorder")
	if _, err := s.Place(ctx, order("penalized")); !errors.Is(err, provider.ErrRateLimited) || e.sim.RequestCount("order/placeorder") != sent {
		t.Fatalf("within p-time: %v, sent %d", err, e.sim.RequestCount("order/placeorder")-sent)
	}
	time.Sleep(rl.RetryAfter)
	if _, err := s.Place(ctx, order("penalized")); err != nil {
		t.Fatalf("after p-time with the ticket: %v", err)
	}
	if n := e.sim.OrdersByClOrdID(name, clientID("penalized")); n != 1 {
		t.Fatalf("%d orders after the penalty", n)
	}

	if err := e.sim.AddFault(tradovatesim.Fault{Endpoint: "command/list", Times: 1, Lockout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	var bn *provider.Banned
	if _, err := s.Lookup(ctx, es, clientID("x")); !errors.As(err, &bn) || time.Until(bn.Until) < 50*time.Minute {
		t.Fatalf("a 429 locks the login out for the documented hour: %v", err)
	}
	before := e.sim.Requests()
	if _, err := s.Snapshot(ctx); !errors.Is(err, provider.ErrBanned) {
		t.Fatalf("locked out: %v", err)
	}
	if _, err := s.Place(ctx, order("locked")); !errors.Is(err, provider.ErrBanned) {
		t.Fatalf("locked out: %v", err)
	}
	if after := e.sim.Requests(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("sent while locked out: %v then %v", before, after)
	}
}

// A cut socket is dialed again and synced, then a Gap says events may have
// been missed; the stream goes on. Duplicated and reordered events give
// each execution once.
func TestAStreamCutDeliversAGap(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "streamer", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	evs, err := s.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, graceful := range []bool{false, true} {
		e.sim.DisconnectSockets(graceful)
		g := next[*provider.Gap](t, evs, 5*time.Second, nil)
		if g.Cause == "" || g.At.Before(g.Since) {
			t.Fatalf("gap %+v", g)
		}
	}
	e.sim.SetStreamFaults(tradovatesim.StreamFaults{Duplicate: true, Reorder: true, ReorderHold: 20 * time.Millisecond})
	o := provider.Order{ClientOrderID: clientID("after-gap"), Instrument: es, Side: provider.Sell, Type: provider.Market, Quantity: dec("1")}
	if _, err := s.Place(ctx, o); err != nil {
		t.Fatal(err)
	}
	u := next(t, evs, 5*time.Second, func(u *provider.OrderUpdate) bool { return u.Execution != nil })
	if u.Execution.ClientOrderID != o.ClientOrderID {
		t.Fatalf("execution %+v", u.Execution)
	}
	deadline := time.After(500 * time.Millisecond)
	for {
		select {
		case ev := <-evs:
			if x, ok := ev.(*provider.OrderUpdate); ok && x.Execution != nil {
				t.Fatalf("execution %s delivered again", x.Execution.ID)
			}
			continue
		case <-deadline:
		}
		break
	}
	_ = s.Close()
	for range evs {
	}
}

// Futures prices come only from a live login whose market-data
// subscription covers the product: a demo login and a live one without it
// are refused, the one with it streams its quotes.
func TestMarketDataNeedsTheLoginsOwnSubscription(t *testing.T) {
	sim := newSim(t, tradovatesim.Options{})
	live := &env{sim: sim, p: adapter(t, sim, tradovate.Options{})}
	demo := &env{sim: sim, p: adapter(t, sim, tradovate.Options{Demo: true})}
	ctx := context.Background()
	es, zn := sim.FrontContract("ES"), sim.FrontContract("ZN")

	tok, acct, _ := demo.login(t, tradovatesim.Login{Name: "demo-md", Kind: "demo"})
	var ne *provider.NotEntitled
	if _, err := demo.session(t, tok, acct, nil).(provider.QuoteSession).Quotes(ctx, []string{es}); !errors.As(err, &ne) ||
		ne.Reason != provider.EntitlementDemoLogin {
		t.Fatalf("a demo login: %v", err)
	}
	tok, acct, _ = live.login(t, tradovatesim.Login{Name: "live-nomd", Kind: "live"})
	if _, err := live.session(t, tok, acct, nil).(provider.QuoteSession).Quotes(ctx, []string{es}); !errors.As(err, &ne) ||
		ne.Reason != provider.EntitlementNoSubscription {
		t.Fatalf("a live login without a subscription: %v", err)
	}
	tok, acct, _ = live.login(t, tradovatesim.Login{Name: "live-md", Kind: "live", MarketData: []string{"ES"}})
	qs := live.session(t, tok, acct, nil).(provider.QuoteSession)
	if _, err := qs.Quotes(ctx, []string{zn}); !errors.As(err, &ne) || ne.Reason != provider.EntitlementNoSubscription {
		t.Fatalf("a product outside the subscription: %v", err)
	}
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := qs.Quotes(qctx, []string{es})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetPrice(es, "5012.75"); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		select {
		case q := <-ch:
			if q.Symbol == es && q.Mark != nil && q.Mark.Cmp(dec("5012.75")) == 0 && q.Bid != nil && q.Ask != nil {
				return nil
			}
			return fmt.Errorf("quote %+v", q)
		default:
			return errors.New("no quote")
		}
	})
	sim.DisconnectSockets(false)
	enginetest.WaitFor(t, 5*time.Second, func() error {
		select {
		case q := <-ch:
			if q.Stale {
				return nil
			}
			return errors.New("not stale")
		default:
			if err := sim.SetPrice(es, "5013"); err != nil {
				return err
			}
			return errors.New("no quote")
		}
	})
}

// Contracts with their product's facts; a 32nds product's prices go out and
// come back exactly.
func TestContractsAndPricesIn32nds(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "bonds", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es, zn := e.sim.FrontContract("ES"), e.sim.FrontContract("ZN")
	cs, err := s.(provider.ContractSession).Contracts(ctx, []string{zn, es, "NOPEZ9"})
	if err != nil || len(cs) != 2 {
		t.Fatalf("contracts %+v %v", cs, err)
	}
	z, x := cs[0], cs[1]
	if z.Symbol != zn || z.Product != "ZN" || z.Fraction == nil || *z.Fraction != (provider.PriceFraction{Denominator: 32, SubFraction: 2}) ||
		z.TickSize.Cmp(dec("0.015625")) != 0 || z.ValuePerPoint.Cmp(dec("1000")) != 0 || z.Currency != "USD" || z.Expiration.IsZero() {
		t.Fatalf("ZN %+v", z)
	}
	if x.Symbol != es || x.Fraction != nil || x.TickSize.Cmp(dec("0.25")) != 0 || x.ValuePerPoint.Cmp(dec("50")) != 0 {
		t.Fatalf("ES %+v", x)
	}
	price, err := tradovate.ParsePrice("109'16.5", z.Fraction)
	if err != nil {
		t.Fatal(err)
	}
	o := provider.Order{ClientOrderID: clientID("zn"), Instrument: zn, Side: provider.Buy, Type: provider.Limit, TIF: provider.GTC,
		Quantity: dec("1"), LimitPrice: &price}
	if _, err := s.Place(ctx, o); err != nil {
		t.Fatal(err)
	}
	st, err := s.Lookup(ctx, zn, o.ClientOrderID)
	if err != nil || st.LimitPrice == nil || st.LimitPrice.String() != "109.515625" {
		t.Fatalf("lookup %+v %v", st, err)
	}
	if w, err := tradovate.FormatPrice(*st.LimitPrice, z.Fraction); err != nil || w != "109'16.5" {
		t.Fatalf("written %q %v", w, err)
	}
}

// Without AllowPrivate the default transport is the egress guard's: the
// simulator on loopback is never reached.
func TestOutboundCallsReachOnlyPublicAddresses(t *testing.T) {
	sim := newSim(t, tradovatesim.Options{})
	if _, _, err := sim.AddLogin(tradovatesim.Login{Name: "guarded", Password: password, Kind: "live"}); err != nil {
		t.Fatal(err)
	}
	p, err := tradovate.New(tradovate.Options{RestURL: sim.URL(), WSURL: sim.WSURL(), MDURL: sim.MDURL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Login(context.Background(), "guarded", []byte(password)); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("login to a loopback address: %v", err)
	}
	if n := sim.RequestCount("auth/accesstokenrequest"); n != 0 {
		t.Fatalf("%d requests reached the simulator", n)
	}
}

// Bars come from the login's own market data as Quotes do.
func TestBarsNeedTheLoginsOwnSubscription(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{HistoryBars: 30}, tradovate.Options{})
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "charts", Kind: "live", MarketData: []string{"ES"}})
	cs := e.session(t, tok, acct, nil).(provider.ChartSession)
	bars, err := cs.Bars(ctx, provider.BarRequest{Symbol: es, Minutes: 1, Count: 10})
	if err != nil || len(bars) != 10 {
		t.Fatalf("bars %d %v", len(bars), err)
	}
	for i, b := range bars {
		if i > 0 && !b.Start.After(bars[i-1].Start) || b.Close.Cmp(dec("5000")) != 0 || b.High.Cmp(b.Low) < 0 {
			t.Fatalf("bar %d %+v", i, b)
		}
	}
	if n := e.sim.MDSubscriptions("charts"); n != 0 {
		t.Fatalf("%d subscriptions left running", n)
	}
	tok, acct, _ = e.login(t, tradovatesim.Login{Name: "nocharts", Kind: "live"})
	if _, err := e.session(t, tok, acct, nil).(provider.ChartSession).Bars(ctx, provider.BarRequest{Symbol: es, Minutes: 1, Count: 10}); !errors.Is(err, provider.ErrNotEntitled) {
		t.Fatalf("without a subscription: %v", err)
	}
}

// The token request's own limits: a penalty longer than the adapter waits
// is RateLimited, a captcha (after wrong passwords) Banned; neither shows
// the password.
func TestLoginPenalties(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{AuthPerMinute: 1}, tradovate.Options{})
	ctx := context.Background()
	if _, _, err := e.sim.AddLogin(tradovatesim.Login{Name: "limited", Password: password, Kind: "live"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Login(ctx, "limited", []byte(password)); err != nil {
		t.Fatal(err)
	}
	var rl *provider.RateLimited
	if _, err := e.p.Login(ctx, "limited", []byte(password)); !errors.As(err, &rl) || rl.RetryAfter < 30*time.Second {
		t.Fatalf("a second login within the minute: %v", err)
	}
	g := newEnv(t, tradovatesim.Options{AuthPerMinute: -1, LoginFailures: 2}, tradovate.Options{})
	if _, _, err := g.sim.AddLogin(tradovatesim.Login{Name: "guessed", Password: password, Kind: "live"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := g.p.Login(ctx, "guessed", []byte(fmt.Sprint("wrong", i))); !errors.Is(err, provider.ErrUnauthorized) {
			t.Fatalf("wrong password %d: %v", i, err)
		}
	}
	_, err := g.p.Login(ctx, "guessed", []byte(password))
	var bn *provider.Banned
	if !errors.As(err, &bn) || strings.Contains(err.Error(), password) {
		t.Fatalf("after wrong passwords: %v", err)
	}
}

// A cancel or a modify whose answer is lost is Unknown; the order is read
// as it is, and the write is never sent again.
func TestLostCancelAndModifyAnswers(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, _ := e.login(t, tradovatesim.Login{Name: "lossy", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	ctx := context.Background()
	es := e.sim.FrontContract("ES")
	o := provider.Order{ClientOrderID: clientID("resting"), Instrument: es, Side: provider.Buy, Type: provider.Limit, TIF: provider.GTC,
		Quantity: dec("1"), LimitPrice: ptr("4000")}
	if _, err := s.Place(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.AddFault(tradovatesim.Fault{Endpoint: "order/modifyorder", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace(ctx, provider.Replace{Instrument: es, ClientOrderID: o.ClientOrderID, Side: provider.Buy, Quantity: dec("2"), LimitPrice: dec("4001")}); !errors.Is(err, provider.ErrUnknown) {
		t.Fatalf("modify with its answer lost: %v", err)
	}
	st, err := s.Lookup(ctx, es, o.ClientOrderID)
	if err != nil || st.Quantity.Cmp(dec("2")) != 0 || st.LimitPrice.Cmp(dec("4001")) != 0 {
		t.Fatalf("after the lost modify %+v %v", st, err)
	}
	if err := e.sim.AddFault(tradovatesim.Fault{Endpoint: "order/cancelorder", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, es, o.ClientOrderID); !errors.Is(err, provider.ErrUnknown) {
		t.Fatalf("cancel with its answer lost: %v", err)
	}
	if st, err := s.Lookup(ctx, es, o.ClientOrderID); err != nil || st.Status != provider.StatusCanceled {
		t.Fatalf("after the lost cancel %+v %v", st, err)
	}
	if m, c := e.sim.RequestCount("order/modifyorder"), e.sim.RequestCount("order/cancelorder"); m != 1 || c != 1 {
		t.Fatalf("sent %d modifies, %d cancels", m, c)
	}
}

// Connect (the Provider's way in with a name and a password) opens a
// login's only account; a login of several accounts is to be opened with
// Login, Accounts and Resume.
func TestConnectOpensALoginsOnlyAccount(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	ctx := context.Background()
	for _, l := range []tradovatesim.Login{{Name: "one", Password: password, Kind: "live"},
		{Name: "two", Password: password, Kind: "live", Accounts: []tradovatesim.AccountSpec{{}, {}}}} {
		if _, _, err := e.sim.AddLogin(l); err != nil {
			t.Fatal(err)
		}
	}
	s, err := e.p.Connect(ctx, provider.Credentials{APIKey: "one", Secret: []byte(password)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Connect(ctx, provider.Credentials{APIKey: "two", Secret: []byte(password)}); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("a login of two accounts: %v", err)
	}
	if _, err := e.p.Connect(ctx, provider.Credentials{APIKey: "one", Secret: []byte("nope")}); !errors.Is(err, provider.ErrUnauthorized) {
		t.Fatalf("a wrong password: %v", err)
	}
}

// A write whose moment to leave passed (provider.WithSendBy) is not sent:
// Unavailable (ErrSendByPassed), no place, cancel or modify request reaches
// the provider; reads under the same context still go.
func TestAWritePastItsMomentIsNotSent(t *testing.T) {
	e := newEnv(t, tradovatesim.Options{}, tradovate.Options{})
	tok, acct, name := e.login(t, tradovatesim.Login{Name: "late", Kind: "live"})
	s := e.session(t, tok, acct, nil)
	es := e.sim.FrontContract("ES")
	late := provider.WithSendBy(context.Background(), time.Now().Add(-time.Millisecond))
	o := provider.Order{ClientOrderID: clientID("late"), Instrument: es, Side: provider.Buy, Type: provider.Limit, TIF: provider.GTC,
		Quantity: dec("1"), LimitPrice: ptr("4990")}
	if _, err := s.Place(late, o); !errors.Is(err, provider.ErrUnavailable) || !errors.Is(err, provider.ErrSendByPassed) {
		t.Fatalf("a place past its moment: %v", err)
	}
	if n, sent := e.sim.OrdersByClOrdID(name, o.ClientOrderID), e.sim.RequestCount("order/placeorder"); n != 0 || sent != 0 {
		t.Fatalf("%d orders, %d placements sent", n, sent)
	}
	if _, err := s.Lookup(late, es, o.ClientOrderID); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("a read under the same context: %v", err)
	}
	if _, err := s.Place(provider.WithSendBy(context.Background(), time.Now().Add(time.Minute)), o); err != nil {
		t.Fatalf("within its moment: %v", err)
	}
	if _, err := s.Replace(late, provider.Replace{Instrument: es, ClientOrderID: o.ClientOrderID, Side: provider.Buy, Quantity: dec("2"),
		LimitPrice: dec("4995")}); !errors.Is(err, provider.ErrSendByPassed) {
		t.Fatalf("a modify past its moment: %v", err)
	}
	if _, err := s.Cancel(late, es, o.ClientOrderID); !errors.Is(err, provider.ErrSendByPassed) {
		t.Fatalf("a cancel past its moment: %v", err)
	}
	for _, ep := range []string{"order/modifyorder", "order/cancelorder"} {
		if n := e.sim.RequestCount(ep); n != 0 {
			t.Fatalf("%d requests of %s reached the provider", n, ep)
		}
	}
	st, err := s.Lookup(context.Background(), es, o.ClientOrderID)
	if err != nil || st.Status != provider.StatusWorking || st.Quantity.Cmp(dec("1")) != 0 {
		t.Fatalf("after the writes that were not sent: %+v, %v", st, err)
	}
	if n, sent := e.sim.OrdersByClOrdID(name, o.ClientOrderID), e.sim.RequestCount("order/placeorder"); n != 1 || sent != 1 {
		t.Fatalf("%d orders, %d placements sent", n, sent)
	}
}

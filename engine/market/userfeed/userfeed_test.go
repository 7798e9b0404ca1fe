package userfeed_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/bars"
	"github.com/svc/engine/engine/market/spread"
	"github.com/svc/engine/engine/market/userfeed"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/tradovate"
	"github.com/svc/engine/events"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

const password = "md-pa$$word-1"

// logins are the users' linked futures logins, as the engine keeps them.
type logins struct {
	prov provider.TokenProvider
	mu   sync.Mutex
	toks map[string]provider.Token // by user id
	asks atomic.Int64
}

func (l *logins) FuturesLogin(_ context.Context, user string) (provider.Token, bool, error) {
	l.asks.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.toks[user]
	return t, ok, nil
}

func (l *logins) FuturesData() (provider.TokenProvider, bool) { return l.prov, l.prov != nil }

func (l *logins) unlink(user string) {
	l.mu.Lock()
	delete(l.toks, user)
	l.mu.Unlock()
}

// env is a simulator, an adapter of one environment pointed at it, the
// users' logins and a source over them.
type env struct {
	sim    *tradovatesim.Sim
	p      *tradovate.Provider
	logins *logins
	src    *userfeed.Source
}

func newSim(t testing.TB) *tradovatesim.Sim {
	t.Helper()
	products := tradovatesim.DefaultProducts()
	for i := range products {
		products[i].Contracts = 5
	}
	sim, err := tradovatesim.New(tradovatesim.Options{Products: products, HistoryBars: 30, MaxSessions: -1, AuthPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

func newEnv(t testing.TB, sim *tradovatesim.Sim, demo bool, cfg userfeed.Config) *env {
	t.Helper()
	p, err := tradovate.New(tradovate.Options{Demo: demo, RestURL: sim.URL(), WSURL: sim.WSURL(), MDURL: sim.MDURL(), AllowPrivate: true,
		Reconnect: 20 * time.Millisecond, RequestTimeout: 3 * time.Second, Limits: tradovate.Limits{LoginsPerMinute: 600},
		App: tradovate.App{ID: "engine-test", Version: "1.0", CID: "8", Secret: "app-secret", DeviceID: "device-1"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{sim: sim, p: p, logins: &logins{prov: p, toks: map[string]provider.Token{}}}
	cfg.Logins, cfg.Products = e.logins, market.Products()
	if e.src, err = userfeed.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.src.Close)
	return e
}

// link adds a login to the simulator, signs in to it and links it to user.
func (e *env) link(t testing.TB, user string, l tradovatesim.Login) {
	t.Helper()
	l.Password = password
	if _, _, err := e.sim.AddLogin(l); err != nil {
		t.Fatal(err)
	}
	tok, err := e.p.Login(context.Background(), l.Name, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	e.logins.mu.Lock()
	e.logins.toks[user] = tok
	e.logins.mu.Unlock()
}

func waitFor(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s: %v", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// roots resolves the futures roots of a spread expression.
func roots(s string) (string, bool) {
	r, ok := market.FuturesRoot(s, market.Products())
	return r, ok && r == s
}

func reason(err error) string {
	r, _ := market.RefusalReason(err)
	return r
}

func dec(s string) events.Decimal { return events.MustDecimal(s) }

// three traders on the production system: alice subscribes to the equity
// index products, bob to none, carol to the 10-year note.
func traders(t testing.TB, e *env) {
	e.link(t, "alice", tradovatesim.Login{Name: "alice-live", Kind: "live", MarketData: []string{"ES", "NQ"}})
	e.link(t, "bob", tradovatesim.Login{Name: "bob-live", Kind: "live"})
	e.link(t, "carol", tradovatesim.Login{Name: "carol-live", Kind: "live", MarketData: []string{"ZN"}})
}

// Each trader's futures prices come from their own login only, under its
// own subscription; everyone else is refused with the reason.
func TestQuotesOnlyFromTheTradersOwnSubscription(t *testing.T) {
	e := newEnv(t, newSim(t), false, userfeed.Config{})
	traders(t, e)
	es := e.sim.FrontContract("ES")
	if err := e.sim.SetPrice(es, "5012.75"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		user, symbol string
		wantReason   string
		wantLast     string
	}{
		{"alice", "ES", "", "5012.75"},
		{"alice", "es1!", "", "5012.75"},
		{"alice", es, "", "5012.75"},
		{"alice", "ZN", market.ReasonNoSubscription, ""},
		{"bob", "ES", market.ReasonNoSubscription, ""},
		{"carol", "ES", market.ReasonNoSubscription, ""},
		{"carol", "ZN", "", "110.5"},
		{"dave", "ES", market.ReasonLoginRequired, ""}, // linked nothing
		{"", "ES", market.ReasonLoginRequired, ""},
	} {
		t.Run(tc.user+"/"+tc.symbol, func(t *testing.T) {
			q, err := e.src.Quote(ctx, tc.user, tc.symbol)
			if got := reason(err); got != tc.wantReason {
				t.Fatalf("reason %q (%v), want %q", got, err, tc.wantReason)
			}
			if tc.wantReason != "" {
				return
			}
			if err != nil || q.Last.Cmp(dec(tc.wantLast)) != 0 || q.Bid.Cmp(dec(tc.wantLast)) != 0 || q.Instrument == "" {
				t.Fatalf("quote %+v %v", q, err)
			}
		})
	}
	// a refused trader opened nothing at the provider that serves prices
	if n := e.sim.MDSubscriptions("bob-live"); n != 0 {
		t.Fatalf("bob has %d market data subscriptions", n)
	}
	// the entitled trader's stream follows the provider's prices
	got := make(chan market.Quote, 16)
	cancel, err := e.src.Watch(ctx, "alice", "ES", func(q market.Quote) { got <- q })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if err := e.sim.SetPrice(es, "5020"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() error {
		select {
		case q := <-got:
			if q.Instrument == "ES" && q.Last.Cmp(dec("5020")) == 0 {
				return nil
			}
			return fmt.Errorf("quote %+v", q)
		default:
			return errors.New("no quote")
		}
	})
}

// One trader's feed never serves another's request: feeds are per user,
// and a second trader entitled to the same product has a stream of their
// own at the provider.
func TestOneTradersFeedNeverServesAnother(t *testing.T) {
	clk := &clock{now: time.Now()}
	e := newEnv(t, newSim(t), false, userfeed.Config{Now: clk.Now})
	traders(t, e)
	e.link(t, "erin", tradovatesim.Login{Name: "erin-live", Kind: "live", MarketData: []string{"ES"}})
	ctx := context.Background()

	if _, err := e.src.Quote(ctx, "alice", "ES"); err != nil {
		t.Fatal(err)
	}
	// alice's stream is open; bob still gets nothing from it
	if _, err := e.src.Quote(ctx, "bob", "ES"); reason(err) != market.ReasonNoSubscription {
		t.Fatalf("bob while alice streams ES: %v", err)
	}
	if _, err := e.src.Quote(ctx, "erin", "ES"); err != nil {
		t.Fatal(err)
	}
	fa, _ := e.src.Open(ctx, "alice")
	fe, _ := e.src.Open(ctx, "erin")
	if fa == fe || e.src.Feeds() < 2 {
		t.Fatalf("alice and erin share a feed (%d feeds)", e.src.Feeds())
	}
	if a, b := e.sim.MDSubscriptions("alice-live"), e.sim.MDSubscriptions("erin-live"); a != 1 || b != 1 {
		t.Fatalf("subscriptions at the provider: alice %d, erin %d", a, b)
	}
	// unlinking stops the feed within a second, and closes its streams at the provider
	asked := e.logins.asks.Load()
	if _, err := e.src.Quote(ctx, "alice", "ES"); err != nil || e.logins.asks.Load() != asked {
		t.Fatalf("the login read again within a second (%v)", err)
	}
	e.logins.unlink("alice")
	clk.set(clk.Now().Add(time.Second))
	if _, err := e.src.Quote(ctx, "alice", "ES"); reason(err) != market.ReasonLoginRequired {
		t.Fatalf("after unlinking: %v", err)
	}
	waitFor(t, 5*time.Second, func() error {
		if n := e.sim.MDSubscriptions("alice-live"); n != 0 {
			return fmt.Errorf("alice still has %d subscriptions", n)
		}
		return nil
	})
	if _, err := e.src.Quote(ctx, "erin", "ES"); err != nil {
		t.Fatalf("erin after alice unlinked: %v", err)
	}
}

// A demo login carries no market data: every read is refused demo_login
// and a search lists no futures.
func TestDemoLoginCarriesNone(t *testing.T) {
	e := newEnv(t, newSim(t), true, userfeed.Config{})
	e.link(t, "dora", tradovatesim.Login{Name: "dora-demo", Kind: "demo"})
	ctx := context.Background()
	f, err := e.src.Open(ctx, "dora")
	if err != nil || f.Live() {
		t.Fatalf("open %v live %v", err, f != nil && f.Live())
	}
	if _, err := f.Quote(ctx, "ES"); reason(err) != market.ReasonDemoLogin {
		t.Fatalf("quote: %v", err)
	}
	if _, err := f.Quote(ctx, "ZN"); reason(err) != market.ReasonDemoLogin {
		t.Fatalf("another product: %v", err)
	}
	tf, _ := market.ParseTimeframe("1m")
	if _, err := f.History(ctx, "NQ", tf, 10, 0); reason(err) != market.ReasonDemoLogin {
		t.Fatalf("history: %v", err)
	}
	if got := f.Search(ctx, "", 50); len(got) != 0 {
		t.Fatalf("search lists %v", got)
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Contract months come from the provider's library: the root and ES1!
// name the provider's month to trade now, ES2! the next; when the
// provider rolls, the root follows within a minute. A product quoted in
// 32nds carries the catalog's priceFraction and its prices are exact.
func TestContractMonthsRollAndThirtySeconds(t *testing.T) {
	clk := &clock{now: time.Now()}
	e := newEnv(t, newSim(t), false, userfeed.Config{Now: clk.Now})
	traders(t, e)
	ctx := context.Background()
	months := e.sim.Contracts("ES")
	i := slices.Index(months, e.sim.FrontContract("ES"))
	if i < 0 || i+2 >= len(months) {
		t.Fatalf("front %s of %v", e.sim.FrontContract("ES"), months)
	}
	months = months[i:]
	f, err := e.src.Open(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ symbol, want string }{
		{"ES", months[0]}, {"ES1!", months[0]}, {"ES2!", months[1]}, {months[1], months[1]},
		{months[2][:3] + "2" + months[2][3:], months[2]}, // ESZ26 names ESZ6
	} {
		c, err := f.Contract(ctx, tc.symbol)
		if err != nil || c.Symbol != tc.want || c.Root != "ES" || c.Expiration.IsZero() || c.TickSize.Cmp(dec("0.25")) != 0 {
			t.Fatalf("%s: %+v %v, want %s", tc.symbol, c, err, tc.want)
		}
	}
	if _, err := f.Contract(ctx, "ESF7"); !errors.Is(err, userfeed.ErrUnknownSymbol) {
		t.Fatalf("a month outside the cycle: %v", err)
	}
	if err := e.sim.SetRollDate(months[0], time.Time{}); err != nil {
		t.Fatal(err)
	}
	if c, err := f.Contract(ctx, "ES"); err != nil || c.Symbol != months[0] {
		t.Fatalf("within a minute of the roll: %+v %v", c, err)
	}
	clk.set(clk.Now().Add(2 * time.Minute))
	if c, err := f.Contract(ctx, "ES"); err != nil || c.Symbol != months[1] {
		t.Fatalf("after the provider rolled: %+v %v", c, err)
	}
	if c, err := f.Contract(ctx, "ES2!"); err != nil || c.Symbol != months[2] {
		t.Fatalf("ES2! after the roll: %+v %v", c, err)
	}
	// the 10-year note rolls a month before it expires: the provider's roll, not the nearest expiry
	zn := e.sim.FrontContract("ZN")
	if zn != e.sim.Contracts("ZN")[0] {
		if c, err := f.Contract(ctx, "ZN"); reason(err) != market.ReasonNoSubscription {
			t.Fatalf("alice's ZN: %+v %v", c, err)
		}
	}
	if err := e.sim.SetPrice(zn, "110.515625"); err != nil {
		t.Fatal(err)
	}
	g, err := e.src.Open(ctx, "carol")
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.Contract(ctx, "ZN")
	if err != nil || c.Symbol != zn {
		t.Fatalf("ZN is %+v %v, want %s", c, err, zn)
	}
	if fr := c.Fraction(); fr == nil || fr.Denominator != 32 || fr.SubFraction != 2 || c.TickSize.Cmp(dec("0.015625")) != 0 ||
		c.ValuePerPoint.Cmp(dec("1000")) != 0 {
		t.Fatalf("ZN %+v", c)
	}
	q, err := g.Quote(ctx, "ZN")
	if err != nil || q.Bid.String() != "110.515625" || q.Ask.String() != "110.515625" {
		t.Fatalf("ZN quote %+v %v", q, err)
	}
}

// History comes from the login's own charts, aggregated into the
// timeframe's buckets; a spread over futures legs works when every leg is
// entitled; seconds are not charted.
func TestHistoryAndSpreadsFromTheLoginsCharts(t *testing.T) {
	e := newEnv(t, newSim(t), false, userfeed.Config{})
	traders(t, e)
	ctx := context.Background()
	f, err := e.src.Open(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := market.ParseTimeframe("1m")
	m5, _ := market.ParseTimeframe("5m")
	s1, _ := market.ParseTimeframe("1s")
	list, err := f.History(ctx, "ES", m1, 10, 0)
	if err != nil || len(list) != 10 || list[9].Close.String() != "5000" {
		t.Fatalf("1m: %d %v", len(list), err)
	}
	list, err = f.History(ctx, "ES", m5, 4, 0)
	if err != nil || len(list) == 0 || len(list) > 4 || list[0].Time%300 != 0 {
		t.Fatalf("5m: %+v %v", list, err)
	}
	to := list[len(list)-1].Time
	if before, err := f.History(ctx, "ES", m5, 4, to); err != nil || len(before) == 0 || before[len(before)-1].Time >= to {
		t.Fatalf("5m before %d: %+v %v", to, before, err)
	}
	if _, err := f.History(ctx, "ES", s1, 10, 0); !errors.Is(err, userfeed.ErrTimeframe) {
		t.Fatalf("1s: %v", err)
	}
	isF := func(string) bool { return true }
	ex, err := spread.Parse("ES-NQ", roots)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := f.SpreadHistory(ctx, ex, m1, 5, 0, userfeed.Legs{IsFutures: isF})
	if err != nil || len(sp) != 5 || sp[4].Close.Cmp(dec("-13000").Apd()) != 0 {
		t.Fatalf("ES-NQ: %+v %v", sp, err)
	}
	ez, _ := spread.Parse("ES-ZN", roots)
	if _, err := f.SpreadHistory(ctx, ez, m1, 5, 0, userfeed.Legs{IsFutures: isF}); reason(err) != market.ReasonNoSubscription {
		t.Fatalf("a leg outside the subscription: %v", err)
	}
}

type sink struct {
	mu  sync.Mutex
	got []bars.Update
}

func (s *sink) Offer(_ int, u bars.Update) {
	s.mu.Lock()
	s.got = append(s.got, u)
	s.mu.Unlock()
}
func (*sink) Wake() {}

func (s *sink) last() (bars.Update, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == 0 {
		return bars.Update{}, false
	}
	return s.got[len(s.got)-1], true
}

// Live bars are the trader's own, made from their own quotes and seeded
// from their charts; another trader cannot subscribe.
func TestLiveBarsFromTheTradersQuotes(t *testing.T) {
	e := newEnv(t, newSim(t), false, userfeed.Config{})
	traders(t, e)
	ctx := context.Background()
	m1, _ := market.ParseTimeframe("1m")
	ex, _ := spread.Parse("ES", roots)
	f, _ := e.src.Open(ctx, "alice")
	var s sink
	cancel, err := f.SubscribeBars(ctx, ex, m1, &s, 0, userfeed.Legs{})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	es := e.sim.FrontContract("ES")
	waitFor(t, 5*time.Second, func() error {
		if err := e.sim.SetPrice(es, "5031.25"); err != nil {
			return err
		}
		u, ok := s.last()
		if !ok || u.Bar.Close.String() != "5031.25" || u.Bar.Time%60 != 0 {
			return fmt.Errorf("bar %+v", u)
		}
		return nil
	})
	g, _ := e.src.Open(ctx, "bob")
	if _, err := g.SubscribeBars(ctx, ex, m1, &sink{}, 0, userfeed.Legs{}); reason(err) != market.ReasonNoSubscription {
		t.Fatalf("bob's bars: %v", err)
	}
}

// Search lists only the months of products the login is entitled to.
func TestSearchListsOnlyEntitledProducts(t *testing.T) {
	e := newEnv(t, newSim(t), false, userfeed.Config{})
	traders(t, e)
	ctx := context.Background()
	for _, tc := range []struct {
		user, query string
		want        map[string]bool // roots listed
	}{
		{"alice", "", map[string]bool{"ES": true, "NQ": true}},
		{"alice", "nasdaq", map[string]bool{"NQ": true}},
		{"alice", "ZN", map[string]bool{}},
		{"bob", "", map[string]bool{}},
		{"carol", "", map[string]bool{"ZN": true}},
	} {
		f, err := e.src.Open(ctx, tc.user)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, c := range f.Search(ctx, tc.query, 50) {
			got[c.Root] = true
			if in := c.Instrument(); in.AssetClass != "futures" || in.Type != "future" || in.Name == "" {
				t.Fatalf("%+v", in)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s %q: %v, want %v", tc.user, tc.query, got, tc.want)
		}
	}
}

// A stream nobody reads is closed after Idle, and the feed with it.
func TestIdleStreamsAndFeedsClose(t *testing.T) {
	e := newEnv(t, newSim(t), false, userfeed.Config{Idle: 100 * time.Millisecond})
	traders(t, e)
	if _, err := e.src.Quote(context.Background(), "alice", "ES"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() error {
		if n, f := e.sim.MDSubscriptions("alice-live"), e.src.Feeds(); n != 0 || f != 0 {
			return fmt.Errorf("%d subscriptions, %d feeds", n, f)
		}
		return nil
	})
}

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// traderFeeds is each trader's own futures feed as engine.UserFutures
// serves it: a trader with no quotes set is refused.
type traderFeeds struct {
	mu      sync.Mutex
	refused map[string]string                  // user -> reason
	quotes  map[string]map[string]market.Quote // user -> symbol -> newest
	subs    map[string][]func(market.Quote)    // user+symbol
}

func newTraderFeeds() *traderFeeds {
	return &traderFeeds{refused: map[string]string{}, quotes: map[string]map[string]market.Quote{}, subs: map[string][]func(market.Quote){}}
}

func (f *traderFeeds) Quote(_ context.Context, user, symbol string) (market.Quote, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.refused[user]; ok {
		return market.Quote{}, &market.FeedRefused{Reason: r}
	}
	q, ok := f.quotes[user][symbol]
	if !ok {
		return market.Quote{}, &market.FeedRefused{Reason: market.ReasonLoginRequired}
	}
	return q, nil
}

func (f *traderFeeds) Watch(ctx context.Context, user, symbol string, fn func(market.Quote)) (func(), error) {
	q, err := f.Quote(ctx, user, symbol)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	k := user + "/" + symbol
	f.subs[k] = append(f.subs[k], fn)
	i := len(f.subs[k]) - 1
	f.mu.Unlock()
	fn(q)
	return func() {
		f.mu.Lock()
		f.subs[k][i] = nil
		f.mu.Unlock()
	}, nil
}

// set publishes a trader's quote to that trader's watchers alone.
func (f *traderFeeds) set(user, symbol, bid, ask string) {
	q := market.Quote{Instrument: symbol, Bid: dec(bid), Ask: dec(ask), Last: dec(bid), Size: dec("0"), At: clock()}
	f.mu.Lock()
	if f.quotes[user] == nil {
		f.quotes[user] = map[string]market.Quote{}
	}
	f.quotes[user][symbol] = q
	subs := append([]func(market.Quote){}, f.subs[user+"/"+symbol]...)
	f.mu.Unlock()
	for _, fn := range subs {
		if fn != nil {
			fn(q)
		}
	}
}

func (f *traderFeeds) watchers(user, symbol string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fn := range f.subs[user+"/"+symbol] {
		if fn != nil {
			n++
		}
	}
	return n
}

// Paper futures fill at the prices of the account owner's own futures
// feed, and only that owner's: a market order at the owner's touch, a
// resting limit when the owner's quote reaches it (another trader's quote
// through it fills nothing of theirs), a trader without a feed refused
// with the feed's reason, a contract month priced by its product.
func TestPaperFuturesFillAtTheOwnersOwnPrices(t *testing.T) {
	ctx := context.Background()
	feeds := newTraderFeeds()
	catalog := market.NewCatalog(append(market.DefaultCrypto(), market.DefaultFutures()...))
	e, err := engine.New(engine.Config{Log: tempLog(t), Feed: market.NewSim(market.DefaultCrypto(), 1, clock), Catalog: catalog, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	e.UseUserFutures(feeds)
	if _, err := e.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	w := &writer{t: t, e: e}
	for _, u := range []string{"alice", "bob", "carol"} {
		w.account("acct_"+u, &tenantcmd.OpenAccount{TenantID: u, Broker: "paper", AccountNumber: "PF" + u, Currency: "USD", StartingBalance: dec("100000")})
	}
	feeds.set("alice", "ES", "5000", "5000.25")
	feeds.set("carol", "ES", "5100", "5100.25")
	feeds.refused["bob"] = market.ReasonNoSubscription
	place := func(id string, o *trading.PlaceOrder) error {
		o.Quantity, o.TimeInForce = dec("1"), "gtc"
		_, err := e.Account(ctx, "acct_"+id, e.Envelope(events.Principal{TenantID: id}, "", o))
		return err
	}
	position := func(id, inst string) (qty, avg string) {
		t.Helper()
		if err := e.InspectAccount(ctx, "acct_"+id, func(s *account.State, _ uint64) {
			p := s.Positions[inst]
			qty, avg = p.Quantity.String(), p.AvgPrice.String()
		}); err != nil {
			t.Fatal(err)
		}
		return qty, avg
	}

	// a market order at the owner's own touch
	if err := place("alice", &trading.PlaceOrder{ClientOrderID: "a-mkt", Instrument: "ES", Side: "buy", OrderType: "market"}); err != nil {
		t.Fatal(err)
	}
	if qty, avg := position("alice", "ES"); qty != "1" || dec(avg).Cmp(dec("5000.25")) != 0 {
		t.Fatalf("alice's ES: %s at %s, want 1 at her ask 5000.25", qty, avg)
	}
	if err := place("carol", &trading.PlaceOrder{ClientOrderID: "c-mkt", Instrument: "ES", Side: "sell", OrderType: "market"}); err != nil {
		t.Fatal(err)
	}
	if qty, avg := position("carol", "ES"); qty != "-1" || dec(avg).Cmp(dec("5100")) != 0 {
		t.Fatalf("carol's ES: %s at %s, want -1 at her bid 5100", qty, avg)
	}
	// a trader whose feed refuses: the reason, nothing recorded
	err = place("bob", &trading.PlaceOrder{ClientOrderID: "b-mkt", Instrument: "ES", Side: "buy", OrderType: "market"})
	var ref *commands.Refusal
	if !errors.As(err, &ref) || ref.Code != commands.CodeFeedRequiresConnection || ref.Params["reason"] != market.ReasonNoSubscription {
		t.Fatalf("bob's order: %v", err)
	}
	if qty, _ := position("bob", "ES"); qty != "0" {
		t.Fatalf("bob holds %s ES", qty)
	}

	// resting limits: each fills on its owner's quotes only
	lim := dec("4990")
	if err := place("alice", &trading.PlaceOrder{ClientOrderID: "a-lim", Instrument: "ES", Side: "buy", OrderType: "limit", LimitPrice: &lim}); err != nil {
		t.Fatal(err)
	}
	high := dec("5200")
	if err := place("carol", &trading.PlaceOrder{ClientOrderID: "c-lim", Instrument: "ES", Side: "sell", OrderType: "limit", LimitPrice: &high}); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if a, c := feeds.watchers("alice", "ES"), feeds.watchers("carol", "ES"); a != 1 || c != 1 {
			return fmt.Errorf("watches of ES: alice's %d, carol's %d", a, c)
		}
		return nil
	})
	feeds.set("carol", "ES", "4980", "4980.25") // carol's price through alice's limit, while carol's own order is watched
	time.Sleep(100 * time.Millisecond)
	if qty, _ := position("alice", "ES"); qty != "1" {
		t.Fatalf("another trader's quote filled alice's limit: she holds %s", qty)
	}
	feeds.set("alice", "ES", "4989.75", "4990")
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if qty, _ := position("alice", "ES"); qty != "2" {
			return fmt.Errorf("alice holds %s ES", qty)
		}
		return nil
	})
	// no order rests on alice's ES any more: her watch ends, carol's stays
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if a, c := feeds.watchers("alice", "ES"), feeds.watchers("carol", "ES"); a != 0 || c != 1 {
			return fmt.Errorf("watches of ES: alice's %d, carol's %d", a, c)
		}
		return nil
	})

	// a contract month the catalog does not list by that symbol: its product's spec
	feeds.set("alice", "ESZ6", "5001", "5001.25")
	if err := place("alice", &trading.PlaceOrder{ClientOrderID: "a-z6", Instrument: "ESZ6", Side: "buy", OrderType: "market"}); err != nil {
		t.Fatal(err)
	}
	if qty, avg := position("alice", "ESZ6"); qty != "1" || dec(avg).Cmp(dec("5001.25")) != 0 {
		t.Fatalf("alice's ESZ6: %s at %s", qty, avg)
	}
	off := dec("5001.1")
	if err := place("alice", &trading.PlaceOrder{ClientOrderID: "a-off", Instrument: "ESZ6", Side: "buy", OrderType: "limit", LimitPrice: &off}); err == nil {
		t.Fatal("a limit off the product's tick was taken")
	}
}

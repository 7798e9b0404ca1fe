// Package userfeed serves futures prices per trader, each from that
// trader's own futures login. Futures prices are licensed per trader: a
// trader's quotes, bars, contracts and symbol search come only from the
// login that trader linked, under that login's own market data
// subscription, and never serve another trader's request.
//
// A Source holds one Feed per user id, keyed by that id and never shared:
// Open asks the engine for the user's freshest futures token each time
// (Logins.FuturesLogin), so an unlinked login stops serving at once and a
// login linked anew replaces the old feed. A Feed opens one provider
// session of its login (on the login's first active account, since the
// provider's market data rides a session), reads the contract library with
// it (ContractSession), and opens one quote stream per contract
// (QuoteSession) when a reader first asks for it; a stream nobody has read
// for Config.Idle is closed, and a feed left with none is closed too.
//
// Refusals are typed (market.FeedRefused): login_required when the user has
// linked no futures login (or its tokens no longer renew), demo_login for a
// demo login, no_subscription when the login's subscription does not cover
// the product. A product's refusal is remembered for Config.Recheck, so a
// trader who buys a subscription is served soon after without every
// request asking the provider again.
//
// Contract months come from the provider's library: a product root (ES) and
// the continuous symbol ES1! name the month the provider trades now (its
// roll, provider.RollSession, which moves on before the front month
// expires; without one, the nearest month not expired), ES2! the month
// after it; an explicit month (ESZ6, ESZ26, ESZ2026) names the provider's
// contract ESZ6. The product facts (tick size, priceFraction of a product quoted in
// thirty-seconds) are the catalog's, checked against the provider's.
package userfeed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/provider"
)

// Logins is where the users' futures logins come from: the engine
// (engine.Engine.FuturesLogin and FuturesData).
type Logins interface {
	// FuturesLogin is the freshest token of the futures login the user
	// linked; false when none.
	FuturesLogin(ctx context.Context, userID string) (provider.Token, bool, error)
	// FuturesData is the provider whose logins serve futures market data;
	// false when the engine links none.
	FuturesData() (provider.TokenProvider, bool)
}

// Config configures a Source.
type Config struct {
	Logins   Logins
	Products []market.Product // the futures product catalog: the products a feed serves
	Now      func() time.Time
	// Idle is how long a quote stream nobody reads stays open, and a feed
	// with no stream; 1 min when zero.
	Idle time.Duration
	// Recheck is how long a product's refusal is remembered before the
	// provider is asked again; 30 s when zero.
	Recheck time.Duration
	// Wait bounds how long a read waits for a new stream's first quote;
	// 5 s when zero.
	Wait time.Duration
	// LoginCheck is how long a user's login, once read, is taken as it was
	// before Open reads it again (an unlinked login stops serving within
	// it); 1 s when zero, negative: every Open reads it.
	LoginCheck time.Duration
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Logins == nil {
		errs = append(errs, errors.New("userfeed: Logins is required"))
	}
	if len(c.Products) == 0 {
		errs = append(errs, errors.New("userfeed: Products is required"))
	}
	return errors.Join(errs...)
}

// Source hands out each user's futures feed. Safe for concurrent use.
type Source struct {
	cfg      Config
	products map[string]market.Product // by root

	mu     sync.Mutex
	feeds  map[string]*Feed // by user id: a feed serves its user alone
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

// New makes a source and starts closing what stays idle; Close stops it.
func New(cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Idle <= 0 {
		cfg.Idle = time.Minute
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 30 * time.Second
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 5 * time.Second
	}
	if cfg.LoginCheck == 0 {
		cfg.LoginCheck = time.Second
	}
	s := &Source{cfg: cfg, products: map[string]market.Product{}, feeds: map[string]*Feed{}, stop: make(chan struct{})}
	for _, p := range cfg.Products {
		s.products[p.Root] = p
	}
	s.wg.Add(1)
	go s.sweep()
	return s, nil
}

// Products is the futures product catalog the source serves.
func (s *Source) Products() []market.Product { return s.cfg.Products }

// Open returns the user's own feed, or a *market.FeedRefused
// (login_required) when the user has linked no futures login or the
// engine serves no futures provider. The login is read anew when the
// feed's was read more than Config.LoginCheck ago: a feed whose login was
// unlinked or replaced is closed.
func (s *Source) Open(ctx context.Context, userID string) (*Feed, error) {
	refused := &market.FeedRefused{Reason: market.ReasonLoginRequired}
	if userID == "" {
		return nil, refused
	}
	now := s.cfg.Now()
	s.mu.Lock()
	if f := s.feeds[userID]; f != nil && s.cfg.LoginCheck > 0 && now.Sub(f.checkedAt()) < s.cfg.LoginCheck && !f.isDead() {
		s.mu.Unlock()
		f.touch(now)
		return f, nil
	}
	s.mu.Unlock()
	prov, ok := s.cfg.Logins.FuturesData()
	if !ok {
		s.drop(userID, nil)
		return nil, refused
	}
	tok, ok, err := s.cfg.Logins.FuturesLogin(ctx, userID)
	if err != nil {
		return nil, fmt.Errorf("userfeed: the user's futures login: %w", err)
	}
	if !ok || !tok.Valid() {
		s.drop(userID, nil)
		return nil, refused
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	f := s.feeds[userID]
	var old *Feed
	if f != nil && (f.login != tok.ID() || f.isDead()) {
		old, f = f, nil
		delete(s.feeds, userID)
	}
	if f == nil {
		f = newFeed(s, userID, prov, tok)
		s.feeds[userID] = f
	}
	f.renew(tok, now)
	s.mu.Unlock()
	if old != nil {
		old.close()
	}
	return f, nil
}

// Quote is the user's newest quote of a futures symbol from the user's own
// feed (Open, then Feed.Quote).
func (s *Source) Quote(ctx context.Context, userID, symbol string) (market.Quote, error) {
	f, err := s.Open(ctx, userID)
	if err != nil {
		return market.Quote{}, err
	}
	return f.Quote(ctx, symbol)
}

// Watch calls fn with every quote of symbol from the user's own feed, the
// newest at once, until cancel (Open, then Feed.Subscribe).
func (s *Source) Watch(ctx context.Context, userID, symbol string, fn func(market.Quote)) (cancel func(), err error) {
	f, err := s.Open(ctx, userID)
	if err != nil {
		return nil, err
	}
	return f.Subscribe(ctx, symbol, fn)
}

// Feeds counts the open feeds (one per user served).
func (s *Source) Feeds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.feeds)
}

// Close closes every feed and stops the sweep.
func (s *Source) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	feeds := s.feeds
	s.feeds = map[string]*Feed{}
	s.mu.Unlock()
	for _, f := range feeds {
		f.close()
	}
	s.wg.Wait()
}

var errClosed = errors.New("userfeed: closed")

// drop closes the user's feed (only f, when f is not nil).
func (s *Source) drop(userID string, f *Feed) {
	s.mu.Lock()
	cur := s.feeds[userID]
	if cur == nil || (f != nil && cur != f) {
		s.mu.Unlock()
		return
	}
	delete(s.feeds, userID)
	s.mu.Unlock()
	cur.close()
}

// sweep closes idle streams and idle feeds until Close.
func (s *Source) sweep() {
	defer s.wg.Done()
	t := time.NewTicker(max(s.cfg.Idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		feeds := make([]*Feed, 0, len(s.feeds))
		for _, f := range s.feeds {
			feeds = append(feeds, f)
		}
		s.mu.Unlock()
		now := s.cfg.Now()
		for _, f := range feeds {
			if f.sweep(now) {
				s.drop(f.user, f)
			}
		}
	}
}

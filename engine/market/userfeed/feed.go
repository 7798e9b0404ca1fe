package userfeed

import (
	"context"
	"errors"
	"time"

	"sync"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/bars"
	"github.com/svc/engine/engine/provider"
)

// Name is the feed's source label (symbol-info's source).
const Name = "futures"

// ErrNoQuote: no quote arrived in time (Config.Wait) on a stream the
// provider accepted: the feed is down or stale for now.
var ErrNoQuote = errors.New("userfeed: no quote from the trader's futures feed yet")

// liveRetention keeps a feed's live bars: enough for the newest bar of any
// timeframe a bar stream serves (the history comes from the provider).
var liveRetention = bars.Retention{15 * time.Minute, 2 * 24 * time.Hour, 400 * 24 * time.Hour}

// Feed is one user's futures feed: the session of the user's own login,
// its contract months, its quote streams and the live bars aggregated from
// them. It serves its user alone. Safe for concurrent use.
type Feed struct {
	src    *Source
	user   string
	login  string // the login's provider.Token.ID
	prov   provider.TokenProvider
	ctx    context.Context // ends at close: every stream's
	cancel context.CancelFunc
	live   *bars.Service // the live bars of the user's bar streams

	mu       sync.Mutex
	tok      provider.Token
	sess     provider.Session // nil until opened
	opening  chan struct{}    // closed when an opening in progress ends
	dead     bool             // the login's tokens no longer serve, or closed
	streams  map[string]*stream
	listings map[string]*listing // by root
	refused  map[string]refusal  // by root
	used     time.Time
	checked  time.Time // when the login was last read (Source.Open)
}

// refusal is a product's remembered refusal.
type refusal struct {
	reason string
	until  time.Time
}

func newFeed(s *Source, user string, prov provider.TokenProvider, tok provider.Token) *Feed {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Feed{src: s, user: user, login: tok.ID(), prov: prov, ctx: ctx, cancel: cancel, tok: tok,
		live: bars.NewService(liveRetention, nil), streams: map[string]*stream{}, listings: map[string]*listing{},
		refused: map[string]refusal{}, used: s.cfg.Now()}
	go f.live.Live.Run(ctx)
	return f
}

// Name labels the feed.
func (f *Feed) Name() string { return Name }

// renew keeps the freshest token for the next session the feed opens;
// the login was read at now.
func (f *Feed) renew(tok provider.Token, now time.Time) {
	f.mu.Lock()
	if tok.ExpiresAt.After(f.tok.ExpiresAt) {
		f.tok = tok
	}
	f.used, f.checked = now, now
	f.mu.Unlock()
}

func (f *Feed) touch(now time.Time) {
	f.mu.Lock()
	f.used = now
	f.mu.Unlock()
}

func (f *Feed) checkedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checked
}

func (f *Feed) isDead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}

// kill marks the feed unusable (its tokens are no longer taken): the next
// Open makes a new one from the engine's freshest token.
func (f *Feed) kill() {
	f.mu.Lock()
	f.dead = true
	f.mu.Unlock()
}

// close ends the session and every stream.
func (f *Feed) close() {
	f.mu.Lock()
	f.dead = true
	sess := f.sess
	f.sess = nil
	f.mu.Unlock()
	f.cancel()
	if sess != nil {
		_ = sess.Close()
	}
}

// sweep closes the streams nobody read for Idle; it reports whether the
// feed itself is idle (no stream left, unused for Idle) or dead.
func (f *Feed) sweep(now time.Time) bool {
	idle := f.src.cfg.Idle
	f.mu.Lock()
	var closing []*stream
	for k, st := range f.streams {
		if st.idle(now, idle) {
			delete(f.streams, k)
			closing = append(closing, st)
		}
	}
	done := f.dead || (len(f.streams) == 0 && now.Sub(f.used) >= idle)
	f.mu.Unlock()
	for _, st := range closing {
		st.cancel()
	}
	return done
}

// session is the login's provider session, opened once on the login's
// first active account.
func (f *Feed) session(ctx context.Context) (provider.Session, error) {
	for {
		f.mu.Lock()
		switch {
		case f.dead:
			f.mu.Unlock()
			return nil, &market.FeedRefused{Reason: market.ReasonLoginRequired}
		case f.sess != nil:
			s := f.sess
			f.mu.Unlock()
			return s, nil
		case f.opening != nil:
			ch := f.opening
			f.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		f.opening = ch
		tok := f.tok
		f.mu.Unlock()
		sess, err := f.openSession(ctx, tok)
		f.mu.Lock()
		f.opening = nil
		close(ch)
		if err == nil && f.dead {
			_ = sess.Close()
			sess, err = nil, &market.FeedRefused{Reason: market.ReasonLoginRequired}
		}
		if err == nil {
			f.sess = sess
		}
		if errors.Is(err, provider.ErrUnauthorized) {
			f.dead = true
		}
		f.mu.Unlock()
		return sess, refusalOf(err)
	}
}

func (f *Feed) openSession(ctx context.Context, tok provider.Token) (provider.Session, error) {
	accts, err := f.prov.Accounts(ctx, tok)
	if err != nil {
		return nil, err
	}
	for _, a := range accts {
		if a.Active {
			// Renewals are the engine's (the linked account's own session
			// shares the login and hands each renewed token on).
			return f.prov.Resume(ctx, tok, a.ID, nil)
		}
	}
	return nil, &market.FeedRefused{Reason: market.ReasonLoginRequired}
}

// refusalOf maps the provider's refusals to the feed's: NotEntitled keeps
// its reason; unauthorized tokens need the trader's login again.
func refusalOf(err error) error {
	var ne *provider.NotEntitled
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ne):
		return &market.FeedRefused{Reason: ne.Reason}
	case errors.Is(err, provider.ErrUnauthorized):
		return &market.FeedRefused{Reason: market.ReasonLoginRequired}
	}
	return err
}

// refusedFor is root's remembered refusal, if it still stands.
func (f *Feed) refusedFor(root string) error {
	now := f.src.cfg.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used = now
	if f.dead {
		return &market.FeedRefused{Reason: market.ReasonLoginRequired}
	}
	if r, ok := f.refused[root]; ok && now.Before(r.until) {
		return &market.FeedRefused{Reason: r.reason}
	}
	return nil
}

// refuse remembers a product's refusal for Recheck (a demo login's for
// every product).
func (f *Feed) refuse(root, reason string) {
	until := f.src.cfg.Now().Add(f.src.cfg.Recheck)
	f.mu.Lock()
	defer f.mu.Unlock()
	if reason == market.ReasonDemoLogin {
		for r := range f.src.products {
			f.refused[r] = refusal{reason, until}
		}
		return
	}
	f.refused[root] = refusal{reason, until}
}

// acquire returns c's stream, started when there is none, holding a
// reference until release.
func (f *Feed) acquire(c Contract) (*stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return nil, &market.FeedRefused{Reason: market.ReasonLoginRequired}
	}
	st := f.streams[c.Symbol]
	if st == nil || st.isEnded() {
		st = newStream(f, c)
		f.streams[c.Symbol] = st
		go st.run()
	}
	st.hold()
	return st, nil
}

// ended removes a stream that ended (refused, cut for good, or closed).
func (f *Feed) ended(st *stream) {
	f.mu.Lock()
	if f.streams[st.c.Symbol] == st {
		delete(f.streams, st.c.Symbol)
	}
	f.mu.Unlock()
}

// wait waits for st's first quote (or its refusal), at most Config.Wait.
func (f *Feed) wait(ctx context.Context, st *stream) (market.Quote, error) {
	t := time.NewTimer(f.src.cfg.Wait)
	defer t.Stop()
	select {
	case <-st.ready:
	case <-ctx.Done():
		return market.Quote{}, ctx.Err()
	case <-t.C:
		return market.Quote{}, ErrNoQuote
	}
	return st.newest()
}

// Quote is the newest quote of a futures symbol (a root, a continuous
// symbol or a contract month) from the user's own login, its Instrument
// the symbol as asked (upper case). The first read of a contract opens its
// stream and waits for its first quote (ErrNoQuote after Config.Wait); a
// product the login is not entitled to is a *market.FeedRefused.
func (f *Feed) Quote(ctx context.Context, symbol string) (market.Quote, error) {
	q, _, err := f.QuoteOf(ctx, symbol)
	return q, err
}

// QuoteOf is Quote with the contract month the symbol stands for now.
func (f *Feed) QuoteOf(ctx context.Context, symbol string) (market.Quote, Contract, error) {
	c, name, err := f.resolve(ctx, symbol)
	if err != nil {
		return market.Quote{}, c, err
	}
	st, err := f.acquire(c)
	if err != nil {
		return market.Quote{}, c, err
	}
	defer st.release()
	q, err := f.wait(ctx, st)
	q.Instrument = name
	return q, c, err
}

// Live reports whether the feed's login is on the provider's production
// system (a demo login carries no market data).
func (f *Feed) Live() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tok.Environment == provider.EnvLive
}

// Subscribe calls fn with the symbol's newest quote and then every quote
// of it from the user's own login (Instrument the symbol as asked), until
// cancel. It answers once the stream's first quote came, or its refusal.
// fn must not block.
func (f *Feed) Subscribe(ctx context.Context, symbol string, fn func(market.Quote)) (cancel func(), err error) {
	c, name, err := f.resolve(ctx, symbol)
	if err != nil {
		return nil, err
	}
	st, err := f.acquire(c)
	if err != nil {
		return nil, err
	}
	if _, err := f.wait(ctx, st); err != nil {
		st.release()
		return nil, err
	}
	id := st.subscribe(name, fn)
	var once sync.Once
	return func() {
		once.Do(func() {
			st.unsubscribe(id)
			st.release()
		})
	}, nil
}

// Entitled reports whether the login's market data covers the product of
// symbol: nil, or the *market.FeedRefused (or the failure) of its front
// month's quotes.
func (f *Feed) Entitled(ctx context.Context, symbol string) error {
	_, err := f.Quote(ctx, symbol)
	return err
}

package userfeed

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// errEnded: the provider ended the stream (its session closed, or its
// entitlement or tokens were refused on a reconnect).
var errEnded = errors.New("userfeed: the trader's quote stream ended")

// stream is one contract's quotes from the login's market data: its
// newest quote, its subscribers and the names its live bars are kept
// under. Its goroutine (run) is the only writer of the quotes.
type stream struct {
	f      *Feed
	c      Contract
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed at the first quote or the failure

	mu      sync.Mutex
	err     error // why it failed or ended; nil while it streams
	last    market.Quote
	has     bool
	done    bool
	subs    map[int]subscriber
	nextSub int
	aliases map[string]int // names its quotes are kept in the live bars under, by users
	refs    int
	used    time.Time
}

type subscriber struct {
	name string
	fn   func(market.Quote)
}

func newStream(f *Feed, c Contract) *stream {
	ctx, cancel := context.WithCancel(f.ctx)
	return &stream{f: f, c: c, ctx: ctx, cancel: cancel, ready: make(chan struct{}), subs: map[int]subscriber{},
		aliases: map[string]int{}, used: f.src.cfg.Now()}
}

// run streams the contract's quotes until the stream is closed or the
// provider ends it.
func (st *stream) run() {
	err := st.stream()
	st.mu.Lock()
	st.done = true
	if st.err == nil {
		st.err = err
	}
	st.subs = map[int]subscriber{}
	st.mu.Unlock()
	st.markReady()
	st.cancel()
	st.f.ended(st)
}

func (st *stream) stream() error {
	f := st.f
	if err := f.refusedFor(st.c.Root); err != nil {
		return err
	}
	sess, err := f.session(st.ctx)
	if err != nil {
		return err
	}
	qs, ok := sess.(provider.QuoteSession)
	if !ok {
		return &market.FeedRefused{Reason: market.ReasonNoSubscription}
	}
	ch, err := qs.Quotes(st.ctx, []string{st.c.Symbol})
	if err != nil {
		return st.failed(err)
	}
	for q := range ch {
		st.publish(q)
	}
	if st.ctx.Err() != nil {
		return errEnded
	}
	// The provider ended it: a refusal on a reconnect, or the session's
	// tokens no longer taken. Either way ask again from a fresh start.
	f.kill()
	return errEnded
}

// failed classifies a refused subscription and remembers a refusal.
func (st *stream) failed(err error) error {
	var ne *provider.NotEntitled
	switch {
	case errors.As(err, &ne):
		st.f.refuse(st.c.Root, ne.Reason)
	case errors.Is(err, provider.ErrUnauthorized):
		st.f.kill()
	}
	return refusalOf(err)
}

// publish takes a provider quote: a touch (bid and ask both known) becomes
// the newest quote, goes into the live bars under every alias and to every
// subscriber. The last trade is Last; the mid when none traded yet.
func (st *stream) publish(pq provider.Quote) {
	if pq.Bid == nil || pq.Ask == nil {
		return
	}
	at := pq.At
	if at.IsZero() {
		at = st.f.src.cfg.Now()
	}
	q := market.Quote{Instrument: st.c.Symbol, Bid: *pq.Bid, Ask: *pq.Ask, Size: events.Int(0), At: at}
	if pq.Mark != nil {
		q.Last = *pq.Mark
	} else {
		q.Last = q.Mid()
	}
	st.mu.Lock()
	st.last, st.has = q, true
	var aliases []string
	for a := range st.aliases {
		aliases = append(aliases, a)
	}
	subs := make([]subscriber, 0, len(st.subs))
	for _, s := range st.subs {
		subs = append(subs, s)
	}
	st.mu.Unlock()
	st.markReady()
	for _, a := range aliases {
		aq := q
		aq.Instrument = a
		st.f.live.Tick(aq)
	}
	for _, s := range subs {
		sq := q
		sq.Instrument = s.name
		s.fn(sq)
	}
}

func (st *stream) markReady() {
	select {
	case <-st.ready:
	default:
		close(st.ready)
	}
}

// newest is the newest quote, or why there is none.
func (st *stream) newest() (market.Quote, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.has && !st.done:
		return st.last, nil
	case st.err != nil:
		return market.Quote{}, st.err
	}
	return market.Quote{}, ErrNoQuote
}

func (st *stream) isEnded() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.done
}

func (st *stream) hold() {
	st.mu.Lock()
	st.refs++
	st.used = st.f.src.cfg.Now()
	st.mu.Unlock()
}

func (st *stream) release() {
	st.mu.Lock()
	st.refs--
	st.used = st.f.src.cfg.Now()
	st.mu.Unlock()
}

// idle reports whether nobody holds the stream and nobody read it for d.
func (st *stream) idle(now time.Time, d time.Duration) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.refs <= 0 && now.Sub(st.used) >= d
}

// subscribe adds fn and hands it the newest quote at once.
func (st *stream) subscribe(name string, fn func(market.Quote)) int {
	st.mu.Lock()
	id := st.nextSub
	st.nextSub++
	if !st.done {
		st.subs[id] = subscriber{name: name, fn: fn}
	}
	q, has := st.last, st.has && !st.done
	st.mu.Unlock()
	if has {
		q.Instrument = name
		fn(q)
	}
	return id
}

func (st *stream) unsubscribe(id int) {
	st.mu.Lock()
	delete(st.subs, id)
	st.mu.Unlock()
}

// alias keeps the stream's quotes in the live bars under name too, until
// unalias.
func (st *stream) alias(name string) {
	st.mu.Lock()
	st.aliases[name]++
	st.mu.Unlock()
}

func (st *stream) unalias(name string) {
	st.mu.Lock()
	if st.aliases[name]--; st.aliases[name] <= 0 {
		delete(st.aliases, name)
	}
	st.mu.Unlock()
}

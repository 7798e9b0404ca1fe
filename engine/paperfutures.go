package engine

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/paper"
	"github.com/svc/engine/events"
)

// This file is the paper book's futures: a trader's paper futures orders
// fill at the prices of that trader's own futures login, and only that
// trader's. Futures prices are licensed per trader, so the paper book
// never shares them: an order on a futures symbol on a paper account is
// decided on the quote of the account owner's own feed (UserFutures), and
// its resting orders are woken by that feed's quotes alone, under a book of
// the paper reactor kept per trader and instrument (scope), which no other
// trader's quotes reach. Breakeven and trailing moves of a bracket need the
// paper book's marks, which are shared by every account of an instrument:
// on a paper futures position its stop rests where it was set and does not
// move. The risk controls value paper futures at the quotes of the command
// that prices them.

// UserFutures serves each trader's futures quotes from that trader's own
// futures login (engine/market/userfeed.Source). userID is the account
// owner's tenant id, as FuturesLogin takes it.
type UserFutures interface {
	// Quote is the newest quote of a futures symbol from the user's own
	// feed, or its refusal (market.FeedRefused).
	Quote(ctx context.Context, userID, symbol string) (market.Quote, error)
	// Watch calls fn with every quote of symbol from the user's own feed
	// (the newest at once) until cancel; fn must not block.
	Watch(ctx context.Context, userID, symbol string, fn func(market.Quote)) (cancel func(), err error)
}

// UseUserFutures makes the paper book fill futures orders at each
// trader's own futures prices. Call it before Start.
func (e *Engine) UseUserFutures(u UserFutures) { e.pf.src = u }

// scopeSep joins an instrument and a trader in a paper book's key: no
// symbol holds it.
const scopeSep = "\x00"

// scope is the paper reactor's book of instrument for one trader.
func scope(user, instrument string) string { return instrument + scopeSep + user }

// unscope is the instrument of a trader's book, and whether key is one.
func unscope(key string) (string, bool) {
	inst, _, ok := strings.Cut(key, scopeSep)
	return inst, ok
}

// paperFutures tracks what the paper accounts need of their owners'
// futures feeds: the accounts with futures working orders or positions,
// and a watch of each (owner, instrument) a working order rests on.
type paperFutures struct {
	src UserFutures

	mu       sync.Mutex
	accounts map[string]futuresAccount // by account id: those with futures working orders or positions
	watches  map[watchKey]*futuresWatch
	started  bool
	closed   bool
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

type futuresAccount struct {
	owner   string
	working map[string]bool // futures instruments of its working orders: watched
	held    map[string]bool // futures instruments of its positions
}

type watchKey struct{ user, instrument string }

type futuresWatch struct {
	cancel  func() // nil while it starts or after it failed
	pending bool
	retryAt time.Time
}

// watchRetry is how long a watch that failed (a refusal, the provider
// down) waits before it is tried again while an order still rests on it.
const watchRetry = 5 * time.Second

// futuresSymbol reports whether instrument is a futures symbol: a futures
// catalog entry, a product root, a contract or a continuous symbol.
func (e *Engine) futuresSymbol(instrument string) bool {
	if in, ok := e.cfg.Catalog.Get(instrument); ok {
		return in.AssetClass == "futures"
	}
	_, ok := market.FuturesRoot(instrument, market.Products())
	return ok
}

// userFuturesOn reports whether the paper book prices futures from its
// traders' own feeds for this account (a paper account, with a source).
func (e *Engine) userFuturesOn(accountID string) bool {
	return e.pf.src != nil && e.cfg.Futures == nil && !e.isProvider(accountID)
}

// paperTriggers are the account's triggers for the paper reactor: those on
// futures instruments under the owner's own book (and without the moves
// of brackets, which need shared marks). It keeps the account's futures in
// the index that watches its owner's feeds.
func (e *Engine) paperTriggers(s *account.State) map[string][]paper.Trigger {
	ts := triggers(s)
	if e.pf.src == nil || e.cfg.Futures != nil || s.Provider != nil {
		return ts
	}
	fa := futuresAccount{owner: s.TenantID} // its maps made at their first entry: most accounts hold no futures
	for inst, list := range ts {
		if !e.futuresSymbol(inst) {
			continue
		}
		delete(ts, inst)
		var keep []paper.Trigger
		for _, t := range list {
			if !t.Move {
				keep = append(keep, t)
			}
		}
		if len(keep) > 0 && s.TenantID != "" {
			ts[scope(s.TenantID, inst)] = keep
			if fa.working == nil {
				fa.working = map[string]bool{}
			}
			fa.working[inst] = true
		}
	}
	for inst, p := range s.Positions {
		if !p.Quantity.IsZero() && e.futuresSymbol(inst) {
			if fa.held == nil {
				fa.held = map[string]bool{}
			}
			fa.held[inst] = true
		}
	}
	e.pf.note(e, s.ID, fa)
	return ts
}

// note records an account's futures and has the watches follow.
func (pf *paperFutures) note(e *Engine, accountID string, fa futuresAccount) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.closed {
		return
	}
	_, had := pf.accounts[accountID]
	if len(fa.working) == 0 && len(fa.held) == 0 {
		if !had {
			return
		}
		delete(pf.accounts, accountID)
	} else {
		if pf.accounts == nil {
			pf.accounts = map[string]futuresAccount{}
		}
		pf.accounts[accountID] = fa
	}
	if !pf.started {
		pf.started = true
		pf.kick, pf.stop, pf.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		pf.watches = map[watchKey]*futuresWatch{}
		go pf.run(e)
	}
	select {
	case pf.kick <- struct{}{}:
	default:
	}
}

// close stops every watch.
func (pf *paperFutures) close() {
	pf.mu.Lock()
	if pf.closed {
		pf.mu.Unlock()
		return
	}
	pf.closed = true
	started := pf.started
	pf.mu.Unlock()
	if started {
		close(pf.stop)
		<-pf.done
	}
}

// run keeps a watch of each (owner, instrument) a working order rests on,
// feeding its quotes to the owner's book of the paper reactor, and ends
// the watches no order needs.
func (pf *paperFutures) run(e *Engine) {
	defer close(pf.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-pf.stop:
			pf.mu.Lock()
			for _, w := range pf.watches {
				if w.cancel != nil {
					w.cancel()
				}
			}
			pf.watches = map[watchKey]*futuresWatch{}
			pf.mu.Unlock()
			return
		case <-pf.kick:
		case <-tick.C:
		}
		pf.sync(e)
	}
}

// sync starts the watches wanted and not running (or due a retry) and
// ends those no longer wanted.
func (pf *paperFutures) sync(e *Engine) {
	now := time.Now()
	pf.mu.Lock()
	defer pf.mu.Unlock()
	want := map[watchKey]bool{}
	for _, fa := range pf.accounts {
		for inst := range fa.working {
			want[watchKey{fa.owner, inst}] = true
		}
	}
	for k, w := range pf.watches {
		if !want[k] && !w.pending {
			if w.cancel != nil {
				w.cancel()
			}
			delete(pf.watches, k)
		}
	}
	for k := range want {
		w := pf.watches[k]
		if w == nil {
			w = &futuresWatch{}
			pf.watches[k] = w
		}
		if w.cancel != nil || w.pending || now.Before(w.retryAt) {
			continue
		}
		w.pending = true
		go pf.start(e, k, w)
	}
}

// start opens one watch; a failure is tried again after watchRetry.
func (pf *paperFutures) start(e *Engine, k watchKey, w *futuresWatch) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	book := scope(k.user, k.instrument)
	stop, err := pf.src.Watch(ctx, k.user, k.instrument, func(q market.Quote) { e.paper.OnQuote(book, q.Bid, q.Ask) })
	pf.mu.Lock()
	defer pf.mu.Unlock()
	w.pending = false
	switch {
	case err != nil:
		w.retryAt = time.Now().Add(watchRetry)
	case pf.closed || pf.watches[k] != w:
		stop()
	default:
		w.cancel = stop
	}
}

// futuresHeld lists the futures instruments of an account's working
// orders and positions.
func (pf *paperFutures) futuresHeld(accountID string) (string, []string) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	fa, ok := pf.accounts[accountID]
	if !ok {
		return "", nil
	}
	var out []string
	for inst := range fa.working {
		out = append(out, inst)
	}
	for inst := range fa.held {
		if !fa.working[inst] {
			out = append(out, inst)
		}
	}
	return fa.owner, out
}

// ownerOf is the account's owner (its tenant).
func (e *Engine) ownerOf(ctx context.Context, accountID string) string {
	var owner string
	_ = e.accounts.Inspect(ctx, accountID, func(s *account.State, _ uint64) { owner = s.TenantID })
	return owner
}

// userFuturesQuotes are the quotes a paper command on the account is
// decided on from its owner's own futures feed: instrument's (when it is
// a futures symbol: its refusal is the command's) and those of the
// account's other futures working orders and positions (best effort).
func (e *Engine) userFuturesQuotes(ctx context.Context, accountID, instrument string) (map[string]trading.Quote, error) {
	owner, held := e.pf.futuresHeld(accountID)
	named := instrument != "" && e.futuresSymbol(instrument)
	if !named && len(held) == 0 {
		return nil, nil
	}
	if owner == "" {
		owner = e.ownerOf(ctx, accountID)
	}
	out := map[string]trading.Quote{}
	if named {
		q, err := e.pf.src.Quote(ctx, owner, instrument)
		if err != nil {
			return nil, futuresRefusal(instrument, err)
		}
		out[instrument] = trading.Quote{Instrument: instrument, Bid: q.Bid, Ask: q.Ask, At: q.At}
	}
	for _, inst := range held {
		if _, ok := out[inst]; ok {
			continue
		}
		if q, err := e.pf.src.Quote(ctx, owner, inst); err == nil {
			out[inst] = trading.Quote{Instrument: inst, Bid: q.Bid, Ask: q.Ask, At: q.At}
		}
	}
	return out, nil
}

// futuresRefusal is a paper futures order's refusal: 503
// feed_requires_connection with the reason the owner's feed gave, or
// feed_unavailable when the feed is down or has no quote yet.
func futuresRefusal(instrument string, err error) error {
	if reason, ok := market.RefusalReason(err); ok {
		r := trading.FeedRequiresConnection(instrument)
		r.Params["reason"] = reason
		return r
	}
	return commands.Refuse(commands.CodeFeedUnavailable, "your futures feed has no price for the instrument right now",
		map[string]any{"instrument": instrument})
}

// withUserFutures puts the owner's futures quotes in a command's market,
// and the spec of a futures contract the catalog does not list by that
// symbol (ESZ6, ES1!) from its product's.
func (e *Engine) withUserFutures(m *trading.Market, quotes map[string]trading.Quote) {
	var specs map[string]trading.Spec
	if len(quotes) > 0 { // m.Quotes is market's, shared: the owner's go into a copy
		qs := make(map[string]trading.Quote, len(m.Quotes)+len(quotes))
		maps.Copy(qs, m.Quotes)
		m.Quotes = qs
	}
	for inst, q := range quotes {
		m.Quotes[inst] = q
		if _, ok := m.Specs[inst]; ok {
			continue
		}
		sp, ok := productSpec(inst)
		if !ok {
			continue
		}
		if specs == nil {
			specs = make(map[string]trading.Spec, len(m.Specs)+1)
			for k, v := range m.Specs {
				specs[k] = v
			}
		}
		specs[inst] = sp
	}
	if specs != nil {
		m.Specs = specs
	}
}

// productSpec is a futures contract's spec from its product's: tick, whole
// contracts, the dollar multiplier, at most 50 contracts an order as the
// catalog's futures.
func productSpec(instrument string) (trading.Spec, bool) {
	sp, ok := futuresSpec(instrument)
	if !ok {
		return sp, false
	}
	root, _ := market.FuturesRoot(instrument, market.Products())
	for _, p := range market.Products() {
		if p.Root == root {
			mult, err := events.ParseDecimal(p.Multiplier)
			if err != nil {
				return sp, false
			}
			sp.Multiplier, sp.MaxQuantity = mult, events.Int(50)
		}
	}
	return sp, true
}

package bars

import (
	"context"
	"runtime"
	"sync"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/spread"
)

// Update is one live bar of a subscription's key: the bar and its JSON object
// ({"time","open","high","low","close","volume"}), shared by every subscriber;
// never modify either.
type Update struct {
	Bar  market.Bar
	JSON []byte
}

// Live fans bar updates out per (expression, timeframe) key. When a tick
// arrives, every key over that symbol recomputes its newest bar from the store
// (the same aggregation history answers) once, renders it once, and offers it
// to each subscriber. Subscribers must not block: they conflate.
type Live struct {
	store    *Store
	mu       sync.Mutex
	keys     map[string]*liveKey
	bySymbol map[string]map[*liveKey]struct{}
	dmu      sync.Mutex
	dirty    map[string]struct{}
	wake     chan struct{}
}

type liveKey struct {
	id    string
	expr  *spread.Expr
	tf    market.Timeframe
	eval  *SpreadEval
	subs  map[*subscription]struct{}
	last  *Update
	lastM sync.Mutex
}

// Sink receives the live bars of its subscriptions. Offer must not block;
// Wake is called once after each fan-out that offered the sink anything, so a
// sink can write one batch per burst of ticks.
type Sink interface {
	Offer(sub int, u Update)
	Wake()
}

type funcSink struct{ fn func(Update) }

func (f *funcSink) Offer(_ int, u Update) { f.fn(u) }
func (*funcSink) Wake()                   {}

type subscription struct {
	sink Sink
	sub  int
}

// NewLive makes a fan-out over store.
func NewLive(store *Store) *Live {
	return &Live{store: store, keys: map[string]*liveKey{}, bySymbol: map[string]map[*liveKey]struct{}{},
		dirty: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// Touch marks symbol as having new ticks.
func (l *Live) Touch(symbol string) {
	l.dmu.Lock()
	l.dirty[symbol] = struct{}{}
	l.dmu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Keys counts the live keys (distinct expression and timeframe pairs).
func (l *Live) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// Subscribe calls fn with the key's newest bar now (if any) and on every change,
// until cancel. fn must not block.
func (l *Live) Subscribe(e *spread.Expr, tf market.Timeframe, fn func(Update)) (cancel func()) {
	return l.SubscribeSink(e, tf, &funcSink{fn: fn}, 0)
}

// SubscribeSink offers the key's newest bar (if any) to sink as subscription
// number sub now and on every change, until cancel.
func (l *Live) SubscribeSink(e *spread.Expr, tf market.Timeframe, sink Sink, subNo int) (cancel func()) {
	id := e.Canonical + "~" + tf.String()
	sub := &subscription{sink: sink, sub: subNo}
	l.mu.Lock()
	k, ok := l.keys[id]
	if !ok {
		k = &liveKey{id: id, expr: e, tf: tf, subs: map[*subscription]struct{}{}}
		if !e.Single() {
			k.eval = NewSpreadEval(e)
		}
		l.keys[id] = k
		for _, leg := range e.Legs {
			m := l.bySymbol[leg]
			if m == nil {
				m = map[*liveKey]struct{}{}
				l.bySymbol[leg] = m
			}
			m[k] = struct{}{}
		}
	}
	k.subs[sub] = struct{}{}
	l.mu.Unlock()
	if u := l.refresh(k, true); u != nil {
		sink.Offer(subNo, *u)
		sink.Wake()
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(k.subs, sub)
		if len(k.subs) == 0 && l.keys[id] == k {
			delete(l.keys, id)
			for _, leg := range e.Legs {
				delete(l.bySymbol[leg], k)
				if len(l.bySymbol[leg]) == 0 {
					delete(l.bySymbol, leg)
				}
			}
		}
	}
}

// newest computes the key's newest bar from the store.
func (l *Live) newest(k *liveKey) (market.Bar, bool) {
	var bars []market.Bar
	if k.eval == nil {
		bars = l.store.History(k.expr.Legs[0], k.tf, 1, 0)
	} else {
		legs := make([][]market.Bar, len(k.expr.Legs))
		for i, leg := range k.expr.Legs {
			// the newest bar of each leg; the spread's newest bar is where they meet
			legs[i] = l.store.History(leg, k.tf, 2, 0)
		}
		bars = k.eval.Intersect(legs)
	}
	if len(bars) == 0 {
		return market.Bar{}, false
	}
	return bars[len(bars)-1], true
}

// refresh recomputes k's newest bar; it returns the update when it changed
// (or, with always, whenever there is a bar).
func (l *Live) refresh(k *liveKey, always bool) *Update {
	k.lastM.Lock()
	defer k.lastM.Unlock()
	b, ok := l.newest(k)
	if !ok {
		return nil
	}
	if k.last != nil && sameBar(&k.last.Bar, &b) {
		if always {
			return k.last
		}
		return nil
	}
	if k.last != nil && b.Time < k.last.Bar.Time { // never step back in time
		return nil
	}
	u := &Update{Bar: b, JSON: b.AppendJSON(nil)}
	k.last = u
	return u
}

func sameBar(a, b *market.Bar) bool {
	return a.Time == b.Time && a.Open.Cmp(&b.Open) == 0 && a.High.Cmp(&b.High) == 0 && a.Low.Cmp(&b.Low) == 0 &&
		a.Close.Cmp(&b.Close) == 0 && a.Volume.Cmp(&b.Volume) == 0
}

// Run recomputes and fans out the keys of touched symbols until ctx ends.
func (l *Live) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		runtime.Gosched() // let a burst of ticks (a feed steps every instrument at once) land first
		l.Flush()
	}
}

// Flush fans out the keys of every symbol touched since the last flush, now.
func (l *Live) Flush() {
	l.dmu.Lock()
	dirty := l.dirty
	l.dirty = map[string]struct{}{}
	l.dmu.Unlock()
	seen := map[*liveKey]struct{}{}
	var keys []*liveKey
	l.mu.Lock()
	for sym := range dirty {
		for k := range l.bySymbol[sym] {
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				keys = append(keys, k)
			}
		}
	}
	l.mu.Unlock()
	woken := map[Sink]struct{}{}
	var subs []*subscription
	for _, k := range keys {
		u := l.refresh(k, false)
		if u == nil {
			continue
		}
		l.mu.Lock()
		subs = subs[:0]
		for s := range k.subs {
			subs = append(subs, s)
		}
		l.mu.Unlock()
		for _, s := range subs {
			s.sink.Offer(s.sub, *u)
			woken[s.sink] = struct{}{}
		}
	}
	for s := range woken {
		s.Wake()
	}
}

package paper

import (
	"time"

	"github.com/svc/engine/events"
)

// Track replaces what the reactor knows of one account's working orders. An
// account that is queued or in flight stays out of the index: its wake's end
// checks it against the newest quote; one queued to move a stop keeps its
// orders' levels in the upgrade trees.
func (r *Reactor) Track(accountID string, byInstrument map[string][]Trigger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.track(accountID, byInstrument, func(b *book, _ Trigger) uint64 { return b.seq + 1 })
}

// Take is Track for an account this node has just begun to decide
// (failover, a partition handed over, a start): its orders rest from the
// first quote the book received at or after since (when its previous owner
// may have stopped deciding it), or after each order was last set where it
// is, whichever is later; and it is woken at once, on the newest quote,
// when that quote crosses one of its triggers, a quote since traded through
// one of its stops or touched one of its limits, or reached where a
// bracket's move wakes it: the same test as a wake's end (due), over the
// quotes of the gap, which this node saw though it did not own the account.
func (r *Reactor) Take(accountID string, byInstrument map[string][]Trigger, since time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.track(accountID, byInstrument, func(b *book, t Trigger) uint64 {
		from := since
		if t.Since.After(from) {
			from = t.Since
		}
		return b.seqAt(from)
	})
	for inst, ts := range byInstrument {
		k := key{accountID, inst}
		b := r.book(inst)
		if r.wakers[k] != nil || r.closed || b.quote == nil {
			continue // queued already: its wake decides on the newest quote
		}
		from := b.seqAt(since)
		crosses, fill := r.due(k, ts, b, from)
		if !crosses {
			continue
		}
		r.unindex(k)
		w := &waker{since: from}
		r.wakers[k] = w
		r.enqueue(k, w, fill, ts)
	}
	if len(r.fills) > 0 || len(r.moves) > 0 {
		r.ready.Broadcast()
	}
}

// track is Track under r.mu; restFrom dates the rest of an order not known
// to rest where it is.
func (r *Reactor) track(accountID string, byInstrument map[string][]Trigger, restFrom func(*book, Trigger) uint64) {
	for inst, accts := range r.byInst {
		if _, keep := byInstrument[inst]; !keep {
			delete(accts, accountID)
			if len(accts) == 0 {
				delete(r.byInst, inst)
			}
			k := key{accountID, inst}
			r.unindex(k)
			delete(r.rested, k)
			if w := r.wakers[k]; w != nil {
				r.unwatchUpgrade(k, w)
			}
		}
	}
	for inst, ts := range byInstrument {
		accts, ok := r.byInst[inst]
		if !ok {
			accts = map[string][]Trigger{}
			r.byInst[inst] = accts
		}
		accts[accountID] = ts
		k := key{accountID, inst}
		r.rest(k, ts, restFrom)
		switch w := r.wakers[k]; {
		case w == nil:
			if since, ok := r.behind(k, ts); ok && !r.closed {
				r.unindex(k)
				w = &waker{since: since}
				r.wakers[k] = w
				r.enqueue(k, w, false, ts)
				continue
			}
			r.index(k, ts)
		case w.queued && !w.fill:
			r.watchUpgrade(k, w, ts)
		}
	}
}

// rest is when a stop began resting at its price: the first quote after.
type rest struct {
	at    uint64
	price events.Decimal
}

// rest records when each untriggered stop and resting limit of ts began
// resting where it is (from, for one not known to: the next quote of its
// instrument, but for Take): an order moved (a trailing rule, a replace, a
// stop-limit's trigger) rests anew from its move, so a dip that came before
// its move is not taken for one through its new level.
func (r *Reactor) rest(k key, ts []Trigger, from func(*book, Trigger) uint64) {
	prev := r.rested[k]
	var next map[string]rest
	for _, t := range ts {
		price, ok := t.restsAt()
		if !ok {
			continue
		}
		if next == nil {
			next = map[string]rest{}
		}
		at, ok := prev[t.ID]
		if !ok || at.price.Cmp(price) != 0 {
			at = rest{at: from(r.book(k.instrument), t), price: price}
		}
		next[t.ID] = at
	}
	if next == nil {
		delete(r.rested, k)
		return
	}
	r.rested[k] = next
}

// restRuleMoves dates the rest of each trailing stop the wake just moved
// where its rules put it (ts are the triggers it decided on, t its touch,
// seq its newest quote) from the quote after seq, not from its commit: the
// rules moved it by the quotes up to seq, so a dip after seq through its new
// level, even one before the commit, triggers it (the next wake's walk, or
// the quote's traded-through check). A stop a trader's change set elsewhere
// rests from its commit as before.
func (r *Reactor) restRuleMoves(k key, ts []Trigger, t Touch, seq uint64) {
	rested := r.rested[k]
	for _, tr := range ts {
		if !tr.Move || tr.Trail == nil {
			continue
		}
		best := t.LowAsk
		if tr.Trail.Long {
			best = t.HighBid
		}
		level, moved := tr.Trail.LevelAt(best)
		if at, ok := rested[tr.Trail.Stop]; moved && ok && at.at > seq+1 && at.price.Cmp(level) == 0 {
			rested[tr.Trail.Stop] = rest{at: seq + 1, price: at.price}
		}
	}
}

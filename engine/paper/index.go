package paper

import (
	"github.com/google/btree"

	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
)

// level is one account's wake level in one tree.
type level struct {
	at      events.Decimal
	account string
}

func less(a, b level) bool {
	if c := a.at.Cmp(b.at); c != 0 {
		return c < 0
	}
	return a.account < b.account
}

// trees index accounts by the touch at which they wake, one tree a
// direction.
type trees struct {
	sellUp, sellDown, buyUp, buyDown *btree.BTreeG[level]
	market                           map[string]bool // accounts with a resting market order: any quote wakes them
}

func newTrees() trees {
	return trees{sellUp: btree.NewG(16, less), sellDown: btree.NewG(16, less), buyUp: btree.NewG(16, less),
		buyDown: btree.NewG(16, less), market: map[string]bool{}}
}

// levels are the touches at which triggers ts wake an account, nearest in
// each direction: a sell at or above a bid (limit, triggered stop-limit,
// move), at or below it (stop); a buy at or below an ask, at or above it.
type levels struct {
	sellUp, sellDown, buyUp, buyDown *events.Decimal
	market                           bool
}

func levelsOf(ts []Trigger) levels {
	var l levels
	nearer := func(cur **events.Decimal, p events.Decimal, lower bool) {
		if *cur == nil || (lower && p.Cmp(**cur) < 0) || (!lower && p.Cmp(**cur) > 0) {
			v := p
			*cur = &v
		}
	}
	for _, t := range ts {
		o := t.order()
		limit := o.RestingLimit()
		switch {
		case o.AtOnce():
			l.market = true
		case limit && t.Side == order.Sell:
			nearer(&l.sellUp, *t.LimitPrice, true)
		case limit:
			nearer(&l.buyDown, *t.LimitPrice, false)
		case t.Side == order.Sell:
			nearer(&l.sellDown, *t.StopPrice, false)
		default:
			nearer(&l.buyUp, *t.StopPrice, true)
		}
	}
	return l
}

// treeLevel is one of an account's levels and the tree it goes in.
type treeLevel struct {
	t  *btree.BTreeG[level]
	at *events.Decimal // nil: the account has none in this direction
}

// pairs pairs each of an account's levels with its tree.
func (t *trees) pairs(l levels) [4]treeLevel {
	return [4]treeLevel{{t.sellUp, l.sellUp}, {t.sellDown, l.sellDown}, {t.buyUp, l.buyUp}, {t.buyDown, l.buyDown}}
}

// put indexes an account's levels.
func (t *trees) put(account string, l levels) {
	for _, e := range t.pairs(l) {
		if e.at != nil {
			e.t.ReplaceOrInsert(level{*e.at, account})
		}
	}
	if l.market {
		t.market[account] = true
	}
}

// remove takes an account's levels out.
func (t *trees) remove(account string, l levels) {
	for _, e := range t.pairs(l) {
		if e.at != nil {
			e.t.Delete(level{*e.at, account})
		}
	}
	delete(t.market, account)
}

// crossed lists the accounts a quote wakes: a sell limit at or below the
// bid, a sell stop at or above it, a buy limit at or above the ask, a buy
// stop at or below it, and every resting market order. An account may be
// listed more than once.
func (t *trees) crossed(bid, ask events.Decimal) []string {
	var due []string
	t.sellUp.Ascend(func(l level) bool {
		if l.at.Cmp(bid) > 0 {
			return false
		}
		due = append(due, l.account)
		return true
	})
	t.sellDown.Descend(func(l level) bool {
		if l.at.Cmp(bid) < 0 {
			return false
		}
		due = append(due, l.account)
		return true
	})
	t.buyDown.Descend(func(l level) bool {
		if l.at.Cmp(ask) < 0 {
			return false
		}
		due = append(due, l.account)
		return true
	})
	t.buyUp.Ascend(func(l level) bool {
		if l.at.Cmp(ask) > 0 {
			return false
		}
		due = append(due, l.account)
		return true
	})
	for acct := range t.market {
		due = append(due, acct)
	}
	return due
}

// unindex takes an account out of an instrument's trees.
func (r *Reactor) unindex(k key) {
	l, ok := r.indexed[k]
	if !ok {
		return
	}
	delete(r.indexed, k)
	r.book(k.instrument).remove(k.account, l)
}

// index puts an idle account into an instrument's trees by its triggers there.
func (r *Reactor) index(k key, ts []Trigger) {
	r.unindex(k)
	if len(ts) == 0 {
		return
	}
	l := levelsOf(ts)
	r.book(k.instrument).put(k.account, l)
	r.indexed[k] = l
}

// watchUpgrade indexes the fill levels of a queued move wake's account
// (from its triggers ts) in the upgrade trees, and its trailing stops in
// their groups, replacing what they held.
func (r *Reactor) watchUpgrade(k key, w *waker, ts []Trigger) {
	r.unwatchUpgrade(k, w)
	b := r.book(k.instrument)
	for _, t := range ts {
		if !t.Move || t.Trail == nil {
			continue
		}
		side := &b.asks
		if t.Trail.Long {
			side = &b.bids
		}
		if g := side.group(w.since); g != nil {
			g.add(k.account, t.Trail)
			w.trails = append(w.trails, trailRef{g, t.Trail})
		}
	}
	fs := fills(ts)
	for _, t := range ts {
		// A bracket's stop where its rules put it by the best touch since
		// the wake (breakeven's level holds from its trigger on; a trailing
		// stop's is a floor its group raises).
		if !t.Move || t.LevelAt == nil {
			continue
		}
		side := &b.asks
		if t.Side == order.Sell {
			side = &b.bids
		}
		if len(side.seqs) == 0 {
			continue
		}
		if lv, moved := t.LevelAt(side.since(w.since)); moved {
			fs = append(fs, Trigger{Side: t.Side, OrderType: order.Stop, StopPrice: &lv})
		}
	}
	if len(fs) == 0 {
		return
	}
	l := levelsOf(fs)
	b.upgrade.put(k.account, l)
	w.upgrade = &l
}

// unwatchUpgrade takes a wake's account out of the upgrade trees and the
// groups of trailing stops.
func (r *Reactor) unwatchUpgrade(k key, w *waker) {
	if w.upgrade != nil {
		r.book(k.instrument).upgrade.remove(k.account, *w.upgrade)
		w.upgrade = nil
	}
	for _, ref := range w.trails {
		ref.g.find().remove(k.account, ref.t)
	}
	w.trails = nil
}

package paper

import (
	"slices"
	"sort"

	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events/mark"
)

// markSeq is the quote a mark was numbered at.
type markSeq struct{ n, seq uint64 }

// sinceMark is the first quote after mark anchor: where the best touch
// since a bracket anchored there starts; false when no kept mark is newer.
// An anchor older than every kept mark counts from the oldest kept (a best
// never better than the truth).
func (b *book) sinceMark(anchor uint64) (uint64, bool) {
	i := sort.Search(len(b.markSeqs), func(i int) bool { return b.markSeqs[i].n > anchor })
	if i == len(b.markSeqs) {
		return 0, false
	}
	return b.markSeqs[i].seq, true
}

// mark numbers the book's newest quote as a mark: the stack after it.
func (b *book) mark() *mark.Stack {
	n := b.stack.N + 1
	b.stack = b.stack.Push(n, &b.quote[0], &b.quote[1])
	b.markSeqs = append(b.markSeqs, markSeq{n, b.seq})
	if len(b.markSeqs) > 2*maxBest {
		b.markSeqs = slices.Clone(b.markSeqs[len(b.markSeqs)-maxBest:])
	}
	return b.stack
}

// RecordMarks switches the reactor to marks (events/mark): a quote that
// would move a bracket's stop is numbered as a mark of this node and handed
// to record (which must not block; the newest stack holds every earlier
// one), and the accounts it moves are parked instead of woken: their stops
// wait in the trees at the levels their rules put them at by the best touch
// since, and only a quote through one wakes the account, to fill. A stop's
// level is derived from the marks after its bracket's anchor; nothing is
// recorded for a move alone. Call it before the first Track.
func (r *Reactor) RecordMarks(node string, record func(*mark.Stack)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.node, r.onMark = node, record
}

// SeedMarks gives an instrument's book the marks recorded before this
// start, as quotes before its first: an account tracked after it whose
// bracket's anchor is older than some of them is parked at the first, its
// stop where they put it. Call it before the instrument's first quote.
func (r *Reactor) SeedMarks(s *mark.Stack) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.book(s.Instrument)
	if b.seq > 0 || s.Node != r.node {
		return
	}
	ns := make([]uint64, 0, len(s.Bids)+len(s.Asks))
	for _, e := range s.Bids {
		ns = append(ns, e.N)
	}
	for _, e := range s.Asks {
		ns = append(ns, e.N)
	}
	slices.Sort(ns)
	ns = slices.Compact(ns)
	bi, ai := 0, 0
	for _, n := range ns {
		b.seq++
		if bi < len(s.Bids) && s.Bids[bi].N == n {
			b.bids.add(b.seq, s.Bids[bi].Price)
			bi++
		}
		if ai < len(s.Asks) && s.Asks[ai].N == n {
			b.asks.add(b.seq, s.Asks[ai].Price)
			ai++
		}
		b.markSeqs = append(b.markSeqs, markSeq{n, b.seq})
	}
	b.stack = s
}

// behind reports whether k's account is behind the marks: a bracket's
// anchor is older than a kept mark of this node that moves its stop. It
// answers the quote from which the best touch counts.
func (r *Reactor) behind(k key, ts []Trigger) (uint64, bool) {
	if r.onMark == nil {
		return 0, false
	}
	b := r.book(k.instrument)
	for _, t := range ts {
		if !t.Move || !t.Marked || t.MarkNode != r.node || t.LevelAt == nil {
			continue
		}
		since, ok := b.sinceMark(t.Anchor)
		side := &b.asks
		if t.Side == order.Sell {
			side = &b.bids
		}
		if !ok || len(side.seqs) == 0 {
			continue
		}
		if _, moved := t.LevelAt(side.since(since)); moved {
			return since, true
		}
	}
	return 0, false
}

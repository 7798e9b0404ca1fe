package paper

import (
	"runtime"
	"slices"
	"time"

	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
)

// wakeChunk bounds the accounts OnQuote wakes under one hold of the lock: a
// quote at a new high crosses the trailing level of every idle bracket on
// its instrument (10,000 took 43 ms at once), and every commit's Track waits
// for the lock in its mailbox, so an unrelated order's answer would wait for
// all of them (BenchmarkQuoteWakingEveryTrailingStop).
const wakeChunk = 64

// OnQuote records the instrument's newest quote and schedules a wake of every
// idle account whose triggers it crosses; accounts already queued or in
// flight will decide on this quote or a newer one. It lets go of the lock
// every wakeChunk accounts; an account whose triggers changed meanwhile is
// checked against the quote again.
func (r *Reactor) OnQuote(instrument string, bid, ask events.Decimal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.book(instrument)
	b.quote, b.seq = &[2]events.Decimal{bid, ask}, b.seq+1
	seq := b.seq
	moved := b.bids.add(seq, bid)
	moved = b.asks.add(seq, ask) || moved
	b.lowBids.add(seq, bid)
	b.highAsk.add(seq, ask)
	if len(b.path) == 0 {
		b.pathFrom = seq
	}
	b.path, b.times = append(b.path, trading.Touch{Bid: bid, Ask: ask}), append(b.times, time.Now())
	if len(b.path) > 2*maxBest {
		n := len(b.path) - maxBest
		b.path, b.times, b.pathFrom = slices.Clone(b.path[n:]), slices.Clone(b.times[n:]), b.pathFrom+uint64(n)
	}
	due := b.crossed(bid, ask)
	for i, acct := range due {
		if i > 0 && i%wakeChunk == 0 {
			r.ready.Broadcast()
			r.mu.Unlock()
			runtime.Gosched() // a waiting Track gets the lock before this takes it back
			r.mu.Lock()
		}
		k := key{acct, instrument}
		if r.wakers[k] != nil || r.closed {
			continue // named by two trees, or woken meanwhile
		}
		ts := r.byInst[instrument][acct]
		crosses, fill := crossing(ts, bid, ask)
		if !crosses {
			continue // its triggers changed while the lock was let go: indexed anew
		}
		r.unindex(k)
		w := &waker{since: seq}
		r.wakers[k] = w
		r.enqueue(k, w, fill, ts)
		moved = moved || !fill
	}
	if moved && r.onMark != nil && !r.closed {
		r.onMark(b.mark()) // the quote moved a stop: a mark, not a commit for each
	}
	// A move wake still queued whose order this quote crosses, or whose
	// trailing stop it crosses where the rules have put it by now, goes to
	// the fills: a stop that triggers does not wait behind other stops' moves.
	crossed := append(b.upgrade.crossed(bid, ask), b.bids.through(bid)...)
	for _, acct := range append(crossed, b.asks.through(ask)...) {
		k := key{acct, instrument}
		w := r.wakers[k]
		if w == nil || !w.queued || w.fill {
			continue
		}
		r.unwatchUpgrade(k, w)
		w.fill, w.parked = true, false
		r.fills = append(r.fills, k) // its place among the moves is skipped when reached
	}
	if len(r.fills) > 0 || len(r.moves) > 0 {
		r.ready.Broadcast()
	}
}

// crossing reports whether the quote crosses one of ts, and whether one it
// crosses may fill an order.
func crossing(ts []Trigger, bid, ask events.Decimal) (crosses, fill bool) {
	for _, t := range ts {
		if t.Crosses(bid, ask) {
			crosses = true
			if !t.Move {
				return true, true
			}
		}
	}
	return crosses, false
}

// movedSince reports whether a quote from seq on reached where one of ts's
// moves wakes (the best touches since, not only the newest quote): a high
// while the account's wake was in flight still moves its stop, though the
// price came back before the wake ended.
func movedSince(ts []Trigger, b *book, seq uint64) bool {
	if seq > b.seq {
		return false
	}
	hb, la := b.bids.since(seq), b.asks.since(seq)
	for _, t := range ts {
		if t.Move && t.Crosses(hb, la) {
			return true
		}
	}
	return false
}

// due reports whether k's account, with triggers ts, wants a wake now: the
// newest quote crosses one of them, a quote from seq on traded through one
// of its stops or touched one of its limits since it rested (fill), or
// reached where a bracket's move wakes it. A wake's end asks it of the
// quotes since the wake's (work), a takeover of the quotes since the gap
// began (Take): one test for both.
func (r *Reactor) due(k key, ts []Trigger, b *book, seq uint64) (crosses, fill bool) {
	if b.quote == nil {
		return false, false
	}
	crosses, fill = crossing(ts, b.quote[0], b.quote[1])
	if !fill && seq <= b.seq && (len(b.tradedThrough(ts, r.rested[k], seq)) > 0 || len(b.touched(ts, r.rested[k], seq)) > 0) {
		crosses, fill = true, true
	}
	if !crosses && movedSince(ts, b, seq) {
		crosses = true // a high since seq that the newest quote came back from
	}
	return crosses, fill
}

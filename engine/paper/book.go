package paper

import (
	"sort"
	"time"

	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/fill"
	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

// book is one instrument's index: the wake level of every idle account with
// triggers on it, in the tree of its direction; and, in upgrade, the fill
// levels of the accounts queued for a wake that only moves a stop, so a
// quote that crosses one of their orders moves the wake to the fills.
type book struct {
	trees
	upgrade trees
	quote   *[2]events.Decimal
	seq     uint64 // quotes seen
	bids    best   // the highest bid since a quote
	asks    best   // the lowest ask since a quote
	lowBids best   // the lowest bid since a quote: sell stops
	highAsk best   // the highest ask since a quote: buy stops
	// path is the newest quotes, path[i] being quote pathFrom+i; it is only
	// appended to (trimmed by copying), so a slice of it handed to a wake
	// stays as it was.
	path     []trading.Touch
	pathFrom uint64
	// times is when each quote of path reached the book (Take dates a
	// gap by them).
	times []time.Time
	// With marks (RecordMarks): the instrument's marks on this node, and
	// the quote each kept mark was numbered at (seeded marks: the quotes
	// before the first real one), oldest first.
	stack    *mark.Stack
	markSeqs []markSeq
}

func newBook() *book {
	return &book{trees: newTrees(), upgrade: newTrees(), bids: best{higher: true, trails: true}, asks: best{trails: true},
		highAsk: best{higher: true}}
}

func (r *Reactor) book(instrument string) *book {
	b, ok := r.books[instrument]
	if !ok {
		b = newBook()
		b.stack = &mark.Stack{Instrument: instrument, Node: r.node}
		r.books[instrument] = b
	}
	return b
}

// seqAt is the first quote the book received at or after t: the oldest it
// keeps when t is older, the next quote when none is as new.
func (b *book) seqAt(t time.Time) uint64 {
	if len(b.times) == 0 {
		return b.seq + 1
	}
	i := sort.Search(len(b.times), func(i int) bool { return !b.times[i].Before(t) })
	return b.pathFrom + uint64(i)
}

// pathSince is the quotes from seq on (at most the newest few thousand) and
// the sequence of the first of them.
func (b *book) pathSince(seq uint64) ([]trading.Touch, uint64) {
	if seq < b.pathFrom {
		seq = b.pathFrom
	}
	if seq-b.pathFrom > uint64(len(b.path)) { // none yet
		return nil, seq
	}
	return b.path[seq-b.pathFrom:], seq
}

// restsFrom is the quote from which order t rests at its price (rested, by
// order id); false when no known quote is.
func restsFrom(t Trigger, rested map[string]rest) (uint64, bool) {
	r, ok := rested[t.ID]
	p, rests := t.restsAt()
	return r.at, ok && rests && r.price.Cmp(p) == 0
}

// pathFrom is, for each untriggered stop of ts, the index of a path of n
// quotes starting at quote start from which the stop rests where it is: a
// walk of the path for that stop starts there, so a dip before the stop was
// set where it is (by a trader's replace, or an earlier move) never
// triggers it. A stop resting there since before start is left out (0); one
// not known to rest since a known quote walks nothing (n).
func pathFrom(ts []Trigger, rested map[string]rest, start uint64, n int) map[string]int {
	var out map[string]int
	for _, t := range ts {
		if !t.untriggeredStop() {
			continue
		}
		from := n
		if at, ok := restsFrom(t, rested); ok {
			if at <= start {
				continue
			}
			from = int(min(at-start, uint64(n)))
		}
		if out == nil {
			out = map[string]int{}
		}
		out[t.ID] = from
	}
	return out
}

// pathBest is, for each untriggered stop of ts resting where it is since
// before start (the path's first quote, which is later than since when the
// book no longer keeps the quotes before it), the best touch of its side
// between the later of since and its rest and start, where that is better
// than every quote of the path: its walk moves it there first, so a high the
// path no longer holds still counts.
func (b *book) pathBest(ts []Trigger, rested map[string]rest, since, start uint64) map[string]events.Decimal {
	if start <= since || start > b.seq {
		return nil
	}
	var out map[string]events.Decimal
	for _, t := range ts {
		at, ok := restsFrom(t, rested)
		if !t.untriggeredStop() || !ok || at > start {
			continue
		}
		from := max(at, since)
		if from >= start {
			continue
		}
		side := &b.bids // a sell stop (a long's) follows the highest bid
		if t.Side == order.Buy {
			side = &b.asks
		}
		p, inPath := side.since(from), side.since(start)
		if p.Cmp(inPath) == 0 || !side.better(p, inPath) {
			continue
		}
		if out == nil {
			out = map[string]events.Decimal{}
		}
		out[t.ID] = p
	}
	return out
}

// tradedThrough lists the untriggered stops of ts that a quote from when
// each began resting at its price (rested, by order id), and from seq on,
// traded through: a sell stop at or above the lowest bid since, a buy stop at or
// below the highest ask since. Quotes before the oldest the book keeps count
// as that one (a dip older than 4,096 unbettered quotes is not seen).
func (b *book) tradedThrough(ts []Trigger, rested map[string]rest, seq uint64) []string {
	var out []string
	for _, t := range ts {
		at, ok := restsFrom(t, rested)
		if !t.untriggeredStop() || !ok {
			continue // not resting there since a known quote
		}
		from := max(at, seq)
		if from > b.seq {
			continue // no quote since
		}
		extreme := &b.highAsk // a buy stop: the highest ask since
		if t.Side == order.Sell {
			extreme = &b.lowBids // a sell stop: the lowest bid since
		}
		if fill.StopCrossed(t.Side, extreme.since(from), *t.StopPrice) {
			out = append(out, t.ID)
		}
	}
	return out
}

// touched lists the resting limits of ts that a quote from when each began
// resting at its price, and from seq on, touched: a buy's limit at or above
// the lowest ask since, a sell's at or below the highest bid since (the
// paper book's fill rule: a touch fills a limit). Quotes before the oldest
// the book keeps count as that one.
func (b *book) touched(ts []Trigger, rested map[string]rest, seq uint64) []string {
	var out []string
	for _, t := range ts {
		at, ok := restsFrom(t, rested)
		if !t.restingLimit() || !ok {
			continue
		}
		from := max(at, seq)
		side := &b.bids
		if t.Side == order.Buy {
			side = &b.asks
		}
		if from > b.seq || len(side.seqs) == 0 {
			continue
		}
		if fill.LimitReached(t.Side, side.since(from), *t.LimitPrice) {
			out = append(out, t.ID)
		}
	}
	return out
}

// Package mark holds the paper book's marks: the quotes that moved a
// bracket's stop (breakeven, trailing), recorded per instrument and node at
// most once a quote, so that a stop's level is derived from them instead of
// one commit per moved stop (docs/decisions.md, "Marks").
//
// A mark is numbered (N, counting up per instrument and node) when the
// paper book's reactor sees its quote, before it is recorded; a bracket
// keeps the number of the newest mark its recorded level has taken in (its
// anchor), and the best touch since is the best mark numbered after it.
// Every Marked carries the whole stack of marks no later mark betters, so
// the newest commit of a subject is all a reader needs.
package mark

import (
	"encoding/hex"
	"sort"
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file mark.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the marks node recorded for instrument
// (hex, so any symbol or node name is one subject token).
func Subject(instrument, node string) string {
	id := hex.EncodeToString([]byte(instrument))
	if node != "" {
		id += "_" + hex.EncodeToString([]byte(node))
	}
	return events.Subject(events.KindMark, id)
}

// MaxEntries bounds a side of a stack. Past it the oldest entries go: a
// bracket anchored before the oldest kept gets the best of those kept,
// never better than the truth (its stop moves less, never too far).
const MaxEntries = 256

// Entry is one mark on one side: its number and its touch.
type Entry struct {
	N     uint64         `json:"n"`
	Price events.Decimal `json:"price"`
}

// Stack is an instrument's marks as one node recorded them: on each side
// the marks no later mark betters, oldest first (bids falling, asks
// rising), and the newest mark's number. A Stack is never changed once
// made: Push makes a new one, so decisions and readers may hold it.
type Stack struct {
	Instrument string  `json:"instrument"`
	Node       string  `json:"node,omitempty"`
	N          uint64  `json:"n"`
	Bids       []Entry `json:"bids,omitempty"` // the highest bids: a long's stop follows them
	Asks       []Entry `json:"asks,omitempty"` // the lowest asks: a short's stop follows them
}

// Marked records an instrument's stack after its newest mark.
type Marked struct {
	Stack Stack     `json:"stack"`
	At    time.Time `json:"at"`
}

func (Marked) Type() string { return "mark.marked.v1" }

// Registry lists the mark event types.
func Registry() events.Registry {
	return events.Registry{Marked{}.Type(): events.Of[Marked]()}
}

// BestSince is the best touch of the marks numbered after anchor on a
// long's side (the highest bid) or a short's (the lowest ask); false when
// there is none. s may be nil.
func (s *Stack) BestSince(long bool, anchor uint64) (events.Decimal, bool) {
	if s == nil {
		return events.Decimal{}, false
	}
	side := s.Asks
	if long {
		side = s.Bids
	}
	i := sort.Search(len(side), func(i int) bool { return side[i].N > anchor })
	if i == len(side) {
		return events.Decimal{}, false
	}
	return side[i].Price, true
}

// Push is the stack after mark n with a bid and an ask (either may be nil:
// that side unchanged). The entries a new touch equals or betters go.
func (s *Stack) Push(n uint64, bid, ask *events.Decimal) *Stack {
	next := &Stack{N: n}
	if s != nil {
		next.Instrument, next.Node, next.Bids, next.Asks = s.Instrument, s.Node, s.Bids, s.Asks
	}
	if bid != nil {
		next.Bids = push(next.Bids, Entry{N: n, Price: *bid}, func(p, top events.Decimal) bool { return p.Cmp(top) >= 0 })
	}
	if ask != nil {
		next.Asks = push(next.Asks, Entry{N: n, Price: *ask}, func(p, top events.Decimal) bool { return p.Cmp(top) <= 0 })
	}
	return next
}

// push is side with e on top, in a new array: the entries e betters (or
// equals) go, and past MaxEntries the oldest.
func push(side []Entry, e Entry, betters func(p, top events.Decimal) bool) []Entry {
	n := len(side)
	for n > 0 && betters(e.Price, side[n-1].Price) {
		n--
	}
	from := 0
	if n+1 > MaxEntries {
		from = n + 1 - MaxEntries
	}
	out := make([]Entry, 0, n-from+1)
	out = append(out, side[from:n]...)
	return append(out, e)
}

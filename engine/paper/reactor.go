// Package paper is the paper book's reactor: it watches quotes and asks the
// accounts whose working orders a quote crosses to fill them, and those whose
// bracket a quote would move (breakeven, trailing). The decision and the fill
// price stay in the account aggregate; the reactor only wakes it.
//
// Wakes are scheduled, not fired: at most Workers are in flight at once, and
// of those at most MovesInFlight only move a stop, so the reactor never fills
// the commit queue ahead of the traders' own orders (the log stores one
// message at a time, each under its own fsync: a trader's append waits for
// every append ahead of it, so a stream of stop moves may hold at most one
// place in that queue); wakes that may fill an order go before wakes that
// only move a stop; and an
// account has at most one wake queued or in flight per instrument, which
// decides on the newest quote of its instrument (quotes that arrive meanwhile
// are conflated into it; when the wake ends, the account is checked against
// the newest quote again). Conflation never skips a stop's trigger: a wake
// names the stops a quote traded through since they began resting at their
// price (Touch.TradedThrough), though the newest quote came back.
//
// Accounts are indexed by the touch at which each would wake (per
// instrument, in four ordered trees: sells that wake at or above a bid, at or
// below it, buys at or below an ask, at or above it), so a quote visits only
// the accounts it crosses, not every account with an order. An account that
// is queued or in flight is out of the index until its wake ends; while it
// is queued only to move a stop, the levels of its orders stay in a second
// index, so a quote that crosses one of them moves its wake to the fills
// (a stop that triggers never waits behind the other accounts' moves), and
// its trailing stops wait in groups by the best touch since their wake
// (trail.go), so a quote through the level the rule has moved a stop to by
// now moves the wake to the fills too, though its move is not recorded yet.
//
// With marks (RecordMarks, the engine's way), no wake only moves a stop: a
// quote that would is numbered as a mark of its instrument and recorded once,
// and the accounts it moves stay parked where a queued move would wait (the
// upgrade trees, the trailing groups) until a quote through a stop's derived
// level wakes them to fill; the move queue serves only an engine that records
// every move (engine.Config.RecordMoves).
//
// A resting limit fills on a touch: a quote at or through its price since it
// rested (Touch.Touched) fills it at its limit, though the quote a wake
// decides on came back. An account a node begins to own (Take) is decided at
// once, on the quotes the book holds since its previous owner may have
// stopped: the newest, and the touches and stops traded through between.
package paper

import (
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/fill"
	"github.com/svc/engine/events"
	"github.com/svc/engine/events/mark"
)

// Trigger is the part of a working order the reactor needs to tell whether a quote crosses it.
type Trigger struct {
	Side        order.Side
	OrderType   order.Type
	LimitPrice  *events.Decimal
	StopPrice   *events.Decimal
	Triggered   bool
	TimeInForce order.TIF
	CreatedAt   time.Time
	Move        bool   // a bracket's breakeven or trailing level: a wake of lower priority
	ID          string // the order's id; empty for a move
	Trail       *Trail // a move's trailing rule, to index it by while its wake is queued; may be nil
	// LevelAt is, for a move, where the bracket's rules put its stop at a
	// best touch, and whether they move it (account.LevelAt); may be nil.
	LevelAt func(best events.Decimal) (events.Decimal, bool)
	// A move's anchor: the number of the newest mark its recorded level took
	// in (events/mark), as MarkNode numbered them; Marked false: none.
	Anchor   uint64
	MarkNode string
	Marked   bool
	// Since is when the order was last set where it rests (placed,
	// replaced, triggered: account.Working.UpdatedAt): Take counts no quote
	// before it.
	Since time.Time
}

// order is the part of t the fill rules read (engine/fill).
func (t Trigger) order() fill.Order {
	return fill.Order{Side: t.Side, Type: t.OrderType, Limit: t.LimitPrice, Stop: t.StopPrice, Triggered: t.Triggered}
}

// untriggeredStop reports whether t is a stop or stop-limit order waiting for its trigger.
func (t Trigger) untriggeredStop() bool {
	return t.ID != "" && !t.Move && t.StopPrice != nil && t.order().WaitingStop()
}

// restingLimit reports whether t is an order resting at its limit price: a
// limit, or a stop-limit its stop triggered.
func (t Trigger) restingLimit() bool {
	return t.ID != "" && !t.Move && t.LimitPrice != nil && t.order().RestingLimit()
}

// restsAt is the price t rests at, where its rest is dated (Reactor.rested):
// an untriggered stop's stop price, a resting limit's limit price.
func (t Trigger) restsAt() (events.Decimal, bool) {
	switch {
	case t.untriggeredStop():
		return *t.StopPrice, true
	case t.restingLimit():
		return *t.LimitPrice, true
	}
	return events.Decimal{}, false
}

// Crosses reports whether the touch (ask for a buy, bid for a sell) would
// fill or trigger t, by the paper book's fill rules (fill.Order.Crosses).
func (t Trigger) Crosses(bid, ask events.Decimal) bool { return t.order().Crosses(bid, ask) }

// Touch is what a wake decides on: the instrument's newest quote, and the
// best touches since the quote the account's brackets were last decided on
// (the highest bid and the lowest ask), so a trailing stop follows a high
// that came and went while its wake waited.
type Touch struct {
	Bid, Ask        events.Decimal
	HighBid, LowAsk events.Decimal
	// TradedThrough names the account's stops that a quote since they began
	// resting traded through while the account was queued or in flight (the
	// quote it decides on may have come back above a sell stop).
	TradedThrough []string
	// Path is the quotes the wake decides on, from the first its HighBid and
	// LowAsk count to the newest (trading.Quote.Path).
	Path []trading.Touch
	// PathFrom is, by stop, where in Path it began resting where it is
	// (trading.Quote.PathFrom).
	PathFrom map[string]int
	// PathBest is, by stop, the best touch of the quotes before Path that it
	// rested through, where Path no longer holds it (trading.Quote.PathBest).
	PathBest map[string]events.Decimal
	// Marks is the instrument's marks on this node, up to the newest quote
	// the wake decides on (RecordMarks); nil without marks.
	Marks *mark.Stack
	// Touched names the account's resting limits that a quote since they
	// began resting touched (a buy's limit at or above the ask, a sell's at
	// or below the bid), though the quote the wake decides on may no longer
	// (trading.FillWorking.Touched).
	Touched []string
}

// maxBest bounds the quotes a book keeps to answer the best touch since a
// quote; a wake queued before the oldest kept gets the best since that one
// (never better than the truth: its stop moves less, never too far).
const maxBest = 4096

// best answers the best touch of one side since a quote: the quotes that
// no later quote betters, oldest first (their touches worsen with time).
// The highest bids and lowest asks also hold, entry by entry, the groups of
// queued stops whose best since their wake is that entry's (trail.go).
type best struct {
	seqs   []uint64
	prices []events.Decimal
	higher bool // bids: higher is better; asks: lower
	trails bool
	groups []*trailGroup // with trails: by entry, nil where no stop waits
}

func (b *best) better(p, than events.Decimal) bool {
	if b.higher {
		return p.Cmp(than) >= 0
	}
	return p.Cmp(than) <= 0
}

// add records the touch of quote seq. The entries it betters go, and their
// groups of stops merge into the new entry's: their best is now this touch.
// Past maxBest the oldest go, their stops counted from the oldest kept (a
// best never better than the truth).
func (b *best) add(seq uint64, p events.Decimal) (raised bool) {
	n := len(b.prices)
	for n > 0 && b.better(p, b.prices[n-1]) {
		n--
	}
	if b.trails {
		var g *trailGroup
		for _, old := range b.groups[n:] {
			g = merge(g, old)
		}
		if g != nil {
			raised = g.size > 0 && g.best.Cmp(p) != 0
			g.best = p
			g.activate()
		}
		b.groups = append(b.groups[:n], g)
	}
	b.seqs, b.prices = append(b.seqs[:n], seq), append(b.prices[:n], p)
	if len(b.seqs) > maxBest {
		drop := len(b.seqs) - maxBest
		if b.trails {
			var g *trailGroup
			for _, old := range b.groups[:drop+1] {
				g = merge(g, old)
			}
			if g != nil {
				g.best = b.prices[drop]
			}
			b.groups = b.groups[drop:]
			b.groups[0] = g
		}
		b.seqs, b.prices = b.seqs[drop:], b.prices[drop:]
	}
	return raised
}

// group is the group of stops whose best since quote seq is this side's
// best since it (made when none waits there yet); nil before any quote.
func (b *best) group(seq uint64) *trailGroup {
	if len(b.seqs) == 0 {
		return nil
	}
	i := b.index(seq)
	if b.groups[i] == nil {
		b.groups[i] = newTrailGroup(b.prices[i], b.higher)
	}
	return b.groups[i]
}

// through lists the accounts whose queued stop the touch reaches at the
// level their rules put it at by the best since their wake.
func (b *best) through(touch events.Decimal) []string {
	var due []string
	for _, g := range b.groups {
		if g != nil {
			due = g.through(touch, due)
		}
	}
	return due
}

// index is the entry that holds the best since quote seq.
func (b *best) index(seq uint64) int {
	i := sort.Search(len(b.seqs), func(i int) bool { return b.seqs[i] >= seq })
	if i == len(b.seqs) {
		i--
	}
	return i
}

// since is the best touch of the quotes from seq on (the newest when seq is
// past them all).
func (b *best) since(seq uint64) events.Decimal {
	return b.prices[b.index(seq)]
}

// Workers bounds the wakes in flight at once.
const Workers = 4

// MovesInFlight bounds the wakes in flight that only move a stop. One keeps
// the log's queue free for the traders' orders: measured with 10,000 trailing
// stops under 200 quotes/s (2026-11-25, in the history of
// docs/performance.md), four moves in flight gave ordinary orders 3-5x their
// idle p99 on the command path and one about 1.3x, for about a fifth fewer
// moves a second (the log, not the reactor, sets their pace).
const MovesInFlight = 1

type key struct{ account, instrument string }

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

func newBook() *book {
	return &book{trees: newTrees(), upgrade: newTrees(), bids: best{higher: true, trails: true}, asks: best{trails: true},
		highAsk: best{higher: true}}
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

// fills are the triggers of ts that fill an order (not a bracket's move).
func fills(ts []Trigger) []Trigger {
	out := make([]Trigger, 0, len(ts))
	for _, t := range ts {
		if !t.Move {
			out = append(out, t)
		}
	}
	return out
}

// waker is one account's wake on one instrument, queued or in flight.
type waker struct {
	fill     bool // may fill an order: goes first
	queued   bool
	inflight bool
	parked   bool       // with marks: a move that waits for a quote through its stop, never sent
	upgrade  *levels    // a queued move wake's fill levels, in its book's upgrade trees
	trails   []trailRef // a queued move wake's trailing stops, in its book's groups
	since    uint64     // the first quote the wake has not decided on: its best touches count from it
}

// Reactor indexes working orders by instrument and account and schedules wakes.
type Reactor struct {
	mu      sync.Mutex
	byInst  map[string]map[string][]Trigger
	indexed map[key]levels // what the trees hold for an idle account
	books   map[string]*book
	wakers  map[key]*waker
	rested  map[key]map[string]rest // untriggered stops by order id: since when they rest where they are
	fills   []key                   // queued wakes that may fill, FIFO
	moves   []key                   // queued wakes that only move stops, FIFO
	moving  int                     // move wakes in flight
	ready   *sync.Cond
	closed  bool
	wg      sync.WaitGroup
	wake    func(accountID, instrument string, t Touch) // sends the command; may block
	node    string                                      // with marks: this node's name in them
	onMark  func(*mark.Stack)                           // with marks: records a stack; must not block
}

// New makes a reactor with Workers wake workers; wake sends an account the
// command to fill or move at the given touch. Close stops the workers.
func New(wake func(accountID, instrument string, t Touch)) *Reactor {
	r := &Reactor{byInst: map[string]map[string][]Trigger{}, indexed: map[key]levels{}, books: map[string]*book{},
		wakers: map[key]*waker{}, rested: map[key]map[string]rest{}, wake: wake}
	r.ready = sync.NewCond(&r.mu)
	for i := 0; i < Workers; i++ {
		r.wg.Add(1)
		go r.work()
	}
	return r
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

// DrainTimeout bounds how long a clean stop waits for the queued wakes
// (Drain): 10,000 trailing stops' moves under a quote stream took about 4 s
// to decide after the stream's last quote (scripts/bench -phases brackets).
const DrainTimeout = 10 * time.Second

// Drain waits, at most d, until no wake is queued or in flight, and reports
// how many still are. A clean stop stops the quotes first and drains before
// Close: a queued wake carries what only this process saw (a stop a quote
// traded through before the price came back, the highs a trailing stop
// follows), which a restart would not see again, so decided now it is
// recorded instead of lost; Close then drops what the deadline left. With
// no new quote a wake ends without waking again, so the queue only shrinks.
func (r *Reactor) Drain(d time.Duration) int {
	deadline := time.Now().Add(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		n := 0
		for _, w := range r.wakers {
			if !w.parked {
				n++
			}
		}
		if n == 0 || r.closed || !time.Now().Before(deadline) {
			return n
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond) // a stop's path, not a command's: no signal kept for it
		r.mu.Lock()
	}
}

// Close stops the workers after the wakes in flight and drops the queued
// ones (the next quotes after a start wake their accounts again): Drain
// first to decide them, for as long as a stop may take. It used to let the
// workers go through the whole queue, with no bound on a stop's time (a
// wake waits up to 10 s for an unreachable log) and, on a node of several,
// after the node had handed its accounts over.
func (r *Reactor) Close() {
	r.mu.Lock()
	r.closed = true
	for _, k := range append(r.fills, r.moves...) {
		if w := r.wakers[k]; w != nil && w.queued {
			r.unwatchUpgrade(k, w)
			delete(r.wakers, k)
		}
	}
	r.fills, r.moves = nil, nil
	r.ready.Broadcast()
	r.mu.Unlock()
	r.wg.Wait()
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

// Working counts the accounts with working orders on instrument.
func (r *Reactor) Working(instrument string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byInst[instrument])
}

// DayOrdersBefore lists the accounts holding a working `day` order placed before t.
func (r *Reactor) DayOrdersBefore(t time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, accts := range r.byInst {
		for acct, ts := range accts {
			for _, tr := range ts {
				if tr.TimeInForce == order.Day && tr.CreatedAt.Before(t) && !seen[acct] {
					seen[acct] = true
					out = append(out, acct)
				}
			}
		}
	}
	return out
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

// enqueue queues w, the wake of k, as a fill or a move; a move keeps the
// levels of the account's orders (triggers ts) in the upgrade trees.
func (r *Reactor) enqueue(k key, w *waker, fill bool, ts []Trigger) {
	w.queued, w.fill = true, fill
	if fill {
		r.fills = append(r.fills, k)
		return
	}
	if r.onMark != nil {
		w.parked = true // its quotes are marks: nothing to send until one goes through its stop
	} else {
		r.moves = append(r.moves, k)
	}
	r.watchUpgrade(k, w, ts)
}

// next pops the next queued wake: fills first, then a move if fewer than
// MovesInFlight are in flight.
func (r *Reactor) next() (key, *waker, bool) {
	for {
		var k key
		switch {
		case len(r.fills) > 0:
			k, r.fills = r.fills[0], r.fills[1:]
		case len(r.moves) > 0 && r.moving < MovesInFlight:
			k, r.moves = r.moves[0], r.moves[1:]
		default:
			return key{}, nil, false
		}
		if w := r.wakers[k]; w != nil && w.queued {
			return k, w, true
		}
	}
}

func (r *Reactor) work() {
	defer r.wg.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		k, w, ok := r.next()
		for !ok && !r.closed {
			r.ready.Wait()
			k, w, ok = r.next()
		}
		if !ok {
			return
		}
		r.unwatchUpgrade(k, w)
		w.queued, w.inflight = false, true
		move := !w.fill
		if move {
			r.moving++
		}
		b := r.book(k.instrument)
		q, seq := *b.quote, b.seq // the newest quote of the instrument
		ts0 := r.byInst[k.instrument][k.account]
		path, start := b.pathSince(w.since)
		t := Touch{Bid: q[0], Ask: q[1], HighBid: b.bids.since(w.since), LowAsk: b.asks.since(w.since),
			Path: path, PathFrom: pathFrom(ts0, r.rested[k], start, len(path)),
			PathBest:      b.pathBest(ts0, r.rested[k], w.since, start),
			TradedThrough: b.tradedThrough(ts0, r.rested[k], 0), Touched: b.touched(ts0, r.rested[k], 0)}
		if r.onMark != nil {
			t.Marks = b.stack
		}
		r.mu.Unlock()
		r.wake(k.account, k.instrument, t)
		r.mu.Lock()
		if move {
			r.moving--
			r.ready.Signal() // a worker waiting while a move was in flight
		}
		r.restRuleMoves(k, ts0, t, seq)
		// The account's triggers are as its commit left them (Track ran in its
		// After): when a newer quote came during the wake and crosses them,
		// wake again at once; else index it to wait for a quote that does.
		ts := r.byInst[k.instrument][k.account]
		crosses, fill := r.due(k, ts, b, seq+1) // the quotes during the wake
		if crosses && !r.closed && b.seq != seq {
			w.inflight, w.since = false, seq+1
			r.enqueue(k, w, fill, ts)
			continue
		}
		delete(r.wakers, k)
		r.index(k, ts)
	}
}

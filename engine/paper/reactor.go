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
//
// The fill rules themselves (when a quote fills or triggers an order, at
// what price) are engine/fill's, which the account's book decides by too.
// The files follow the reactor's concerns: trigger.go (what it knows of an
// order), book.go and best.go (one instrument's quotes and best touches),
// index.go (the working-order index), quotes.go (watching quotes),
// dispatch.go (the queue of wakes and its workers), track.go (tracking and
// takeover), marks.go (marks) and trail.go (trailing stops).
package paper

import (
	"sync"
	"time"

	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events/mark"
)

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

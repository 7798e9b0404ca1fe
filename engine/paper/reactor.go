// Package paper is the paper book's reactor: it watches quotes and asks the
// accounts whose working orders a quote crosses to fill them. The decision and
// the fill price stay in the account aggregate; the reactor only wakes it.
package paper

import (
	"sync"
	"time"

	"github.com/svc/engine/events"
)

// Trigger is the part of a working order the reactor needs to tell whether a quote crosses it.
type Trigger struct {
	Side        string
	OrderType   string
	LimitPrice  *events.Decimal
	StopPrice   *events.Decimal
	Triggered   bool
	TimeInForce string
	CreatedAt   time.Time
}

// Crosses reports whether the touch (ask for a buy, bid for a sell) would fill or trigger t.
func (t Trigger) Crosses(bid, ask events.Decimal) bool {
	touch := ask
	if t.Side == "sell" {
		touch = bid
	}
	better := func(p events.Decimal) bool { // touch at or better than p for the order's side
		if t.Side == "buy" {
			return touch.Cmp(p) <= 0
		}
		return touch.Cmp(p) >= 0
	}
	switch {
	case t.OrderType == "market":
		return true
	case t.OrderType == "limit" || (t.OrderType == "stop_limit" && t.Triggered):
		return better(*t.LimitPrice)
	case t.OrderType == "stop" || t.OrderType == "stop_limit":
		if t.Side == "buy" {
			return touch.Cmp(*t.StopPrice) >= 0
		}
		return touch.Cmp(*t.StopPrice) <= 0
	}
	return false
}

// Reactor indexes working orders by instrument and account.
type Reactor struct {
	mu       sync.Mutex
	byInst   map[string]map[string][]Trigger
	inflight map[string]bool
	wake     func(accountID, instrument string, bid, ask events.Decimal) // sends the fill command; may block
}

// New makes a reactor; wake sends an account the command to fill at the given touch.
func New(wake func(accountID, instrument string, bid, ask events.Decimal)) *Reactor {
	return &Reactor{byInst: map[string]map[string][]Trigger{}, inflight: map[string]bool{}, wake: wake}
}

// Track replaces what the reactor knows of one account's working orders.
func (r *Reactor) Track(accountID string, byInstrument map[string][]Trigger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for inst, accts := range r.byInst {
		if _, keep := byInstrument[inst]; !keep {
			delete(accts, accountID)
			if len(accts) == 0 {
				delete(r.byInst, inst)
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
				if tr.TimeInForce == "day" && tr.CreatedAt.Before(t) && !seen[acct] {
					seen[acct] = true
					out = append(out, acct)
				}
			}
		}
	}
	return out
}

// OnQuote wakes every account with a working order the quote crosses, one
// wake in flight per account and instrument.
func (r *Reactor) OnQuote(instrument string, bid, ask events.Decimal) {
	r.mu.Lock()
	var due []string
	for acct, ts := range r.byInst[instrument] {
		key := acct + "|" + instrument
		if r.inflight[key] {
			continue
		}
		for _, t := range ts {
			if t.Crosses(bid, ask) {
				r.inflight[key] = true
				due = append(due, acct)
				break
			}
		}
	}
	r.mu.Unlock()
	for _, acct := range due {
		go func(acct string) {
			r.wake(acct, instrument, bid, ask)
			r.mu.Lock()
			delete(r.inflight, acct+"|"+instrument)
			r.mu.Unlock()
		}(acct)
	}
}

package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// The accounts' clientOrderId indexes keep a hash and a sequence for each
// clientOrderId (engine/account/orderindex.go); a hit reads that commit
// back here, behind a bounded cache of the commits read last (a client
// retrying one clientOrderId reads it once).

// commitCacheSize bounds the cache of commits read back: what it holds is
// recently repeated clientOrderIds' commits, a few hundred bytes each.
const commitCacheSize = 4096

// findTimeout bounds one read of a commit: the decision waiting on it holds
// its account's mailbox.
const findTimeout = 5 * time.Second

type commitCache struct {
	mu   sync.Mutex
	m    map[uint64][]events.Event
	ring [commitCacheSize]uint64 // the sequences in m, oldest replaced first
	next int
}

func (c *commitCache) get(seq uint64) ([]events.Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	evs, ok := c.m[seq]
	return evs, ok
}

func (c *commitCache) put(seq uint64, evs []events.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[uint64][]events.Event, commitCacheSize)
	}
	if _, ok := c.m[seq]; ok {
		return
	}
	if old := c.ring[c.next]; old != 0 {
		delete(c.m, old)
	}
	c.ring[c.next], c.m[seq] = seq, evs
	c.next = (c.next + 1) % commitCacheSize
}

// newAccount is an account's state with no commits, given the way to read
// its commits back.
func (e *Engine) newAccount(id string) *account.State {
	s := account.New(id)
	s.UseFinder(e.findCommit)
	return s
}

// findCommit reads the events of the commit at seq (account.Finder). A
// read that fails is the log's unavailability: the decision answers 503
// and records nothing.
func (e *Engine) findCommit(seq uint64) ([]events.Event, error) {
	if evs, ok := e.commits.get(seq); ok {
		return evs, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), findTimeout)
	defer cancel()
	m, err := e.cfg.Log.At(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", eventlog.ErrLogUnavailable, err)
	}
	c, err := e.reg.Decode(m.Data)
	if err != nil {
		return nil, fmt.Errorf("commit %d: %w", seq, err)
	}
	e.commits.put(seq, c.Events)
	return c.Events, nil
}

// keepPlacing keeps the events of a provider account's commit that placed
// an order in the cache of commits read back: the order's answer names
// the order by its clientOrderId at once (awaitOne), and so does the
// stream's report of its end a moment later; both would otherwise read
// the commit back from the log on the account's goroutine.
func (e *Engine) keepPlacing(c events.Committed) {
	for _, ev := range c.Events {
		if _, ok := ev.(evacct.OrderPlaced); ok {
			e.commits.put(c.Seq, c.Events)
			return
		}
	}
}

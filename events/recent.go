package events

import "sync"

// Recent hands commits this process is appending, already decoded, to its own
// readers of the log (the projector), so they need not decode them again. It is
// keyed by the commit's id (the message's Nats-Msg-Id) and bounded: a lookup
// that misses (evicted, dropped, or a commit of another process) decodes from
// the log as usual, so correctness never depends on it.
type Recent struct {
	mu    sync.Mutex
	byID  map[string]Commit
	order []string // ring of ids, oldest at next
	next  int
}

// NewRecent holds up to n commits.
func NewRecent(n int) *Recent {
	return &Recent{byID: make(map[string]Commit, n), order: make([]string, n)}
}

// Put remembers a commit about to be appended.
func (r *Recent) Put(c Commit) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.order[r.next]; old != "" {
		delete(r.byID, old)
	}
	r.order[r.next] = c.CommandID
	r.next = (r.next + 1) % len(r.order)
	r.byID[c.CommandID] = c
}

// Drop forgets a commit whose append was refused.
func (r *Recent) Drop(id string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.byID, id)
	r.mu.Unlock()
}

// Take returns and forgets the commit with the id, if held.
func (r *Recent) Take(id string) (Commit, bool) {
	if r == nil || id == "" {
		return Commit{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byID[id]
	if ok {
		delete(r.byID, id)
	}
	return c, ok
}

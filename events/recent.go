package events

import "sync"

// Recent hands commits this process is appending, already decoded, to its own
// readers of the log (the projector), so they need not decode them again. It is
// keyed by the commit's id (the message's Nats-Msg-Id) and bounded: a lookup
// that misses (evicted, dropped, or a commit of another process) decodes from
// the log as usual, so correctness never depends on it.
type Recent struct {
	mu   sync.Mutex
	byID map[string]int // the slot of ring holding the commit of an id
	ring []Commit       // the commits, oldest at next; an empty slot has no id
	next int
}

// NewRecent holds up to n commits.
func NewRecent(n int) *Recent {
	return &Recent{byID: make(map[string]int, n), ring: make([]Commit, n)}
}

// Put remembers a commit about to be appended.
func (r *Recent) Put(c Commit) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(r.next)
	r.ring[r.next] = c
	r.byID[c.CommandID] = r.next
	r.next = (r.next + 1) % len(r.ring)
}

// forget empties slot i, and drops its id unless a newer Put of the same id
// holds it elsewhere; r.mu is held.
func (r *Recent) forget(i int) {
	if id := r.ring[i].CommandID; id != "" {
		if j, ok := r.byID[id]; ok && j == i {
			delete(r.byID, id)
		}
	}
	r.ring[i] = Commit{}
}

// Drop forgets a commit whose append was refused.
func (r *Recent) Drop(id string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if i, ok := r.byID[id]; ok {
		r.forget(i)
	}
	r.mu.Unlock()
}

// Take returns and forgets the commit with the id, if held.
func (r *Recent) Take(id string) (Commit, bool) {
	if r == nil || id == "" {
		return Commit{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.byID[id]
	if !ok {
		return Commit{}, false
	}
	c := r.ring[i]
	r.forget(i)
	return c, true
}

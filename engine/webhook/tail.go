package webhook

import (
	"log/slog"
	"sync"
	"time"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// The tail. A reactor with Config.Tail does not read the log a second time
// in the process: it takes the commits another reader gives it (the
// projector's, which reads every commit anyway) and reads the log itself
// only for the commits that reader has not given it, and only when it needs
// them. One rule keeps every commit routed exactly once and in stream
// order: the router's position p is the last commit it is done with, and
// the next commit it routes is the first one after p, from wherever it
// comes.
//
//   - A commit heard from the tail at or below p was routed already (the
//     replay read it, or a read of the log did, or the tail repeats itself
//     after its reader started again): skipped.
//   - One right after p is routed, and p moves to it.
//   - One further on shows a gap: commits the tail never gave the router
//     (those between the replay's end and the first commit heard, those of
//     a full queue dropped, those its reader had passed when the tail was
//     heard from). The router reads the log after p to its end first
//     (bridge), then goes on with what it heard, skipping what the read
//     covered.
//   - When the tail has not moved p for TailLag while the log holds commits
//     past it (its reader stopped, or is far behind), the router reads them
//     from the log the same way, so deliveries never wait on the reader for
//     long.
//
// Start hears from the tail before its replay and follows it after, so in
// the common case the first commit heard after the replay is the one right
// after it and the log is never read again.

// DefaultTailLag is how long a reactor with a tail lets the tail leave its
// position behind the log before it reads the log itself.
const DefaultTailLag = 2 * time.Second

// TailBuffer bounds the commits heard from the tail and not yet taken by the
// router. A full queue drops what it holds: the router reads those commits
// from the log instead.
const TailBuffer = 4096

// tailQueue is the hand-off of commits from the tail's goroutine to the
// router's.
type tailQueue struct {
	mu   sync.Mutex
	q    []events.Committed
	wake chan struct{}
}

func newTailQueue() *tailQueue { return &tailQueue{wake: make(chan struct{}, 1)} }

// push queues c for the router; it never blocks.
func (t *tailQueue) push(c events.Committed) {
	t.mu.Lock()
	if len(t.q) >= TailBuffer {
		clear(t.q)
		t.q = t.q[:0]
	}
	t.q = append(t.q, c)
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// take is what the queue holds, in the order heard; spare, emptied, becomes
// the queue.
func (t *tailQueue) take(spare []events.Committed) []events.Committed {
	clear(spare)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.q
	t.q = spare[:0]
	return out
}

// listen starts hearing the tail.
func (r *Reactor) listen() {
	r.tail = newTailQueue()
	stop := r.cfg.Tail(r.tail.push)
	r.mu.Lock()
	r.untail = stop
	r.mu.Unlock()
}

// unlisten stops hearing the tail, once.
func (r *Reactor) unlisten() {
	r.mu.Lock()
	stop := r.untail
	r.untail = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// followTail is the router's live loop with a tail, from position pos on
// until Close (see the rule above).
func (r *Reactor) followTail(pos uint64) {
	defer r.loops.Done()
	lag := time.NewTicker(r.cfg.TailLag)
	defer lag.Stop()
	moved := pos // the position at the last tick
	var batch []events.Committed
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.tail.wake:
		case <-lag.C:
			if pos == moved {
				pos = r.bridge(pos)
			}
			moved = pos
		}
		batch = r.tail.take(batch)
		for _, c := range batch {
			if c.Seq <= pos {
				continue
			}
			if c.Seq > pos+1 {
				if pos = r.bridge(pos); r.ctx.Err() != nil {
					return
				}
				if c.Seq <= pos {
					continue
				}
			}
			if !r.retry(c.Subject, c.Seq, func() error { return r.stepCommitted(c) }) {
				return
			}
			pos = c.Seq
			r.pos.Store(pos)
		}
	}
}

// bridge routes the log's commits after pos up to its last one, and returns
// the position it reached: that last one, or pos when the log holds nothing
// after it. A read that fails is made again, from where it stopped, until it
// succeeds or Close; a commit whose routing fails is routed again.
func (r *Reactor) bridge(pos uint64) uint64 {
	for r.ctx.Err() == nil {
		last, err := r.cfg.Log.Replay(r.ctx, pos, func(m eventlog.Msg) error {
			if m.Seq <= pos {
				return nil
			}
			r.bridged.Add(1)
			if err := r.step(m); err != nil {
				return err
			}
			pos = m.Seq
			r.pos.Store(pos)
			return nil
		})
		if err == nil {
			if last > pos { // the commits past pos were none to route (none left in the log)
				pos = last
				r.pos.Store(pos)
			}
			return pos
		}
		if r.ctx.Err() != nil {
			break
		}
		slog.Warn("webhook: reading the log past the tail", "err", err, "from", pos)
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return pos
}

// retry runs f, the routing of one commit, until it succeeds (true) or
// Close (false), a second apart.
func (r *Reactor) retry(subject string, seq uint64, f func() error) bool {
	for r.ctx.Err() == nil {
		err := f()
		if err == nil {
			return true
		}
		slog.Warn("webhook: routing a commit; trying again", "subject", subject, "seq", seq, "err", err)
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return false
}

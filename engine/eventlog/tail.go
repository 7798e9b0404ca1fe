package eventlog

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The tail: an engine that is the only writer of its log (Config.SoleWriter)
// already holds every commit it appended, with the sequence the server's ack
// gave it. FollowCommits, the read models' live read, then takes them from
// here instead of asking the server to deliver each one back through a
// consumer: on the embedded server that delivery was about a quarter of the
// commit's allocation (the server loading the message and writing it out,
// nats.go reading it back and parsing its headers) and CPU on both sides,
// for bytes this process had in hand.
//
// Correctness never rests on the tail: it serves a sequence only as the
// ack of this process's own append named it, and whatever it does not
// hold (another writer's commit, an append whose ack was lost but which was
// stored, a commit the tail no longer keeps, anything before a reconnect)
// is read from the log as before, through a consumer, in order.
const (
	// tailSize bounds the commits the tail keeps (about 600 bytes each for
	// an order): a follower further behind reads from the log.
	tailSize = 4096
	// tailGap is how long a follower waits for a sequence it is missing
	// while the tail holds later ones (their appends' acks are handled in
	// any order) before it reads the log from there.
	tailGap = 20 * time.Millisecond
	// tailIdle is how often a follower that is waiting asks the log's head,
	// for commits another writer appended with none of this process's after
	// them.
	tailIdle = 250 * time.Millisecond
)

// tailEntry is one appended commit; data is the tail's own copy.
type tailEntry struct {
	seq         uint64
	subject, id string
	prev        uint64
	data        []byte
}

type tail struct {
	mu    sync.Mutex
	ring  []tailEntry // the entry of sequence s at s % len(ring)
	top   uint64      // the highest sequence held
	gen   uint64      // raised by every clear
	waits map[chan struct{}]struct{}
}

// generation is what an append reads before it sends (put takes it back):
// an ack that comes in a connection older than the last clear is not kept.
func (t *tail) generation() uint64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

func newTail(n int) *tail {
	return &tail{ring: make([]tailEntry, n), waits: map[chan struct{}]struct{}{}}
}

// put keeps the commit stored at seq (an append's ack, never a duplicate's)
// and wakes the followers; not when the tail was cleared since the append
// read gen (generation).
func (t *tail) put(gen, seq uint64, subject, id string, prev uint64, data []byte) {
	e := tailEntry{seq: seq, subject: subject, id: id, prev: prev, data: append([]byte(nil), data...)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.gen {
		return
	}
	slot := &t.ring[seq%uint64(len(t.ring))]
	if slot.seq < seq {
		*slot = e
	}
	t.top = max(t.top, seq)
	for ch := range t.waits {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// get is the commit at seq when the tail holds it.
func (t *tail) get(seq uint64) (tailEntry, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.ring[seq%uint64(len(t.ring))]
	return e, t.top, e.seq == seq
}

// clear forgets everything: after a reconnect the server may be another
// one, or have lost what it acknowledged without storing it to disk, so
// only the log itself says what a sequence holds.
func (t *tail) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.ring)
	t.top = 0
	t.gen++
	for ch := range t.waits {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (t *tail) watch(ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waits[ch] = struct{}{}
}

func (t *tail) unwatch(ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.waits, ch)
}

// keep records a commit this process appended at seq, when the log keeps
// a tail; gen is the tail's generation read before the append was sent.
func (l *Log) keep(gen, seq uint64, subject, id string, prev uint64, data []byte) {
	if l.tail != nil {
		l.tail.put(gen, seq, subject, id, prev, data)
	}
}

// errClosed ends a read of the tail when the log's connection is closed.
var errClosed = errors.New("eventlog: the log's connection is closed")

// followTail is Follow for a log that keeps a tail: every commit after
// from, in stream order, each exactly once, until ctx ends or fn fails;
// what the tail does not hold is read from the log.
func (l *Log) followTail(ctx context.Context, from uint64, fn func(Msg) error) error {
	t := l.tail
	wake := make(chan struct{}, 1)
	t.watch(wake)
	defer t.unwatch(wake)
	timer := time.NewTimer(tailIdle)
	defer timer.Stop()
	next := from + 1
	var missing time.Time // since when next is missing while later ones are held
	// The first commit missing is read from the log at once: a read that
	// starts behind (a projector restarting from its checkpoint) has no
	// append of this process's to wait for.
	behind := true
	for {
		e, top, ok := t.get(next)
		if ok {
			missing, behind = time.Time{}, false
			if err := fn(Msg{Subject: e.subject, Seq: e.seq, ID: e.id, Data: e.data, Prev: e.prev, HasPrev: true}); err != nil {
				return err
			}
			next++
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if l.nc.IsClosed() {
			return errClosed
		}
		wait := tailIdle
		if behind || top >= next+uint64(len(t.ring)) { // the tail cannot hold it
			wait = 0
		} else if top > next {
			now := time.Now()
			if missing.IsZero() {
				missing = now
			}
			wait = tailGap - now.Sub(missing)
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-wake:
				continue
			case <-timer.C:
			}
			if _, _, ok := t.get(next); ok {
				continue
			}
		}
		// Waited long enough: read what the log holds past next-1.
		missing, behind = time.Time{}, false
		last, err := l.LastSeq(ctx)
		if err != nil { // the log cannot be asked now: ask again a little later
			timer.Reset(tailGap)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
			continue
		}
		if last < next {
			continue // nothing to read yet: wait again
		}
		err = l.follow(ctx, nil, next-1, last, func(m Msg) error {
			next = m.Seq + 1
			return fn(m)
		})
		if err != nil {
			return err
		}
		next = max(next, last+1)
	}
}

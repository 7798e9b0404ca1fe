package stream

import (
	"sync"
	"time"

	"github.com/svc/engine/gateway/httpx"
)

// Sub is one subscriber of one account. Until it is served on a detached
// connection (Hub.Serve) its payloads wait in slots, read with Ready and Take;
// once served, the hub's fan-out writes each payload to the connection at
// once, without waking a goroutine, and only a subscriber whose socket is full
// gets a goroutine (drain) that writes the rest and then the newest pending
// payload of each name.
type Sub struct {
	mu     sync.Mutex
	slots  map[string]Payload // newest payload per event name, not yet written
	order  []string           // names with a pending payload, in arrival order
	revs   []nameRev          // the newest revision offered per event name
	notify chan struct{}

	// On a detached connection: while busy, a drain goroutine owns the
	// connection's writes and every payload waits in slots; while not busy,
	// nothing waits and the writer of a payload holds mu.
	conn   *httpx.Conn
	beat   []byte      // the heartbeat, chunk-framed
	timer  *time.Timer // the next heartbeat
	rest   []byte      // the unwritten end of a chunk, written first by drain
	due    bool        // a heartbeat waits for drain
	busy   bool        // a drain goroutine runs
	idle   *sync.Cond  // signalled when busy turns false
	ended  bool        // the stream is ending: write nothing more
	broken bool        // a write failed: the stream cannot end cleanly
	kicked bool        // the hub closed
}

func newSub() *Sub {
	s := &Sub{slots: map[string]Payload{}, notify: make(chan struct{}, 1)}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// offer takes p unless a newer revision of its name came first: a stream's
// revisions never go back.
func (s *Sub) offer(p Payload) {
	s.mu.Lock()
	if !s.advance(p.Name, p.Rev) {
		s.mu.Unlock()
		return
	}
	if s.conn != nil {
		switch {
		case s.ended:
		case s.busy:
			s.slotLocked(p)
		default:
			s.writeLocked(p.chunkBytes())
		}
		s.mu.Unlock()
		return
	}
	s.slotLocked(p)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// nameRev is the newest revision a subscriber was offered of one event name.
type nameRev struct {
	name string
	rev  uint64
}

// advance records rev as the newest of name, or reports false when a newer one came first.
func (s *Sub) advance(name string, rev uint64) bool {
	for i := range s.revs {
		if s.revs[i].name == name {
			if s.revs[i].rev > rev {
				return false
			}
			s.revs[i].rev = rev
			return true
		}
	}
	s.revs = append(s.revs, nameRev{name, rev})
	return true
}

func (s *Sub) slotLocked(p Payload) {
	if _, pending := s.slots[p.Name]; !pending {
		s.order = append(s.order, p.Name)
	}
	s.slots[p.Name] = p
}

// Ready is signalled when payloads are pending.
func (s *Sub) Ready() <-chan struct{} { return s.notify }

// Take returns the pending payloads, oldest name first, and clears them.
func (s *Sub) Take() []Payload {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Payload, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.slots[n])
		delete(s.slots, n)
	}
	s.order = s.order[:0]
	return out
}

// attach makes c the subscriber's connection: it writes what is pending and
// starts the heartbeat.
func (s *Sub) attach(c *httpx.Conn, every time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = c
	s.beat = httpx.AppendChunk(nil, httpx.FormatComment("heartbeat"))
	if s.kicked {
		c.Release()
	}
	if b := s.pendingLocked(); len(b) > 0 {
		s.writeLocked(b)
	}
	s.timer = time.AfterFunc(every, func() { s.heartbeat(every) })
}

// writeLocked writes b without blocking; what the socket does not take goes
// to a drain goroutine. Call it only while not busy.
func (s *Sub) writeLocked(b []byte) {
	n, err := s.conn.TryWrite(b)
	switch {
	case err != nil:
		s.failLocked()
	case n < len(b):
		s.rest = b[n:]
		s.busy = true
		go s.drain()
	}
}

// drain writes, blocking, what waits until nothing does or the stream ends.
func (s *Sub) drain() {
	s.mu.Lock()
	for !s.ended {
		b := s.pendingLocked()
		if len(b) == 0 {
			break
		}
		s.mu.Unlock()
		err := s.conn.Write(b)
		s.mu.Lock()
		if err != nil {
			s.failLocked()
		}
	}
	s.busy = false
	s.idle.Broadcast()
	s.mu.Unlock()
}

// pendingLocked renders and clears what waits: the rest of a chunk, the
// payloads in arrival order, the heartbeat. The bytes are a fresh copy.
func (s *Sub) pendingLocked() []byte {
	var b []byte
	b = append(b, s.rest...)
	s.rest = nil
	for _, n := range s.order {
		b = append(b, s.slots[n].chunkBytes()...)
		delete(s.slots, n)
	}
	s.order = s.order[:0]
	if s.due {
		b = append(b, s.beat...)
		s.due = false
	}
	return b
}

func (s *Sub) heartbeat(every time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if s.busy {
		s.due = true
	} else {
		s.writeLocked(s.beat)
	}
	s.timer.Reset(every)
}

// failLocked ends the stream after a failed write.
func (s *Sub) failLocked() {
	s.broken, s.ended = true, true
	s.conn.Release()
}

// kick makes Serve return: the hub closed.
func (s *Sub) kick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kicked = true
	if s.conn != nil {
		s.conn.Release()
	}
}

// end stops writing, waits for a drain goroutine (its write is cut short after
// a second), and closes the connection, ending the body cleanly, after the
// final event if any, when asked and no chunk was left half written.
func (s *Sub) end(clean bool, final []byte) {
	s.mu.Lock()
	s.ended = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.busy {
		s.conn.Bound(time.Second)
	}
	for s.busy {
		s.idle.Wait()
	}
	clean = clean && !s.broken && s.rest == nil
	s.mu.Unlock()
	s.conn.End(clean, final)
}

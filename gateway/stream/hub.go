// Package stream is the SSE hub of account streams. Every subscriber holds only
// the newest payload of each event name (conflation): a slow client skips
// frames and never slows the engine or other subscribers.
package stream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
)

// Payload is one event ready to write: its name, SSE id and JSON data.
type Payload struct {
	Name  string
	ID    string
	Data  []byte
	Rev   uint64
	wire  []byte // rendered once, written to every subscriber
	chunk []byte // wire as one HTTP/1.1 chunk, for detached connections
}

// Wire is the event as a stream writes it.
func (p Payload) Wire() []byte {
	if p.wire != nil {
		return p.wire
	}
	return httpx.FormatEvent(p.Name, p.ID, p.Data)
}

func (p Payload) chunkBytes() []byte {
	if p.chunk != nil {
		return p.chunk
	}
	return httpx.AppendChunk(nil, p.Wire())
}

// endWait bounds how long Close waits for served streams to end.
const endWait = 5 * time.Second

// Hub fans account frames out to subscribers: Run renders each frame once, and
// the fan-out writes it to every served subscriber's connection (fanout.go).
type Hub struct {
	store   projections.Store
	marks   frames.Marks
	mu      sync.RWMutex
	subs    map[string]map[*Sub]struct{}
	lists   map[string][]*Sub // subs as a slice, rebuilt after a change
	closed  bool
	live    sync.WaitGroup // served streams
	dmu     sync.Mutex
	dirty   map[string]uint64
	wake    chan struct{}
	fmu     sync.Mutex
	feeds   map[feedKey]*feed
	due     map[feedKey]struct{} // feeds with a payload to fan out
	fanWake chan struct{}
	workers int
	gauge   prometheus.Gauge
	count   atomic.Int64
	extras  []func(ctx context.Context, accountID string, rev uint64) []Payload
	done    chan struct{}
	once    sync.Once
	stacks  follows
}

// follows indexes streamed accounts by the mark stacks their newest frame's
// brackets follow (frames.Frame.Follows), so that a Marked commit rebuilds
// the frames it changes and no other.
type follows struct {
	mu    sync.Mutex
	of    map[string]following           // account id -> what its newest frame follows
	by    map[string]map[string]struct{} // projections.MarkKey -> account ids
	heard map[string]uint64              // projections.MarkKey -> the count of Marked commits heard at its newest
	count uint64                         // Marked commits heard
}

type following struct {
	rev  uint64
	keys []string
}

// Done is closed when the hub closes: every stream ends.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Close ends every stream, and waits (a few seconds at most) for the served
// ones to end their bodies and close their connections.
func (h *Hub) Close() {
	h.once.Do(func() {
		h.mu.Lock()
		h.closed = true
		close(h.done)
		for _, m := range h.subs {
			for s := range m {
				s.kick()
			}
		}
		h.mu.Unlock()
	})
	ended := make(chan struct{})
	go func() { h.live.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(endWait):
	}
}

// NewHub makes a hub reading frames from store; reg may be nil.
func NewHub(store projections.Store, marks frames.Marks, reg prometheus.Registerer) *Hub {
	h := &Hub{store: store, marks: marks, subs: map[string]map[*Sub]struct{}{}, lists: map[string][]*Sub{},
		dirty: map[string]uint64{}, wake: make(chan struct{}, 1), feeds: map[feedKey]*feed{}, due: map[feedKey]struct{}{},
		fanWake: make(chan struct{}, 1), workers: runtime.GOMAXPROCS(0), done: make(chan struct{}),
		stacks: follows{of: map[string]following{}, by: map[string]map[string]struct{}{}, heard: map[string]uint64{}}}
	h.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "engine_sse_subscribers", Help: "Open SSE subscriptions of account streams."})
	if reg != nil {
		reg.MustRegister(h.gauge)
	}
	return h
}

// OnConnect registers a source of extra payloads sent to a new subscriber
// after the frame (a lock event, say). rev is the revision of that frame:
// fn's payloads show the account as of rev or later and name such a
// revision, so a stream's ids never go back (a client resuming from the
// newest id it saw, or folding by it, is never taken backwards).
func (h *Hub) OnConnect(fn func(ctx context.Context, accountID string, rev uint64) []Payload) {
	h.extras = append(h.extras, fn)
}

// Subscribers counts open subscriptions.
func (h *Hub) Subscribers() int64 { return h.count.Load() }

// OnCommit is the projector listener: it marks the commit's account dirty,
// or, for a Marked commit, every streamed account whose brackets follow its
// stack.
func (h *Hub) OnCommit(c events.Committed) {
	if key, ok := events.SubjectID(c.Subject, events.KindMark); ok {
		if h.marked(key, c.Seq) {
			h.kick()
		}
		return
	}
	id, watched := h.watched(c)
	if !watched {
		return
	}
	h.dmu.Lock()
	h.dirty[id] = c.Seq
	h.dmu.Unlock()
	h.kick()
}

// kick wakes Run.
func (h *Hub) kick() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Watched reports whether c is a commit of an account someone streams, or
// a Marked commit of a stack a streamed account's brackets follow: the
// projector writes such a commit without lingering (Projector.SetUrgent).
func (h *Hub) Watched(c events.Committed) bool {
	if key, ok := events.SubjectID(c.Subject, events.KindMark); ok {
		h.stacks.mu.Lock()
		defer h.stacks.mu.Unlock()
		return len(h.stacks.by[key]) > 0
	}
	_, watched := h.watched(c)
	return watched
}

// watched is Watched of an account's commit, with the account id.
func (h *Hub) watched(c events.Committed) (string, bool) {
	id, ok := events.SubjectID(c.Subject, events.KindAccount)
	if !ok {
		return "", false
	}
	h.mu.RLock()
	_, watched := h.subs[id]
	h.mu.RUnlock()
	return id, watched
}

// marked records a Marked commit of the stack key and marks the accounts
// following it dirty; it reports whether there were any.
func (h *Hub) marked(key string, seq uint64) bool {
	m := &h.stacks
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count++
	m.heard[key] = m.count
	ids := m.by[key]
	if len(ids) == 0 {
		return false
	}
	h.dmu.Lock()
	for id := range ids {
		h.dirty[id] = seq
	}
	h.dmu.Unlock()
	return true
}

// heard is the count of Marked commits heard so far: a frame built after it
// shows the stacks as those commits left them.
func (h *Hub) heard() uint64 {
	h.stacks.mu.Lock()
	defer h.stacks.mu.Unlock()
	return h.stacks.count
}

// follow makes keys, the stacks the account's frame at rev follows, the
// ones whose Marked commits rebuild its frame, while someone streams it and
// no later frame's were recorded. A Marked commit of one of them heard
// after from, which that frame may not show, marks the account dirty again.
func (h *Hub) follow(accountID string, rev uint64, keys []string, from uint64) {
	m := &h.stacks
	m.mu.Lock()
	defer m.mu.Unlock()
	streamed := h.isStreamed(accountID)
	old, had := m.of[accountID]
	if !streamed || (had && old.rev > rev) {
		return
	}
	m.drop(accountID, old.keys)
	if len(keys) == 0 {
		delete(m.of, accountID)
		return
	}
	m.of[accountID] = following{rev: rev, keys: keys}
	missed := false
	for _, k := range keys {
		ids := m.by[k]
		if ids == nil {
			ids = map[string]struct{}{}
			m.by[k] = ids
		}
		ids[accountID] = struct{}{}
		missed = missed || m.heard[k] > from
	}
	if missed {
		h.dmu.Lock()
		h.dirty[accountID] = rev
		h.dmu.Unlock()
		h.kick()
	}
}

// isStreamed reports whether someone streams the account.
func (h *Hub) isStreamed(accountID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, ok := h.subs[accountID]
	return ok
}

// unfollow forgets what the account follows once nobody streams it.
func (h *Hub) unfollow(accountID string) {
	m := &h.stacks
	m.mu.Lock()
	defer m.mu.Unlock()
	if h.isStreamed(accountID) { // subscribed again meanwhile: its frame has followed
		return
	}
	m.drop(accountID, m.of[accountID].keys)
	delete(m.of, accountID)
}

// drop removes the account from the followers of keys; mu is held.
func (m *follows) drop(accountID string, keys []string) {
	for _, k := range keys {
		delete(m.by[k], accountID)
		if len(m.by[k]) == 0 {
			delete(m.by, k)
		}
	}
}

// Run builds one frame per dirty account and sends it, and runs the fan-out,
// until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { h.fan(ctx) })
	defer wg.Wait()
	spare := map[string]uint64{} // the dirty set Run took last, emptied: the two take turns
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.dmu.Lock()
		dirty := h.dirty
		h.dirty = spare
		h.dmu.Unlock()
		for id := range dirty {
			p, err := h.streamed(ctx, id)
			if err != nil {
				slog.Warn("frame", "account", id, "err", err)
				continue
			}
			h.Send(id, p)
		}
		clear(dirty)
		spare = dirty
	}
}

// Frame renders the account's current frame as a payload. A panic while
// building it is that frame's error: the hub and the process serve on.
func (h *Hub) Frame(ctx context.Context, accountID string) (Payload, error) {
	p, _, err := h.frame(ctx, accountID)
	return p, err
}

// streamed is Frame for the account's subscribers: the Marked commits of the
// stacks its brackets follow rebuild it from then on.
func (h *Hub) streamed(ctx context.Context, accountID string) (Payload, error) {
	from := h.heard()
	p, keys, err := h.frame(ctx, accountID)
	if err != nil {
		return p, err
	}
	h.follow(accountID, p.Rev, keys, from)
	return p, nil
}

// frame is Frame with the mark stacks the frame follows (frames.Frame.Follows).
func (h *Hub) frame(ctx context.Context, accountID string) (_ Payload, _ []string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("frame of %s panicked: %v", accountID, v)
		}
	}()
	f := framePool.Get().(*frames.Frame)
	defer func() {
		clear(f.Positions)
		*f = frames.Frame{Positions: f.Positions[:0]} // hold nothing the frame refers to; keep the positions' room
		framePool.Put(f)
	}()
	if err := frames.BuildInto(ctx, h.store, accountID, h.marks, f); err != nil {
		return Payload{}, nil, err
	}
	p, err := render("account", f.Revision, f)
	if err != nil {
		return Payload{}, nil, err
	}
	return p, f.Follows, nil
}

// framePool is the frames frame builds and renders: only the rendered
// payload outlives a build, so the frame itself is reused.
var framePool = sync.Pool{New: func() any { return new(frames.Frame) }}

// render encodes v as the payload of an event named name with the revision
// rev as its id, in one buffer that is its chunk: Data and the SSE form are
// parts of it, so the frame is one copy, shared by every subscriber.
// The JSON is what encoding/json's Marshal writes (goccy/go-json, at half
// its CPU), one line, so its SSE form is a single data line.
func render(name string, rev uint64, v any) (Payload, error) {
	var p Payload
	err := httpx.EncodeJSON(v, func(b []byte) {
		p = frame(name, rev, bytes.TrimSuffix(b, []byte("\n"))) // Encode ends the value with a newline
	})
	return p, err
}

// frame is the payload of the JSON data as the event name at rev.
func frame(name string, rev uint64, data []byte) Payload {
	var idb [20]byte
	id := strconv.AppendUint(idb[:0], rev, 10)
	// event: NAME\nid: ID\ndata: DATA\n\n, framed as an HTTP/1.1 chunk.
	wireLen := len("event: \nid: \ndata: \n\n") + len(name) + len(id) + len(data)
	var hex [16]byte
	size := strconv.AppendUint(hex[:0], uint64(wireLen), 16)
	chunk := make([]byte, 0, len(size)+2+wireLen+2)
	chunk = append(append(chunk, size...), "\r\n"...)
	w0 := len(chunk)
	chunk = append(append(append(chunk, "event: "...), name...), '\n')
	idAt := len(chunk) + len("id: ")
	chunk = append(append(append(chunk, "id: "...), id...), '\n')
	d0 := len(chunk) + len("data: ")
	chunk = append(append(append(chunk, "data: "...), data...), "\n\n"...)
	w1 := len(chunk)
	chunk = append(chunk, "\r\n"...)
	return Payload{Name: name, ID: string(chunk[idAt : idAt+len(id)]), Data: chunk[d0 : d0+len(data) : d0+len(data)], Rev: rev,
		wire: chunk[w0:w1:w1], chunk: chunk}
}

// list is the account's subscribers as a slice.
func (h *Hub) list(accountID string) []*Sub {
	h.mu.RLock()
	l, ok := h.lists[accountID]
	h.mu.RUnlock()
	if ok {
		return l
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	l = make([]*Sub, 0, len(h.subs[accountID]))
	for s := range h.subs[accountID] {
		l = append(l, s)
	}
	h.lists[accountID] = l
	return l
}

// Serve writes the subscription to its detached connection until the client
// goes, a write fails, the hub closes or the credential that opened the
// stream ends: the frame and extras pending since Subscribe, then every
// payload as the hub fans it out, and a heartbeat every httpx.Heartbeat. A
// stream whose credential ended gets its final `error` event
// (httpx.StreamEnd.Final) last. It ends the connection before it returns.
func (h *Hub) Serve(s *Sub, c *httpx.Conn) {
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.live.Add(1)
	}
	h.mu.Unlock()
	if closed {
		c.End(true, nil)
		return
	}
	defer h.live.Done()
	s.attach(c, httpx.Heartbeat)
	c.Hold()
	select {
	case <-c.StreamEnd().Done():
		s.end(true, c.StreamEnd().Final())
	case <-h.done:
		s.end(true, nil)
	default:
		s.end(false, nil)
	}
}

// Subscribe opens a subscription; its first payloads are the current frame and
// the extras. Cancel with the returned func.
func (h *Hub) Subscribe(ctx context.Context, accountID string) (*Sub, func(), error) {
	s := newSub()
	h.mu.Lock()
	m, ok := h.subs[accountID]
	if !ok {
		m = map[*Sub]struct{}{}
		h.subs[accountID] = m
	}
	m[s] = struct{}{}
	delete(h.lists, accountID)
	h.mu.Unlock()
	h.count.Add(1)
	h.gauge.Inc()
	cancel := func() {
		h.mu.Lock()
		if _, ok := h.subs[accountID][s]; ok {
			delete(h.subs[accountID], s)
			delete(h.lists, accountID)
			if len(h.subs[accountID]) == 0 {
				delete(h.subs, accountID)
			}
			h.count.Add(-1)
			h.gauge.Dec()
		}
		h.mu.Unlock()
		h.unfollow(accountID)
	}
	p, err := h.streamed(ctx, accountID)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	s.offer(p)
	for _, fn := range h.extras {
		for _, x := range fn(ctx, accountID, p.Rev) {
			s.offer(x)
		}
	}
	return s, cancel, nil
}

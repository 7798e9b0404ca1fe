// Package stream is the SSE hub of account streams. Every subscriber holds only
// the newest payload of each event name (conflation): a slow client skips
// frames and never slows the engine or other subscribers.
package stream

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
)

// Payload is one event ready to write: its name, SSE id and JSON data.
type Payload struct {
	Name string
	ID   string
	Data []byte
	Rev  uint64
	wire []byte // rendered once, written to every subscriber
}

// Wire is the event as a stream writes it.
func (p Payload) Wire() []byte {
	if p.wire != nil {
		return p.wire
	}
	return httpx.FormatEvent(p.Name, p.ID, p.Data)
}

// Sub is one subscriber of one account.
type Sub struct {
	mu     sync.Mutex
	slots  map[string]Payload // newest payload per event name
	order  []string           // names with a pending payload, in arrival order
	notify chan struct{}
}

func newSub() *Sub { return &Sub{slots: map[string]Payload{}, notify: make(chan struct{}, 1)} }

func (s *Sub) offer(p Payload) {
	s.mu.Lock()
	if old, ok := s.slots[p.Name]; ok && old.Rev > p.Rev {
		s.mu.Unlock()
		return
	}
	if _, pending := s.slots[p.Name]; !pending {
		s.order = append(s.order, p.Name)
	}
	s.slots[p.Name] = p
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
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

// Hub fans account frames out to subscribers.
type Hub struct {
	store  projections.Store
	marks  frames.Marks
	mu     sync.RWMutex
	subs   map[string]map[*Sub]struct{}
	dmu    sync.Mutex
	dirty  map[string]uint64
	wake   chan struct{}
	gauge  prometheus.Gauge
	count  atomic.Int64
	extras []func(ctx context.Context, accountID string) []Payload
	done   chan struct{}
	once   sync.Once
}

// Done is closed when the hub closes: every stream ends.
func (h *Hub) Done() <-chan struct{} { return h.done }

// Close ends every stream.
func (h *Hub) Close() { h.once.Do(func() { close(h.done) }) }

// NewHub makes a hub reading frames from store; reg may be nil.
func NewHub(store projections.Store, marks frames.Marks, reg prometheus.Registerer) *Hub {
	h := &Hub{store: store, marks: marks, subs: map[string]map[*Sub]struct{}{}, dirty: map[string]uint64{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "engine_sse_subscribers", Help: "Open SSE subscriptions of account streams."})
	if reg != nil {
		reg.MustRegister(h.gauge)
	}
	return h
}

// OnConnect registers a source of extra payloads sent to a new subscriber after the frame (a lock event, say).
func (h *Hub) OnConnect(fn func(ctx context.Context, accountID string) []Payload) {
	h.extras = append(h.extras, fn)
}

// Subscribers counts open subscriptions.
func (h *Hub) Subscribers() int64 { return h.count.Load() }

// OnCommit is the projector listener: it marks the commit's account dirty.
func (h *Hub) OnCommit(c events.Committed) {
	id, ok := strings.CutPrefix(c.Subject, "evt.account.")
	if !ok {
		return
	}
	h.mu.RLock()
	_, watched := h.subs[id]
	h.mu.RUnlock()
	if !watched {
		return
	}
	h.dmu.Lock()
	h.dirty[id] = c.Seq
	h.dmu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run builds one frame per dirty account and offers it to its subscribers, until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.dmu.Lock()
		dirty := h.dirty
		h.dirty = map[string]uint64{}
		h.dmu.Unlock()
		for id := range dirty {
			p, err := h.Frame(ctx, id)
			if err != nil {
				slog.Warn("frame", "account", id, "err", err)
				continue
			}
			h.Send(id, p)
		}
	}
}

// Frame renders the account's current frame as a payload.
func (h *Hub) Frame(ctx context.Context, accountID string) (Payload, error) {
	f, err := frames.Build(ctx, h.store, accountID, h.marks)
	if err != nil {
		return Payload{}, err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return Payload{}, err
	}
	return Payload{Name: "account", ID: strconv.FormatUint(f.Revision, 10), Data: b, Rev: f.Revision}, nil
}

// Send offers p to every subscriber of the account.
func (h *Hub) Send(accountID string, p Payload) {
	p.wire = p.Wire()
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs[accountID] {
		s.offer(p)
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
	h.mu.Unlock()
	h.count.Add(1)
	h.gauge.Inc()
	cancel := func() {
		h.mu.Lock()
		if _, ok := h.subs[accountID][s]; ok {
			delete(h.subs[accountID], s)
			if len(h.subs[accountID]) == 0 {
				delete(h.subs, accountID)
			}
			h.count.Add(-1)
			h.gauge.Dec()
		}
		h.mu.Unlock()
	}
	p, err := h.Frame(ctx, accountID)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	s.offer(p)
	for _, fn := range h.extras {
		for _, x := range fn(ctx, accountID) {
			s.offer(x)
		}
	}
	return s, cancel, nil
}

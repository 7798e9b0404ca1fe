package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evmark "github.com/svc/engine/events/mark"
)

// markBook is the engine's side of the paper book's marks (events/mark): the
// newest stack this node numbered for each instrument, and one writer per
// instrument recording the newest, one commit in flight at a time. A stack
// holds every mark before it that no later one betters, so the stacks
// numbered while a commit was in flight are skipped, not lost: the next
// commit holds them.
type markBook struct {
	// stacks is every instrument's newest stack, numbered or not: a map
	// never changed once stored (replaced whole on each mark), so a
	// command's market reads it without a lock.
	stacks  atomic.Pointer[map[string]*evmark.Stack]
	mu      sync.Mutex
	last    map[string]uint64 // by instrument: the subject's last sequence as this node knows it
	written map[string]uint64 // by instrument: the newest mark recorded
	writing map[string]bool
	closed  bool
	rebases map[string]bool // accounts with a Rebase queued or in flight
	queue   []rebaseJob     // Rebases waiting for a worker
	workers int             // rebase workers running, at most rebaseWorkers
	peak    int             // the most workers that ran at once (tests)
	idle    *sync.Cond      // signalled when a writer stops
}

// rebaseJob is one account's Rebase: the instruments of its brackets
// anchored elsewhere and, for each, the nodes whose marks anchor them.
type rebaseJob struct {
	id   string
	need map[string]map[string]bool
}

// rebaseWorkers bounds the Rebases in flight: the first start after an
// upgrade finds every account with a trailing bracket unanchored, and one
// commit each in a burst would hold the log and the accounts' mailboxes
// from the orders arriving meanwhile.
const rebaseWorkers = 4

// set makes s its instrument's newest stack; m.mu is held.
func (m *markBook) set(s *evmark.Stack) {
	next := maps.Clone(*m.stacks.Load())
	next[s.Instrument] = s
	m.stacks.Store(&next)
}

// init makes the maps; the stacks hold none until New adds each symbol's empty one.
func (m *markBook) init() {
	m.last, m.written, m.writing = map[string]uint64{}, map[string]uint64{}, map[string]bool{}
	m.rebases = map[string]bool{}
	m.stacks.Store(&map[string]*evmark.Stack{})
	m.idle = sync.NewCond(&m.mu)
}

// marksOn reports whether the paper book derives stops from marks.
func (e *Engine) marksOn() bool { return !e.cfg.RecordMoves }

// markStacks is every instrument's newest stack (an empty one where none
// was numbered yet, so a bracket opened there is anchored before the
// first): a map the caller must not change.
func (e *Engine) markStacks() map[string]*evmark.Stack {
	return *e.bookMarks.stacks.Load()
}

// recordMark takes a stack the paper book numbered; called under the
// reactor's lock, so it only hands it to the instrument's writer.
func (e *Engine) recordMark(s *evmark.Stack) {
	m := &e.bookMarks
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set(s)
	if !m.writing[s.Instrument] && !m.closed {
		m.writing[s.Instrument] = true
		go e.writeMarks(s.Instrument)
	}
}

// markRetry is how long a writer waits after a failed commit before it
// records the newest stack again.
const markRetry = 100 * time.Millisecond

// writeMarks records the instrument's newest stack until the newest is
// recorded. A conflict (the subject moved on under another writer of the
// same node name) reads the subject's last sequence again.
func (e *Engine) writeMarks(inst string) {
	m := &e.bookMarks
	subject := evmark.Subject(inst, e.cfg.Node)
	for {
		m.mu.Lock()
		s, expected := (*m.stacks.Load())[inst], m.last[inst]
		if s.N <= m.written[inst] || m.closed {
			m.writing[inst] = false
			m.idle.Broadcast()
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		seq, err := e.appendMark(ctx, subject, s, expected)
		if errors.Is(err, eventlog.ErrConcurrency) {
			seq, err = e.cfg.Log.LastSubjectSeq(ctx, subject)
			if err == nil {
				m.mu.Lock()
				m.last[inst] = seq
				m.mu.Unlock()
				cancel()
				continue
			}
		}
		cancel()
		if err != nil {
			slog.Warn("paper book: marks not recorded; retrying", "instrument", inst, "mark", s.N, "err", err)
			time.Sleep(markRetry)
			continue
		}
		m.mu.Lock()
		m.last[inst], m.written[inst] = seq, s.N
		m.mu.Unlock()
	}
}

func (e *Engine) appendMark(ctx context.Context, subject string, s *evmark.Stack, expected uint64) (uint64, error) {
	at := e.cfg.Now().UTC()
	c := events.Commit{CommandID: ulid.Make().String(), Principal: events.Principal{System: "paper"}, At: at,
		Events: []events.Event{evmark.Marked{Stack: *s, At: at}}}
	data, err := e.reg.Encode(c)
	if err != nil {
		return 0, err
	}
	// The commit's id is the stack's: a retry after an answer that was lost
	// is the same commit to the log's duplicate window, not a second one.
	return e.cfg.Log.Append(ctx, subject, expected, fmt.Sprintf("%s#%d", subject, s.N), data)
}

// flushMarks waits, at most d, until every numbered stack is recorded, then
// stops the writers.
func (e *Engine) flushMarks(d time.Duration) {
	m := &e.bookMarks
	deadline := time.Now().Add(d)
	stop := time.AfterFunc(d, func() {
		m.mu.Lock()
		m.idle.Broadcast()
		m.mu.Unlock()
	})
	defer stop.Stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	for busy(m.writing) && time.Now().Before(deadline) {
		m.idle.Wait()
	}
	m.closed = true
}

func busy(writing map[string]bool) bool {
	for _, w := range writing {
		if w {
			return true
		}
	}
	return false
}

// loadMarks reads this node's newest stack of every instrument and gives
// it to the paper book before its first quote: the brackets anchored
// before some of its marks are where those marks put them.
func (e *Engine) loadMarks(ctx context.Context) error {
	if !e.marksOn() {
		return nil
	}
	for _, in := range e.priced {
		s, seq, err := e.lastMarks(ctx, in.Symbol, e.cfg.Node)
		if err != nil {
			return err
		}
		if s == nil {
			continue
		}
		e.bookMarks.mu.Lock()
		e.bookMarks.set(s)
		e.bookMarks.last[in.Symbol], e.bookMarks.written[in.Symbol] = seq, s.N
		e.bookMarks.mu.Unlock()
		e.paper.SeedMarks(s)
	}
	return nil
}

// rebase anchors in this node's marks the account's breakeven and trailing
// brackets anchored elsewhere: in another node's marks (the account moved
// here from a node that stopped: they first move where that node's marks put
// them) or in none (recorded before marks). Until then the paper book would
// trigger them at their recorded level while a reader sees the level the
// other node's marks derive. One Rebase an instrument, in the background, by
// at most rebaseWorkers workers.
func (e *Engine) rebase(id string, s *account.State) {
	if !e.marksOn() {
		return
	}
	var need map[string]map[string]bool // instrument -> the nodes of its foreign anchors
	for _, b := range s.Brackets {
		if b.State != evacct.BracketActive || (b.Breakeven == nil && b.Trailing == nil) || (b.Marked && b.MarkNode == e.cfg.Node) {
			continue
		}
		if need == nil {
			need = map[string]map[string]bool{}
		}
		if need[b.Instrument] == nil {
			need[b.Instrument] = map[string]bool{}
		}
		if b.Marked {
			need[b.Instrument][b.MarkNode] = true
		}
	}
	m := &e.bookMarks
	m.mu.Lock()
	defer m.mu.Unlock()
	if need == nil || m.rebases[id] || m.closed {
		return
	}
	m.rebases[id] = true
	m.queue = append(m.queue, rebaseJob{id: id, need: need})
	if m.workers < rebaseWorkers {
		m.workers++
		m.peak = max(m.peak, m.workers)
		go e.rebaseWorker()
	}
}

// rebaseWorker sends the queued Rebases one after another until none is
// left or the engine closes.
func (e *Engine) rebaseWorker() {
	m := &e.bookMarks
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.queue) > 0 && !m.closed {
		j := m.queue[0]
		m.queue[0] = rebaseJob{}
		m.queue = m.queue[1:]
		m.mu.Unlock()
		e.rebaseOne(j)
		m.mu.Lock()
		delete(m.rebases, j.id)
	}
	m.workers--
}

// rebaseOne sends one account a Rebase an instrument.
func (e *Engine) rebaseOne(j rebaseJob) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for inst, nodes := range j.need {
		c := &trading.Rebase{Instrument: inst, Marks: e.markStacks()[inst], Foreign: map[string]*evmark.Stack{}}
		for node := range nodes {
			s, _, err := e.lastMarks(ctx, inst, node)
			if err != nil {
				slog.Warn("paper book: another node's marks unreadable; its brackets are anchored here as recorded", "account", j.id, "node", node, "err", err)
				continue
			}
			if s != nil {
				c.Foreign[node] = s
			}
		}
		if _, err := e.accounts.Execute(ctx, j.id, e.Envelope(events.Principal{System: "paper"}, "", c)); err != nil {
			slog.Warn("paper book: brackets not anchored in this node's marks; the account's next commit tries again", "account", j.id, "err", err)
		}
	}
}

// lastMarks is the newest stack node recorded for instrument (nil: none),
// and the subject's last sequence.
func (e *Engine) lastMarks(ctx context.Context, instrument, node string) (*evmark.Stack, uint64, error) {
	msg, ok, err := e.cfg.Log.Last(ctx, evmark.Subject(instrument, node))
	if err != nil || !ok {
		return nil, 0, err
	}
	c, err := e.reg.Decode(msg.Data)
	if err != nil {
		return nil, 0, err
	}
	for _, ev := range c.Events {
		if mk, ok := ev.(evmark.Marked); ok && mk.Stack.Instrument == instrument && mk.Stack.Node == node {
			s := mk.Stack
			return &s, msg.Seq, nil
		}
	}
	return nil, msg.Seq, nil
}

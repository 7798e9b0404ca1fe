// Package mailbox runs aggregates: one goroutine per aggregate owns its state,
// decides commands in arrival order and appends each decision as one commit,
// guarded by the subject's expected sequence.
package mailbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// Kind describes one aggregate type to the mailbox.
type Kind[S any] struct {
	Name    string
	Subject func(id string) string
	New     func(id string) S
	Decide  func(S, commands.Envelope) ([]events.Event, error)
	Apply   func(S, events.Event) S
	// Fold, if set, folds one commit's events at its sequence instead of
	// Apply on each: for a state that keeps where in the log it learned
	// something (the account's clientOrderId index, engine/account/orderindex.go).
	Fold func(s S, seq uint64, evs []events.Event) S
	// After, if set, runs in the mailbox goroutine after each commit is
	// applied: its own, and one another node made that Observe applied.
	After func(id string, s S, c events.Committed)
	// Observed, if set, runs instead of After for a commit another node
	// made (Observe applied it): what this node decided and what it only
	// saw may differ in what it does about them (a provider account's
	// intent is sent only by the node whose append committed it).
	Observed func(id string, s S, c events.Committed)
	// Admit, if set, runs before each append: an error refuses the command
	// with nothing sent (a node that no longer owns the aggregate).
	Admit func(id string) error
	// Loaded, if set, runs in the mailbox goroutine after the state was read
	// again from the log.
	Loaded func(id string, s S, rev uint64)
}

// Result is the outcome of a command that was committed (Seq > 0) or changed nothing.
type Result struct {
	Seq    uint64 // the commit's stream sequence: the aggregate's revision
	Events []events.Event
}

// Observer sees every command's outcome and the commit latency (for metrics).
type Observer interface {
	Command(kind, outcome string, commit time.Duration)
}

// MaxRetries bounds decisions repeated after a concurrency conflict.
const MaxRetries = 5

// Group runs all aggregates of one kind.
type Group[S any] struct {
	kind  Kind[S]
	log   *eventlog.Log
	reg   events.Registry
	obs   Observer
	mu    sync.Mutex
	boxes map[string]*box[S]
	wg    sync.WaitGroup
	reqs  sync.Pool // of *request[S], reused by send
}

type request[S any] struct {
	ctx     context.Context
	env     commands.Envelope
	dry     bool
	inspect func(S, uint64)
	observe *observed
	reply   chan reply
}

// observed is a commit read from the log, made by another node.
type observed struct {
	c    events.Committed
	prev uint64 // the subject's sequence the commit was decided on; 0 with known false: not said
	know bool
}

type reply struct {
	res Result
	err error
}

type box[S any] struct {
	id    string
	in    chan *request[S] // pointers: a collection scans 32 words a mailbox, not 32 requests (10,000 accounts held 78 MB of slots)
	state S
	rev   uint64
	seen  atomic.Uint64 // rev, for readers outside the mailbox goroutine
	stale bool          // state may be behind the log: reload before the next decision
	subj  string        // the aggregate's subject, once its goroutine first needed it (subject)
}

// subject is the aggregate's subject on the log, made once: only b's
// goroutine calls it.
func (g *Group[S]) subject(b *box[S]) string {
	if b.subj == "" {
		b.subj = g.kind.Subject(b.id)
	}
	return b.subj
}

// NewGroup makes the group of one aggregate kind.
func NewGroup[S any](k Kind[S], log *eventlog.Log, reg events.Registry, obs Observer) *Group[S] {
	g := &Group[S]{kind: k, log: log, reg: reg, obs: obs, boxes: map[string]*box[S]{}}
	g.reqs.New = func() any { return new(request[S]) }
	return g
}

// SetAdmit sets the kind's Admit before the group's first command.
func (g *Group[S]) SetAdmit(fn func(id string) error) { g.kind.Admit = fn }

// Seed installs an aggregate's state as rebuilt by a replay, before its first command.
func (g *Group[S]) Seed(id string, s S, rev uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.boxes[id]; ok {
		return
	}
	g.boxes[id] = g.start(id, s, rev, false)
}

func (g *Group[S]) start(id string, s S, rev uint64, stale bool) *box[S] {
	b := &box[S]{id: id, in: make(chan *request[S], 32), state: s, rev: rev, stale: stale}
	b.seen.Store(rev)
	g.wg.Add(1)
	go g.run(b)
	return b
}

func (g *Group[S]) get(id string) *box[S] {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.boxes[id]
	if !ok {
		b = g.start(id, g.kind.New(id), 0, true)
		g.boxes[id] = b
	}
	return b
}

// Execute decides env on aggregate id and commits the events. A refusal comes
// back as the Decide error; nothing is appended then.
func (g *Group[S]) Execute(ctx context.Context, id string, env commands.Envelope) (Result, error) {
	return g.send(ctx, id, request[S]{ctx: ctx, env: env})
}

// DryRun decides env on aggregate id without committing anything.
func (g *Group[S]) DryRun(ctx context.Context, id string, env commands.Envelope) (Result, error) {
	return g.send(ctx, id, request[S]{ctx: ctx, env: env, dry: true})
}

// Inspect runs fn on the aggregate's state inside its mailbox goroutine.
// fn must not keep references into the state.
func (g *Group[S]) Inspect(ctx context.Context, id string, fn func(S, uint64)) error {
	_, err := g.send(ctx, id, request[S]{ctx: ctx, inspect: fn})
	return err
}

// Each calls fn for the id of every aggregate the group holds.
func (g *Group[S]) Each(fn func(id string)) {
	g.mu.Lock()
	ids := make([]string, 0, len(g.boxes))
	for id := range g.boxes {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, id := range ids {
		fn(id)
	}
}

// send hands r to aggregate id's mailbox and waits for its reply. The
// request and its reply channel are reused once the reply is read: the
// mailbox touches neither after sending it. A request the caller stopped
// waiting for is the mailbox's and is let go.
func (g *Group[S]) send(ctx context.Context, id string, r request[S]) (Result, error) {
	rp := g.reqs.Get().(*request[S])
	*rp = r
	rp.reply = replies.Get().(chan reply)
	b := g.get(id)
	select {
	case b.in <- rp:
	case <-ctx.Done():
		g.release(rp)
		return Result{}, ctx.Err()
	}
	select {
	case rep := <-rp.reply:
		g.release(rp)
		return rep.res, rep.err
	case <-ctx.Done():
		// The command may still commit: its outcome is unknown to this caller.
		return Result{}, fmt.Errorf("%w: %v", eventlog.ErrOutcomeUnknown, ctx.Err())
	}
}

// release returns a request whose reply channel is empty, and the channel,
// for reuse.
func (g *Group[S]) release(r *request[S]) {
	replies.Put(r.reply)
	*r = request[S]{}
	g.reqs.Put(r)
}

// replies are the empty reply channels of requests (send).
var replies = sync.Pool{New: func() any { return make(chan reply, 1) }}

// Observe hands the group a commit read from the log (the cluster's
// follower): on an aggregate it holds, a commit past its revision that was
// decided on that revision is applied (and After runs); one that leaves a gap
// makes it reload before its next command. An aggregate it does not hold is
// started from the commit when create is set and the commit is the subject's
// first; else left to load from the log when first used. decode runs only
// when the commit is needed. It reports whether subject is of this group.
func (g *Group[S]) Observe(subject string, seq uint64, prev uint64, knowPrev, create bool, decode func() (events.Commit, error)) (bool, error) {
	id, ok := strings.CutPrefix(subject, g.kind.Subject(""))
	if !ok || id == "" || strings.Contains(id, ".") {
		return false, nil
	}
	g.mu.Lock()
	b, held := g.boxes[id]
	if !held && create && knowPrev && prev == 0 {
		b = g.start(id, g.kind.New(id), 0, false)
		g.boxes[id] = b
		held = true
	}
	g.mu.Unlock()
	if !held || b.seen.Load() >= seq {
		return true, nil // not held, or its own commit
	}
	c, err := decode()
	if err != nil {
		return true, err
	}
	r := request[S]{ctx: context.Background(), observe: &observed{c: events.Committed{Subject: subject, Seq: seq, Commit: c}, prev: prev, know: knowPrev},
		reply: make(chan reply, 1)}
	defer func() { _ = recover() }() // the group closed meanwhile
	b.in <- &r
	return true, nil
}

// Held reports whether the group holds aggregate id.
func (g *Group[S]) Held(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.boxes[id]
	return ok
}

// Close stops every mailbox after the commands already queued.
func (g *Group[S]) Close() {
	g.mu.Lock()
	for _, b := range g.boxes {
		close(b.in)
	}
	g.boxes = map[string]*box[S]{}
	g.mu.Unlock()
	g.wg.Wait()
}

func (g *Group[S]) run(b *box[S]) {
	defer g.wg.Done()
	for r := range b.in {
		if r.observe != nil {
			g.safeObserve(b, r.observe)
			continue
		}
		res, err := g.safeHandle(b, r)
		r.reply <- reply{res, err}
	}
}

// safeObserve applies a commit another node made (see Observe); a panic
// makes the aggregate reload before its next command.
func (g *Group[S]) safeObserve(b *box[S], o *observed) {
	defer func() {
		if v := recover(); v != nil {
			b.stale = true
			g.observe("panic", 0)
			slog.Error("observed commit panicked", "aggregate", g.kind.Name, "id", b.id, "seq", o.c.Seq, "panic", fmt.Sprint(v))
		}
	}()
	if b.rev >= o.c.Seq {
		return
	}
	if b.stale || !o.know || o.prev != b.rev {
		b.stale = true // a gap: read the subject again before deciding
		return
	}
	b.state = g.fold(b.state, o.c.Seq, o.c.Events)
	b.rev = o.c.Seq
	b.seen.Store(b.rev)
	switch {
	case g.kind.Observed != nil:
		g.kind.Observed(b.id, b.state, o.c)
	case g.kind.After != nil:
		g.kind.After(b.id, b.state, o.c)
	}
}

// fold applies a commit's events at its sequence.
func (g *Group[S]) fold(s S, seq uint64, evs []events.Event) S {
	if g.kind.Fold != nil {
		return g.kind.Fold(s, seq, evs)
	}
	for _, e := range evs {
		s = g.kind.Apply(s, e)
	}
	return s
}

// CodeInternal is the code of a command that panicked inside the engine.
const CodeInternal = commands.CodeInternalError

// safeHandle is handle with a panic contained to its one command: the command
// answers 500 internal_error, the panic is logged with the command id and
// counted as outcome "panic", and the aggregate reloads its state from the
// log before its next command (a panic may have left it half-applied). When
// the panic struck after the commit was appended (while applying it or in
// After), the write stands and its result is returned.
func (g *Group[S]) safeHandle(b *box[S], r *request[S]) (res Result, err error) {
	committed := Result{}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		b.stale = true
		g.observe("panic", 0)
		slog.Error("command panicked", "aggregate", g.kind.Name, "id", b.id, "commandId", r.env.ID.String(),
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if committed.Seq > 0 {
			res, err = committed, nil
			return
		}
		res, err = Result{}, commands.Refuse(CodeInternal,
			"the engine failed on this command and recorded nothing; the failure is logged with the command id",
			map[string]any{"commandId": r.env.ID.String()})
	}()
	return g.handle(b, r, &committed)
}

func (g *Group[S]) reload(ctx context.Context, b *box[S]) error {
	s := g.kind.New(b.id)
	last, err := g.log.Load(ctx, g.subject(b), func(m eventlog.Msg) (err error) {
		// The log client calls this in its own goroutine: a panic here would end the process.
		defer func() {
			if v := recover(); v != nil {
				g.observe("panic", 0)
				err = fmt.Errorf("%s %s at %d: apply panicked: %v", g.kind.Name, b.id, m.Seq, v)
			}
		}()
		c, err := g.reg.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("%s %s at %d: %w", g.kind.Name, b.id, m.Seq, err)
		}
		s = g.fold(s, m.Seq, c.Events)
		return nil
	})
	if err != nil {
		return err
	}
	b.state, b.rev, b.stale = s, last, false
	b.seen.Store(last)
	if g.kind.Loaded != nil {
		g.kind.Loaded(b.id, b.state, b.rev)
	}
	return nil
}

// behind reports whether the log holds a commit of b's subject after the
// state's revision; never on a log this process alone appends to.
func (g *Group[S]) behind(b *box[S], deadline time.Time) (bool, error) {
	if g.log.SoleWriter() {
		return false, nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	last, err := g.log.LastSubjectSeq(ctx, g.subject(b))
	if err != nil {
		g.observe("unavailable", 0)
		if !g.log.Connected() && !errors.Is(err, eventlog.ErrLogUnavailable) {
			err = fmt.Errorf("%w: %w", err, eventlog.ErrLogUnavailable)
		}
		return false, fmt.Errorf("confirm %s %s is current: %w", g.kind.Name, b.id, err)
	}
	return last > b.rev, nil
}

func (g *Group[S]) handle(b *box[S], r *request[S], committed *Result) (Result, error) {
	// A commit in flight finishes even if its caller has gone: it is bounded by
	// its own deadline, not the request's.
	deadline := time.Now().Add(10 * time.Second)
	for attempt := 0; ; attempt++ {
		if b.stale {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			err := g.reload(ctx, b)
			cancel()
			if err != nil {
				g.observe("unavailable", 0)
				if !g.log.Connected() {
					return Result{}, fmt.Errorf("load %s %s: %v: %w", g.kind.Name, b.id, err, eventlog.ErrLogUnavailable)
				}
				return Result{}, fmt.Errorf("load %s %s: %w", g.kind.Name, b.id, err)
			}
		}
		if r.inspect != nil {
			r.inspect(b.state, b.rev)
			return Result{Seq: b.rev}, nil
		}
		if r.ctx.Err() != nil && attempt == 0 {
			return Result{}, r.ctx.Err() // the caller left before anything was decided
		}
		evs, err := g.kind.Decide(b.state, r.env)
		if err != nil || r.dry || (len(evs) == 0 && r.env.Principal.System == "") {
			// A refusal, a dry run's answer or a caller's command that
			// changes nothing appends nothing, so the log's guard never
			// checks the state it came from: on a log other processes append
			// to, that state may lag the log (a node's warm state just after
			// a lease moved to it, while its follow of the log catches up),
			// so it is given only once the subject's last commit is the
			// state's own. A reactor's command that changes nothing (a check
			// that found nothing due) is let be: its reactor comes again.
			behind, cerr := g.behind(b, deadline)
			switch {
			case cerr != nil:
				return Result{}, cerr
			case behind && attempt < MaxRetries:
				b.stale = true
				continue
			}
		}
		if err != nil {
			g.observe("refused", 0)
			return Result{}, err
		}
		if len(evs) == 0 || r.dry {
			g.observe("unchanged", 0)
			return Result{Seq: b.rev, Events: evs}, nil
		}
		c := events.Commit{CommandID: r.env.ID.String(), Key: r.env.Key, Principal: r.env.Principal, At: r.env.At, Events: evs}
		buf := encodeBufs.Get().(*[]byte)
		data, err := g.reg.AppendEncode((*buf)[:0], c)
		if err != nil {
			return Result{}, err
		}
		if g.kind.Admit != nil {
			if err := g.kind.Admit(b.id); err != nil {
				g.observe("refused", 0)
				return Result{}, err
			}
		}
		subject := g.subject(b)
		start := time.Now()
		g.log.Recent().Put(c)
		ctx, cancel := g.log.CommitContext(deadline) // ends early if the log's connection breaks
		seq, err := g.log.Append(ctx, subject, b.rev, c.CommandID, data)
		cancel()
		took := time.Since(start)
		if err == nil && cap(data) <= maxEncodeBuf {
			// Stored: the log has copied the bytes. After an error they may
			// still be queued to send (an outcome unknown), so they are let go.
			*buf = data[:0]
			encodeBufs.Put(buf)
		}
		if errors.Is(err, eventlog.ErrConcurrency) || errors.Is(err, eventlog.ErrLogUnavailable) {
			g.log.Recent().Drop(c.CommandID) // not stored; an outcome unknown may still arrive
		}
		switch {
		case errors.Is(err, eventlog.ErrConcurrency) && attempt < MaxRetries:
			g.observe("conflict", took)
			b.stale = true
			continue
		case errors.Is(err, eventlog.ErrLogUnavailable):
			g.observe("unavailable", took) // refused before sending: the state is still the log's
			return Result{}, err
		case err != nil:
			g.observe("unknown", took)
			b.stale = true
			return Result{}, err
		}
		*committed = Result{Seq: seq, Events: evs}
		b.state = g.fold(b.state, seq, evs)
		b.rev = seq
		b.seen.Store(seq)
		g.observe("committed", took)

		if g.kind.After != nil {
			g.kind.After(b.id, b.state, events.Committed{Subject: subject, Seq: seq, Commit: c})
		}
		return Result{Seq: seq, Events: evs}, nil
	}
}

// encodeBufs are the buffers commits are encoded into: the log has copied
// a commit's bytes once Append has stored it, so its buffer is reused.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxEncodeBuf bounds a buffer kept for reuse (a rare large commit's is let go).
const maxEncodeBuf = 64 << 10

func (g *Group[S]) observe(outcome string, took time.Duration) {
	if g.obs != nil {
		g.obs.Command(g.kind.Name, outcome, took)
	}
}

package projections

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/events"
)

// Source is the commit log as the projector reads it.
type Source interface {
	// FollowCommits calls fn for every commit after from, in stream order, until ctx ends.
	// id is the commit's id (its message id); it may be empty.
	FollowCommits(ctx context.Context, from uint64, fn func(subject string, seq uint64, id string, data []byte) error) error
	// LastSeq is the log's newest sequence.
	LastSeq(ctx context.Context) (uint64, error)
}

// ErrSource marks a projector that stopped because reading the log failed
// (the connection to NATS went away), not because a commit could not be
// folded: running it again resumes from the store's checkpoint.
var ErrSource = errors.New("projector: reading the log failed")

// sourceFailed marks err as the log's read failing (ErrSource): the engine
// runs the projector again, which resumes from the checkpoint.
func sourceFailed(err error) error { return fmt.Errorf("%w: %w", ErrSource, err) }

// ErrStore marks a projector that stopped because its store failed (the
// database went away, or lost commits it had acknowledged), not because a
// commit could not be folded: running it again, once the store answers,
// resumes from the store's checkpoint. Stalled reports it meanwhile.
var ErrStore = errors.New("projector: the read-model store failed")

// storeFailed marks err as the store failing (ErrStore).
func storeFailed(err error) error {
	if errors.Is(err, ErrStore) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}

// MaxBatch bounds how many commits one store transaction applies.
const MaxBatch = 512

// Projector folds the log into a Store, in order, in batches, and tells
// listeners about every commit it applied.
type Projector struct {
	store   Store
	reg     events.Registry
	folds   []Fold
	mu      sync.Mutex
	applied uint64
	err     error
	waiters waiters // WaitFor callers, lowest sequence first
	recent  *events.Recent
	lmu     sync.RWMutex
	listen  []func(events.Committed)
	// reading: another node writes the shared store (cluster leader), so this
	// projector only waits for the store to pass each batch (SetWriting).
	reading atomic.Bool
	// linger: how long the live loop holds a batch open for more commits
	// while nobody waits for them (SetLinger); kick wakes it when a waiter
	// registers, urgent names commits someone watches (SetUrgent).
	linger atomic.Int64
	kick   chan struct{}
	urgent atomic.Pointer[func(events.Committed) bool]
	// stalled: since when the store has failed (ErrStore) and with what;
	// zero while it takes the projector's writes. p.mu guards both.
	stalled  time.Time
	stallErr error
}

// Stalled reports since when the projector cannot write its store (an
// ErrStore, for as long as Run is not past its catch-up again), and the
// last such error; the zero time while it writes.
func (p *Projector) Stalled() (since time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled, p.stallErr
}

// SetLinger makes the live loop write behind: a batch stays open up to d for
// more commits, so a store whose transactions cost more than their rows
// (PostgreSQL) writes fewer, larger ones, and a document many commits of one
// batch change (an account's balance, position, day) is written once. No
// read waits for it: a batch is written at once when WaitFor waits for one
// of its commits (a read after the caller's own write, a write answered
// after the read models show it) or when SetUrgent's func names one of them
// (an account someone streams). 0, the default, writes each batch as soon
// as the previous one is done.
func (p *Projector) SetLinger(d time.Duration) { p.linger.Store(int64(max(d, 0))) }

// SetUrgent names the commits that end a lingering batch at once: those
// someone watches live (the stream hub's subscribed accounts). fn runs on
// the projector's goroutine for every commit while a batch lingers and must
// not block.
func (p *Projector) SetUrgent(fn func(events.Committed) bool) { p.urgent.Store(&fn) }

// SetWriting says whether this projector folds into its store (true, the
// default) or, on a node of several sharing one PostgreSQL, only follows the
// leader's writes: each batch then waits until the store's checkpoint
// passes it, and listeners hear of it as before.
func (p *Projector) SetWriting(on bool) { p.reading.Store(!on) }

// Writing reports whether this projector folds into its store.
func (p *Projector) Writing() bool { return !p.reading.Load() }

// FollowPoll is how often a reading projector asks the store's checkpoint.
const FollowPoll = 2 * time.Millisecond

// NewProjector makes a projector applying folds, in the given order, to store.
func NewProjector(store Store, reg events.Registry, folds ...Fold) *Projector {
	return &Projector{store: store, reg: reg, folds: folds, kick: make(chan struct{}, 1)}
}

// UseRecent lets the projector take commits this process appended from r,
// already decoded, instead of decoding them from the log again.
func (p *Projector) UseRecent(r *events.Recent) { p.recent = r }

// Store is the projector's store.
func (p *Projector) Store() Store { return p.store }

// Listen registers fn for every applied commit, called in stream order from the
// projector's goroutine; fn must not block.
func (p *Projector) Listen(fn func(events.Committed)) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	p.listen = append(p.listen, fn)
}

// Applied is the last sequence folded into the store.
func (p *Projector) Applied() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// WaitFor blocks until the projector applied seq, ctx ends, or the projector failed.
// Each waiter is woken once, when its own sequence is applied, not on every batch.
func (p *Projector) WaitFor(ctx context.Context, seq uint64) error {
	w, err := p.register(seq)
	if w == nil {
		return err
	}
	return p.await(ctx, w)
}

// register queues a waiter for seq. It returns none, with WaitFor's answer,
// when seq is applied already (nil) or the projector failed (its error).
func (p *Projector) register(seq uint64) (*waiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.applied >= seq {
		return nil, nil
	}
	if p.err != nil {
		return nil, p.err
	}
	w := &waiter{seq: seq, done: make(chan struct{})}
	heap.Push(&p.waiters, w)
	select { // a lingering batch may hold seq: write it now
	case p.kick <- struct{}{}:
	default:
	}
	return w, nil
}

// awaited reports whether a waiter waits for a sequence at or below seq.
func (p *Projector) awaited(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters) > 0 && p.waiters[0].seq <= seq
}

// await blocks until w is woken (its sequence applied, or the projector
// failed) or ctx ends.
func (p *Projector) await(ctx context.Context, w *waiter) error {
	select {
	case <-w.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.applied >= w.seq {
			return nil
		}
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// advance records seq as applied and wakes the waiters it satisfies; p.mu is held.
func (p *Projector) advance(seq uint64) {
	if seq > p.applied {
		p.applied = seq
	}
	for len(p.waiters) > 0 && p.waiters[0].seq <= p.applied {
		close(heap.Pop(&p.waiters).(*waiter).done)
	}
}

type waiter struct {
	seq  uint64
	done chan struct{}
}

// waiters is a min-heap of waiters by sequence (container/heap).
type waiters []*waiter

func (h waiters) Len() int           { return len(h) }
func (h waiters) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h waiters) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waiters) Push(x any)        { *h = append(*h, x.(*waiter)) }
func (h *waiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}

type pending struct {
	c events.Committed
}

// Run follows src from the store's checkpoint and applies commits until ctx
// ends. It returns when the log cannot be read (ErrSource), the store fails
// (ErrStore: the fold stops at once, not at the next commit) or a commit
// cannot be folded; the first two are the caller's to run again, which
// resumes from the checkpoint. Until then waiters are answered the error.
func (p *Projector) Run(ctx context.Context, src Source) error {
	from, err := p.store.Checkpoint(ctx)
	if err != nil {
		err = storeFailed(err)
		if ctx.Err() == nil {
			p.fail(err)
		}
		return err
	}
	p.mu.Lock()
	p.applied, p.err = 0, nil // a restarted projector serves waiters again
	p.advance(from)           // a durable store may start at or past what waiters wait for
	p.mu.Unlock()
	if from, err = p.catchUp(ctx, src, from); err != nil {
		if ctx.Err() == nil {
			p.fail(err)
		}
		return err
	}
	p.mu.Lock()
	p.stalled, p.stallErr = time.Time{}, nil // the store took what the log held at the restart
	p.mu.Unlock()
	ch := make(chan pending, 4*MaxBatch)
	done := make(chan error, 1)
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	go func() {
		err := p.apply(ctx, ch)
		if err != nil {
			stopFollow() // no more commits to wait for before Run returns
		}
		done <- err
	}()
	err = src.FollowCommits(fctx, from, func(subject string, seq uint64, id string, data []byte) error {
		c, ok := p.recent.Take(id)
		if !ok {
			var err error
			if c, err = p.reg.Decode(data); err != nil {
				return fmt.Errorf("projector: %s at %d: %w", subject, seq, err)
			}
		}
		select {
		case ch <- pending{events.Committed{Subject: subject, Seq: seq, Commit: c}}:
			return nil
		case err := <-done:
			done <- err // Run reads the fold's outcome below, once more: nothing else sends
			return err
		}
	})
	close(ch)
	if err != nil && ctx.Err() == nil {
		err = sourceFailed(err)
	}
	if aerr := <-done; aerr != nil && ctx.Err() == nil {
		err = aerr
	}
	if ctx.Err() == nil {
		p.fail(err)
	}
	return err
}

// errCaughtUp ends the catch-up's read of the log.
var errCaughtUp = errors.New("projector: caught up")

// catchUp applies what the log held when Run started, decoding on every core
// (events.Pipeline), and returns the sequence it reached. Commits appended
// meanwhile are left to the live loop, which decodes one at a time and takes
// this process's own commits from Recent.
func (p *Projector) catchUp(ctx context.Context, src Source, from uint64) (uint64, error) {
	last, err := src.LastSeq(ctx)
	if err != nil {
		return from, sourceFailed(err)
	}
	if last <= from {
		return from, nil
	}
	pl := p.reg.Pipeline(nil, func(cs []events.Committed) error {
		for len(cs) > 0 {
			n := min(len(cs), MaxBatch)
			if err := p.ApplyBatch(ctx, cs[:n]); err != nil {
				return err
			}
			cs = cs[n:]
		}
		return nil
	})
	var folding error // an error of the fold, not of the log's read
	err = src.FollowCommits(ctx, from, func(subject string, seq uint64, _ string, data []byte) error {
		if folding = pl.Add(events.Raw{Subject: subject, Seq: seq, Data: data}); folding != nil {
			return folding
		}
		if seq >= last {
			return errCaughtUp
		}
		return nil
	})
	if err != nil && folding == nil && !errors.Is(err, errCaughtUp) && ctx.Err() == nil {
		err = sourceFailed(err)
	}
	if ctx.Err() != nil {
		pl.Abort(ctx.Err())
	}
	if cerr := pl.Close(); err == nil || errors.Is(err, errCaughtUp) {
		err = cerr
	}
	if err != nil {
		return from, err
	}
	return last, nil
}

func (p *Projector) fail(err error) {
	p.mu.Lock()
	p.err = err
	if errors.Is(err, ErrStore) {
		if p.stalled.IsZero() {
			p.stalled = time.Now()
		}
		p.stallErr = err
	}
	for _, w := range p.waiters {
		close(w.done)
	}
	p.waiters = nil
	p.mu.Unlock()
}

func (p *Projector) apply(ctx context.Context, ch <-chan pending) error {
	batch := make([]events.Committed, 0, MaxBatch)
	for first := range ch {
		batch = p.gather(append(batch[:0], first.c), ch)
		if err := p.ApplyBatch(ctx, batch); err != nil {
			p.fail(err)
			return err
		}
	}
	return nil
}

// gather adds to batch what ch holds, up to MaxBatch; with a linger set
// (SetLinger) it waits up to the linger for more while no waiter waits for
// a commit of the batch and no commit of it is urgent.
func (p *Projector) gather(batch []events.Committed, ch <-chan pending) []events.Committed {
	var until <-chan time.Time
	if d := time.Duration(p.linger.Load()); d > 0 && p.Writing() && !p.due(batch) {
		t := time.NewTimer(d)
		defer t.Stop()
		until = t.C
	}
	for len(batch) < MaxBatch {
		var n pending
		ok := true
		if until == nil {
			select {
			case n, ok = <-ch:
			default:
				return batch
			}
		} else {
			select {
			case n, ok = <-ch:
			case <-p.kick:
				if p.awaited(batch[len(batch)-1].Seq) {
					until = nil
				}
				continue
			case <-until:
				until = nil
				continue
			}
		}
		if !ok {
			return batch
		}
		batch = append(batch, n.c)
		if until != nil && p.due(batch[len(batch)-1:]) {
			until = nil
		}
	}
	return batch
}

// due reports whether cs must be written without lingering: a waiter waits
// for one of them, or one is urgent.
func (p *Projector) due(cs []events.Committed) bool {
	if len(cs) == 0 {
		return false
	}
	if p.awaited(cs[len(cs)-1].Seq) {
		return true
	}
	if fn := p.urgent.Load(); fn != nil {
		for _, c := range cs {
			if (*fn)(c) {
				return true
			}
		}
	}
	return false
}

// Feed returns a sink for commits read elsewhere in stream order (a replay at
// start) that applies those after the store's checkpoint in batches, and the
// flush that applies the rest.
func (p *Projector) Feed(ctx context.Context) (tap func(events.Committed) error, flush func() error, err error) {
	from, err := p.store.Checkpoint(ctx)
	if err != nil {
		return nil, nil, err
	}
	batch := make([]events.Committed, 0, MaxBatch)
	flush = func() error {
		err := p.ApplyBatch(ctx, batch)
		batch = batch[:0]
		return err
	}
	tap = func(c events.Committed) error {
		if c.Seq <= from {
			return nil
		}
		batch = append(batch, c)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	}
	return tap, flush, nil
}

// ApplyBatch folds commits, in order, in one store transaction, then tells listeners.
func (p *Projector) ApplyBatch(ctx context.Context, batch []events.Committed) error {
	if len(batch) == 0 {
		return nil
	}
	last := batch[len(batch)-1].Seq
	if p.reading.Load() {
		passed, err := p.awaitStore(ctx, last)
		if err != nil {
			return err
		}
		if passed {
			p.notify(batch, last)
			return nil
		}
	}
	var folding error // the fold's own error: not the store's
	err := p.store.Update(ctx, last, func(tx Tx) (err error) {
		var at events.Committed
		defer func() {
			// A fold that panics fails the batch like a fold's error: the
			// transaction rolls back and the projector stops at that commit,
			// named, instead of ending the process.
			if v := recover(); v != nil {
				err = fmt.Errorf("fold of %s at %d panicked: %v", at.Subject, at.Seq, v)
			}
			if err != nil && !errors.Is(err, ErrUnavailable) {
				folding = err // a read of the store that failed is the store's
			}
		}()
		from := tx.From()
		for _, c := range batch {
			if c.Seq <= from {
				continue // another node's projector folded it (a leader that was paused, then resumed)
			}
			at = c
			for _, f := range p.folds {
				if err := f(tx, c); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("projector: apply up to %d: %w", last, err)
		if folding == nil && ctx.Err() == nil {
			err = storeFailed(err) // begin, write, commit or checkpoint: the store's
		}
		return err
	}
	p.notify(batch, last)
	return nil
}

// awaitStore waits until the store's checkpoint reaches seq (another node
// folds): passed. It stops waiting, not passed, when this projector is told
// to write itself; the caller then folds what the store does not hold yet.
func (p *Projector) awaitStore(ctx context.Context, seq uint64) (passed bool, err error) {
	for p.reading.Load() {
		cp, err := p.store.Checkpoint(ctx)
		if err != nil {
			return false, storeFailed(fmt.Errorf("projector: reading the leader's checkpoint: %w", err))
		}
		if cp >= seq {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(FollowPoll):
		}
	}
	return false, nil
}

// notify records a batch up to last as applied and tells the listeners.
func (p *Projector) notify(batch []events.Committed, last uint64) {
	p.mu.Lock()
	p.advance(last)
	p.mu.Unlock()
	p.lmu.RLock()
	ls := p.listen
	p.lmu.RUnlock()
	for _, c := range batch {
		for _, fn := range ls {
			fn(c)
		}
	}
}

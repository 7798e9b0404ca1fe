package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc/engine/commands"
	copiercmd "github.com/svc/engine/commands/copier"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evcopier "github.com/svc/engine/events/copier"
	evplan "github.com/svc/engine/events/plan"
)

// The copier: copier groups (engine/copier's aggregate, one per group) and
// the reactor that mirrors a leader's accepted orders on its followers.
//
// The account mailbox's After hook (copyLeader) sees each leader commit
// once it is committed and queues what it did (copier.Actions) for the
// leader's worker; the leader's answer never waits for it. The worker
// takes the leader's commits in order and hands each, for each group of
// the leader, to every participating follower's worker (one per leader
// and follower, which mirrors the leader's commits in their order, so a
// cancel follows its placement), all followers at once, through
// Engine.Account like any order, with a clientOrderId derived from the
// leader's order and the follower (copier.ClientOrderID): the follower's
// account takes it once, whatever is retried. The group's recorder
// records a commit's outcomes (RecordMirrors) once every follower has
// one, in the leader's commit order, which advances the group's
// mirroredThrough. A follower's refusal is an outcome, and a slow
// follower holds up only the recording: neither stops another follower.
//
// At start each leader's worker first catches up: the leader's commits in
// the log after its groups' mirroredThrough are mirrored as they would have
// been live (a mirror placed before a crash answers 409 for its id, and
// counts as mirrored). Live commits the hook queued meanwhile follow; one
// at or below what the worker handled is skipped.
//
// On a node of several, the node that owns the leader mirrors it; the
// catch-up runs for the leaders this node owns at start.

// copyRetry bounds how long a follower's mirror is retried while its
// account answers a refusal that is safe to retry (its log or owner moving,
// no price yet, a provider's outcome not known yet) or no answer.
const copyRetry = 30 * time.Second

// copyTimeout bounds one attempt of a follower's mirror.
const copyTimeout = 15 * time.Second

// copierPrincipal is the principal of the commands the copier sends.
var copierPrincipal = events.Principal{System: "copier"}

type copiers struct {
	groups *mailbox.Group[*copier.State]
	// views are the groups as their last commits left them, by id:
	// immutable copies the reactor and the lists read.
	views    sync.Map // string -> *copier.State
	byLeader atomic.Pointer[map[string][]string]
	indexMu  sync.Mutex // serialises index rebuilds

	// mu guards the leaders' workers and the groups' recorders, and each
	// shard of followers its followers' workers (by leader and follower:
	// the followers of one commit finish together, and would queue on one
	// lock). A follower's worker and a group's recorder leave their map
	// when they run out of work (so a follower removed, or idle, holds
	// nothing); one is only ever added to, run from and removed from its
	// map under its lock, so two never run for the same key. A leader's
	// worker stays: it holds the last commit handled, which keeps the
	// catch-up and the hook from mirroring one twice; there is one for
	// each leader of a group.
	mu        sync.Mutex
	workers   map[string]*leaderWorker
	followers [followerShards]followerShard
	recorders map[string]*groupRecorder // by group
	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	// mirrored counts follower orders the copier placed (tests, metrics).
	mirrored atomic.Int64
	// observe, if set, sees each follower order committed: the leader's
	// commit and when its hook saw it (the bench's latency).
	observe atomic.Pointer[func(leaderSeq uint64, seen time.Time)]

	watchMu  sync.Mutex
	watchers map[string]map[chan struct{}]struct{} // by group: woken on each of its commits
}

// leaderWorker mirrors one leader's commits in order.
type leaderWorker struct {
	leader  string
	items   []leaderCommit
	running bool
	catchUp bool
	done    uint64 // the last leader commit handled
	// entries names the entry each of the leader's brackets came from
	// (copier.Entries), from the commits handled: rebuilt by the catch-up,
	// then kept by the worker's goroutine alone.
	entries copier.Entries
}

// leaderCommit is what one leader commit did that followers mirror.
type leaderCommit struct {
	seq     uint64
	seen    time.Time
	actions []copier.LeaderAction
	ended   []string // the brackets it ended (copier.BracketActions)
}

func newCopiers(cfg Config, e *Engine) *copiers {
	c := &copiers{workers: map[string]*leaderWorker{}, recorders: map[string]*groupRecorder{},
		watchers: map[string]map[chan struct{}]struct{}{}}
	for i := range c.followers {
		c.followers[i].m = map[string]*followerWorker{}
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	empty := map[string][]string{}
	c.byLeader.Store(&empty)
	c.groups = mailbox.NewGroup(mailbox.Kind[*copier.State]{
		Name:    "copier",
		Subject: evcopier.Subject,
		New:     copier.New,
		Decide:  copier.Decide,
		Apply:   copier.Apply,
		Fold:    copier.Fold,
		After: func(id string, s *copier.State, cm events.Committed) {
			c.note(id, s, cm)
		},
		Loaded: func(id string, s *copier.State, _ uint64) { c.note(id, s, events.Committed{}) },
	}, cfg.Log, e.reg, cfg.Metrics)
	return c
}

// note takes a group's state after a commit into the views and the index
// (in the group's mailbox goroutine: the copy is made here).
func (c *copiers) note(id string, s *copier.State, cm events.Committed) {
	if !s.Created {
		return
	}
	onlyMirrors := len(cm.Events) > 0
	for _, ev := range cm.Events {
		if _, ok := ev.(evcopier.MirrorsRecorded); !ok {
			onlyMirrors = false
		}
	}
	v := &copier.State{ID: s.ID, Created: true, Leader: s.Leader, Name: s.Name, Owner: s.Owner, OnBehalfOf: s.OnBehalfOf,
		CreatedAt: s.CreatedAt, Through: s.Through}
	if old, ok := c.views.Load(id); ok && onlyMirrors {
		v.Followers = old.(*copier.State).Followers // unchanged: the copy is shared
	} else {
		v.Followers = make(map[string]*copier.Follower, len(s.Followers))
		for fid, f := range s.Followers {
			cp := *f
			v.Followers[fid] = &cp
		}
	}
	_, known := c.views.Swap(id, v)
	if !known {
		c.index(id, v.Leader)
	}
	c.wake(id)
}

// wake tells the group's watchers it committed; a watcher that has not
// taken the last word yet gets no second (conflation).
func (c *copiers) wake(id string) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for ch := range c.watchers[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// index adds a group to its leader's in the index (copy on write).
func (c *copiers) index(groupID, leader string) {
	c.indexMu.Lock()
	defer c.indexMu.Unlock()
	cur := *c.byLeader.Load()
	next := make(map[string][]string, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[leader] = append(append([]string(nil), cur[leader]...), groupID)
	c.byLeader.Store(&next)
}

// leads reports whether the account leads a group.
func (c *copiers) leads(accountID string) bool {
	_, ok := (*c.byLeader.Load())[accountID]
	return ok
}

// groupsOf are the views of the groups the account leads.
func (c *copiers) groupsOf(leader string) []*copier.State {
	var out []*copier.State
	for _, id := range (*c.byLeader.Load())[leader] {
		if v, ok := c.views.Load(id); ok {
			out = append(out, v.(*copier.State))
		}
	}
	return out
}

// copyLeader is the account mailbox's hook: a leader's commit that did
// something followers mirror is queued for its worker. It never blocks.
func (e *Engine) copyLeader(id string, s *account.State, cm events.Committed) {
	if e.copier == nil || !e.copier.leads(id) || !e.owns(id) {
		return
	}
	lc, ok := leaderActions(s, cm.Seq, cm.Commit)
	if !ok {
		return
	}
	lc.seen = time.Now()
	e.copier.enqueue(e, id, lc, false)
}

// leaderActions is what the leader's commit c at seq did that followers
// mirror (copier.Actions, then copier.BracketActions), s the leader's state
// after it; ok false when it did nothing of it.
func leaderActions(s *account.State, seq uint64, c events.Commit) (leaderCommit, bool) {
	acts := copier.Actions(c.Events, func(inst string) events.Decimal { return s.Positions[inst].Quantity.Abs() }, brackets(s))
	bacts, ended := copier.BracketActions(c, brackets(s))
	acts = append(acts, bacts...)
	return leaderCommit{seq: seq, actions: acts, ended: ended}, len(acts) > 0 || len(ended) > 0
}

// brackets reads the account's active brackets by id (copier.Actions).
func brackets(s *account.State) func(string) *evacct.Bracket {
	return func(id string) *evacct.Bracket { return s.Brackets[id] }
}

// enqueue queues a leader commit (or, with catchUp, the catch-up) and
// starts the leader's worker if it is not running.
func (c *copiers) enqueue(e *Engine, leader string, lc leaderCommit, catchUp bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return
	}
	w := c.workers[leader]
	if w == nil {
		w = &leaderWorker{leader: leader}
		c.workers[leader] = w
	}
	if catchUp {
		w.catchUp = true
	} else {
		w.items = append(w.items, lc)
	}
	if !w.running {
		w.running = true
		c.wg.Add(1)
		go e.runLeader(w)
	}
}

// runLeader is a leader's worker: the catch-up when asked, then the queued
// commits in order, until the queue is empty.
func (e *Engine) runLeader(w *leaderWorker) {
	c := e.copier
	defer c.wg.Done()
	for {
		c.mu.Lock()
		catchUp := w.catchUp
		w.catchUp = false
		var lc leaderCommit
		have := len(w.items) > 0
		if have && !catchUp {
			lc, w.items = w.items[0], w.items[1:]
		}
		if !have && !catchUp || c.ctx.Err() != nil {
			w.running = false
			c.mu.Unlock()
			return
		}
		done := w.done
		c.mu.Unlock()
		if catchUp {
			last := e.catchUpLeader(w, done)
			c.mu.Lock()
			w.done = max(w.done, last)
			c.mu.Unlock()
			continue
		}
		if lc.seq <= done {
			continue
		}
		if w.entries == nil {
			w.entries = copier.Entries{}
		}
		if lc.actions = w.entries.Resolve(lc.actions, lc.ended); len(lc.actions) > 0 {
			e.mirrorCommit(w.leader, lc)
		}
		c.mu.Lock()
		w.done = max(w.done, lc.seq)
		c.mu.Unlock()
	}
}

// catchUpLeader mirrors the leader's commits in the log after done and
// after its groups' mirroredThrough, in order; it answers the last commit
// handled. The worker's entries are rebuilt from all of the leader's
// commits.
func (e *Engine) catchUpLeader(w *leaderWorker, done uint64) uint64 {
	leader := w.leader
	groups := e.copier.groupsOf(leader)
	from := uint64(0)
	for i, g := range groups {
		if i == 0 || g.Through < from {
			from = g.Through
		}
	}
	from = max(from, done)
	// The leader's account is folded from its first commit, so each
	// commit's actions see its positions after it, as the live hook does.
	st := account.New(leader)
	entries := copier.Entries{}
	var pending []leaderCommit
	loaded, err := e.cfg.Log.Load(e.copier.ctx, evacct.Subject(leader), func(m eventlog.Msg) error {
		cm, err := e.reg.Decode(m.Data)
		if err != nil {
			return err
		}
		st = account.Fold(st, m.Seq, cm.Events)
		lc, ok := leaderActions(st, m.Seq, cm)
		if !ok {
			return nil
		}
		lc.actions = entries.Resolve(lc.actions, lc.ended)
		if m.Seq > from && len(lc.actions) > 0 {
			lc.seen = time.Now()
			pending = append(pending, lc)
		}
		return nil
	})
	if err != nil {
		slog.Warn("copier: the leader's commits could not be read to catch up; its next start tries again", "leader", leader, "err", err)
		return done
	}
	w.entries = entries // the worker's goroutine: no live commit is handled meanwhile
	for _, lc := range pending {
		e.mirrorCommit(leader, lc)
	}
	return max(done, loaded)
}

// mirrorCommit hands one leader commit to the followers of each of the
// leader's groups that has not recorded it: each follower's worker mirrors
// its actions after the leader's earlier commits (copyFollowerWorker), all
// followers at once, and the group's recorder records the outcomes once
// every follower has one, in the leader's commit order (groupRecorder). A
// slow follower (a provider answering late) holds up no other follower:
// only the recording waits for it.
func (e *Engine) mirrorCommit(leader string, lc leaderCommit) {
	c := e.copier
	eq := &leaderEquity{e: e, leader: leader}
	for _, g := range c.groupsOf(leader) {
		if lc.seq <= g.Through {
			continue
		}
		fs := copier.Participants(g, lc.seq)
		if len(fs) == 0 {
			continue
		}
		pc := &pendingCommit{group: g, lc: lc, fs: fs, eq: eq, out: make([][]evcopier.Mirror, len(fs))}
		pc.left.Store(int32(len(fs)))
		c.addPending(pc)
		for i, f := range fs {
			c.addJob(e, leader, f.AccountID, followerJob{pc: pc, i: i})
		}
	}
}

// leaderEquity is the leader's equity, read once per leader commit when a
// follower sizes by equity.
type leaderEquity struct {
	e      *Engine
	leader string
	once   sync.Once
	v      *events.Decimal
}

func (l *leaderEquity) get() *events.Decimal {
	l.once.Do(func() { l.v = l.e.copyEquity(l.leader) })
	return l.v
}

// pendingCommit is one leader commit on one group's followers, until its
// outcomes are recorded.
type pendingCommit struct {
	group *copier.State
	lc    leaderCommit
	fs    []*copier.Follower
	eq    *leaderEquity
	out   [][]evcopier.Mirror // by follower, by action
	left  atomic.Int32        // followers still mirroring
	rec   *groupRecorder      // the group's recorder that holds it
}

// followerJob is one follower's part of a pending commit.
type followerJob struct {
	pc *pendingCommit
	i  int
}

// followerShards is how many locks the followers' workers are spread over.
const followerShards = 64

// followerShard holds followers' workers by leader and follower; mu guards
// the map and its workers' fields.
type followerShard struct {
	mu sync.Mutex
	m  map[string]*followerWorker
}

// shard is the shard of the key (FNV-1a).
func (c *copiers) shard(k string) *followerShard {
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h = (h ^ uint32(k[i])) * 16777619
	}
	return &c.followers[h%followerShards]
}

// followerWorker mirrors one leader's commits on one follower, in order,
// on one goroutine at a time (its fields are guarded by its shard's mu).
type followerWorker struct {
	key     string
	sh      *followerShard
	items   []followerJob
	running bool
}

// addJob queues a follower's part of a commit on its worker (made if there
// is none) and starts the worker if it is not running.
func (c *copiers) addJob(e *Engine, leader, follower string, j followerJob) {
	k := leader + "\x00" + follower
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w := sh.m[k]
	if w == nil {
		w = &followerWorker{key: k, sh: sh}
		sh.m[k] = w
	}
	w.items = append(w.items, j)
	if !w.running {
		w.running = true
		c.wg.Add(1) // from a running worker: the count is above zero
		go e.runFollower(w)
	}
}

// nextJob takes the worker's next job; with none left (or the copier
// stopping) the worker ends and leaves the map, in one step under the
// shard's mu.
func (c *copiers) nextJob(w *followerWorker) (followerJob, bool) {
	w.sh.mu.Lock()
	defer w.sh.mu.Unlock()
	if len(w.items) == 0 || c.ctx.Err() != nil {
		w.running = false
		w.items = nil // stopping: unrecorded, for the next start's catch-up
		if w.sh.m[w.key] == w {
			delete(w.sh.m, w.key)
		}
		return followerJob{}, false
	}
	j := w.items[0]
	w.items[0] = followerJob{}
	w.items = w.items[1:]
	return j, true
}

// runFollower is a follower's worker: its jobs in order, until none is left.
func (e *Engine) runFollower(w *followerWorker) {
	c := e.copier
	defer c.wg.Done()
	for {
		j, ok := c.nextJob(w)
		if !ok {
			return
		}
		pc := j.pc
		out := make([]evcopier.Mirror, len(pc.lc.actions))
		for k, a := range pc.lc.actions {
			if c.ctx.Err() != nil {
				break // stopping: the commit stays unrecorded, for the next start's catch-up
			}
			out[k] = e.mirrorOne(pc.group, pc.fs[j.i], a, pc.lc, pc.eq.get)
		}
		pc.out[j.i] = out
		if pc.left.Add(-1) == 0 {
			c.kick(e, pc.rec)
		}
	}
}

// groupRecorder records a group's pending commits in the leader's order,
// each once all its followers have an outcome (its fields are guarded by
// copiers.mu).
type groupRecorder struct {
	group   string
	pending []*pendingCommit
	running bool
}

// addPending queues a commit on its group's recorder (made if there is
// none), before any follower mirrors it.
func (c *copiers) addPending(pc *pendingCommit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.recorders[pc.group.ID]
	if r == nil {
		r = &groupRecorder{group: pc.group.ID}
		c.recorders[r.group] = r
	}
	r.pending = append(r.pending, pc)
	pc.rec = r
}

// kick starts the recorder unless it runs. Each completion kicks; the
// runner reads whether the head is complete under mu, so a completion
// after its last look starts it again.
func (c *copiers) kick(e *Engine, r *groupRecorder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.running {
		return
	}
	r.running = true
	c.wg.Add(1) // from a running worker: the count is above zero
	go e.runRecorder(r)
}

// nextRecord takes the recorder's head when it is complete; else the
// recorder ends, and with nothing pending leaves the map, under mu.
func (c *copiers) nextRecord(r *groupRecorder) (*pendingCommit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(r.pending) == 0 || r.pending[0].left.Load() > 0 || c.ctx.Err() != nil {
		r.running = false // a commit completing from now kicks again
		if len(r.pending) == 0 && c.recorders[r.group] == r {
			delete(c.recorders, r.group)
		}
		return nil, false
	}
	pc := r.pending[0]
	r.pending[0] = nil
	r.pending = r.pending[1:]
	return pc, true
}

// runRecorder records the complete commits at the head of the recorder.
func (e *Engine) runRecorder(r *groupRecorder) {
	c := e.copier
	defer c.wg.Done()
	for {
		pc, ok := c.nextRecord(r)
		if !ok {
			return
		}
		e.record(pc)
	}
}

// record records a pending commit's outcomes in records of at most
// copyMirrorsPerRecord outcomes: the last advances the group's
// mirroredThrough.
func (e *Engine) record(pc *pendingCommit) {
	acts := pc.lc.actions
	per := max(1, copyMirrorsPerRecord/len(acts))
	for lo := 0; lo < len(pc.fs); lo += per {
		hi := min(len(pc.fs), lo+per)
		out := make([]evcopier.Action, len(acts))
		for j, a := range acts {
			out[j] = evcopier.Action{Op: a.Op, LeaderOrderID: a.OrderID, Mirrors: make([]evcopier.Mirror, 0, hi-lo)}
			for i := lo; i < hi; i++ {
				out[j].Mirrors = append(out[j].Mirrors, pc.out[i][j])
			}
		}
		e.recordMirrors(pc.group.ID, &copiercmd.RecordMirrors{LeaderSeq: pc.lc.seq, Actions: out, Partial: hi < len(pc.fs)})
	}
}

// copyMirrorsPerRecord bounds the outcomes one record (one commit) holds.
const copyMirrorsPerRecord = 2000

// recordMirrors records outcomes in the group; an append that fails is
// retried for copyRetry, then left to the next start's catch-up.
func (e *Engine) recordMirrors(groupID string, cmd *copiercmd.RecordMirrors) {
	ctx := e.copier.ctx
	deadline := time.Now().Add(copyRetry)
	for {
		env := e.Envelope(copierPrincipal, "", cmd)
		_, err := e.copier.groups.Execute(ctx, groupID, env)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			if err != nil && ctx.Err() == nil {
				slog.Warn("copier: mirror outcomes not recorded; the next start mirrors the leader's commit again (each mirror once)",
					"group", groupID, "leaderSeq", cmd.LeaderSeq, "err", err)
			}
			return
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// mirrorOne mirrors one leader action on one follower and answers the outcome.
func (e *Engine) mirrorOne(g *copier.State, f *copier.Follower, a copier.LeaderAction, lc leaderCommit, leaderEquity func() *events.Decimal) evcopier.Mirror {
	m := evcopier.Mirror{Follower: f.AccountID, ClientOrderID: copier.ClientOrderID(g.Leader, a.OrderID, f.AccountID)}
	switch a.Op {
	case evcopier.OpPlace:
		o := a.Order
		m.Instrument, m.Side = copier.Instrument(f.Follower, o.Instrument), copier.Side(f.Follower, o.Side)
		sp := e.specs[m.Instrument]
		in := copier.SizeInput{Sizing: f.Sizing, Leader: o.Quantity, LotStep: sp.LotStep, MinQuantity: sp.MinQuantity}
		if f.Sizing.Mode == evcopier.SizeEquity {
			in.LeaderEquity, in.FollowerEquity = leaderEquity(), e.copyEquity(f.AccountID)
			m.LeaderEquity, m.FollowerEquity = in.LeaderEquity, in.FollowerEquity
		}
		qty := copier.Size(in)
		if o.ReduceOnly {
			pos, _ := e.copyFollower(f.AccountID, m.Instrument, m.ClientOrderID)
			if pos.IsZero() {
				return skipped(m, commands.CodePositionNotClosable)
			}
			qty = copier.ReduceSize(qty, pos, a.CloseAll)
		}
		if qty.IsZero() {
			return skipped(m, commands.CodeCopyQuantityTooSmall)
		}
		m.Quantity = &qty
		cmd := &trading.PlaceOrder{ClientOrderID: m.ClientOrderID, Instrument: m.Instrument, Side: m.Side, OrderType: o.OrderType,
			Quantity: qty, LimitPrice: o.LimitPrice, StopPrice: o.StopPrice, TimeInForce: o.TimeInForce, ReduceOnly: o.ReduceOnly,
			LeaderOrderID: a.OrderID}
		if a.Exit != nil && !o.ReduceOnly {
			return e.sendEntry(m, f.AccountID, cmd, a.Exit, lc)
		}
		return e.sendMirror(m, f.AccountID, cmd, lc)
	case evcopier.OpCancel, evcopier.OpReplace:
		_, w := e.copyFollower(f.AccountID, "", m.ClientOrderID)
		if w == nil {
			return skipped(m, commands.CodeNotFound) // no working mirror of the order
		}
		m.BrokerOrderID, m.Instrument, m.Side = w.BrokerOrderID, w.Instrument, w.Side
		if a.Op == evcopier.OpCancel {
			return e.sendMirror(m, f.AccountID, &trading.CancelOrder{BrokerOrderID: w.BrokerOrderID}, lc)
		}
		sp := e.specs[m.Instrument]
		in := copier.SizeInput{Sizing: f.Sizing, Leader: a.Quantity, LotStep: sp.LotStep, MinQuantity: sp.MinQuantity}
		if f.Sizing.Mode == evcopier.SizeEquity {
			in.LeaderEquity, in.FollowerEquity = leaderEquity(), e.copyEquity(f.AccountID)
			m.LeaderEquity, m.FollowerEquity = in.LeaderEquity, in.FollowerEquity
		}
		qty := copier.Size(in)
		if qty.IsZero() {
			return skipped(m, commands.CodeCopyQuantityTooSmall)
		}
		m.Quantity = &qty
		return e.sendMirror(m, f.AccountID, &trading.ReplaceOrder{BrokerOrderID: w.BrokerOrderID, Quantity: &qty, LimitPrice: a.LimitPrice, StopPrice: a.StopPrice}, lc)
	case evcopier.OpChangeBracket, evcopier.OpWithdrawBracket:
		return e.mirrorBracket(m, f, a, lc)
	}
	return skipped(m, commands.CodeNotFound)
}

// mirrorBracket mirrors a change or withdrawal of the leader's bracket on
// the follower's own bracket, the one its mirror of the bracket's entry
// opened (found by the mirror's clientOrderId), as copier.FollowerBracket
// says. A change is absolute (each leg to a level), so a repeat after a
// crash finds the legs there and sends nothing; a withdrawal repeated finds
// the bracket ended.
func (e *Engine) mirrorBracket(m evcopier.Mirror, f *copier.Follower, a copier.LeaderAction, lc leaderCommit) evcopier.Mirror {
	var mirrored bool
	var fb *evacct.Bracket
	if f.Direction != evcopier.DirectionInverse {
		mirrored, fb = e.copyFollowerBracket(f.AccountID, m.ClientOrderID)
	}
	mv := copier.FollowerBracket(f.Follower, a, mirrored, fb)
	if fb != nil {
		m.BracketID, m.Instrument = fb.ID, fb.Instrument
	}
	switch {
	case mv.Code != "":
		m = skipped(m, mv.Code)
		m.Reason = mv.Reason
		return m
	case mv.Done:
		m.Status = evcopier.StatusMirrored
		return m
	}
	var cmd commands.Command = &trading.WithdrawBracket{BracketID: fb.ID}
	if a.Op == evcopier.OpChangeBracket {
		cmd = &trading.ChangeBracket{BracketID: fb.ID, Legs: mv.Legs}
	}
	out := e.sendMirror(m, f.AccountID, cmd, lc)
	if out.Status == evcopier.StatusSkipped && out.Code == string(commands.CodeNotFound) {
		out.Reason = evcopier.ReasonBracketEnded // it ended between the read and the send
	}
	return out
}

// copyFollowerBracket reads a follower account: whether it took a mirror
// under clientOrderID, and a copy of the active bracket that mirror opened
// (nil: none).
func (e *Engine) copyFollowerBracket(accountID, clientOrderID string) (mirrored bool, b *evacct.Bracket) {
	ctx, cancel := context.WithTimeout(e.copier.ctx, copyTimeout)
	defer cancel()
	_ = e.accounts.Inspect(ctx, accountID, func(s *account.State, _ uint64) {
		var id string
		id, mirrored, _ = s.OrderFor(clientOrderID)
		if fb := copier.MirrorBracket(s.Brackets, clientOrderID, id); fb != nil {
			cp := *fb
			cp.Legs = slices.Clone(fb.Legs)
			b = &cp
		}
	})
	return mirrored, b
}

// sendEntry places the mirror of an exit plan's entry with the plan
// (copier.Exit): the whole plan; refused, without the breakeven and
// trailing rules (a provider account serves neither), when it has them;
// refused again, without a plan. Each attempt is one placement under the
// mirror's clientOrderId, and a refused one leaves nothing, so the follower
// takes one entry, with a bracket of its own or none. A refusal of the
// plain entry too is the outcome.
func (e *Engine) sendEntry(m evcopier.Mirror, accountID string, cmd *trading.PlaceOrder, x *copier.Exit, lc leaderCommit) evcopier.Mirror {
	type try struct {
		status string
		spec   *evplan.Spec
	}
	tries := []try{{evcopier.ExitPlanFollowed, &x.Spec}}
	if u, ok := copier.Unmanaged(x.Spec); ok {
		tries = append(tries, try{evcopier.ExitPlanPartial, &u})
	}
	tries = append(tries, try{evcopier.ExitPlanNone, nil})
	code := ""
	for i, tr := range tries {
		c := *cmd
		c.Bracket = nil
		if tr.spec != nil {
			c.Bracket = &trading.BracketPlan{PlanID: x.PlanID, PlanRevision: x.PlanRevision, Spec: *tr.spec, Entry: x.Entry}
		}
		out, repeat := e.sendMirrorOnce(m, accountID, &c, lc)
		refused := out.Status == evcopier.StatusRefused
		if refused && i < len(tries)-1 && (out.Code == string(commands.CodeInvalidRequest) || out.Code == string(commands.CodeExitPlanConflict)) {
			code = out.Code // the plan's, or the entry's own (refused again without it)
			continue
		}
		if !refused && out.Code == "" && !repeat { // a repeat does not say what the first placement carried
			out.ExitPlan, out.ExitPlanCode = tr.status, code
		}
		return out
	}
	panic("unreachable: the last try returns")
}

func skipped(m evcopier.Mirror, code commands.Code) evcopier.Mirror {
	m.Status, m.Code = evcopier.StatusSkipped, string(code)
	return m
}

// sendMirror runs a follower's mirror command and answers its outcome. A
// refusal safe to retry, an outcome not known yet or no answer is retried
// for copyRetry with the same command (a placement under the same
// clientOrderId): the account takes it once.
func (e *Engine) sendMirror(m evcopier.Mirror, accountID string, cmd commands.Command, lc leaderCommit) evcopier.Mirror {
	out, _ := e.sendMirrorOnce(m, accountID, cmd, lc)
	return out
}

// sendMirrorOnce is sendMirror; repeat reports a placement the follower
// had taken before (its clientOrderId answered 409 naming the order).
func (e *Engine) sendMirrorOnce(m evcopier.Mirror, accountID string, cmd commands.Command, lc leaderCommit) (_ evcopier.Mirror, repeat bool) {
	place, isPlace := cmd.(*trading.PlaceOrder)
	key := ""
	if isPlace {
		key = place.ClientOrderID
	}
	deadline := time.Now().Add(copyRetry)
	wait := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(e.copier.ctx, copyTimeout)
		env := e.Envelope(copierPrincipal, key, cmd)
		res, err := e.Account(ctx, accountID, env)
		cancel()
		if err == nil {
			m.Status = evcopier.StatusMirrored
			if isPlace {
				m.BrokerOrderID = placedOrderID(res.Events, env.ID.String())
			}
			e.copier.placed(lc)
			return m, false
		}
		var ref *commands.Refusal
		isRef := errors.As(err, &ref)
		switch {
		case isRef && isPlace && ref.Code == commands.CodeIdempotencyConflict:
			if id, ok := ref.Params["brokerOrderId"].(string); ok { // placed before: by an attempt whose outcome was not recorded
				m.Status, m.BrokerOrderID = evcopier.StatusMirrored, id
				return m, true
			}
			m.Status, m.Code = evcopier.StatusRefused, string(ref.Code)
			return m, false
		case isRef && !isPlace && ref.Code == commands.CodeNotFound:
			return skipped(m, ref.Code), false // no longer working: filled, or canceled already
		case isRef && !commands.RetrySafe(ref.Code) && ref.Code != commands.CodeOutcomeUnknown:
			m.Status, m.Code = evcopier.StatusRefused, string(ref.Code)
			return m, false
		case isRef && time.Now().Add(retryAfterOf(ref)).After(deadline):
			// The refusal's own wait (a provider's rate limit) outlasts the
			// retries: refused now, not after retries the limit refuses too.
			m.Status, m.Code = evcopier.StatusRefused, string(ref.Code)
			return m, false
		case e.copier.ctx.Err() != nil || time.Now().After(deadline):
			m.Status, m.Code = evcopier.StatusRefused, string(commands.CodeOutcomeUnknown)
			if isRef {
				m.Code = string(ref.Code)
			}
			return m, false
		}
		pause := wait
		if isRef {
			pause = max(pause, retryAfterOf(ref))
		}
		sleepCtx(e.copier.ctx, pause)
		wait = min(2*wait, time.Second)
	}
}

// retryAfterOf is the wait a refusal names itself (a provider's rate
// limit), 0 for none.
func retryAfterOf(ref *commands.Refusal) time.Duration {
	return time.Duration(ref.RetryAfter) * time.Second
}

// placedOrderID is the order a placement's commit placed (or intended, on
// a provider account); else the command's id, which names it.
func placedOrderID(evs []events.Event, fallback string) string {
	for _, ev := range evs {
		switch ev := ev.(type) {
		case evacct.OrderPlaced:
			return ev.Order.BrokerOrderID
		case evacct.OrderIntended:
			if ev.Op == evacct.IntentPlace {
				return ev.Order.BrokerOrderID
			}
		}
	}
	return fallback
}

// placed counts a follower order committed and tells the observer.
func (c *copiers) placed(lc leaderCommit) {
	c.mirrored.Add(1)
	if fn := c.observe.Load(); fn != nil {
		(*fn)(lc.seq, lc.seen)
	}
}

// copyFollower reads a follower account: its open quantity (unsigned) in
// instrument, and its working order placed under clientOrderID (nil: none
// working).
func (e *Engine) copyFollower(accountID, instrument, clientOrderID string) (events.Decimal, *account.Working) {
	var pos events.Decimal
	var w *account.Working
	ctx, cancel := context.WithTimeout(e.copier.ctx, copyTimeout)
	defer cancel()
	_ = e.accounts.Inspect(ctx, accountID, func(s *account.State, _ uint64) {
		if instrument != "" {
			pos = s.Positions[instrument].Quantity.Abs()
		}
		if id, ok, _ := s.OrderFor(clientOrderID); ok {
			if o, working := s.Working[id]; working {
				cp := *o
				w = &cp
			}
		}
	})
	return pos, w
}

// copyEquity is an account's equity: its balance and its positions' open
// PnL at the mid of their newest quotes; nil when it cannot be read.
func (e *Engine) copyEquity(accountID string) *events.Decimal {
	var eq *events.Decimal
	ctx, cancel := context.WithTimeout(e.copier.ctx, copyTimeout)
	defer cancel()
	_ = e.accounts.Inspect(ctx, accountID, func(s *account.State, _ uint64) {
		marks := make(map[string]events.Decimal, len(s.Positions))
		for inst := range s.Positions {
			if m, ok := e.copyMark(inst); ok {
				marks[inst] = m
			}
		}
		v := account.Equity(s.Balance, s.Positions, marks)
		eq = &v
	})
	return eq
}

// copyMark is an instrument's mid from its feed.
func (e *Engine) copyMark(instrument string) (events.Decimal, bool) {
	src := e.cfg.Feed
	if in, ok := e.cfg.Catalog.Get(instrument); ok && in.AssetClass == "futures" {
		src = e.cfg.Futures
	}
	if src == nil {
		return events.Decimal{}, false
	}
	q, ok := src.Quote(instrument)
	if !ok {
		return events.Decimal{}, false
	}
	return q.Bid.Add(q.Ask).Quo(events.Int(2)), true
}

// startCopier loads every copier group from the log and starts the
// catch-up of each leader this node owns. The catch-up runs in the
// background: the start does not wait for it.
func (e *Engine) startCopier(ctx context.Context) error {
	states, revs := map[string]*copier.State{}, map[string]uint64{}
	_, err := e.cfg.Log.Load(ctx, events.Subject(events.KindCopier, ">"), func(m eventlog.Msg) error {
		id, ok := events.SubjectID(m.Subject, events.KindCopier)
		if !ok {
			return nil
		}
		c, err := e.reg.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("copier group %s at %d: %w", id, m.Seq, err)
		}
		s, seen := states[id]
		if !seen {
			s = copier.New(id)
		}
		states[id], revs[id] = copier.Fold(s, m.Seq, c.Events), m.Seq
		return nil
	})
	if err != nil {
		return fmt.Errorf("copier: load the groups: %w", err)
	}
	for id, s := range states {
		e.copier.groups.Seed(id, s, revs[id])
		e.copier.note(id, s, events.Committed{})
	}
	for leader := range *e.copier.byLeader.Load() {
		if e.owns(leader) {
			e.copier.enqueue(e, leader, leaderCommit{}, true)
		}
	}
	return nil
}

// closeCopier stops the workers (a mirror in flight ends; the next start's
// catch-up finishes what was not recorded) and the groups' mailboxes.
func (e *Engine) closeCopier() {
	e.copier.mu.Lock()
	e.copier.stop()
	e.copier.mu.Unlock()
	e.copier.wg.Wait()
	e.copier.groups.Close()
}

// accountRev is an account's revision on this node.
func (e *Engine) accountRev(ctx context.Context, accountID string) (uint64, error) {
	var rev uint64
	err := e.accounts.Inspect(ctx, accountID, func(_ *account.State, r uint64) { rev = r })
	return rev, err
}

// Copier runs cmd on the copier group groupID and commits its events. A
// group's and a follower's changes record the leader's revision they were
// made at: a follower mirrors the leader's commits after it.
func (e *Engine) Copier(ctx context.Context, groupID string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	leader := ""
	switch c := env.Cmd.(type) {
	case *copiercmd.CreateGroup:
		leader = c.Leader
	case *copiercmd.SetFollower, *copiercmd.RemoveFollower:
		v, ok := e.copier.views.Load(groupID)
		if !ok {
			return Result{}, commands.Refuse(commands.CodeNotFound, "no copier group of yours has that id", nil)
		}
		leader = v.(*copier.State).Leader
	default:
		return Result{}, fmt.Errorf("copier: %T is not a command of the routes", env.Cmd)
	}
	rev, err := e.accountRev(ctx, leader)
	if err != nil {
		return Result{}, err
	}
	switch c := env.Cmd.(type) {
	case *copiercmd.CreateGroup:
		c.LeaderRev = rev
	case *copiercmd.SetFollower:
		c.LeaderRev = rev
	case *copiercmd.RemoveFollower:
		c.LeaderRev = rev
	}
	return e.copier.groups.Execute(ctx, groupID, env)
}

// CopierGroup reads the group groupID from its aggregate: its view and its
// recent actions' outcomes, newest first (at most limit). With
// leaderOrderID, that order's actions only, every one recorded: read back
// from the group's records in the log that its index names, however old.
// ok is false when there is no such group.
func (e *Engine) CopierGroup(ctx context.Context, groupID, leaderOrderID string, limit int) (v copier.View, recent []copier.ActionView, ok bool, err error) {
	var seqs []uint64
	err = e.copier.groups.Inspect(ctx, groupID, func(s *copier.State, _ uint64) {
		if ok = s.Created; ok {
			v = copier.ViewOf(s)
			if leaderOrderID == "" {
				recent = copier.RecentView(s, "", limit)
			} else {
				seqs = s.RecordsOf(leaderOrderID)
			}
		}
	})
	if err != nil || !ok || leaderOrderID == "" {
		return v, recent, ok, err
	}
	var rs []copier.Recorded
	for _, seq := range seqs {
		m, err := e.cfg.Log.At(ctx, seq)
		if err != nil {
			return v, nil, ok, fmt.Errorf("copier group %s: %w", groupID, err)
		}
		if m.Subject != evcopier.Subject(groupID) {
			continue
		}
		cm, err := e.reg.Decode(m.Data)
		if err != nil {
			return v, nil, ok, fmt.Errorf("copier group %s at %d: %w", groupID, seq, err)
		}
		rs = append(rs, copier.OrderRecords(cm.Events, leaderOrderID)...)
	}
	return v, copier.ActionsView(rs, leaderOrderID, limit), ok, nil
}

// CopierGroupsLed lists the groups the accounts lead, in id order, as
// their last commits left them.
func (e *Engine) CopierGroupsLed(accountIDs []string) []copier.View {
	var out []copier.View
	for _, a := range accountIDs {
		for _, g := range e.copier.groupsOf(a) {
			out = append(out, copier.ViewOf(g))
		}
	}
	slices.SortFunc(out, func(a, b copier.View) int { return strings.Compare(a.GroupID, b.GroupID) })
	return out
}

// CopierMirrored counts the follower orders the copier placed since start.
func (e *Engine) CopierMirrored() int64 { return e.copier.mirrored.Load() }

// ObserveCopier sets fn to see each follower order the copier commits: the
// leader's commit it mirrors and when the copier saw that commit (the
// bench's leader-to-follower latency). nil: none.
func (e *Engine) ObserveCopier(fn func(leaderSeq uint64, seen time.Time)) {
	if fn == nil {
		e.copier.observe.Store(nil)
		return
	}
	e.copier.observe.Store(&fn)
}

// WatchCopierGroup answers a channel that receives a word after each commit
// of the group (words conflate: one waiting stands for any number of
// commits), and the function that stops the watch.
func (e *Engine) WatchCopierGroup(groupID string) (<-chan struct{}, func()) {
	c := e.copier
	ch := make(chan struct{}, 1)
	c.watchMu.Lock()
	if c.watchers[groupID] == nil {
		c.watchers[groupID] = map[chan struct{}]struct{}{}
	}
	c.watchers[groupID][ch] = struct{}{}
	c.watchMu.Unlock()
	return ch, func() {
		c.watchMu.Lock()
		defer c.watchMu.Unlock()
		delete(c.watchers[groupID], ch)
		if len(c.watchers[groupID]) == 0 {
			delete(c.watchers, groupID)
		}
	}
}

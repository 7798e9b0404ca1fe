package engine

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	firmcmd "github.com/svc/engine/commands/firm"
	providercmd "github.com/svc/engine/commands/provider"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/cluster"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// Several nodes (issue 19). Every node keeps every aggregate's state warm by
// following the log (observe); the commands of an account are decided by the
// node holding its partition's lease and forwarded there from the others over
// NATS request/reply; the account's reactions (fills, expiry, evaluations,
// risk commands) run on that node only.

// The cluster's admission refusals, all 503 with Retry-After: 1 and nothing recorded.
var (
	errUnresolved = func(id string) error {
		return commands.Refuse(commands.CodeAccountUnresolved,
			"no node owns this account right now (a node joined or left); nothing was recorded; retry with the same id after the Retry-After seconds",
			map[string]any{"accountId": id})
	}
	errOwnerUnavailable = func(id, node string) error {
		return commands.Refuse(commands.CodeOwnerUnavailable,
			"the node that owns this account did not take the command; nothing was recorded; retry with the same id after the Retry-After seconds",
			map[string]any{"accountId": id, "node": node})
	}
	errNotOwned = func(id string) error {
		return commands.Refuse(commands.CodeAccountNotOwned,
			"this account's ownership is moving between nodes; nothing was recorded; retry with the same id after the Retry-After seconds",
			map[string]any{"accountId": id})
	}
	errOwnershipUnavailable = commands.Refuse(commands.CodeOwnershipUnavailable,
		"this node has not joined the cluster yet; nothing was recorded; retry with the same id after the Retry-After seconds", nil)
)

// ForwardWait bounds how long a node looks for an account's owner (a lease
// moving) before it answers with a 503.
const ForwardWait = 2 * time.Second

// nodes is the engine's side of the cluster.
type nodes struct {
	cl    *cluster.Cluster
	sub   *nats.Subscription
	parts []map[string]struct{} // account ids by partition
	mu    sync.Mutex
	stop  context.CancelFunc
	done  chan struct{}
	fwd   func(outcome string) // metrics
	at    seen                 // the last commit observe handed to the mailboxes (Start's replay end before)
}

// seen is how far a follower of the log has come, which readers can wait
// for: each advance wakes every waiter then waiting, and costs the follower
// one atomic load while none waits.
type seen struct {
	seq     atomic.Uint64
	waiting atomic.Bool   // a waiter holds wake
	mu      sync.Mutex    // guards wake
	wake    chan struct{} // closed at the next advance; nil while none waits
}

// Load is the last sequence stored.
func (s *seen) Load() uint64 { return s.seq.Load() }

// Store records seq and wakes the waiters.
func (s *seen) Store(seq uint64) {
	s.seq.Store(seq)
	if !s.waiting.Load() {
		return
	}
	s.mu.Lock()
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	s.waiting.Store(false)
	s.mu.Unlock()
}

// next is a channel closed at the next Store. A caller loads the sequence
// after taking it: a Store before that load is seen in it, one after closes
// the channel (both sides' atomics are sequentially consistent).
func (s *seen) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	s.waiting.Store(true)
	return s.wake
}

// wait blocks until the sequence reaches seq or ctx ends.
func (s *seen) wait(ctx context.Context, seq uint64) error {
	for s.Load() < seq {
		ch := s.next()
		if s.Load() >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
	return nil
}

// Observed waits until this node's aggregates hold the log up to seq, or
// ctx ends. On a node of several, the commits other nodes make reach its
// aggregates through observe, apart from the read models, which may be
// ahead: a read of an aggregate's live state (the risk lock) after a read
// model showed seq waits for this. On a single node every commit is its
// own and they hold it at once.
func (e *Engine) Observed(ctx context.Context, seq uint64) error {
	if !e.clustered() {
		return nil
	}
	return e.nodes.at.wait(ctx, seq)
}

// clustered reports whether the engine runs as one node of several.
func (e *Engine) clustered() bool { return e.cfg.Node != "" }

// owns reports whether this node decides the account's commands (always on a
// single node).
func (e *Engine) owns(accountID string) bool {
	if !e.clustered() {
		return true
	}
	return e.nodes.cl != nil && e.nodes.cl.Owns(accountID)
}

// admitAccount refuses an append for an account this node no longer owns.
func (e *Engine) admitAccount(id string) error {
	if e.owns(id) {
		return nil
	}
	return errNotOwned(id)
}

// index records an account id under its partition.
func (e *Engine) index(id string) {
	if !e.clustered() {
		return
	}
	p := cluster.Partition(id, e.partitions())
	e.nodes.mu.Lock()
	if e.nodes.parts[p] == nil {
		e.nodes.parts[p] = map[string]struct{}{}
	}
	e.nodes.parts[p][id] = struct{}{}
	e.nodes.mu.Unlock()
}

// partitions is how many partitions accounts fall into: the same on every
// node of a deployment, so not a setting.
func (e *Engine) partitions() int { return cluster.DefaultPartitions }

func (e *Engine) inPartition(p int) []string {
	e.nodes.mu.Lock()
	defer e.nodes.mu.Unlock()
	ids := make([]string, 0, len(e.nodes.parts[p]))
	for id := range e.nodes.parts[p] {
		ids = append(ids, id)
	}
	return ids
}

// ClusterConfig shapes a node's membership (JoinCluster).
type ClusterConfig struct {
	Replicas int
	TTL      time.Duration
	// Lead runs while this node leads (the duties the cluster runs once).
	Lead func(ctx context.Context)
	// Fit says whether this node can do the leader's duties now (cluster.Config.Fit).
	Fit func() bool
}

// JoinCluster starts the node's membership: after Start, before serving.
func (e *Engine) JoinCluster(ctx context.Context, cc ClusterConfig) (*cluster.Cluster, error) {
	if !e.clustered() {
		return nil, errors.New("engine: JoinCluster needs Config.Node")
	}
	log := e.cfg.Log
	cl, err := cluster.New(ctx, cluster.Config{Conn: log.Conn(), JS: log.JetStream(), Name: log.StreamName(), Node: e.cfg.Node,
		Replicas: cc.Replicas, Partitions: e.partitions(), TTL: cc.TTL, Acquired: e.acquired, Released: e.released, Lead: cc.Lead, Fit: cc.Fit,
		Moved: e.cfg.Metrics.leaseMoved})
	if err != nil {
		return nil, err
	}
	e.nodes.cl = cl
	e.nodes.fwd = e.cfg.Metrics.forwarded
	sub, err := log.Conn().Subscribe(e.forwardSubject(e.cfg.Node), e.serveForward)
	if err != nil {
		return nil, fmt.Errorf("engine: forwarded commands: %w", err)
	}
	e.nodes.sub = sub
	if err := cl.Start(ctx); err != nil {
		return nil, err
	}
	return cl, nil
}

// Cluster is the node's membership; nil on a single node or before JoinCluster.
func (e *Engine) Cluster() *cluster.Cluster { return e.nodes.cl }

// leaveCluster hands the node's partitions over and stops taking forwarded commands.
func (e *Engine) leaveCluster() {
	if e.nodes.cl != nil {
		e.nodes.cl.Close()
	}
	if e.nodes.sub != nil {
		_ = e.nodes.sub.Drain()
	}
}

// acquired starts the account reactions of a partition this node now owns,
// at once, on the prices it holds (takeOver). Every account's state is warm
// (observe), so this reads no log.
func (e *Engine) acquired(p int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	since := e.nodes.cl.Vacated(p)
	for _, id := range e.inPartition(p) {
		_ = e.accounts.Inspect(ctx, id, func(s *account.State, rev uint64) {
			e.takeOver(id, s, rev, since)
			if s.Eval.Bound && len(s.Eval.Rows) > 0 { // verdicts its last owner may not have carried on
				go e.forwardVerdicts(id, s.TenantID, s.Eval.Rules, s.Eval.Run, append([]account.EvalRow(nil), s.Eval.Rows...))
			}
		})
		if e.copier.leads(id) {
			// The mirrors its last owner had on their way (or never began)
			// are finished here, each under its derived clientOrderId, so
			// none twice; a node's own start reaches here too (it owns no
			// partition before it joins).
			e.copier.enqueue(e, id, leaderCommit{}, true)
		}
	}
}

// released stops them when it no longer does.
func (e *Engine) released(p int) {
	for _, id := range e.inPartition(p) {
		e.paper.Track(id, nil)
		e.ch.reactor.Untrack(id)
		if e.prov != nil {
			e.prov.Release(id) // deposed: this node sends nothing more for it
		}
	}
}

// react tracks an account's triggers in the reactors of its owner.
func (e *Engine) react(id string, s *account.State) {
	if !e.owns(id) {
		return
	}
	e.paper.Track(id, e.paperTriggers(s))
	e.rebase(id, s)
	if s.Eval.Bound {
		e.ch.reactor.Track(id, s)
	}
}

// takeOver is react for an account this node has just begun to own (at
// revision rev; its previous owner may have stopped deciding it at since):
// before any later quote, every duty a price drives runs on the prices this
// node holds, by the path a quote takes. The paper book counts the quotes
// since as resting orders' touches (paper.Reactor.Take: a limit a quote
// touched fills at its limit, a stop one traded through triggers, exactly
// once, the account's state saying what is done); the risk controls are
// evaluated against the newest marks and the gap's extremes
// (risk.Reactor.Take: a breach in the gap locks); an evaluation's
// thresholds are checked against them (challenge.Reactor.Check).
func (e *Engine) takeOver(id string, s *account.State, rev uint64, since time.Time) {
	if !e.owns(id) {
		return
	}
	e.paper.Take(id, e.paperTriggers(s), since)
	e.rebase(id, s)
	e.risk.Take(id, s, rev, since)
	e.trackProvider(id, s, events.Committed{}, true, false) // resume the provider session: open intents settled by lookup, then a reconciliation
	if s.Eval.Bound {
		e.ch.reactor.Track(id, s)
		e.ch.reactor.Check(id)
	}
}

// observe follows the log from after seq and hands every commit to the
// groups that hold its aggregate (mailbox.Observe): another node's commits
// keep this node's states warm.
func (e *Engine) observe(from uint64) {
	ctx, stop := context.WithCancel(context.Background())
	e.nodes.stop, e.nodes.done = stop, make(chan struct{})
	go func() {
		defer close(e.nodes.done)
		for ctx.Err() == nil {
			err := e.cfg.Log.Follow(ctx, from, func(m eventlog.Msg) error {
				decode := func() (events.Commit, error) { return e.reg.Decode(m.Data) }
				if err := e.observeOne(m, decode); err != nil {
					slog.Error("cluster: a commit of another node could not be applied; the aggregate reloads before its next command",
						"subject", m.Subject, "seq", m.Seq, "err", err)
				}
				from = m.Seq
				e.nodes.at.Store(m.Seq)
				return nil
			})
			if ctx.Err() != nil {
				return
			}
			slog.Warn("cluster: following the log", "err", err, "from", from)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

func (e *Engine) observeOne(m eventlog.Msg, decode func() (events.Commit, error)) error {
	if id, ok := events.SubjectID(m.Subject, events.KindAccount); ok {
		e.index(id)
		_, err := e.accounts.Observe(m.Subject, m.Seq, m.Prev, m.HasPrev, true, decode)
		return err
	}
	if events.IsKind(m.Subject, events.KindCopier) {
		// Every node holds every copier group: the node that owns a leader,
		// now or after a takeover, mirrors it by its groups, wherever they
		// were created.
		_, err := e.copier.groups.Observe(m.Subject, m.Seq, m.Prev, m.HasPrev, true, decode)
		return err
	}
	if events.IsKind(m.Subject, events.KindVenue) {
		// Every node holds every venue, as every account: their terms stay
		// current here, and the snapshot rounds see them all (snapshots.go).
		_, err := e.venues.Observe(m.Subject, m.Seq, m.Prev, m.HasPrev, true, decode)
		return err
	}
	for _, g := range e.observers() {
		if ok, err := g(m.Subject, m.Seq, m.Prev, m.HasPrev, false, decode); ok {
			return err
		}
	}
	return nil
}

type observer func(subject string, seq, prev uint64, knowPrev, create bool, decode func() (events.Commit, error)) (bool, error)

func (e *Engine) observers() []observer {
	return []observer{e.tenants.Observe, e.orgs.Observe, e.plans.Observe, e.venues.Observe, e.firms.Observe,
		e.connect.apps.Observe, e.connect.links.Observe, e.connect.stmts.Observe, e.ch.programs.Observe, e.ch.enrollments.Observe}
}

func (e *Engine) stopObserving() {
	if e.nodes.stop != nil {
		e.nodes.stop()
		<-e.nodes.done
	}
}

// The forwarded command, as it crosses the wire between nodes.
type wireEnvelope struct {
	Account   string           `json:"account"`
	ID        string           `json:"id"`
	At        time.Time        `json:"at"`
	Key       string           `json:"key,omitempty"`
	Digest    string           `json:"digest,omitempty"`
	Principal events.Principal `json:"principal"`
	Type      string           `json:"type"`
	Cmd       []byte           `json:"cmd"` // gob: every exported field, whatever its JSON tags say
}

// wireResult is the owner's answer: one of its outcomes.
type wireResult struct {
	Outcome string            `json:"outcome"` // ok, refused, not_owned, unknown, unavailable, failed
	Seq     uint64            `json:"seq,omitempty"`
	Events  []byte            `json:"events,omitempty"` // the commit's events, in the log's encoding
	Refusal *commands.Refusal `json:"refusal,omitempty"`
	Msg     string            `json:"msg,omitempty"`
}

// accountCommands is every command an account aggregate decides: the ones a
// node may forward. A test checks each survives the wire whole.
func accountCommands() []commands.Command {
	return []commands.Command{
		&tenantcmd.OpenAccount{},
		&trading.PlaceOrder{}, &trading.CancelOrder{}, &trading.ReplaceOrder{}, &trading.ClosePosition{}, &trading.Flatten{},
		&trading.Reverse{}, &trading.FillWorking{}, &trading.Protect{}, &trading.WithdrawBracket{}, &trading.ChangeBracket{},
		&trading.ExpireDayOrders{},
		&riskcmd.SetSettings{}, &riskcmd.Evaluate{}, &riskcmd.Unlock{}, &riskcmd.Release{}, &riskcmd.BreachEvaluation{},
		&riskcmd.ReleaseEvaluation{},
		&firmcmd.BalanceOp{}, &firmcmd.HaltAccount{}, &firmcmd.ResumeAccount{}, &firmcmd.HoldForReconciliation{},
		&firmcmd.ReleaseReconciliation{}, &firmcmd.ResetAccount{},
		&challengecmd.OpenEvaluation{}, &challengecmd.EvaluateStage{}, &challengecmd.RestartEvaluation{},
		// A provider link checked and sealed on another node, and an unlink:
		// only the sealed credential crosses (the owner opens its own session).
		&providercmd.Link{}, &providercmd.Unlink{},
		// The trader's withdrawal of live consent (hosted Connect).
		&providercmd.WithdrawLiveConsent{},
	}
}

var wireTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, c := range accountCommands() {
		t := reflect.TypeOf(c)
		m[t.String()] = t.Elem()
	}
	return m
}()

func encodeEnvelope(accountID string, env commands.Envelope) ([]byte, error) {
	name := reflect.TypeOf(env.Cmd).String()
	if _, ok := wireTypes[name]; !ok {
		return nil, fmt.Errorf("engine: %s cannot be forwarded", name)
	}
	var cmd bytes.Buffer
	if err := gob.NewEncoder(&cmd).Encode(env.Cmd); err != nil {
		return nil, fmt.Errorf("engine: forward %s: %w", name, err)
	}
	return json.Marshal(wireEnvelope{Account: accountID, ID: env.ID.String(), At: env.At, Key: env.Key, Digest: env.Digest,
		Principal: env.Principal, Type: name, Cmd: cmd.Bytes()})
}

func decodeEnvelope(b []byte) (string, commands.Envelope, error) {
	var w wireEnvelope
	if err := json.Unmarshal(b, &w); err != nil {
		return "", commands.Envelope{}, err
	}
	t, ok := wireTypes[w.Type]
	if !ok {
		return "", commands.Envelope{}, fmt.Errorf("engine: unknown forwarded command %q", w.Type)
	}
	id, err := ulid.Parse(w.ID)
	if err != nil {
		return "", commands.Envelope{}, err
	}
	cmd := reflect.New(t).Interface()
	if err := gob.NewDecoder(bytes.NewReader(w.Cmd)).Decode(cmd); err != nil {
		return "", commands.Envelope{}, err
	}
	return w.Account, commands.Envelope{ID: id, At: w.At, Key: w.Key, Digest: w.Digest, Principal: w.Principal, Cmd: cmd.(commands.Command)}, nil
}

func (e *Engine) forwardSubject(node string) string {
	return "_engine." + e.cfg.Log.StreamName() + ".node." + node + ".account"
}

// forward sends an account's command to the node that owns it and answers
// with that node's outcome. While no owner is known, or the owner refuses
// because its lease moved, it looks again until ForwardWait; a request sent
// whose answer never came is outcome_unknown (retry with the same id).
func (e *Engine) forward(ctx context.Context, accountID string, env commands.Envelope) (Result, error) {
	if e.nodes.cl == nil {
		return Result{}, errOwnershipUnavailable
	}
	data, err := encodeEnvelope(accountID, env)
	if err != nil {
		return Result{}, err
	}
	deadline := time.Now().Add(ForwardWait)
	last := errUnresolved(accountID)
	for {
		if e.owns(accountID) {
			return e.decideHere(ctx, accountID, env)
		}
		owner := e.nodes.cl.Owner(accountID)
		if owner != "" && owner != e.cfg.Node {
			res, err, retry := e.send(ctx, owner, accountID, data)
			if !retry {
				return res, err
			}
			last = err
		}
		if time.Now().After(deadline) {
			e.forwarded("refused")
			return Result{}, last
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// send is one forward to owner; retry is true when nothing was done there.
func (e *Engine) send(ctx context.Context, owner, accountID string, data []byte) (Result, error, bool) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := e.request(rctx, owner, accountID, data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return Result{}, errOwnerUnavailable(accountID, owner), true
	case err != nil && !e.cfg.Log.Connected():
		return Result{}, fmt.Errorf("forward to %s: %v: %w", owner, err, eventlog.ErrOutcomeUnknown), false
	case err != nil:
		e.forwarded("unknown")
		return Result{}, fmt.Errorf("forward to %s: %v: %w", owner, err, eventlog.ErrOutcomeUnknown), false
	}
	var w wireResult
	if err := json.Unmarshal(msg.Data, &w); err != nil {
		return Result{}, fmt.Errorf("forward to %s: unreadable answer: %v: %w", owner, err, eventlog.ErrOutcomeUnknown), false
	}
	switch w.Outcome {
	case "ok":
		res := Result{Seq: w.Seq}
		if len(w.Events) > 0 {
			c, err := e.reg.Decode(w.Events)
			if err != nil {
				return Result{}, fmt.Errorf("forward to %s: %v: %w", owner, err, eventlog.ErrOutcomeUnknown), false
			}
			res.Events = c.Events
		}
		e.forwarded("ok")
		return res, nil, false
	case "refused":
		e.forwarded("ok")
		return Result{}, w.Refusal, false
	case "not_owned":
		return Result{}, errNotOwned(accountID), true
	case "unavailable":
		e.forwarded("ok")
		return Result{}, fmt.Errorf("at %s: %s: %w", owner, w.Msg, eventlog.ErrLogUnavailable), false
	case "unknown":
		e.forwarded("unknown")
		return Result{}, fmt.Errorf("at %s: %s: %w", owner, w.Msg, eventlog.ErrOutcomeUnknown), false
	}
	e.forwarded("failed")
	return Result{}, fmt.Errorf("at %s: %s", owner, w.Msg), false
}

// errOwnerLapsed ends a forward whose owner's lease lapsed before it answered.
var errOwnerLapsed = errors.New("the owner's lease lapsed before it answered")

// request sends a forward and waits for its answer, but no longer than the
// owner's lease lives: an owner that stopped answering (paused, cut off)
// can no longer commit by its own clock once its lease lapsed, so waiting
// longer tells nothing more (the outcome is unknown: retry with the same id,
// which reaches the next owner).
func (e *Engine) request(ctx context.Context, owner, accountID string, data []byte) (*nats.Msg, error) {
	type answer struct {
		msg *nats.Msg
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan answer, 1)
	go func() {
		m, err := e.cfg.Log.Conn().RequestWithContext(ctx, e.forwardSubject(owner), data)
		ch <- answer{m, err}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-ch:
			return a.msg, a.err
		case <-tick.C:
			if e.nodes.cl.Owner(accountID) != owner {
				return nil, errOwnerLapsed
			}
		}
	}
}

func (e *Engine) forwarded(outcome string) {
	if e.nodes.fwd != nil {
		e.nodes.fwd(outcome)
	}
}

// serveForward decides a command another node forwarded, on its own
// goroutine (a subscription's handler runs one message at a time).
func (e *Engine) serveForward(m *nats.Msg) {
	go func() {
		w := e.answerForward(m.Data)
		b, err := json.Marshal(w)
		if err != nil {
			b, _ = json.Marshal(wireResult{Outcome: "failed", Msg: "unencodable answer"})
		}
		_ = m.Respond(b)
	}()
}

func (e *Engine) answerForward(data []byte) wireResult {
	id, env, err := decodeEnvelope(data)
	if err != nil {
		return wireResult{Outcome: "failed", Msg: "unreadable forwarded command: " + err.Error()}
	}
	if !e.owns(id) {
		return wireResult{Outcome: "not_owned"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
	defer cancel()
	res, err := e.decideHere(ctx, id, env)
	var ref *commands.Refusal
	switch {
	case err == nil:
		w := wireResult{Outcome: "ok", Seq: res.Seq}
		if len(res.Events) > 0 {
			b, eerr := e.reg.Encode(events.Commit{CommandID: env.ID.String(), Events: res.Events})
			if eerr != nil {
				return wireResult{Outcome: "unknown", Msg: eerr.Error()}
			}
			w.Events = b
		}
		return w
	case errors.As(err, &ref) && ref.Code == commands.CodeAccountNotOwned:
		return wireResult{Outcome: "not_owned"}
	case errors.As(err, &ref):
		return wireResult{Outcome: "refused", Refusal: ref}
	case errors.Is(err, eventlog.ErrLogUnavailable):
		return wireResult{Outcome: "unavailable", Msg: err.Error()}
	case errors.Is(err, eventlog.ErrOutcomeUnknown), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return wireResult{Outcome: "unknown", Msg: err.Error()}
	}
	return wireResult{Outcome: "failed", Msg: err.Error()}
}

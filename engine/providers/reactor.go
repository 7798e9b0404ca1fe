// Package providers is the provider reactor: it talks to the providers of
// the accounts this node owns. It holds one session per linked account,
// sends every intent the account aggregate committed (exactly once: an
// intent found open at a start or takeover is settled by a lookup of its
// client order id, never sent again), commits each outcome, and records
// the provider's stream and its snapshots as observations.
//
// It decides nothing: every outcome and observation goes back to the
// account aggregate as a command (commands/provider), which decides what to
// record. The engine runs it on the node that owns the account (the same
// ownership the paper book's reactor follows): Track is called from the
// account's mailbox after each commit, Resume after a start or a takeover.
package providers

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Config shapes a Reactor.
type Config struct {
	// Providers by name (provider.Provider.Name).
	Providers map[string]provider.Provider
	// Open opens an account's sealed credential.
	Open func(ctx context.Context, accountID string, sealed []byte) (provider.Credentials, error)
	// Exec runs a command on the account (as the system) and commits it.
	Exec func(ctx context.Context, accountID string, cmd commands.Command) error
	Now  func() time.Time
	// SendWithin is how long after its intent a request may still leave
	// for the provider: one that could not leave by then (the session not
	// connected yet, the process held) is not sent at all and settles as
	// not sent, never late. The adapter checks it as the last thing before
	// the request goes out (provider.WithSendBy). 1 s when zero.
	SendWithin time.Duration
	// NeverPlacedAfter is how long after its intent an order the provider
	// does not know was never placed. A request leaves at most SendWithin
	// after its intent, and the provider carries none out later than its
	// receive window after it left (provider.Windowed: Binance refuses a
	// request older than 5 s, or 1 s ahead of its clock; Tradovate's
	// connection is reset when a request is given up), so none can be
	// carried out after that. When zero: SendWithin and the provider's
	// window (the send's timeout and 1 s for a provider that names none).
	NeverPlacedAfter time.Duration
	// Retry is the wait between two lookups or two connects; 250 ms when zero.
	Retry time.Duration
	// ReconcileEvery is the period of the reconciliation that runs besides
	// the ones at a start and after each stream gap; 60 s when zero.
	ReconcileEvery time.Duration
	// Owns reports whether this node owns the account now: a send is made
	// only while it does (a deposed owner never sends; the new owner settles
	// the intent by lookup). Nil: always.
	Owns func(accountID string) bool
	// Logins serves the accounts linked through a login (tokens.go).
	Logins LoginConfig
}

// Reactor is the provider reactor. Safe for concurrent use.
type Reactor struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	links   map[string]*link              // by account id
	waiters map[string][]*waiter          // by account id + "/" + intent key
	recent  map[string][]events.Committed // by account id: its last commits, oldest first (Since)
	changed map[string]chan struct{}      // by account id: closed at its next commit here (Changed)
	pending map[string]provider.Session   // sessions opened by a link, before its commit
	logins  loginState                    // the logins lost (tokens.go)
}

// link is one linked account's session and what is under way on it.
type link struct {
	accountID string
	name      string
	sealed    []byte
	sess      provider.Session // nil until connected
	login     *loginLink       // an account linked through a login (tokens.go); nil for a key
	ready     chan struct{}    // closed once sess is set (or the link ends)
	busy      map[string]bool  // intent keys being sent or looked up
	// sent are the intent keys sent from this node while open: one whose
	// settlement failed to commit is looked up from then on, never sent
	// again (a market order's client order id is free again at the
	// provider once it filled, so a second send would place it twice).
	sent map[string]bool
	// sending are the intent keys whose request is out: each channel
	// closes once the provider's answer to it is recorded (or the request
	// ended without one).
	sending map[string]chan struct{}
	// answered are the keys of sending whose answer is being recorded,
	// each with its provider client order id: the commit that settles one
	// closes its channel (track).
	answered map[string]string
	stop     context.CancelFunc
	settings evacct.ProviderSettings
	// retryDue is when the account's next bracket leg that did not reach
	// the provider is placed again (zero: none waits), retry its timer.
	retryDue time.Time
	retry    *time.Timer
	// observed counts the commits of the account another node made that
	// reached this node (TrackObserved): a reconciliation whose reading
	// one of them overtook judges again, on a fresh reading.
	observed uint64
	// known are the orders the log holds working and the place intents
	// still open, as of the last commit: what a reconciliation looks up
	// when the provider's working orders do not hold them.
	known []ref
	// gate keeps a reconciliation apart from sends: a send holds it shared
	// from the request until its outcome is committed, a reconciliation
	// exclusively from the snapshot's read until its record is committed,
	// so no outcome lands between the reading and its judgement.
	gate sync.RWMutex
}

// ref names an order at the provider.
type ref struct{ instrument, clientOrderID string }

// sendTimeout bounds one request to the provider.
const sendTimeout = 10 * time.Second

// neverPlacedAfter is NeverPlacedAfter for the link's provider.
func (r *Reactor) neverPlacedAfter(l *link) time.Duration {
	if r.cfg.NeverPlacedAfter > 0 {
		return r.cfg.NeverPlacedAfter
	}
	window := sendTimeout + time.Second
	if p, ok := r.cfg.Providers[l.name].(provider.Windowed); ok {
		window = p.ReceiveWindow()
	}
	return r.cfg.SendWithin + window
}

// New makes a reactor.
func New(cfg Config) *Reactor {
	if cfg.SendWithin <= 0 {
		cfg.SendWithin = time.Second
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 250 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = time.Minute
	}
	if cfg.Owns == nil {
		cfg.Owns = func(string) bool { return true }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Reactor{cfg: cfg, ctx: ctx, cancel: cancel, links: map[string]*link{}, waiters: map[string][]*waiter{}, recent: map[string][]events.Committed{},
		changed: map[string]chan struct{}{}, pending: map[string]provider.Session{}}
}

// Provider is the provider of the name, if served.
func (r *Reactor) Provider(name string) (provider.Provider, bool) {
	p, ok := r.cfg.Providers[name]
	return p, ok
}

// Names lists the providers served.
func (r *Reactor) Names() []string {
	var out []string
	for n := range r.cfg.Providers {
		out = append(out, n)
	}
	return out
}

// Hand gives the reactor the session a link opened, for the account its
// commit is about to open: it is used instead of connecting again.
func (r *Reactor) Hand(accountID string, s provider.Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[accountID] = s
}

// Drop closes a session handed over for a link that did not commit.
func (r *Reactor) Drop(accountID string) {
	r.mu.Lock()
	s := r.pending[accountID]
	delete(r.pending, accountID)
	r.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// Track is called after each commit of an account on the owning node, in
// its mailbox: it starts the session of a linked account, ends it on
// unlinking, sends each intent committed since, and wakes the waiters of
// the intents settled. It never blocks. Track takes every intent open in s
// as opened by this node's commit (one it has not sent yet is sent); the
// engine calls TrackCommit, which sends only those the commit opened.
func (r *Reactor) Track(accountID string, s *account.State) {
	var c events.Committed
	for _, in := range s.OpenIntents() {
		c.Events = append(c.Events, in)
	}
	r.track(accountID, s, c, false, false)
}

// TrackCommit is Track with the commit just applied, kept among the
// account's last (Since) so an order's answer is made from the decisions
// since its intent, without waiting for the read models. Only the intents
// the commit opened are sent; any other open one is looked up.
func (r *Reactor) TrackCommit(accountID string, s *account.State, c events.Committed) {
	r.track(accountID, s, c, false, false)
}

// TrackObserved is TrackCommit with a commit another node made: the
// intents it opened are that node's to send (its append committed them),
// and are only looked up here, never sent. Two nodes may both believe
// they own the account for a while (one cut from the cluster keeps its
// leases until it hears otherwise): each sends only what it committed,
// so the log's guard, which lets one append through, is what lets one
// request out.
func (r *Reactor) TrackObserved(accountID string, s *account.State, c events.Committed) {
	r.track(accountID, s, c, false, true)
}

// Resume is Track after a start or a takeover: every open intent may have
// been sent by the node before, so each is settled by a lookup, never sent.
func (r *Reactor) Resume(accountID string, s *account.State) {
	r.track(accountID, s, events.Committed{}, true, false)
}

func (r *Reactor) track(accountID string, s *account.State, c events.Committed, resumed, observed bool) {
	p := s.Provider
	if p == nil {
		return
	}
	intents := s.OpenIntents()
	open := map[string]bool{}
	for _, in := range intents {
		open[providercmd.IntentKey(in.Op, in.ProviderClientOrderID)] = true
	}
	var wake []*waiter // woken once the lock is let go: look may read the log (OrderFor)
	defer func() {
		for _, w := range wake {
			if w.look != nil && c.Seq > 0 {
				w.look(s, c.Seq)
				w.shown = true
			}
			close(w.ch)
		}
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.changed[accountID]; ok {
		close(ch)
		delete(r.changed, accountID)
	}
	if c.Seq > 0 {
		cs := r.recent[accountID]
		if len(cs) == recentCommits {
			cs = append(cs[:0], cs[1:]...)
		}
		r.recent[accountID] = append(cs, c)
	} else {
		delete(r.recent, accountID) // a start or a takeover: what came before is not known here
	}
	if l := r.links[accountID]; l != nil && c.Seq > 0 {
		// An outcome this commit records, once the provider's answer to a
		// request out is in hand (answered), is that answer's record: what
		// waits for it (a stream record held back, an order's answer) goes
		// on at once, not once the sender has heard of the commit. (A
		// stream record settling the intent just before the answer's own
		// record counts as it: the answer then shows the order as that
		// record left it.)
		for _, ev := range c.Events {
			st, ok := ev.(evacct.IntentSettled)
			if !ok {
				continue
			}
			for k, pcoid := range l.answered {
				if ch, out := l.sending[k]; out && !open[k] && pcoid == st.ProviderClientOrderID {
					close(ch)
					delete(l.sending, k)
				}
			}
		}
	}
	for k, ws := range r.waiters {
		if len(k) > len(accountID) && k[:len(accountID)+1] == accountID+"/" && !open[k[len(accountID)+1:]] {
			wake = append(wake, ws...)
			delete(r.waiters, k)
		}
	}
	goOn, resumed := r.trackLogin(accountID, p, resumed) // tokens.go
	if !goOn {
		return
	}
	l := r.links[accountID]
	if !p.Linked {
		if l != nil {
			l.stop()
			delete(r.links, accountID)
		}
		delete(r.recent, accountID) // no answer waits on an unlinked account
		return
	}
	if l == nil {
		ctx, stop := context.WithCancel(r.ctx)
		l = &link{accountID: accountID, name: p.Name, sealed: p.Sealed, ready: make(chan struct{}), busy: map[string]bool{}, sent: map[string]bool{}, sending: map[string]chan struct{}{}, answered: map[string]string{}, stop: stop,
			settings: p.Settings, login: newLoginLink(p)}
		r.links[accountID] = l
		sess := r.pending[accountID]
		delete(r.pending, accountID)
		go r.run(ctx, l, sess, resumed)
	}
	l.settings = p.Settings
	if observed {
		l.observed++
	}
	r.scheduleRetry(l, account.RetryDue(s))
	l.known = l.known[:0]
	for _, in := range intents {
		if in.Op == evacct.IntentPlace || in.Op == account.IntentExit {
			l.known = append(l.known, ref{in.Order.Instrument, in.ProviderClientOrderID})
		}
	}
	for pcoid, id := range p.Orders {
		if w, ok := s.Working[id]; ok {
			l.known = append(l.known, ref{w.Instrument, pcoid})
		}
	}
	for k := range l.sent {
		if !open[k] {
			delete(l.sent, k)
		}
	}
	// An intent is sent only by the node whose own commit opened it, as it
	// applies that commit: one this node only saw (another node's commit,
	// a state read again from the log) or an earlier commit's is looked up.
	// (A node that took an account back after a cut healed sent the other
	// node's intents, still open in its state, at its next own commit.)
	opened := map[string]bool{}
	if !resumed && !observed {
		for _, ev := range c.Events {
			if in, ok := ev.(evacct.OrderIntended); ok {
				opened[providercmd.IntentKey(in.Op, in.ProviderClientOrderID)] = true
			}
		}
	}
	for _, in := range intents {
		k := providercmd.IntentKey(in.Op, in.ProviderClientOrderID)
		if l.busy[k] {
			continue
		}
		l.busy[k] = true
		go r.settle(l, in, opened[k] && !l.sent[k])
	}
}

// scheduleRetry sends RetryExits to the account at due, the retry time of
// its next bracket leg that did not reach the provider (zero: none), with
// r.mu held.
func (r *Reactor) scheduleRetry(l *link, due time.Time) {
	if due.Equal(l.retryDue) {
		return
	}
	if l.retry != nil {
		l.retry.Stop()
		l.retry = nil
	}
	l.retryDue = due
	if due.IsZero() {
		return
	}
	l.retry = time.AfterFunc(max(due.Sub(r.cfg.Now()), 0)+time.Millisecond, func() { r.retryExits(l, due) })
}

// retryExits places the account's legs due at due again, while this node
// owns it; when no commit moved the next retry time on (the command found
// nothing due by the engine's clock, or did not commit), it is tried again
// a second later.
func (r *Reactor) retryExits(l *link, due time.Time) {
	r.mu.Lock()
	current := r.links[l.accountID] == l && l.retryDue.Equal(due)
	r.mu.Unlock()
	if !current || !r.cfg.Owns(l.accountID) {
		return
	}
	_ = r.exec(l.accountID, &providercmd.RetryExits{})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.links[l.accountID] == l && l.retryDue.Equal(due) {
		l.retryDue = time.Time{}
		r.scheduleRetry(l, r.cfg.Now().Add(time.Second))
	}
}

// retryExitsNow places the account's bracket legs waiting to be placed
// again at once, after a complete reading of the account at a start or
// after the stream's gap (cause): the provider answers again, and a stop
// that could not be placed during its outage should not wait out its
// backoff (up to a minute) once it is back.
func (r *Reactor) retryExitsNow(l *link, cause string) {
	if cause != "start" && cause != "gap" {
		return
	}
	r.mu.Lock()
	waiting := r.links[l.accountID] == l && !l.retryDue.IsZero()
	r.mu.Unlock()
	if waiting && r.cfg.Owns(l.accountID) {
		_ = r.exec(l.accountID, &providercmd.RetryExits{Now: true})
	}
}

// Release stops the account's session on a node that no longer owns it:
// nothing more is sent or recorded from here; the new owner resumes.
func (r *Reactor) Release(accountID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.links[accountID]; l != nil {
		l.stop()
		delete(r.links, accountID)
	}
	delete(r.recent, accountID)
	if ch, ok := r.changed[accountID]; ok { // a waiter reads the state once more, and no commit here will close it
		close(ch)
		delete(r.changed, accountID)
	}
}

// waiter is one Wait for an intent's settlement.
type waiter struct {
	ch    chan struct{}                // closed once settled
	look  func(*account.State, uint64) // nil, or shown the state that settled it, before ch closes
	shown bool                         // look was shown it
}

// Wait waits until the intent key of the account is settled, ctx ends or d
// passes; it reports whether it settled. The caller reads the outcome from
// the account's state: look, when not nil, is shown the state (and its
// revision) of the commit that settled it, on the account's goroutine
// before Wait returns, so the caller need not ask the account again.
// shown reports that Wait returned on that wake, look shown the state:
// what look stored may be read then, and only then (look may run while
// Wait returns otherwise); when it is false the caller reads the state
// again (the intent settled before Wait looked, or otherwise than by a
// commit here: a start, a takeover).
func (r *Reactor) Wait(ctx context.Context, accountID, key string, open func() bool, d time.Duration, look func(*account.State, uint64)) (settled, shown bool) {
	w0 := &waiter{ch: make(chan struct{}), look: look}
	ch := w0.ch
	wk := accountID + "/" + key
	r.mu.Lock()
	r.waiters[wk] = append(r.waiters[wk], w0)
	r.mu.Unlock()
	forget := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		ws := r.waiters[wk]
		for i, w := range ws {
			if w == w0 {
				ws = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(r.waiters, wk)
		} else {
			r.waiters[wk] = ws
		}
	}
	if !open() {
		forget()
		return true, false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true, w0.shown
	case <-t.C:
	case <-ctx.Done():
	}
	forget()
	return !open(), false
}

// recentCommits is how many of an account's last commits Since can read:
// an order's intent, the stream's report and the exchange's answer, and
// one more.
const recentCommits = 4

// Since is the events of the account's commits after the one at from up to
// the one at to, as this node applied them; false when it does not hold
// them all (the commit at from among them), and the caller reads the read
// models at to instead.
func (r *Reactor) Since(accountID string, from, to uint64) ([]events.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.recent[accountID]
	i := slices.IndexFunc(cs, func(c events.Committed) bool { return c.Seq == from })
	if i < 0 {
		return nil, false
	}
	var evs []events.Event
	for _, c := range cs[i+1:] {
		if c.Seq > to {
			break
		}
		evs = append(evs, c.Events...)
		from = c.Seq
	}
	return evs, from == to
}

// Sending is a channel that closes once the provider's answer to the
// intent key's request is recorded, while the request is out; nil when
// none is. The stream may report an order before that answer: an order
// answer waits for it, so it shows what the provider answered (a market
// order's fill), not only that the stream saw the order.
func (r *Reactor) Sending(accountID, key string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.links[accountID]; l != nil {
		if ch, ok := l.sending[key]; ok {
			return ch
		}
	}
	return nil
}

// Changed is a channel that closes when the account's state next changes
// on this node (a commit applied, a start or a takeover): a caller
// watching for something in the state takes it before reading the state,
// so no change between the reading and its wait is missed.
func (r *Reactor) Changed(accountID string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.changed[accountID]
	if !ok {
		ch = make(chan struct{})
		r.changed[accountID] = ch
	}
	return ch
}

// Session is the provider session of accountID on this node, waiting for
// it to connect until ctx ends; false when this node holds none.
func (r *Reactor) Session(ctx context.Context, accountID string) (provider.Session, bool) {
	r.mu.Lock()
	l := r.links[accountID]
	r.mu.Unlock()
	if l == nil {
		return nil, false
	}
	return l.session(ctx)
}

// Close ends every session.
func (r *Reactor) Close() {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, s := range r.pending {
		_ = s.Close()
		delete(r.pending, id)
	}
}

func (r *Reactor) exec(accountID string, cmd commands.Command) error {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	err := r.cfg.Exec(ctx, accountID, cmd)
	if err != nil && r.ctx.Err() == nil {
		slog.Warn("providers: recording at the account failed", "account", accountID, "cmd", commandName(cmd), "err", err)
	}
	return err
}

func commandName(cmd commands.Command) string {
	switch cmd.(type) {
	case *providercmd.Settle:
		return "settle"
	case *providercmd.Observe:
		return "observe"
	case *providercmd.RetryExits:
		return "retry exits"
	}
	return "command"
}

// sleep waits d or until ctx ends; false when it ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// session waits for the link's session.
func (l *link) session(ctx context.Context) (provider.Session, bool) {
	select {
	case <-l.ready:
		return l.sess, l.sess != nil
	case <-ctx.Done():
		return nil, false
	}
}

// run connects the link (unless a session was handed over), reconciles
// and records its stream until ctx ends; a cut stream reconciles again.
func (r *Reactor) run(ctx context.Context, l *link, sess provider.Session, resumed bool) {
	prov, ok := r.cfg.Providers[l.name]
	if !ok {
		slog.Error("providers: an account is linked to a provider this engine does not serve", "account", l.accountID, "provider", l.name)
		return
	}
	if sess == nil && l.login != nil {
		if sess = r.resumeLogin(ctx, l, prov); sess == nil {
			return // ended, or the login is lost: the account is marked and its session stopped
		}
	}
	for sess == nil {
		c, err := r.cfg.Open(ctx, l.accountID, l.sealed)
		if err == nil {
			sess, err = prov.Connect(ctx, c)
		}
		if err != nil {
			slog.Warn("providers: connecting a linked account failed; trying again", "account", l.accountID, "err", err)
			if !sleep(ctx, 4*r.cfg.Retry) {
				return
			}
		}
	}
	defer sess.Close()
	l.sess = sess
	// The stream is live before anything is sent: an order placed before
	// it would show its fill only in the stream's first sync, which the
	// stream takes as its starting point, not as news.
	evs, err := sess.Events(ctx)
	if err != nil {
		slog.Warn("providers: the account's stream did not open", "account", l.accountID, "err", err)
	}
	close(l.ready)
	if resumed {
		r.reconcile(ctx, l, "start")
	}
	every := time.NewTicker(r.cfg.ReconcileEvery)
	defer every.Stop()
	var carry provider.Event // read while gathering, recorded next
	for {
		ev := carry
		carry = nil
		if ev == nil {
			select {
			case <-ctx.Done():
				return
			case <-every.C:
				r.reconcile(ctx, l, "periodic")
				continue
			case e, ok := <-evs: // a nil channel (no stream) never speaks
				if !ok {
					<-ctx.Done()
					return
				}
				ev = e
			}
		}
		if _, gap := ev.(*provider.Gap); gap {
			r.reconcile(ctx, l, "gap")
			continue
		}
		cmd := r.observation(l, ev)
		// The events already waiting join this one's record (a market
		// order's acceptance, fill and account update come together): one
		// commit, not one each. Orders are recorded before account updates
		// in one observation, so an order's report joins only a record
		// that holds no account update yet.
		closed := false
	gather:
		for n := 1; n < maxGathered && cmd != nil; n++ {
			select {
			case e, ok := <-evs:
				if !ok {
					closed = true
					break gather
				}
				if !gathers(cmd, e) {
					carry = e
					break gather
				}
				join(cmd, r.observation(l, e))
			default:
				break gather
			}
		}
		if !closed && carry == nil && cmd != nil {
			carry, closed = r.hold(ctx, l, cmd, evs)
		}
		if cmd != nil {
			_ = r.exec(l.accountID, cmd)
		}
		if closed {
			<-ctx.Done()
			return
		}
	}
}

// maxGathered bounds the stream events recorded in one commit.
const maxGathered = 64

// join adds the observation next to cmd.
func join(cmd, next *providercmd.Observe) {
	cmd.Orders = append(cmd.Orders, next.Orders...)
	cmd.Balances = append(cmd.Balances, next.Balances...)
	cmd.Positions = append(cmd.Positions, next.Positions...)
}

// holdAtMost bounds how long a stream record waits for the rest of an
// order's news while the provider's answer to its request is out (hold).
const holdAtMost = 5 * time.Millisecond

// hold keeps the record cmd back while it reports an order whose request
// to the provider is out and has not ended yet (a market order's
// acceptance): the order's next reports (its fill) and the account's
// update come a moment later and join it, until the order ends, the
// provider's answer is recorded, an event cannot join, or holdAtMost
// passes. The order's answer then waits for one record of the stream, not
// one a report (and the account's frames show it once). It answers an
// event read that could not join (recorded next) and whether the stream
// closed.
func (r *Reactor) hold(ctx context.Context, l *link, cmd *providercmd.Observe, evs <-chan provider.Event) (provider.Event, bool) {
	answered := r.inFlight(l, cmd)
	if answered == nil {
		return nil, false
	}
	t := time.NewTimer(holdAtMost)
	defer t.Stop()
	for n := len(cmd.Orders) + len(cmd.Balances); n < maxGathered; n++ {
		select {
		case e, ok := <-evs:
			if !ok {
				return nil, true
			}
			if !gathers(cmd, e) {
				return e, false
			}
			join(cmd, r.observation(l, e))
			if answered = r.inFlight(l, cmd); answered == nil {
				return nil, false
			}
		case <-answered:
			return nil, false
		case <-t.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
	return nil, false
}

// inFlight is the answer channel of a request out to the provider (a
// place) for an order cmd reports, whose last report there has not ended
// it; nil when there is none.
func (r *Reactor) inFlight(l *link, cmd *providercmd.Observe) <-chan struct{} {
	if len(cmd.Orders) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(l.sending) == 0 {
		return nil
	}
	for i, o := range cmd.Orders {
		if o.Final() || slices.ContainsFunc(cmd.Orders[i+1:], func(later providercmd.Order) bool {
			return later.ProviderClientOrderID == o.ProviderClientOrderID
		}) {
			continue // ended, or a later report of it stands
		}
		for _, op := range [...]string{evacct.IntentPlace, account.IntentExit} {
			if ch, ok := l.sending[providercmd.IntentKey(op, o.ProviderClientOrderID)]; ok {
				return ch
			}
		}
	}
	return nil
}

// gathers reports whether e can join the record cmd: an order's report
// joins one with no account update, an account update one with no
// settings; settings and gaps stand alone.
func gathers(cmd *providercmd.Observe, e provider.Event) bool {
	if cmd.Settings != nil {
		return false
	}
	switch e.(type) {
	case *provider.OrderUpdate:
		return len(cmd.Balances) == 0 && len(cmd.Positions) == 0
	case *provider.AccountUpdate:
		return true
	}
	return false
}

// observation is the record of one stream event; nil for none.
func (r *Reactor) observation(l *link, ev provider.Event) *providercmd.Observe {
	var cmd *providercmd.Observe
	switch e := ev.(type) {
	case *provider.OrderUpdate:
		o := fromState(e.Order)
		if x := e.Execution; x != nil {
			price, fee, pnl := x.Price, x.Fee, x.RealizedPnL
			o.LastPrice, o.LastFee, o.LastPnL, o.LastTradeID, o.LastAt = &price, &fee, &pnl, x.ID, x.At
		}
		cmd = &providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{o}}
	case *provider.AccountUpdate:
		cmd = &providercmd.Observe{Cause: "stream", Balances: balances(e.Balances), Positions: positions(e.Positions)}
	case *provider.ConfigUpdate:
		st := l.settings
		if e.HedgeMode != nil {
			st.HedgeMode = *e.HedgeMode
		}
		if e.MultiAssets != nil {
			st.MultiAssets = *e.MultiAssets
		}
		cmd = &providercmd.Observe{Cause: "stream", Settings: &st}
	}
	return cmd
}

// reconcile reads the provider's complete account, looks up every order
// the log knows that the snapshot's working orders do not hold (an order
// that ended in a stream cut: its fill or its end), and records it all as
// one complete observation; the account decides what it cannot explain.
func (r *Reactor) reconcile(ctx context.Context, l *link, cause string) {
	for {
		ok, err := r.reconcileOnce(ctx, l, cause)
		if ok {
			r.retryExitsNow(l, cause)
			return
		}
		if r.loginRefused(l, err) {
			return
		}
		if err != nil {
			slog.Warn("providers: reconciling the account failed; trying again", "account", l.accountID, "err", err)
		}
		if !sleep(ctx, 4*r.cfg.Retry) {
			return
		}
	}
}

func (r *Reactor) reconcileOnce(ctx context.Context, l *link, cause string) (bool, error) {
	l.gate.Lock()
	defer l.gate.Unlock()
	if !r.cfg.Owns(l.accountID) {
		return true, nil // deposed: the new owner reconciles
	}
	// The gate keeps this node's own outcomes apart from the reading, not
	// another node's commits: one that reaches this node while the reading
	// is under way (a node that still believes it owns the account after a
	// cut healed) may record a fill the reading predates, and the reading
	// would then contradict the log for nothing (a reconciliation_hold).
	r.mu.Lock()
	seen := l.observed
	r.mu.Unlock()
	snap, err := l.sess.Snapshot(ctx)
	if err != nil {
		return false, err
	}
	c := SnapshotObservation(snap, cause)
	working := map[string]bool{}
	for _, o := range snap.Orders {
		working[o.ClientOrderID] = true
	}
	r.mu.Lock()
	known := append([]ref(nil), l.known...)
	r.mu.Unlock()
	for _, k := range known {
		if working[k.clientOrderID] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := l.sess.Lookup(cctx, k.instrument, k.clientOrderID)
		cancel()
		switch {
		case err == nil:
			working[k.clientOrderID] = true
			c.Orders = append(c.Orders, fromState(st))
		case errors.Is(err, provider.ErrNotFound):
			// Not at the provider: an open intent never placed settles by its
			// own lookup; a working order is the account's to judge.
		default:
			return false, err // never a partial reading
		}
	}
	r.mu.Lock()
	overtaken := l.observed != seen
	r.mu.Unlock()
	if overtaken {
		return false, errOvertaken
	}
	return r.exec(l.accountID, &c) == nil, nil
}

// errOvertaken: a commit another node made reached this node during a
// reconciliation's reading; it reads again.
var errOvertaken = errors.New("providers: another node's commit overtook the reading; reading again")

// SnapshotObservation is the observation of a complete snapshot.
func SnapshotObservation(snap provider.Snapshot, cause string) providercmd.Observe {
	st := evacct.ProviderSettings{HedgeMode: snap.Settings.HedgeMode, MultiAssets: snap.Settings.MultiAssets,
		PortfolioMargin: snap.Settings.PortfolioMargin}
	c := providercmd.Observe{Cause: cause, Complete: true, Settings: &st, Balances: balances(snap.Balances), Positions: positions(snap.Positions)}
	for _, o := range snap.Orders {
		c.Orders = append(c.Orders, fromState(o))
	}
	return c
}

// settle sends the intent (send) or looks it up, and commits its outcome.
func (r *Reactor) settle(l *link, in evacct.OrderIntended, send bool) {
	ctx := r.ctx
	key := providercmd.IntentKey(in.Op, in.ProviderClientOrderID)
	defer func() {
		r.mu.Lock()
		delete(l.busy, key)
		r.mu.Unlock()
	}()
	if send {
		// The session is waited for only until the intent's moment to be
		// sent: with none by then (the provider unreachable at a start) it
		// is settled as not sent at once, a definite answer for the
		// trader, rather than sent whenever the session comes.
		sctx, cancel := context.WithTimeout(ctx, in.At.Add(r.cfg.SendWithin).Sub(r.cfg.Now())) // by the reactor's clock, as the check
		sess, ok := l.session(sctx)
		cancel()
		var sent, done bool
		if ok {
			sent, done = r.sendOnce(ctx, l, sess, in, key)
		} else if ctx.Err() == nil {
			sent, done = r.late(l, key)
		}
		if !sent || done {
			return // deposed before sending (the new owner settles it by lookup), ended, or settled
		}
		// Unknown (or a cancel refused or not found): what happened is read, never sent again.
	}
	sess, ok := l.session(ctx)
	if !ok {
		return
	}
	for {
		if !r.cfg.Owns(l.accountID) {
			return
		}
		if r.lookupOnce(ctx, l, sess, in, key) {
			return
		}
		if !sleep(ctx, r.cfg.Retry) {
			return
		}
	}
}

// late settles the intent key as not sent, its moment to be sent having
// passed with no session, while this node owns the account (sent false:
// it does not); done reports the outcome committed (else the caller looks
// the intent up, which finds nothing, and settles it never placed).
func (r *Reactor) late(l *link, key string) (sent, done bool) {
	l.gate.RLock()
	defer l.gate.RUnlock()
	if !r.cfg.Owns(l.accountID) {
		return false, false
	}
	return true, r.settleNotSent(l, key)
}

// settleNotSent commits the intent key settled as not sent, its moment to be
// sent passed; false when the commit failed.
func (r *Reactor) settleNotSent(l *link, key string) bool {
	return r.exec(l.accountID, &providercmd.Settle{Key: key, Outcome: evacct.OutcomeNotSent, Reason: evacct.ReasonUnavailable}) == nil
}

// sendOnce sends the intent while this node owns the account (sent
// false: it does not, nothing went out) and commits the outcome when the
// answer settles it (done).
func (r *Reactor) sendOnce(ctx context.Context, l *link, sess provider.Session, in evacct.OrderIntended, key string) (sent, done bool) {
	l.gate.RLock()
	defer l.gate.RUnlock()
	if !r.cfg.Owns(l.accountID) {
		return false, false
	}
	sendBy := in.At.Add(r.cfg.SendWithin)
	if r.cfg.Now().After(sendBy) { // its moment passed (the process held): never sent late
		return true, r.settleNotSent(l, key)
	}
	answered := make(chan struct{})
	r.mu.Lock()
	l.sent[key], l.sending[key] = true, answered
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(l.answered, key)
		if l.sending[key] == answered { // not closed yet by the outcome's commit (track)
			delete(l.sending, key)
			close(answered)
		}
		r.mu.Unlock()
	}()
	cctx, cancel := context.WithTimeout(provider.WithSendBy(ctx, sendBy), sendTimeout)
	var st provider.OrderState
	var err error
	switch in.Op {
	case evacct.IntentPlace, account.IntentExit:
		st, err = sess.Place(cctx, toOrder(in))
	case evacct.IntentReplace:
		st, err = sess.Replace(cctx, toReplace(in))
	default:
		st, err = sess.Cancel(cctx, in.Order.Instrument, in.ProviderClientOrderID)
	}
	cancel()
	r.mu.Lock()
	l.answered[key] = in.ProviderClientOrderID
	r.mu.Unlock()
	var rej *provider.Rejected
	switch {
	case err == nil:
		o := fromState(st)
		return true, r.exec(l.accountID, &providercmd.Settle{Key: key, Outcome: evacct.OutcomeAccepted, Order: &o}) == nil
	case errors.As(err, &rej) && in.Op != evacct.IntentCancel: // a cancel refused is read: the order may have ended
		return true, r.exec(l.accountID, &providercmd.Settle{Key: key, Outcome: evacct.OutcomeRejected, Code: rej.Code}) == nil
	case notSent(err) != "":
		r.mu.Lock()
		delete(l.sent, key) // nothing went out: a later try may send it
		r.mu.Unlock()
		r.loginRefused(l, err)
		return true, r.exec(l.accountID, &providercmd.Settle{Key: key, Outcome: evacct.OutcomeNotSent, Reason: notSent(err), RetryAfter: retryAfter(err, r.cfg.Now())}) == nil
	}
	return true, false // unknown: looked up from here, never sent again
}

// lookupOnce reads the intent's order once and commits what settles it;
// false when nothing settled yet.
func (r *Reactor) lookupOnce(ctx context.Context, l *link, sess provider.Session, in evacct.OrderIntended, key string) bool {
	l.gate.RLock()
	defer l.gate.RUnlock()
	{
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := sess.Lookup(cctx, in.Order.Instrument, in.ProviderClientOrderID)
		cancel()
		r.loginRefused(l, err)
		switch {
		case err == nil:
			undone := (in.Op == evacct.IntentCancel && !st.Status.Final()) || (in.Op == evacct.IntentReplace && !replaced(in, st))
			if undone && r.cfg.Now().Sub(in.At) < r.neverPlacedAfter(l) {
				break // the cancel or replace may still be carried out: look again
			}
			o := fromState(st)
			outcome := evacct.OutcomeAccepted
			if undone {
				outcome = evacct.OutcomeNeverPlaced
			}
			_ = r.exec(l.accountID, &providercmd.Settle{Key: key, Outcome: outcome, Order: &o})
			return true
		case errors.Is(err, provider.ErrNotFound) && r.cfg.Now().Sub(in.At) > r.neverPlacedAfter(l):
			_ = r.exec(l.accountID, &providercmd.Settle{Key: key, Outcome: evacct.OutcomeNeverPlaced})
			return true
		}
	}
	return false
}

// notSent names why a request was not sent (nothing happened), or "".
func notSent(err error) string {
	switch {
	case errors.Is(err, provider.ErrRateLimited), errors.Is(err, provider.ErrBanned):
		return evacct.ReasonThrottled
	case errors.Is(err, provider.ErrUnknown):
		return ""
	case errors.Is(err, provider.ErrUnavailable):
		return evacct.ReasonUnavailable
	case errors.Is(err, provider.ErrUnauthorized), errors.Is(err, provider.ErrUnsupported), errors.Is(err, provider.ErrModeUnsupported):
		return evacct.ReasonRefused
	}
	return ""
}

// retryAfter is how many whole seconds, at least one and at most
// providercmd.MaxRetryAfter, a throttled request's limit holds from now
// (the provider's Retry-After, or the end of its ban); 0 for other errors.
func retryAfter(err error, now time.Time) int {
	var rl *provider.RateLimited
	var bn *provider.Banned
	var d time.Duration
	switch {
	case errors.As(err, &rl):
		d = rl.RetryAfter
	case errors.As(err, &bn):
		d = bn.Until.Sub(now)
	default:
		return 0
	}
	return min(max(1, int((d+time.Second-1)/time.Second)), providercmd.MaxRetryAfter)
}

func toOrder(in evacct.OrderIntended) provider.Order {
	o := in.Order
	po := provider.Order{ClientOrderID: in.ProviderClientOrderID, Instrument: o.Instrument, Side: provider.Side(o.Side),
		Type: provider.OrderType(o.OrderType), Quantity: o.Quantity, LimitPrice: o.LimitPrice, StopPrice: o.StopPrice, ReduceOnly: o.ReduceOnly}
	if in.Op == account.IntentExit {
		return exitOrder(po)
	}
	if po.Type == provider.Limit || po.Type == provider.StopLimit {
		po.TIF = provider.TIF(o.TimeInForce)
	}
	return po
}

// exitOrder is a bracket leg as the provider takes it: its own reduce-only
// trigger order, fired by the mark price (a wick of the last trade alone
// never closes the position). A stop leg is a stop-market order at its
// level; a target, which the book shows as a reduce-only limit at its
// level, is a take-profit trigger there: it rests off the order book and
// closes at market once the mark reaches it.
func exitOrder(po provider.Order) provider.Order {
	if po.Type == provider.Limit {
		po.Type, po.StopPrice, po.LimitPrice = provider.TakeProfit, po.LimitPrice, nil
	}
	po.ReduceOnly, po.MarkTrigger, po.TIF = true, true, ""
	return po
}

// toReplace is the provider's change of a replace intent's order: its
// quantity and limit price as they are to be.
func toReplace(in evacct.OrderIntended) provider.Replace {
	r := provider.Replace{Instrument: in.Order.Instrument, ClientOrderID: in.ProviderClientOrderID, Side: provider.Side(in.Order.Side),
		Quantity: in.Order.Quantity}
	if in.Order.LimitPrice != nil {
		r.LimitPrice = *in.Order.LimitPrice
	}
	return r
}

// replaced reports whether the provider's order shows the replace intent
// carried out (its quantity and limit price as intended), or ended.
func replaced(in evacct.OrderIntended, st provider.OrderState) bool {
	if st.Status.Final() {
		return true
	}
	if st.Quantity.Cmp(in.Order.Quantity) != 0 {
		return false
	}
	return in.Order.LimitPrice == nil || (st.LimitPrice != nil && st.LimitPrice.Cmp(*in.Order.LimitPrice) == 0)
}

func fromState(st provider.OrderState) providercmd.Order {
	return providercmd.Order{ProviderClientOrderID: st.ClientOrderID, ProviderOrderID: st.ProviderOrderID, Instrument: st.Instrument,
		Side: string(st.Side), OrderType: string(st.Type), TimeInForce: string(st.TIF), Status: string(st.Status), Quantity: st.Quantity,
		Filled: st.FilledQuantity, AvgPrice: st.AveragePrice, LimitPrice: st.LimitPrice, StopPrice: st.StopPrice, ReduceOnly: st.ReduceOnly,
		At: st.UpdatedAt, Multiplier: st.ValuePerPoint}
}

func balances(bs []provider.Balance) []evacct.BalanceObserved {
	var out []evacct.BalanceObserved
	for _, b := range bs {
		out = append(out, evacct.BalanceObserved{Asset: b.Asset, Wallet: b.Wallet, Available: b.Available, AsOf: b.AsOf})
	}
	return out
}

func positions(ps []provider.Position) []evacct.Position {
	var out []evacct.Position
	for _, p := range ps {
		m := events.Int(1)
		if p.ValuePerPoint.Sign() > 0 { // the provider's own contract spec (a futures contract's)
			m = p.ValuePerPoint
		}
		out = append(out, evacct.Position{Instrument: p.Instrument, Quantity: p.Quantity, AvgPrice: p.EntryPrice, Multiplier: m})
	}
	return out
}

package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/egress"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evch "github.com/svc/engine/events/challenge"
	evfirm "github.com/svc/engine/events/firm"
)

// Attempts is how many times a delivery is tried before it is given up: the
// spec's "6 attempts over about 9 hours".
const Attempts = 6

// DefaultBackoff is the wait after each failed attempt but the last, 5 waits
// for 6 attempts: 1m, 5m, 30m, 2h, 6h24m, so the last attempt is made 9 hours
// after the first.
var DefaultBackoff = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 6*time.Hour + 24*time.Minute}

// Config shapes the reactor.
type Config struct {
	Log      *eventlog.Log
	Registry events.Registry
	Key      []byte // derives each endpoint's signing secret
	// Client makes the deliveries; it is guarded by egress.Guard (every dial
	// checked unless AllowPrivate, no redirect followed). nil: system roots.
	Client *http.Client
	// AllowPrivate lets deliveries and CheckURL reach private, loopback and
	// link-local addresses: local development and tests only.
	AllowPrivate bool
	// Resolver resolves names for CheckURL; nil: net.DefaultResolver.
	Resolver egress.Resolver
	Timeout  time.Duration
	Backoff  []time.Duration // the Attempts-1 waits after a failed attempt; nil: DefaultBackoff
	// InFlight bounds the attempts in flight per endpoint.
	InFlight int
	// MarkEvery is how often the replay mark is saved when it advanced
	// (mark.go); 0: DefaultMarkEvery.
	MarkEvery time.Duration
	// Tail, when set, hands the reactor the commits another reader of the
	// log in this process reads anyway (the projector's, cmd/engine/app): it
	// calls fn for each, in stream order, from the reader's goroutine, until
	// stop; fn never blocks. The reactor then reads the log itself only for
	// the commits the tail does not give it (tail.go). nil: it follows the
	// log itself.
	Tail func(fn func(events.Committed)) (stop func())
	// TailLag is how long a reactor with a Tail waits for the tail to move
	// it on while the log holds more, before it reads them itself; 0:
	// DefaultTailLag.
	TailLag  time.Duration
	Now      func() time.Time
	Observer mailbox.Observer
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Log == nil {
		errs = append(errs, errors.New("webhook: Log is required"))
	}
	if c.Registry == nil {
		errs = append(errs, errors.New("webhook: Registry is required"))
	}
	if len(c.Key) < 16 {
		errs = append(errs, errors.New("webhook: Key of 16 bytes or more is required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("webhook: Now is required"))
	}
	if c.Backoff != nil && len(c.Backoff) != Attempts-1 {
		errs = append(errs, fmt.Errorf("webhook: Backoff has %d waits, want %d (for %d attempts)", len(c.Backoff), Attempts-1, Attempts))
	}
	for _, d := range c.Backoff {
		if d <= 0 {
			errs = append(errs, errors.New("webhook: every Backoff wait must be positive"))
			break
		}
	}
	return errors.Join(errs...)
}

// Outcome is the result of one attempt.
type Outcome struct {
	Status       string  `json:"status"` // succeeded or failed
	ResponseCode *int    `json:"responseCode"`
	Error        *string `json:"error"`
}

// Reactor delivers webhook events. Its router goroutine follows the log and
// queues deliveries on each endpoint's own worker, so a slow or failing
// endpoint never delays another's deliveries. A start reads the log from
// the replay mark on (mark.go).
type Reactor struct {
	cfg      Config
	client   *http.Client
	ledger   *mailbox.Group[*ledger]
	accounts map[string]acctInfo             // router goroutine only; tenant "": never opened
	pos      atomic.Uint64                   // the last commit the router is done with
	marks    jetstream.KeyValue              // the mark's bucket; nil: no mark is read or saved
	saved    uint64                          // the mark last saved or read: keepMark, then Close
	reads    atomic.Int64                    // commits read by Start
	mu       sync.Mutex                      // guards endpoints
	eps      map[string]map[string]*endpoint // tenant -> id -> endpoint
	ctx      context.Context                 // ends at Close: no new attempts
	stop     context.CancelFunc
	sendCtx  context.Context // ends after the close grace: in-flight attempts give up
	sendStop context.CancelFunc
	started  bool           // replay done; guarded by mu
	loops    sync.WaitGroup // router and endpoint loops
	rmu      sync.Mutex
	records  map[string]*recorder // by ledger key
	flight   sync.WaitGroup       // attempts in flight
	tail     *tailQueue           // commits heard from Config.Tail; nil without one
	untail   func()               // stops the tail; guarded by mu
	bridged  atomic.Int64         // commits the router read from the log after Start, with a tail
}

// ledger is an endpoint's delivery ledger: the highest attempt number each
// delivery has taken (started or recorded), and the claim that started it.
type ledger struct {
	taken  map[string]int
	claims map[string]string // delivery -> the Claim of its highest started attempt
}

// ErrAttemptTaken refuses a start of an attempt the ledger holds already.
// It never reaches a client: the reactor drops the delivery, which another
// node sends.
var ErrAttemptTaken = errors.New("webhook: this attempt of the delivery was taken already")

func decideLedger(l *ledger, env commands.Envelope) ([]events.Event, error) {
	switch c := env.Cmd.(type) {
	case *firmcmd.StartAttempt:
		id := c.Start.DeliveryID
		if l.taken[id] >= c.Start.Attempt {
			if c.Start.Claim != "" && l.taken[id] == c.Start.Attempt && l.claims[id] == c.Start.Claim {
				return nil, nil // this claim's own try, stored before its answer was lost: it holds the attempt
			}
			return nil, ErrAttemptTaken
		}
		return []events.Event{c.Start}, nil
	case *firmcmd.RecordAttempts:
		out := make([]events.Event, 0, len(c.Attempts))
		for _, a := range c.Attempts {
			out = append(out, a)
		}
		return out, nil
	}
	return nil, fmt.Errorf("webhook: no decision for %T", env.Cmd)
}

func applyLedger(l *ledger, e events.Event) *ledger {
	switch e := e.(type) {
	case evfirm.DeliveryStarted:
		if e.Attempt > l.taken[e.DeliveryID] {
			l.taken[e.DeliveryID] = e.Attempt
			if e.Claim != "" {
				l.claims[e.DeliveryID] = e.Claim
			} else {
				delete(l.claims, e.DeliveryID)
			}
		}
	case evfirm.DeliveryAttempted:
		if e.Attempt >= l.taken[e.DeliveryID] {
			l.taken[e.DeliveryID] = e.Attempt
			delete(l.claims, e.DeliveryID) // made: no claim of it goes on
		}
	}
	return l
}

type delivery struct {
	ev       Event
	seq      uint64 // of the commit it is derived from
	body     []byte
	attempts int
	nextAt   time.Time
	// claim names this node's claim of attempt attempts+1, kept from its
	// first try to the next: a try answered with an error may have been
	// stored, and the one after it must be known as the same claim.
	claim string
}

type endpoint struct {
	tenant, id, url string
	types           map[string]bool
	mu              sync.Mutex
	ready           []*delivery
	retry           []*delivery // by nextAt
	inflight        int
	held            map[*delivery]struct{} // taken off the queues by an attempt, not yet final nor queued again
	pinned          uint64                 // the oldest source sequence of a delivery another node took (0: none)
	wake            chan struct{}
	gone            chan struct{}
	goneOnce        sync.Once
}

func (ep *endpoint) admits(typ string) bool { return len(ep.types) == 0 || ep.types[typ] }

func (ep *endpoint) signal() {
	select {
	case ep.wake <- struct{}{}:
	default:
	}
}

func (ep *endpoint) push(d *delivery) {
	ep.queue(d)
	ep.signal()
}

func (ep *endpoint) queue(d *delivery) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.queueLocked(d)
}

// settle ends an attempt's hold on d: queued again when again, else final.
func (ep *endpoint) settle(d *delivery, again bool) {
	ep.mu.Lock()
	delete(ep.held, d)
	if again {
		ep.queueLocked(d)
	}
	ep.mu.Unlock()
	ep.signal()
}

// lose ends an attempt's hold on d, which another node took: its source
// sequence pins the mark, this node never knowing when that node is done.
func (ep *endpoint) lose(d *delivery) {
	ep.mu.Lock()
	delete(ep.held, d)
	if ep.pinned == 0 || d.seq < ep.pinned {
		ep.pinned = d.seq
	}
	ep.mu.Unlock()
	ep.signal()
}

// queueLocked queues d; ep.mu held.
func (ep *endpoint) queueLocked(d *delivery) {
	if d.attempts == 0 {
		ep.ready = append(ep.ready, d)
	} else {
		ep.retry = append(ep.retry, d)
		sort.SliceStable(ep.retry, func(i, j int) bool { return ep.retry[i].nextAt.Before(ep.retry[j].nextAt) })
	}
}

// New makes a reactor; Start replays the log and starts delivering.
func New(cfg Config) (*Reactor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 4
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.MarkEvery <= 0 {
		cfg.MarkEvery = DefaultMarkEvery
	}
	if cfg.TailLag <= 0 {
		cfg.TailLag = DefaultTailLag
	}
	client, err := egress.Guard(cfg.Client, egress.Options{AllowPrivate: cfg.AllowPrivate, Timeout: cfg.Timeout, MaxIdleConnsPerHost: 16})
	if err != nil {
		return nil, fmt.Errorf("webhook: client: %w", err)
	}
	r := &Reactor{cfg: cfg, client: client, accounts: map[string]acctInfo{}, eps: map[string]map[string]*endpoint{}, records: map[string]*recorder{}}
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.sendCtx, r.sendStop = context.WithCancel(context.Background())
	r.ledger = mailbox.NewGroup(mailbox.Kind[*ledger]{
		Name:    "webhook",
		Subject: evfirm.DeliverySubject,
		New:     func(string) *ledger { return &ledger{taken: map[string]int{}, claims: map[string]string{}} },
		Decide:  decideLedger,
		Apply:   applyLedger,
	}, cfg.Log, cfg.Registry, cfg.Observer)
	return r, nil
}

// CheckURL is the registration check of an endpoint URL: https only, a host,
// no userinfo and, unless AllowPrivate, a host that neither is nor resolves
// to an address that is not public. A refusal is an *egress.Error naming the
// rule. The dial check at each delivery is the guard; this one answers early.
func (r *Reactor) CheckURL(ctx context.Context, raw string) error {
	return egress.CheckURL(ctx, raw, egress.Policy{AllowPrivate: r.cfg.AllowPrivate, Resolver: r.cfg.Resolver})
}

type pendingKey struct{ event, webhook string }

// Start rebuilds the endpoints and the schedule and then follows the log.
// With a replay mark M (mark.go) it reads the firm subjects up to M-1 for
// the endpoints alone, then the log from M on; without one, the whole log.
// Of what it reads from M on, deliveries without a final attempt are due now
// or at their recorded next attempt. With a Tail, the tail is heard from
// before that read, and followed after it (tail.go).
func (r *Reactor) Start(ctx context.Context) (err error) {
	begun := time.Now()
	if r.cfg.Tail != nil {
		r.listen()
		defer func() {
			if err != nil {
				r.unlisten()
			}
		}()
	}
	if r.marks, err = r.openMarks(ctx); err != nil {
		slog.Warn("webhook: the replay mark is neither read nor saved; every start reads the whole log", "err", err)
	}
	mark, err := r.loadMark(ctx)
	if err != nil {
		return fmt.Errorf("webhook: replay mark: %w", err)
	}
	r.saved = mark
	if mark > 1 {
		err := r.cfg.Log.ReplaySubjects(ctx, []string{events.Subject(events.KindFirm, ">")}, mark-1, func(m eventlog.Msg) error {
			r.reads.Add(1)
			return r.contain(m.Subject, m.Seq, func() error {
				c, err := r.decode(m)
				if err != nil {
					return err
				}
				r.endpoints(c)
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("webhook: replay of the endpoints: %w", err)
		}
	}
	from := max(mark, 1) - 1
	pending := map[pendingKey]*delivery{}
	var order []pendingKey
	last, err := r.cfg.Log.Replay(ctx, from, func(m eventlog.Msg) error {
		r.reads.Add(1)
		return r.contain(m.Subject, m.Seq, func() error {
			want, err := r.wants(ctx, m.Subject, opens(m))
			if err != nil || !want {
				return err
			}
			c, err := r.decode(m)
			if err != nil {
				return err
			}
			if events.IsKind(c.Subject, events.KindWebhook) {
				for _, e := range c.Events {
					if st, ok := e.(evfirm.DeliveryStarted); ok {
						// An attempt started counts as made, whether or not
						// its outcome was recorded (its node may have died
						// sending it): the next one follows the schedule.
						k := pendingKey{st.DeliveryID, st.WebhookID}
						if d, ok := pending[k]; ok && st.Attempt > d.attempts {
							d.attempts = st.Attempt
							if st.Attempt > len(r.cfg.Backoff) {
								delete(pending, k)
							} else {
								d.nextAt = st.At.Add(r.cfg.Backoff[st.Attempt-1])
							}
						}
						continue
					}
					a, ok := e.(evfirm.DeliveryAttempted)
					if !ok {
						continue
					}
					k := pendingKey{a.DeliveryID, a.WebhookID}
					if d, ok := pending[k]; ok {
						d.attempts = a.Attempt
						if a.NextAt == nil {
							delete(pending, k)
						} else {
							d.nextAt = *a.NextAt
						}
					}
				}
				return nil
			}
			r.route(c, func(ep *endpoint, d *delivery) {
				k := pendingKey{d.ev.ID, ep.id}
				pending[k] = d
				order = append(order, k)
			})
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("webhook: replay: %w", err)
	}
	r.pos.Store(last)
	r.mu.Lock()
	for _, k := range order {
		d, ok := pending[k]
		if !ok {
			continue
		}
		delete(pending, k)
		for _, byID := range r.eps {
			if ep, ok := byID[k.webhook]; ok {
				ep.push(d)
			}
		}
	}
	for _, byID := range r.eps {
		for _, ep := range byID {
			r.startLoop(ep)
		}
	}
	r.started = true
	r.mu.Unlock()
	slog.Info("webhook: started", "mark", mark, "last", last, "read", r.reads.Load(), "took", time.Since(begun).Round(time.Millisecond).String())
	r.loops.Add(1)
	if r.tail != nil {
		go r.followTail(last)
	} else {
		go r.follow(last)
	}
	if r.marks != nil {
		r.loops.Add(1)
		go r.keepMark()
	}
	return nil
}

// wants reports whether a commit can matter to webhooks: firm, venue and
// delivery-ledger commits always; an account's only while its firm has an
// endpoint. An account not known yet is learnt first (learn), unless the
// commit opens it (opening: its subject's first). Other subjects are never
// decoded. Router goroutine only.
func (r *Reactor) wants(ctx context.Context, subject string, opening bool) (bool, error) {
	switch {
	case events.IsKind(subject, events.KindFirm), events.IsKind(subject, events.KindWebhook),
		events.IsKind(subject, evch.KindEnrollment), // an enrollment's lifecycle (challenge.go)
		events.IsKind(subject, events.KindVenue):    // a venue's holds on live trading (livehold.go)
		return true, nil
	case events.IsKind(subject, events.KindAccount):
		id := events.ID(subject, events.KindAccount)
		a, known := r.accounts[id]
		if !known {
			if opening {
				return true, nil
			}
			var err error
			if a, err = r.learn(ctx, subject, id); err != nil {
				return false, err
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.eps[a.tenant]) > 0, nil
	}
	return false, nil
}

// learn reads an account's firm and number from the first commit of its
// subject, which opens it, and keeps them: the account was opened before
// the replay mark, or before a commit the router skipped. An account whose
// first commit opens none is kept as never opened. Router goroutine only.
func (r *Reactor) learn(ctx context.Context, subject, id string) (acctInfo, error) {
	m, ok, err := r.cfg.Log.First(ctx, subject)
	if err != nil {
		return acctInfo{}, fmt.Errorf("webhook: the opening of account %s: %w", id, err)
	}
	var a acctInfo
	if ok {
		c, err := r.decode(m)
		if err != nil {
			return acctInfo{}, err
		}
		for _, e := range c.Events {
			if o, ok := e.(evacct.Opened); ok {
				a = acctInfo{tenant: o.TenantID, number: o.AccountNumber}
			}
		}
	}
	r.accounts[id] = a
	return a, nil
}

func (r *Reactor) decode(m eventlog.Msg) (events.Committed, error) {
	c, err := r.cfg.Registry.Decode(m.Data)
	if err != nil {
		return events.Committed{}, fmt.Errorf("webhook: %s at %d: %w", m.Subject, m.Seq, err)
	}
	return events.Committed{Subject: m.Subject, Seq: m.Seq, Commit: c}, nil
}

// follow feeds live commits to the router until Close, resuming after a
// failure: the reactor without a Tail.
func (r *Reactor) follow(from uint64) {
	defer r.loops.Done()
	for r.ctx.Err() == nil {
		err := r.cfg.Log.Follow(r.ctx, from, func(m eventlog.Msg) error {
			if err := r.step(m); err != nil {
				return err
			}
			from = m.Seq
			r.pos.Store(m.Seq)
			return nil
		})
		if r.ctx.Err() != nil {
			return
		}
		slog.Warn("webhook: following the log", "err", err, "from", from)
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// step is the router's work on one commit read from the log after Start's
// replay: the deliveries it yields are queued on their endpoints.
func (r *Reactor) step(m eventlog.Msg) error {
	if events.IsKind(m.Subject, events.KindWebhook) {
		return nil
	}
	return r.contain(m.Subject, m.Seq, func() error {
		want, err := r.wants(r.ctx, m.Subject, opens(m))
		if err != nil || !want {
			return err
		}
		c, err := r.decode(m)
		if err != nil {
			return err
		}
		r.route(c, func(ep *endpoint, d *delivery) { ep.push(d) })
		return nil
	})
}

// stepCommitted is step for a commit the tail gave, decoded already.
func (r *Reactor) stepCommitted(c events.Committed) error {
	if events.IsKind(c.Subject, events.KindWebhook) {
		return nil
	}
	return r.contain(c.Subject, c.Seq, func() error {
		want, err := r.wants(r.ctx, c.Subject, holdsOpened(c))
		if err != nil || !want {
			return err
		}
		r.route(c, func(ep *endpoint, d *delivery) { ep.push(d) })
		return nil
	})
}

// opens reports whether m is its subject's first commit, as far as it says.
func opens(m eventlog.Msg) bool { return m.HasPrev && m.Prev == 0 }

// holdsOpened reports whether c opens an account (its subject's first
// commit does, and only it).
func holdsOpened(c events.Committed) bool {
	for _, e := range c.Events {
		if _, ok := e.(evacct.Opened); ok {
			return true
		}
	}
	return false
}

// route applies one commit: endpoint changes, and the deliveries it yields.
func (r *Reactor) route(c events.Committed, queue func(*endpoint, *delivery)) {
	r.endpoints(c)
	hooks := derive(c, r.accounts)
	if len(hooks) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range hooks {
		body := encode(h.ev)
		for _, ep := range r.eps[h.tenant] {
			if ep.admits(h.ev.Type) {
				queue(ep, &delivery{ev: h.ev, seq: c.Seq, body: body})
			}
		}
	}
}

// endpoints applies a commit's endpoint changes.
func (r *Reactor) endpoints(c events.Committed) {
	if tenant, ok := events.SubjectID(c.Subject, events.KindFirm); ok {
		for _, e := range c.Events {
			switch e := e.(type) {
			case evfirm.WebhookRegistered:
				ep := &endpoint{tenant: tenant, id: e.WebhookID, url: e.URL, types: map[string]bool{},
					held: map[*delivery]struct{}{}, wake: make(chan struct{}, 1), gone: make(chan struct{})}
				for _, t := range e.EventTypes {
					ep.types[t] = true
				}
				r.add(ep)
			case evfirm.WebhookRemoved:
				r.remove(tenant, e.WebhookID)
			}
		}
	}
}

func (r *Reactor) add(ep *endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.eps[ep.tenant] == nil {
		r.eps[ep.tenant] = map[string]*endpoint{}
	}
	r.eps[ep.tenant][ep.id] = ep
	if r.live() {
		r.startLoop(ep)
	}
}

func (r *Reactor) remove(tenant, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ep, ok := r.eps[tenant][id]; ok {
		ep.goneOnce.Do(func() { close(ep.gone) })
		delete(r.eps[tenant], id)
	}
}

// contain runs f, the router's work on one commit, with a panic contained to
// that commit: the panic is logged and the commit's deliveries are skipped,
// rather than the process ending (the log client calls the router in its
// own goroutine).
func (r *Reactor) contain(subject string, seq uint64, f func() error) error {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("webhook: routing a commit panicked; its deliveries are skipped", "subject", subject, "seq", seq,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	return f()
}

// live reports whether Start finished its replay; r.mu held.
func (r *Reactor) live() bool { return r.started }

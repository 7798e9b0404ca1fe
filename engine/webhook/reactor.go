package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	fcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
)

// DefaultBackoff is the wait before each of the 6 retries of a failed
// delivery: 9 hours 6 minutes in all.
var DefaultBackoff = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, time.Hour, 150 * time.Minute, 5 * time.Hour}

// Config shapes the reactor.
type Config struct {
	Log      *eventlog.Log
	Registry events.Registry
	Key      []byte       // derives each endpoint's signing secret
	Client   *http.Client // nil: system roots, no redirects
	Timeout  time.Duration
	Backoff  []time.Duration // waits before the retries; nil: DefaultBackoff
	// InFlight bounds the attempts in flight per endpoint.
	InFlight int
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
// endpoint never delays another's deliveries.
type Reactor struct {
	cfg      Config
	client   *http.Client
	ledger   *mailbox.Group[*ledger]
	accounts map[string]acctInfo             // router goroutine only
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
}

type ledger struct{}

type delivery struct {
	ev       Event
	body     []byte
	attempts int
	nextAt   time.Time
}

type endpoint struct {
	tenant, id, url string
	types           map[string]bool
	mu              sync.Mutex
	ready           []*delivery
	retry           []*delivery // by nextAt
	inflight        int
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
	ep.mu.Lock()
	if d.attempts == 0 {
		ep.ready = append(ep.ready, d)
	} else {
		ep.retry = append(ep.retry, d)
		sort.SliceStable(ep.retry, func(i, j int) bool { return ep.retry[i].nextAt.Before(ep.retry[j].nextAt) })
	}
	ep.mu.Unlock()
	ep.signal()
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
	client := cfg.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		client = &http.Client{Transport: tr}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	r := &Reactor{cfg: cfg, client: &c, accounts: map[string]acctInfo{}, eps: map[string]map[string]*endpoint{}, records: map[string]*recorder{}}
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.sendCtx, r.sendStop = context.WithCancel(context.Background())
	r.ledger = mailbox.NewGroup(mailbox.Kind[*ledger]{
		Name:    "webhook",
		Subject: evfirm.DeliverySubject,
		New:     func(string) *ledger { return &ledger{} },
		Decide: func(_ *ledger, env commands.Envelope) ([]events.Event, error) {
			c, ok := env.Cmd.(*fcmd.RecordAttempts)
			if !ok {
				return nil, fmt.Errorf("webhook: no decision for %T", env.Cmd)
			}
			out := make([]events.Event, 0, len(c.Attempts))
			for _, a := range c.Attempts {
				out = append(out, a)
			}
			return out, nil
		},
		Apply: func(l *ledger, _ events.Event) *ledger { return l },
	}, cfg.Log, cfg.Registry, cfg.Observer)
	return r, nil
}

type pendingKey struct{ event, webhook string }

// Start rebuilds the schedule by one replay of the log (deliveries without a
// final attempt are due now or at their recorded next attempt) and then
// follows the log.
func (r *Reactor) Start(ctx context.Context) error {
	pending := map[pendingKey]*delivery{}
	var order []pendingKey
	last, err := r.cfg.Log.Replay(ctx, 0, func(m eventlog.Msg) error {
		if !r.wants(m.Subject) {
			return nil
		}
		c, err := r.decode(m)
		if err != nil {
			return err
		}
		if strings.HasPrefix(c.Subject, "evt.webhook.") {
			for _, e := range c.Events {
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
	if err != nil {
		return fmt.Errorf("webhook: replay: %w", err)
	}
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
	r.loops.Add(1)
	go r.follow(last)
	return nil
}

// wants reports whether a commit on subject can matter to webhooks: firm and
// delivery-ledger commits always; an account's only while its firm has an
// endpoint (or before its opening was seen). Other subjects are never decoded.
// Router goroutine only.
func (r *Reactor) wants(subject string) bool {
	switch {
	case strings.HasPrefix(subject, "evt.firm."), strings.HasPrefix(subject, "evt.webhook."):
		return true
	case strings.HasPrefix(subject, "evt.account."):
		a, known := r.accounts[strings.TrimPrefix(subject, "evt.account.")]
		if !known {
			return true
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.eps[a.tenant]) > 0
	}
	return false
}

func (r *Reactor) decode(m eventlog.Msg) (events.Committed, error) {
	c, err := r.cfg.Registry.Decode(m.Data)
	if err != nil {
		return events.Committed{}, fmt.Errorf("webhook: %s at %d: %w", m.Subject, m.Seq, err)
	}
	return events.Committed{Subject: m.Subject, Seq: m.Seq, Commit: c}, nil
}

// follow feeds live commits to the router until Close, resuming after a failure.
func (r *Reactor) follow(from uint64) {
	defer r.loops.Done()
	for r.ctx.Err() == nil {
		err := r.cfg.Log.Follow(r.ctx, from, func(m eventlog.Msg) error {
			if !strings.HasPrefix(m.Subject, "evt.webhook.") && r.wants(m.Subject) {
				c, err := r.decode(m)
				if err != nil {
					return err
				}
				r.route(c, func(ep *endpoint, d *delivery) { ep.push(d) })
			}
			from = m.Seq
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

// route applies one commit: endpoint changes, and the deliveries it yields.
func (r *Reactor) route(c events.Committed, queue func(*endpoint, *delivery)) {
	if tenant, ok := strings.CutPrefix(c.Subject, "evt.firm."); ok {
		for _, e := range c.Events {
			switch e := e.(type) {
			case evfirm.WebhookRegistered:
				ep := &endpoint{tenant: tenant, id: e.WebhookID, url: e.URL, types: map[string]bool{},
					wake: make(chan struct{}, 1), gone: make(chan struct{})}
				for _, t := range e.EventTypes {
					ep.types[t] = true
				}
				r.mu.Lock()
				if r.eps[tenant] == nil {
					r.eps[tenant] = map[string]*endpoint{}
				}
				r.eps[tenant][e.WebhookID] = ep
				if r.live() {
					r.startLoop(ep)
				}
				r.mu.Unlock()
			case evfirm.WebhookRemoved:
				r.mu.Lock()
				if ep, ok := r.eps[tenant][e.WebhookID]; ok {
					ep.goneOnce.Do(func() { close(ep.gone) })
					delete(r.eps[tenant], e.WebhookID)
				}
				r.mu.Unlock()
			}
		}
	}
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
				queue(ep, &delivery{ev: h.ev, body: body})
			}
		}
	}
}

// live reports whether Start finished its replay; r.mu held.
func (r *Reactor) live() bool { return r.started }

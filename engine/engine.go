// Package engine is the command side: it turns commands into commits. It owns
// the aggregates (through per-aggregate mailboxes), the paper book's reactor and
// the event-log client. The gateway calls it; it never calls the gateway.
// Market data (engine/market and below) is a separate service the engine reads.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/firm"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/org"
	"github.com/svc/engine/engine/paper"
	"github.com/svc/engine/engine/plan"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/engine/risk"
	"github.com/svc/engine/engine/snapshot"
	"github.com/svc/engine/engine/tenant"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evch "github.com/svc/engine/events/challenge"
	evconnect "github.com/svc/engine/events/connect"
	evcopier "github.com/svc/engine/events/copier"
	evfirm "github.com/svc/engine/events/firm"
	evidem "github.com/svc/engine/events/idem"
	evmark "github.com/svc/engine/events/mark"
	evorg "github.com/svc/engine/events/org"
	evplan "github.com/svc/engine/events/plan"
	evtenant "github.com/svc/engine/events/tenant"
	evvenue "github.com/svc/engine/events/venue"
)

// Config holds the engine's dependencies.
type Config struct {
	Log     *eventlog.Log
	Feed    market.Feed
	Catalog *market.Catalog
	// Futures is the futures price source; nil: futures orders answer feed_requires_connection.
	Futures market.Feed
	Now     func() time.Time
	Metrics *Metrics
	// CommitEncoding is how new commits are written: "msgpack" (the default
	// when empty) or "json", readable by versions before MessagePack. The log
	// is read in either.
	CommitEncoding string
	// Node names this engine as one node of several (nodes.go); empty: the
	// only node.
	Node string
	// Snapshots shapes aggregate snapshots (snapshots.go); the zero value
	// neither reads nor takes any.
	Snapshots SnapshotConfig
	// RecordMoves makes the paper book record every breakeven and trailing
	// move in its account, as before marks (marks.go): for comparison only.
	RecordMoves bool
	// Providers serves accounts that live at a provider (providerlinks.go);
	// nil: none is linked.
	Providers *ProvidersConfig
}

// Validate reports every missing dependency at once.
func (c Config) Validate() error {
	var errs []error
	if c.Log == nil {
		errs = append(errs, errors.New("engine: Log is required"))
	}
	if c.Feed == nil {
		errs = append(errs, errors.New("engine: Feed is required"))
	}
	if c.Catalog == nil {
		errs = append(errs, errors.New("engine: Catalog is required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("engine: Now is required"))
	}
	if c.CommitEncoding != "" && c.CommitEncoding != "msgpack" && c.CommitEncoding != "json" {
		errs = append(errs, fmt.Errorf("engine: CommitEncoding %q is neither msgpack nor json", c.CommitEncoding))
	}
	return errors.Join(errs...)
}

// Engine decides and commits commands.
type Engine struct {
	cfg       Config
	reg       events.Registry
	accounts  *mailbox.Group[*account.State]
	tenants   *mailbox.Group[*tenant.State]
	orgs      *mailbox.Group[*org.State]                // organizations (orgs.go)
	plans     *mailbox.Group[*plan.State]               // saved exit plans (plans.go)
	venues    *mailbox.Group[*venue.State]              // venues, their keys and provider versions (venues.go)
	terms     atomic.Pointer[map[string]*trading.Terms] // every venue group's terms (setTerms)
	quoted    atomic.Pointer[map[string]trading.Quote]  // the map of quotes market answered last (quotes)
	holds     liveHolds                                 // the venues' holds on live trading (live.go)
	termsMu   sync.Mutex
	firms     *mailbox.Group[*firm.State] // firm area (firm.go)
	connect   connects                    // Connect apps, links and statements (connects.go)
	ch        *challenges                 // challenges (challenges.go)
	paper     *paper.Reactor
	copier    *copiers           // copier groups and their mirrors (copiers.go)
	pf        paperFutures       // the paper book's futures, each trader's from their own feed (paperfutures.go)
	prov      *providers.Reactor // accounts at a provider (providerlinks.go); nil: none
	provAccts provAccounts
	risk      *risk.Reactor // risk controls (riskwire.go)
	nodes     nodes         // the cluster (nodes.go)
	snaps     *snapshotter  // aggregate snapshots (snapshots.go); nil: none
	commits   commitCache   // commits read back for the accounts' clientOrderId indexes (orderindex.go)
	bookMarks markBook      // the paper book's marks (marks.go)
	started   startStats    // what Start used of the snapshots
	stopFeed  func()
	stopSweep context.CancelFunc
	specs     map[string]trading.Spec // every instrument's spec; read-only after New
	priced    []market.Instrument     // the catalog, in order
	symbols   []string                // the catalog's symbols, in order
}

// Registry is every event type the engine writes; projections decode with it.
func Registry() events.Registry {
	return events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry(), evorg.Registry(), evplan.Registry(),
		evvenue.Registry(), evidem.Registry(), evconnect.Registry(), evch.Registry(), evmark.Registry(), evcopier.Registry())
}

// New makes an engine; Start warms it from the log.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, reg: Registry()}
	if cfg.CommitEncoding == "json" {
		e.reg = e.reg.WritingJSON()
	}
	e.priced = cfg.Catalog.All()
	for _, in := range e.priced {
		e.symbols = append(e.symbols, in.Symbol)
	}
	e.specs = make(map[string]trading.Spec, len(e.priced))
	for _, in := range e.priced {
		e.specs[in.Symbol] = trading.Spec{Symbol: in.Symbol, Multiplier: in.Multiplier, MaxQuantity: in.MaxQuantity,
			TickSize: in.TickSize, LotStep: in.LotStep, MinQuantity: in.MinQuantity}
	}
	e.paper = paper.New(e.wake)
	e.bookMarks.init()
	for _, sym := range e.symbols {
		e.bookMarks.set(&evmark.Stack{Instrument: sym, Node: cfg.Node})
	}
	if e.marksOn() {
		e.paper.RecordMarks(cfg.Node, e.recordMark)
	}
	e.risk = risk.New(cfg.Now, e.riskExec, e.mark)
	e.accounts = mailbox.NewGroup(mailbox.Kind[*account.State]{
		Name:     "account",
		Subject:  evacct.Subject,
		New:      e.newAccount,
		Decide:   account.Decide,
		Apply:    account.Apply,
		Fold:     account.Fold,
		After:    e.afterAccountCommit(false),
		Observed: e.afterAccountCommit(true),
	}, cfg.Log, e.reg, cfg.Metrics)
	if e.clustered() {
		e.nodes.parts = make([]map[string]struct{}, e.partitions())
		e.accounts.SetAdmit(e.admitAccount)
	}
	e.initProviders()
	e.firms = newFirms(cfg, e.reg)
	e.orgs = newOrgs(cfg, e)
	e.plans = newPlans(cfg, e)
	e.venues = newVenues(cfg, e)
	e.connect = newConnects(cfg, e)
	e.ch = newChallenges(cfg, e)
	e.copier = newCopiers(cfg, e)
	e.tenants = mailbox.NewGroup(mailbox.Kind[*tenant.State]{
		Name:    "tenant",
		Subject: evtenant.Subject,
		New:     tenant.New,
		Decide:  tenant.Decide,
		Apply:   tenant.Apply,
	}, cfg.Log, e.reg, cfg.Metrics)
	return e, nil
}

func triggers(s *account.State) map[string][]paper.Trigger {
	out := map[string][]paper.Trigger{}
	for _, w := range s.Working {
		out[w.Instrument] = append(out[w.Instrument], paper.Trigger{Side: order.Side(w.Side), OrderType: order.Type(w.OrderType),
			LimitPrice: w.LimitPrice, StopPrice: w.StopPrice, Triggered: w.Triggered, TimeInForce: order.TIF(w.TimeInForce), CreatedAt: w.CreatedAt,
			ID: w.BrokerOrderID, Since: w.UpdatedAt})
	}
	// A bracket's breakeven or trailing rule wakes the account where a quote
	// would move its stop: for a long, a bid at or above the level (as a sell
	// limit there would fill); for a short, an ask at or below it.
	for _, b := range s.Brackets {
		level, ok := account.WakeLevel(b)
		if !ok {
			continue
		}
		side := order.Sell
		if b.Side == "short" {
			side = order.Buy
		}
		t := paper.Trigger{Side: side, OrderType: order.Limit, LimitPrice: &level, Move: true, LevelAt: account.LevelAt(b),
			Anchor: b.Anchor, MarkNode: b.MarkNode, Marked: b.Marked}
		if stop, dist, act, tick, ok := account.TrailOf(b); ok {
			t.Trail = &paper.Trail{Stop: stop, Long: b.Side == "long", Distance: dist, Activation: act, Tick: tick,
				LevelAt: t.LevelAt}
		}
		out[b.Instrument] = append(out[b.Instrument], t)
	}
	return out
}

// rebuilt is what a replay rebuilds of one kind of aggregate: each one's
// state and revision.
type rebuilt[S any] struct {
	kind  string
	new   func(string) S
	apply func(S, uint64, []events.Event) S // one commit's events at its sequence
	state map[string]S
	rev   map[string]uint64
}

func newRebuilt[S any](kind string, new func(string) S, apply func(S, uint64, []events.Event) S) *rebuilt[S] {
	return &rebuilt[S]{kind: kind, new: new, apply: apply, state: map[string]S{}, rev: map[string]uint64{}}
}

// eachEvent folds a commit by applying its events one by one (a state that
// does not keep sequences).
func eachEvent[S any](apply func(S, events.Event) S) func(S, uint64, []events.Event) S {
	return func(s S, _ uint64, evs []events.Event) S {
		for _, ev := range evs {
			s = apply(s, ev)
		}
		return s
	}
}

// fold applies a commit of the kind and reports whether it was one. A
// commit at or below the aggregate's revision (seeded from a snapshot) is
// in its state already.
func (r *rebuilt[S]) fold(c events.Committed) bool {
	id, ok := events.SubjectID(c.Subject, r.kind)
	if !ok {
		return false
	}
	if c.Seq <= r.rev[id] {
		return true
	}
	s, seen := r.state[id]
	if !seen {
		s = r.new(id)
	}
	s = r.apply(s, c.Seq, c.Events)
	r.state[id], r.rev[id] = s, c.Seq
	return true
}

// Start rebuilds every aggregate by one replay of the log and starts watching quotes.
// tap, if set, sees every commit of the replay, decoded, in order: the read
// models catch up from the same pass instead of decoding the log again.
// It returns the last sequence replayed.
func (e *Engine) Start(ctx context.Context, tap func(events.Committed) error) (uint64, error) {
	return e.StartFrom(ctx, 0, tap)
}

// StartFrom is Start for a tap that needs only the commits after sequence
// tapFrom (read models at a checkpoint). With snapshots on, the accounts and
// venues are seeded from their snapshots and the log is replayed from the
// earlier of the snapshots' mark and tapFrom only; an aggregate whose
// snapshot is ignored, or whose commits after it do not follow on from it,
// is rebuilt from its whole subject (snapshots.go).
func (e *Engine) StartFrom(ctx context.Context, tapFrom uint64, tap func(events.Committed) error) (uint64, error) {
	accts := newRebuilt(events.KindAccount, e.newAccount, account.Fold)
	venues := newRebuilt(events.KindVenue, venue.New, eachEvent(venue.Apply))
	var (
		store  *snapshot.Store
		mark   uint64
		reload []string
		ch     = chain{seeded: map[string]uint64{}, checked: map[string]bool{}, broken: map[string]bool{}}
		known  map[string]snapshot.Segs // the segments each seeded aggregate's snapshot names
	)
	if e.cfg.Snapshots.On {
		end, err := e.cfg.Log.LastSeq(ctx)
		if err != nil {
			return 0, err
		}
		maxValue := e.cfg.Snapshots.MaxValue
		if maxValue <= 0 {
			maxValue = int(e.cfg.Log.Conn().MaxPayload())
		}
		store, err = snapshot.Open(ctx, snapshot.Config{JS: e.cfg.Log.JetStream(), Stream: e.cfg.Log.StreamName(),
			Replicas: e.cfg.Log.Durability().Replicas, LogID: e.cfg.Log.ID(), MaxValue: maxValue})
		if err != nil {
			return 0, err
		}
		if mark, reload, ch.seeded, known, err = seedSnapshots(ctx, store, end, accts, venues); err != nil {
			return 0, err
		}
		if len(reload) > maxReloads {
			mark = 0 // one pass over the whole log rebuilds them cheaper than one read of the log each
		}
	}
	from := mark
	if tap != nil {
		from = min(from, tapFrom)
	}
	aggregates := func(cs []events.Committed) error {
		for _, c := range cs {
			_ = accts.fold(c) || venues.fold(c)
		}
		return nil
	}
	consumers := []func([]events.Committed) error{aggregates}
	if tap != nil {
		consumers = append(consumers, func(cs []events.Committed) error {
			for _, c := range cs {
				if err := tap(c); err != nil {
					return err
				}
			}
			return nil
		})
	}
	skip := func(subject string) bool {
		return tap == nil && !events.IsKind(subject, events.KindAccount) && !events.IsKind(subject, events.KindVenue)
	}
	var watch func(eventlog.Msg)
	if len(ch.seeded) > 0 || from > 0 {
		watch = func(m eventlog.Msg) { ch.see(m.Subject, m.Seq, m.Prev, m.HasPrev) }
	}
	last, err := replayDecoded(ctx, e.cfg.Log, e.reg, from, watch, skip, consumers...)
	if err != nil {
		return 0, err
	}
	if store != nil {
		if from == 0 {
			reload = nil // the replay folded their whole subjects
		}
		for subject := range ch.broken {
			if !slices.Contains(reload, subject) {
				slog.Warn("snapshot does not lead on to the log's next commit of its aggregate; the aggregate is rebuilt from the log", "subject", subject)
				reload = append(reload, subject)
			}
		}
		for _, subject := range reload {
			delete(ch.seeded, subject)
			if id, ok := events.SubjectID(subject, events.KindAccount); ok {
				err = reloadSubject(ctx, e, accts, id)
			} else if id, ok := events.SubjectID(subject, events.KindVenue); ok {
				err = reloadSubject(ctx, e, venues, id)
			}
			if err != nil {
				return 0, err
			}
		}
		e.started = startStats{mark: mark, from: from, seeded: len(ch.seeded), rebuilt: len(reload)}
		slog.Info("aggregates seeded from snapshots", "snapshots", len(ch.seeded), "rebuiltWhole", len(reload), "mark", mark, "replayedFrom", from, "lastSeq", last)
	}
	if err := e.loadMarks(ctx); err != nil {
		return 0, err
	}
	for id, s := range venues.state {
		e.venues.Seed(id, s, venues.rev[id])
		e.setTerms(id, venue.Terms(s, venues.rev[id]))
		e.noteHolds(id, s) // live.go
	}
	for id, s := range accts.state {
		s.UseFinder(e.findCommit) // a state a snapshot seeded has none
		e.accounts.Seed(id, s, accts.rev[id])
		e.index(id)
		e.react(id, s) // on a node of several, once its partition is acquired
		e.risk.Track(id, s, accts.rev[id])
		e.trackProvider(id, s, events.Committed{}, true, false) // open intents are settled by lookup, never sent again
	}
	e.nodes.at.Store(last)
	if err := e.startCopier(ctx); err != nil {
		return 0, err
	}
	if store != nil {
		taken := make(map[string]uint64, len(ch.seeded))
		for subject, rev := range ch.seeded {
			if id, ok := events.SubjectID(subject, events.KindAccount); ok {
				taken[snapKey(events.KindAccount, id)] = rev
			} else if id, ok := events.SubjectID(subject, events.KindVenue); ok {
				taken[snapKey(events.KindVenue, id)] = rev
			}
		}
		for id := range accts.state {
			if _, ok := taken[snapKey(events.KindAccount, id)]; !ok {
				taken[snapKey(events.KindAccount, id)] = 0
			}
		}
		for id := range venues.state {
			if _, ok := taken[snapKey(events.KindVenue, id)]; !ok {
				taken[snapKey(events.KindVenue, id)] = 0
			}
		}
		e.startSnapshots(store, taken, known, mark, last)
	}
	if !e.clustered() {
		e.startChallenges(accts.state)
	} else {
		e.ch.reactor.Start(EvalTick)
		e.observe(last)
	}
	e.stopFeed = e.cfg.Feed.Subscribe(func(q market.Quote) {
		e.paper.OnQuote(q.Instrument, q.Bid, q.Ask)
		e.risk.OnQuote(q.Instrument, q.Bid, q.Ask)
		e.ch.reactor.OnQuote(q.Instrument, q.Bid, q.Ask)
	})
	e.risk.Start()
	sweep, stop := context.WithCancel(context.Background())
	e.stopSweep = stop
	go e.expireDayOrders(sweep, 30*time.Second)
	return last, nil
}

// Close stops watching quotes, lets the paper book decide the wakes it has
// queued (paper.Reactor.Drain, at most paper.DrainTimeout, while this node
// still owns its accounts) and every queued command finish; with snapshots
// on, it snapshots the aggregates that moved since their last one.
func (e *Engine) Close() {
	if e.stopFeed != nil {
		e.stopFeed()
		e.stopFeed = nil
	}
	e.pf.close() // no trader's futures quotes either
	if left := e.paper.Drain(paper.DrainTimeout); left > 0 {
		slog.Warn("paper: stopping with wakes of the paper book still queued; the next quotes after the start decide them",
			"wakes", left, "waited", paper.DrainTimeout)
	}
	e.flushMarks(paper.DrainTimeout) // the newest marks, which the parked stops' levels come from
	e.leaveCluster()
	e.stopObserving()
	e.stopSnapshots()
	if e.stopSweep != nil {
		e.stopSweep()
	}
	e.paper.Close()
	if e.prov != nil {
		e.prov.Close()
	}
	e.risk.Close()
	e.ch.reactor.Close()
	e.closeCopier()
	e.accounts.Close()
	e.tenants.Close()
	e.orgs.Close()
	e.plans.Close()
	e.venues.Close()
	e.firms.Close()
	e.connect.close()
	e.ch.programs.Close()
	e.ch.enrollments.Close()
}

// LastSeq is the log's last sequence (a round trip to the log).
func (e *Engine) LastSeq(ctx context.Context) (uint64, error) { return e.cfg.Log.LastSeq(ctx) }

// Envelope wraps cmd with a new id, the engine's time, key and principal.
func (e *Engine) Envelope(p events.Principal, key string, cmd commands.Command) commands.Envelope {
	return commands.Envelope{ID: ulid.Make(), At: e.cfg.Now().UTC(), Key: key, Principal: p, Cmd: cmd}
}

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.cfg.Now() }

// FuturesServed reports whether a futures price source is connected (else
// futures orders answer feed_requires_connection).
func (e *Engine) FuturesServed() bool { return e.cfg.Futures != nil }

// Catalog is the instrument catalog.
func (e *Engine) Catalog() *market.Catalog { return e.cfg.Catalog }

// Feed is the crypto price feed.
func (e *Engine) Feed() market.Feed { return e.cfg.Feed }

// market is the context attached to trading commands: every permitted
// instrument's spec and its newest quote.
// setTerms replaces the compiled terms of one venue's groups in the
// engine's snapshot (copy on write: commands hold the map they were given).
func (e *Engine) setTerms(venueID string, terms map[string]*trading.Terms) {
	e.termsMu.Lock()
	defer e.termsMu.Unlock()
	next := map[string]*trading.Terms{}
	if cur := e.terms.Load(); cur != nil {
		for k, t := range *cur {
			if t.VenueID != venueID {
				next[k] = t
			}
		}
	}
	for k, t := range terms {
		next[k] = t
	}
	e.terms.Store(&next)
}

func (e *Engine) market() trading.Market {
	m := trading.Market{Specs: e.specs}
	var stacks map[string]*evmark.Stack
	if e.marksOn() {
		stacks = e.markStacks()
	}
	if t := e.terms.Load(); t != nil {
		m.Terms = *t
	}
	m.Quotes = e.quotes(stacks)
	return m
}

// quotes is every priced instrument's newest quote with its mark stack, as
// a map no one changes: while every quote and stack is the one in the map
// quotes answered last, it answers that map again (a command holds the map
// it was given and never changes it; withUserFutures copies it first).
func (e *Engine) quotes(stacks map[string]*evmark.Stack) map[string]trading.Quote {
	last := e.quoted.Load()
	out, ok := e.buildQuotes(stacks, last)
	if ok {
		return *last
	}
	p := new(map[string]trading.Quote) // not &out: out would escape on every call
	*p = out
	e.quoted.Store(p)
	return out
}

// buildQuotes makes the map of quotes, or reports that it would be last's.
func (e *Engine) buildQuotes(stacks map[string]*evmark.Stack, last *map[string]trading.Quote) (map[string]trading.Quote, bool) {
	var out map[string]trading.Quote
	same := 0 // the quotes so far, all as in last while out is nil
	for i, in := range e.priced {
		src := e.cfg.Feed
		if in.AssetClass == "futures" {
			src = e.cfg.Futures
		}
		if src == nil {
			continue
		}
		q, ok := src.Quote(in.Symbol)
		if !ok {
			continue
		}
		tq := trading.Quote{Instrument: q.Instrument, Bid: q.Bid, Ask: q.Ask, At: q.At, Marks: stacks[in.Symbol]}
		if out == nil && last != nil {
			if old, ok := (*last)[in.Symbol]; ok && sameQuote(old, tq) {
				same++
				continue
			}
		}
		if out == nil { // the first that differs: the ones before it are as in last
			out = make(map[string]trading.Quote, len(e.priced))
			if same > 0 {
				for _, prev := range e.priced[:i] {
					if old, ok := (*last)[prev.Symbol]; ok {
						out[prev.Symbol] = old
					}
				}
			}
		}
		out[in.Symbol] = tq
	}
	switch {
	case out != nil:
		return out, false
	case last != nil && same == len(*last):
		return nil, true
	case last != nil: // a quote in last is gone: build it afresh
		return e.buildQuotes(stacks, nil)
	}
	return map[string]trading.Quote{}, false
}

// sameQuote reports whether a and b, quotes as market makes them (no
// touches, no path), are the same quote, to the digit.
func sameQuote(a, b trading.Quote) bool {
	return a.Instrument == b.Instrument && a.At == b.At && a.Marks == b.Marks && a.Bid.Same(b.Bid) && a.Ask.Same(b.Ask)
}

// futuresUnserved refuses an order on a futures symbol when no futures
// source is configured: a futures catalog entry, a product root, a contract
// (ESZ6) or a continuous symbol (ES1!), as the market routes recognise them.
func (e *Engine) futuresUnserved(instrument string) error {
	if e.cfg.Futures != nil {
		return nil
	}
	if in, ok := e.cfg.Catalog.Get(instrument); ok {
		if in.AssetClass == "futures" {
			return trading.FeedRequiresConnection(instrument)
		}
		return nil
	}
	if _, ok := market.FuturesRoot(instrument, market.Products()); ok {
		return trading.FeedRequiresConnection(instrument)
	}
	return nil
}

// prepare validates cmd on the account and attaches the market context where the command needs it.
func (e *Engine) prepare(ctx context.Context, accountID string, cmd commands.Command) error {
	if err := cmd.Validate(); err != nil {
		return err
	}
	var instrument string // a command that opens exposure in it
	switch c := cmd.(type) {
	case *trading.PlaceOrder:
		instrument = c.Instrument
	case *trading.ClosePosition:
		instrument = c.Instrument
	case *trading.Reverse:
		instrument = c.Instrument
	}
	if instrument != "" && e.isProvider(accountID) {
		if err := e.providerInstrument(accountID, cmd); err != nil { // the provider serves its instruments (providerfutures.go)
			return err
		}
	} else if instrument != "" && !e.userFuturesOn(accountID) {
		if err := e.futuresUnserved(instrument); err != nil {
			return err
		}
	}
	if p, ok := cmd.(trading.Priced); ok {
		*p.MarketOf() = e.market()
		if e.userFuturesOn(accountID) { // paper futures at the owner's own prices (paperfutures.go)
			quotes, err := e.userFuturesQuotes(ctx, accountID, instrument)
			if err != nil {
				return err
			}
			e.withUserFutures(p.MarketOf(), quotes)
		}
	}
	e.prepareRisk(cmd)
	return nil
}

// Account runs cmd on the account aggregate accountID and commits its events;
// on a node of several, on the node that owns the account (nodes.go).
func (e *Engine) Account(ctx context.Context, accountID string, env commands.Envelope) (mailbox.Result, error) {
	if !e.owns(accountID) {
		return e.forward(ctx, accountID, env)
	}
	return e.decideHere(ctx, accountID, env)
}

// decideHere decides an account's command on this node.
func (e *Engine) decideHere(ctx context.Context, accountID string, env commands.Envelope) (mailbox.Result, error) {
	e.providerDefaults(accountID, env.Cmd)
	if err := e.prepare(ctx, accountID, env.Cmd); err != nil {
		return mailbox.Result{}, err
	}
	if err := e.liveGate(ctx, accountID, env.Cmd); err != nil { // live.go
		return mailbox.Result{}, err
	}
	if err := e.guard(ctx, accountID, env.Cmd); err != nil {
		return mailbox.Result{}, err
	}
	res, err := e.accounts.Execute(ctx, accountID, env)
	res, err = e.awaitIntent(ctx, accountID, env, res, err) // a provider account's order answers its outcome
	return res, risk.FailClosed(err)
}

// Advise decides cmd on the account without committing: the refusal it would meet, or nil.
func (e *Engine) Advise(ctx context.Context, accountID string, env commands.Envelope) error {
	if err := e.prepare(ctx, accountID, env.Cmd); err != nil {
		return err
	}
	_, err := e.accounts.DryRun(ctx, accountID, env)
	return risk.FailClosed(err)
}

// InspectAccount runs fn on the account's live state in its mailbox goroutine.
func (e *Engine) InspectAccount(ctx context.Context, accountID string, fn func(*account.State, uint64)) error {
	return e.accounts.Inspect(ctx, accountID, fn)
}

// Tenant runs cmd on the tenant aggregate tenantID and commits its events.
func (e *Engine) Tenant(ctx context.Context, tenantID string, env commands.Envelope) (mailbox.Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return mailbox.Result{}, err
	}
	return e.tenants.Execute(ctx, tenantID, env)
}

// ExpireDayOrders cancels every working `day` order placed before the current
// trading day began (00:00 UTC), account by account; the aggregate re-checks.
// A timer calls it; tests call it after moving the clock.
func (e *Engine) ExpireDayOrders(ctx context.Context) {
	start := account.DayStart(e.cfg.Now())
	for _, id := range e.paper.DayOrdersBefore(start) {
		env := e.Envelope(events.Principal{System: "paper"}, "", &trading.ExpireDayOrders{})
		_, _ = e.accounts.Execute(ctx, id, env) // a failure leaves them for the next sweep
	}
}

// expireDayOrders sweeps every interval until ctx ends.
func (e *Engine) expireDayOrders(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.ExpireDayOrders(ctx)
		}
	}
}

// wake asks an account to fill the working orders a quote crosses.
func (e *Engine) wake(accountID, instrument string, t paper.Touch) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	marks := t.Marks
	if inst, ok := unscope(instrument); ok { // a trader's own futures book: no shared marks (paperfutures.go)
		instrument, marks = inst, nil
	}
	fw := &trading.FillWorking{Quote: trading.Quote{Instrument: instrument, Bid: t.Bid, Ask: t.Ask, At: e.cfg.Now().UTC(),
		HighBid: &t.HighBid, LowAsk: &t.LowAsk, Path: t.Path, PathFrom: t.PathFrom, PathBest: t.PathBest, Marks: marks},
		TradedThrough: t.TradedThrough, Touched: t.Touched}
	if t := e.terms.Load(); t != nil {
		fw.Terms = *t
	}
	env := e.Envelope(events.Principal{System: "paper"}, "", fw)
	_, _ = e.accounts.Execute(ctx, accountID, env) // a failure leaves the order working; the next quote retries
}

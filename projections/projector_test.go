package projections_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
)

func batch(seqs ...uint64) []events.Committed {
	var out []events.Committed
	for _, s := range seqs {
		out = append(out, events.Committed{Subject: "evt.other.x", Seq: s})
	}
	return out
}

// Each waiter returns once its own sequence is applied, not before.
func TestWaitForReleasesEachWaiterAtItsSequence(t *testing.T) {
	p := projections.NewProjector(memory.New(), nil, projections.Core)
	ctx := context.Background()
	waits := map[uint64][]<-chan error{} // every waiter is registered before any commit is applied
	for _, seq := range []uint64{5, 2, 9, 2} {
		waits[seq] = append(waits[seq], projections.StartWaitFor(ctx, p, seq))
	}
	// released reports whether every waiter for seq returned within d.
	released := func(seq uint64, d time.Duration) bool {
		for _, ch := range waits[seq] {
			select {
			case err := <-ch:
				if err != nil {
					t.Fatalf("WaitFor(%d): %v", seq, err)
				}
			case <-time.After(d):
				return false
			}
		}
		return true
	}
	const returns, staysBlocked = 5 * time.Second, 50 * time.Millisecond
	if err := p.ApplyBatch(ctx, batch(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if !released(2, returns) {
		t.Error("WaitFor(2) still waits after 3 was applied")
	}
	if released(5, staysBlocked) || released(9, staysBlocked) {
		t.Fatal("a waiter returned before its sequence was applied")
	}
	if err := p.ApplyBatch(ctx, batch(4, 5, 6)); err != nil {
		t.Fatal(err)
	}
	if !released(5, returns) {
		t.Error("WaitFor(5) still waits after 6 was applied")
	}
	if released(9, staysBlocked) {
		t.Error("WaitFor(9) returned at 6")
	}
	if err := p.WaitFor(ctx, 6); err != nil {
		t.Errorf("WaitFor of an applied sequence: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := p.WaitFor(cctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFor past its deadline = %v", err)
	}
}

// A projector that fails releases its waiters with the failure.
func TestWaitForReportsTheProjectorsFailure(t *testing.T) {
	p := projections.NewProjector(memory.New(), nil, projections.Core)
	ctx := context.Background()
	got := projections.StartWaitFor(ctx, p, 10)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	failing := source{err: errors.New("log gone")}
	if err := p.Run(runCtx, failing); err == nil {
		t.Fatal("Run of a failing source returned nil")
	}
	select {
	case err := <-got:
		if !errors.Is(err, projections.ErrSource) || !strings.Contains(err.Error(), "log gone") {
			t.Errorf("waiter got %v, want the projector's failure (a source's)", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter was not released by the failure")
	}
	if err := p.WaitFor(ctx, 11); err == nil {
		t.Error("WaitFor after a failure returned nil")
	}
}

// A log read that fails while the projector catches up (NATS went away as
// it started again) is a source's failure too: the engine runs it again
// instead of stopping (a node of a cluster exited on it in CI).
func TestRunReportsACatchUpsReadFailureAsTheSources(t *testing.T) {
	for name, src := range map[string]source{
		"LastSeq":       {lastErr: errors.New("no responders")},
		"FollowCommits": {last: 5, err: errors.New("connection closed")},
	} {
		t.Run(name, func(t *testing.T) {
			p := projections.NewProjector(memory.New(), nil, projections.Core)
			if err := p.Run(context.Background(), src); !errors.Is(err, projections.ErrSource) {
				t.Fatalf("Run = %v, want a source's failure", err)
			}
		})
	}
}

type source struct {
	err     error  // FollowCommits's
	last    uint64 // LastSeq's answer
	lastErr error
}

func (s source) FollowCommits(context.Context, uint64, func(string, uint64, string, []byte) error) error {
	return s.err
}
func (s source) LastSeq(context.Context) (uint64, error) { return s.last, s.lastErr }

// logSource is a log in memory: FollowCommits hands out its commits after
// from, then waits for more until ctx ends, as the JetStream log does.
type logSource struct {
	mu   sync.Mutex
	msgs [][]byte // msgs[i] has sequence i+1
	subj []string
	more chan struct{}
	// follows, when set, hears of every FollowCommits call (an empty log's
	// first is the projector's live loop).
	follows chan struct{}
}

func (l *logSource) add(subject string, data []byte) {
	l.mu.Lock()
	l.msgs, l.subj = append(l.msgs, data), append(l.subj, subject)
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
}

func (l *logSource) FollowCommits(ctx context.Context, from uint64, fn func(string, uint64, string, []byte) error) error {
	if l.follows != nil {
		l.follows <- struct{}{}
	}
	for seq := from + 1; ; seq++ {
		for {
			l.mu.Lock()
			n, more := uint64(len(l.msgs)), l.more
			l.mu.Unlock()
			if seq <= n {
				break
			}
			select {
			case <-more:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		l.mu.Lock()
		subject, data := l.subj[seq-1], l.msgs[seq-1]
		l.mu.Unlock()
		if err := fn(subject, seq, "", data); err != nil {
			return err
		}
	}
}

func (l *logSource) LastSeq(context.Context) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.msgs)), nil
}

// accountCommits are the commits of accounts trading market orders, round robin.
func accountCommits(t *testing.T, reg events.Registry, accounts, orders int) (subjects []string, data [][]byte) {
	t.Helper()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	add := func(acct int, evs ...events.Event) {
		b, err := reg.Encode(events.Commit{CommandID: fmt.Sprintf("c%d", len(data)), At: at, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		subjects, data = append(subjects, evacct.Subject(fmt.Sprintf("a%03d", acct))), append(data, b)
	}
	for a := range accounts {
		add(a, evacct.Opened{AccountID: fmt.Sprintf("a%03d", a), TenantID: "t", Broker: "paper", AccountNumber: fmt.Sprintf("PA%03d", a),
			Currency: "USD", StartingBalance: events.Int(1000), Kind: "demo", At: at})
	}
	for i := range orders {
		for a := range accounts {
			id := fmt.Sprintf("o%03d-%05d", a, i)
			q, p := events.MustDecimal("0.5"), events.Int(int64(100+i%7))
			add(a, evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: id, ClientOrderID: "c" + id, Instrument: "BTC-PERP", Side: "buy",
				OrderType: "market", Quantity: q, TimeInForce: "day", CreatedAt: at}},
				evacct.OrderFilled{BrokerOrderID: id, FillID: id + "-f1", Instrument: "BTC-PERP", Side: "buy", Quantity: q, Price: p,
					Realized: events.Int(int64(i % 3)), Position: evacct.Position{Instrument: "BTC-PERP", Quantity: events.Int(int64(i + 1)), AvgPrice: p, Multiplier: events.Int(1)},
					Balance: events.Int(int64(1000 + i)), OrderFilled: q, OrderAvgPrice: p, Done: true, At: at.Add(time.Duration(i) * time.Hour)})
		}
	}
	return subjects, data
}

// applyOneByOne folds the commits data (on subjects, at sequences 1, 2, ...)
// through p, one commit a batch.
func applyOneByOne(t *testing.T, p *projections.Projector, reg events.Registry, subjects []string, data [][]byte) {
	t.Helper()
	for i := range data {
		c, err := reg.Decode(data[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ApplyBatch(context.Background(), []events.Committed{{Subject: subjects[i], Seq: uint64(i + 1), Commit: c}}); err != nil {
			t.Fatal(err)
		}
	}
}

// Run catches up on what the log held when it started (decoding on every
// core) and then follows what is appended: the read models equal those of
// folding every commit one at a time.
func TestRunCatchesUpThenFollows(t *testing.T) {
	reg := evacct.Registry()
	subjects, data := accountCommits(t, reg, 7, 400)
	split := len(data) - 50
	src := &logSource{more: make(chan struct{})}
	for i := range split {
		src.add(subjects[i], data[i])
	}
	p := projections.NewProjector(memory.New(), reg, projections.Core)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx, src) }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.WaitFor(wctx, uint64(split)); err != nil {
		t.Fatalf("the catch-up did not reach %d: %v", split, err)
	}
	for i := split; i < len(data); i++ {
		src.add(subjects[i], data[i])
	}
	if err := p.WaitFor(wctx, uint64(len(data))); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}

	one := projections.NewProjector(memory.New(), reg, projections.Core)
	applyOneByOne(t, one, reg, subjects, data)
	bg := context.Background()
	for a := range 7 {
		id := fmt.Sprintf("a%03d", a)
		got, err := projections.Orders(bg, p.Store(), id, "all", 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := projections.Orders(bg, one.Store(), id, "all", 0)
		if err != nil || len(want) != 400 || !reflect.DeepEqual(got, want) {
			t.Fatalf("account %s: %d orders after Run, %d one by one (%v)", id, len(got), len(want), err)
		}
		for _, coll := range []string{projections.CollFill, projections.CollPosition, projections.CollPnLDay} {
			gotN, _ := p.Store().Count(bg, coll, id+"/")
			wantN, _ := one.Store().Count(bg, coll, id+"/")
			if gotN != wantN || wantN == 0 {
				t.Fatalf("account %s: %d %s after Run, %d one by one", id, gotN, coll, wantN)
			}
		}
		ga, _ := projections.GetInto[projections.Account](bg, p.Store(), projections.CollAccount, id)
		wa, _ := projections.GetInto[projections.Account](bg, one.Store(), projections.CollAccount, id)
		if !reflect.DeepEqual(ga, wa) || wa.Revision == 0 {
			t.Fatalf("account %s after Run %+v, one by one %+v", id, ga, wa)
		}
	}
}

// A fold that panics fails its batch with an error naming the commit, the
// store keeps its checkpoint, and the projector can go on afterwards.
func TestAFoldPanicFailsTheBatchNamingTheCommit(t *testing.T) {
	store := memory.New()
	boom := true
	fold := func(_ projections.Tx, c events.Committed) error {
		if boom && c.Seq == 2 {
			panic("fold exploded")
		}
		return nil
	}
	p := projections.NewProjector(store, nil, fold)
	ctx := context.Background()
	err := p.ApplyBatch(ctx, batch(1, 2, 3))
	if err == nil || !strings.Contains(err.Error(), "evt.other.x at 2") || !strings.Contains(err.Error(), "fold exploded") {
		t.Fatalf("ApplyBatch answered %v", err)
	}
	if cp, _ := store.Checkpoint(ctx); cp != 0 {
		t.Fatalf("checkpoint moved to %d on a failed batch", cp)
	}
	boom = false
	if err := p.ApplyBatch(ctx, batch(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, 3); err != nil || p.Applied() != 3 {
		t.Fatalf("applied %d after the retry: %v", p.Applied(), err)
	}
}

// countingStore counts the transactions of the store beneath.
type countingStore struct {
	projections.Store
	mu      sync.Mutex
	updates int
}

func (s *countingStore) Update(ctx context.Context, seq uint64, fn func(projections.Tx) error) error {
	s.mu.Lock()
	s.updates++
	s.mu.Unlock()
	return s.Store.Update(ctx, seq, fn)
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

// With a linger the live loop writes commits nobody waits for in one
// transaction, and a waiter or an urgent commit ends the linger at once (the
// linger here is an hour).
func TestLingerBatchesUntilSomeoneWaits(t *testing.T) {
	reg := evacct.Registry()
	subjects, data := accountCommits(t, reg, 4, 25) // 4 openings, then 100 orders
	src := &logSource{more: make(chan struct{}), follows: make(chan struct{}, 1)}
	store := &countingStore{Store: memory.New()}
	p := projections.NewProjector(store, reg, projections.Core)
	p.SetLinger(time.Hour)
	urgent := evacct.Subject("a002")
	p.SetUrgent(func(c events.Committed) bool { return c.Subject == urgent && c.Seq > 50 })
	heard := make(chan uint64, len(data))
	p.Listen(func(c events.Committed) { heard <- c.Seq })
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = p.Run(ctx, src) }()
	<-src.follows // the log was empty: every commit below reaches the live loop, not the catch-up

	for i := range 50 {
		src.add(subjects[i], data[i])
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.WaitFor(wctx, 50); err != nil {
		t.Fatalf("a waiter did not end the linger: %v", err)
	}
	if n := store.count(); n > 2 {
		t.Errorf("50 commits nobody waited for took %d transactions, want them together", n)
	}
	before := store.count()
	for i := 50; i < len(data); i++ { // 4 accounts round robin: a002's first after 50 is 51
		src.add(subjects[i], data[i])
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case seq := <-heard:
			if seq <= 50 {
				continue
			}
			if store.count() == before {
				t.Fatal("a commit was heard before it was written")
			}
			if subjects[seq-1] != urgent {
				continue
			}
			return
		case <-deadline:
			t.Fatal("an urgent commit did not end the linger")
		}
	}
}

// keeping is a store that holds on to every pointer a fold puts, as a store
// may (projections.Tx: the pointer is the store's from then on), and a copy
// of what it pointed to when put.
type keeping struct {
	projections.Store
	kept []keptPut
}

type keptPut struct {
	what string
	ptr  reflect.Value // the pointer put
	was  reflect.Value // a copy of what it pointed to then
}

func (s *keeping) Update(ctx context.Context, seq uint64, fn func(projections.Tx) error) error {
	return s.Store.Update(ctx, seq, func(tx projections.Tx) error { return fn(keepingTx{tx, s}) })
}

type keepingTx struct {
	projections.Tx
	s *keeping
}

func (t keepingTx) Put(coll, key string, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer {
		was := reflect.New(rv.Elem().Type()).Elem()
		was.Set(rv.Elem())
		t.s.kept = append(t.s.kept, keptPut{coll + " " + key, rv, was})
	}
	return t.Tx.Put(coll, key, v)
}

// The documents a fold hands to Put are never changed afterwards, by a
// later commit's fold or anything else: a store may keep the pointer.
func TestAFoldNeverChangesWhatItPut(t *testing.T) {
	reg := evacct.Registry()
	subjects, data := accountCommits(t, reg, 3, 40)
	s := &keeping{Store: memory.New()}
	p := projections.NewProjector(s, reg, projections.Core)
	applyOneByOne(t, p, reg, subjects, data)
	orders := 0
	for _, k := range s.kept {
		if !reflect.DeepEqual(k.ptr.Elem().Interface(), k.was.Interface()) {
			t.Fatalf("%s changed after it was put:\n %+v\nnow\n %+v", k.what, k.was.Interface(), k.ptr.Elem().Interface())
		}
		if strings.HasPrefix(k.what, projections.CollOrder+" ") {
			orders++
		}
	}
	if orders < 120 {
		t.Fatalf("%d orders put as pointers, want every one of the 120", orders)
	}
}

// downStore fails every Update and Checkpoint while down, as PostgreSQL
// does while it is stopped.
type downStore struct {
	projections.Store
	down atomic.Bool
}

var errDown = fmt.Errorf("%w: connection refused", projections.ErrUnavailable)

func (s *downStore) Update(ctx context.Context, seq uint64, fn func(projections.Tx) error) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Update(ctx, seq, fn)
}

func (s *downStore) Checkpoint(ctx context.Context) (uint64, error) {
	if s.down.Load() {
		return 0, errDown
	}
	return s.Store.Checkpoint(ctx)
}

// A store that fails under the live loop ends Run at once with ErrStore (not
// at the log's next commit), answers the waiters with it and reports the
// stall; run again once the store answers, the projector folds from its
// checkpoint, the waiters are served and the stall ends.
func TestAStoreFailureEndsRunAtOnceAndRunAgainResumes(t *testing.T) {
	reg := evacct.Registry()
	subjects, data := accountCommits(t, reg, 1, 2)
	store := &downStore{Store: memory.New()}
	p, log, ctx, cancel, done := running(t, store, reg, subjects, data)
	store.down.Store(true)
	log.add(subjects[1], data[1])
	select {
	case err := <-done:
		if !errors.Is(err, projections.ErrStore) || !errors.Is(err, errDown) {
			t.Fatalf("Run on a failing store = %v, want ErrStore naming the store's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still waits for the log's next commit after its store failed")
	}
	if err := p.WaitFor(ctx, 2); !errors.Is(err, projections.ErrStore) {
		t.Errorf("a waiter during the stall got %v", err)
	}
	if since, err := p.Stalled(); since.IsZero() || !errors.Is(err, errDown) {
		t.Errorf("Stalled() = %v, %v during the outage", since, err)
	}
	if err := p.Run(ctx, log); !errors.Is(err, projections.ErrStore) {
		t.Fatalf("Run while the store is still down = %v", err)
	}

	store.down.Store(false)
	go func() { done <- p.Run(ctx, log) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.Applied() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("applied %d, 5 s after the store came back", p.Applied())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if since, _ := p.Stalled(); !since.IsZero() {
		t.Errorf("still stalled since %v after catching up", since)
	}
	log.add(subjects[2], data[2])
	if err := p.WaitFor(ctx, 3); err != nil {
		t.Fatalf("the live loop after the outage: %v", err)
	}
	cancel()
	<-done
}

// stuckStore holds every Update while held, then fails it, as PostgreSQL
// does with a transaction it ends (idle in transaction too long).
type stuckStore struct {
	projections.Store
	held    atomic.Bool
	release chan struct{}
	entered chan struct{} // told once an Update is held
}

func (s *stuckStore) Update(ctx context.Context, seq uint64, fn func(projections.Tx) error) error {
	if s.held.Load() {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.release
		return errDown
	}
	return s.Store.Update(ctx, seq, fn)
}

// A store that fails while the live loop's queue is full (the log runs
// ahead of a store that hangs, then fails) still ends Run with ErrStore, so
// that it can run again: it once waited forever for the fold's error that
// the log's callback had already taken, and the node's read models stayed
// where they were until it restarted.
func TestAStoreFailureWithTheQueueFullEndsRun(t *testing.T) {
	reg := evacct.Registry()
	subjects, data := accountCommits(t, reg, 1, 5*projections.MaxBatch+200) // more than the queue and a held batch take
	store := &stuckStore{Store: memory.New(), release: make(chan struct{}), entered: make(chan struct{}, 1)}
	_, log, _, _, done := running(t, store, reg, subjects, data)
	store.held.Store(true)
	for i := 1; i < len(data); i++ {
		log.add(subjects[i], data[i])
	}
	<-store.entered
	time.Sleep(200 * time.Millisecond) // the log fills the queue behind the held Update
	close(store.release)
	select {
	case err := <-done:
		if !errors.Is(err, projections.ErrStore) {
			t.Fatalf("Run on a failing store = %v, want ErrStore", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run never returned after its store failed with the queue full: the projector can never run again")
	}
}

// running starts a projector's Run over store on a log holding the first
// of the commits, and waits until that one is applied; done gets what Run
// returns, cancel ends it (the test's end does too).
func running(t *testing.T, store projections.Store, reg events.Registry, subjects []string, data [][]byte) (
	p *projections.Projector, log *logSource, ctx context.Context, cancel context.CancelFunc, done chan error) {
	t.Helper()
	p = projections.NewProjector(store, reg, projections.Core)
	log = &logSource{more: make(chan struct{})}
	log.add(subjects[0], data[0])
	ctx, cancel = context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done = make(chan error, 1)
	go func() { done <- p.Run(ctx, log) }()
	if err := p.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return p, log, ctx, cancel, done
}

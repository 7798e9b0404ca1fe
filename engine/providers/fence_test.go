package providers_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// fakeProv is a provider whose session counts what is sent and looked up.
type fakeProv struct{ sess *fakeSess }

func (p *fakeProv) Name() string                        { return "fake" }
func (p *fakeProv) Capabilities() provider.Capabilities { return provider.Capabilities{} }
func (p *fakeProv) Connect(context.Context, provider.Credentials) (provider.Session, error) {
	return p.sess, nil
}
func (p *fakeProv) Instruments(context.Context) ([]provider.Instrument, error) { return nil, nil }
func (p *fakeProv) Quotes(context.Context, []string) (<-chan provider.Quote, error) {
	return nil, nil
}

type fakeSess struct {
	places, lookups, snapshots atomic.Int32
	// streamOpens, when set, is waited on before Events answers (a stream
	// slow to go live); live is set once it answered.
	streamOpens chan struct{}
	live        atomic.Bool
	placedLive  atomic.Int32 // placements made while the stream was live
	// finds, when set, makes a lookup find the order working.
	finds bool
	// stream, when set, is the account's stream.
	stream chan provider.Event
	// place, when set, answers a placement (after the counting).
	place func(provider.Order) (provider.OrderState, error)
	// hold, when set, holds a placement this long before it would leave,
	// then makes the adapter's last check (provider.SendByPassed): one
	// past its moment is not sent, nor counted.
	hold time.Duration
	// onSnapshot, when set, runs inside the nth reading of the account.
	onSnapshot func(n int32)
}

func (s *fakeSess) Settings(context.Context) (provider.Settings, error) {
	return provider.Settings{}, nil
}
func (s *fakeSess) Snapshot(context.Context) (provider.Snapshot, error) {
	n := s.snapshots.Add(1)
	if s.onSnapshot != nil {
		s.onSnapshot(n)
	}
	return provider.Snapshot{}, nil
}
func (s *fakeSess) Place(ctx context.Context, o provider.Order) (provider.OrderState, error) {
	if s.hold > 0 {
		time.Sleep(s.hold)
		if err := provider.SendByPassed(ctx, time.Now()); err != nil {
			return provider.OrderState{}, err
		}
	}
	s.places.Add(1)
	if s.live.Load() {
		s.placedLive.Add(1)
	}
	if s.place != nil {
		return s.place(o)
	}
	return provider.OrderState{ClientOrderID: o.ClientOrderID, Instrument: o.Instrument, Status: provider.StatusWorking, Quantity: o.Quantity}, nil
}
func (s *fakeSess) Cancel(context.Context, string, string) (provider.OrderState, error) {
	return provider.OrderState{}, provider.ErrNotFound
}
func (s *fakeSess) Replace(context.Context, provider.Replace) (provider.OrderState, error) {
	return provider.OrderState{}, provider.ErrUnsupported
}
func (s *fakeSess) Lookup(context.Context, string, string) (provider.OrderState, error) {
	s.lookups.Add(1)
	if s.finds {
		return provider.OrderState{ClientOrderID: "x", Instrument: "BTCUSDT", Status: provider.StatusWorking, Quantity: events.Int(1)}, nil
	}
	return provider.OrderState{}, provider.ErrNotFound
}
func (s *fakeSess) Executions(context.Context, string, provider.Cursor, int) ([]provider.Execution, provider.Cursor, error) {
	return nil, "", nil
}
func (s *fakeSess) Events(ctx context.Context) (<-chan provider.Event, error) {
	if s.streamOpens != nil {
		select {
		case <-s.streamOpens:
		case <-ctx.Done():
		}
	}
	s.live.Store(true)
	if s.stream != nil {
		return s.stream, nil
	}
	return nil, nil
}
func (s *fakeSess) Close() error { return nil }

// openFake opens every sealed credential as the fake provider's.
func openFake(context.Context, string, []byte) (provider.Credentials, error) {
	return provider.Credentials{APIKey: "k", Secret: []byte("s")}, nil
}

// intended is a linked account's state with one place intent committed.
func intended(t *testing.T) *account.State {
	t.Helper()
	s := account.New("a1")
	at := time.Now()
	for i, c := range []commands.Command{
		&providercmd.Link{Provider: "fake", Broker: "fake", TenantID: "u1", AccountNumber: "F1", Label: "F", Currency: "USDT",
			CredentialID: "c1", Sealed: []byte("x"), Snapshot: providercmd.Observe{Cause: account.CauseLink, Complete: true}},
		&trading.PlaceOrder{ClientOrderID: "o-1", Instrument: "BTCUSDT", Side: "buy", OrderType: "market", Quantity: events.Int(1), TimeInForce: "gtc"},
	} {
		evs, err := account.Decide(s, commands.Envelope{ID: ulid.MustNew(ulid.Timestamp(at), nil), At: at.Add(time.Duration(i)), Cmd: c})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	if len(s.OpenIntents()) != 1 {
		t.Fatalf("intents %v", s.OpenIntents())
	}
	return s
}

// A node whose ownership of the account moved away sends nothing: the
// intent committed before the move is neither sent nor looked up by it
// (the new owner settles it by lookup); the owner sends it once.
func TestDeposedOwnerDoesNotSend(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owns      bool
		wantPlace int32
	}{{"the owner sends the intent once", true, 1}, {"a deposed owner sends nothing", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			sess := &fakeSess{}
			var owns atomic.Bool
			owns.Store(tc.owns)
			var mu sync.Mutex
			var settled []commands.Command
			r := providers.New(providers.Config{
				Providers: map[string]provider.Provider{"fake": &fakeProv{sess: sess}},
				Open:      openFake,
				Exec: func(_ context.Context, _ string, c commands.Command) error {
					mu.Lock()
					settled = append(settled, c)
					mu.Unlock()
					return nil
				},
				Owns:  func(string) bool { return owns.Load() },
				Retry: 10 * time.Millisecond,
			})
			defer r.Close()
			r.Track("a1", intended(t))
			time.Sleep(300 * time.Millisecond)
			if n := sess.places.Load(); n != tc.wantPlace {
				t.Fatalf("%d placements, want %d", n, tc.wantPlace)
			}
			if !tc.owns && (sess.lookups.Load() != 0 || len(settled) != 0) {
				t.Fatalf("the deposed owner looked up %d times and recorded %v", sess.lookups.Load(), settled)
			}
		})
	}
}

// The reconciliation runs periodically at the configured period, besides
// the one at a resume.
func TestPeriodicReconciliation(t *testing.T) {
	sess := &fakeSess{}
	var recorded atomic.Int32
	r := providers.New(providers.Config{
		Providers: map[string]provider.Provider{"fake": &fakeProv{sess: sess}},
		Open:      openFake,
		Exec: func(_ context.Context, _ string, c commands.Command) error {
			if o, ok := c.(*providercmd.Observe); ok && o.Complete {
				recorded.Add(1)
			}
			return nil
		},
		ReconcileEvery:   50 * time.Millisecond,
		NeverPlacedAfter: time.Hour,
		Retry:            10 * time.Millisecond,
	})
	defer r.Close()
	r.Resume("a1", intended(t))
	deadline := time.Now().Add(3 * time.Second)
	for recorded.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := recorded.Load(); n < 4 {
		t.Fatalf("%d complete reconciliations recorded in 3 s at a 50 ms period", n)
	}
	if sess.places.Load() != 0 {
		t.Fatalf("a resumed intent was sent again")
	}
}

// An order is sent only once the account's stream is live: a stream that
// syncs after the order (under load, a slow dial) takes the order's fill in
// its first sync as its starting point, and the fill would never show.
func TestNothingSentBeforeTheStreamIsLive(t *testing.T) {
	sess := &fakeSess{streamOpens: make(chan struct{})}
	r := providers.New(providers.Config{
		Providers: map[string]provider.Provider{"fake": &fakeProv{sess: sess}},
		Open:      openFake,
		Exec:      func(context.Context, string, commands.Command) error { return nil },
		Retry:     10 * time.Millisecond,
	})
	defer r.Close()
	r.Track("a1", intended(t))
	time.Sleep(200 * time.Millisecond)
	if n := sess.places.Load(); n != 0 {
		t.Fatalf("%d placements before the stream was live", n)
	}
	close(sess.streamOpens)
	deadline := time.Now().Add(3 * time.Second)
	for sess.places.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n, live := sess.places.Load(), sess.placedLive.Load(); n != 1 || live != 1 {
		t.Fatalf("%d placements, %d of them with the stream live; want 1 and 1", n, live)
	}
}

// An order whose settlement could not be recorded (the log refused the
// commit) is never sent again: the commits that follow find its intent
// still open and look it up. A market order's client order id is free
// again at the exchange once it filled, so a second send would place it
// twice.
func TestUnrecordedSettlementIsLookedUpNotResent(t *testing.T) {
	sess := &fakeSess{finds: true}
	var settles atomic.Int32
	r := providers.New(providers.Config{
		Providers: map[string]provider.Provider{"fake": &fakeProv{sess: sess}},
		Open:      openFake,
		Exec: func(_ context.Context, _ string, c commands.Command) error {
			if _, ok := c.(*providercmd.Settle); ok {
				settles.Add(1)
				return context.DeadlineExceeded // the commit failed
			}
			return nil
		},
		NeverPlacedAfter: time.Hour,
		Retry:            10 * time.Millisecond,
	})
	defer r.Close()
	s := intended(t)
	r.Track("a1", s)
	deadline := time.Now().Add(3 * time.Second)
	for settles.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 5; i++ { // later commits of the account (stream observations, say)
		time.Sleep(30 * time.Millisecond)
		r.Track("a1", s)
	}
	deadline = time.Now().Add(3 * time.Second)
	for sess.lookups.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := sess.places.Load(); n != 1 {
		t.Fatalf("%d placements of one intent, want 1", n)
	}
	if n := sess.lookups.Load(); n < 2 {
		t.Fatalf("the unsettled intent was looked up %d times, want one after each failed record", n)
	}
}

// Stream events that wait together are recorded in one commit (a market
// order's acceptance, fill and account update), in their order; an order's
// report after an account update starts a record of its own, since an
// observation records its orders before its account updates.
func TestStreamEventsWaitingTogetherAreOneRecord(t *testing.T) {
	sess := &fakeSess{stream: make(chan provider.Event, 8)}
	r, records := streamRecords(sess)
	defer r.Close()
	order := func(status provider.Status) provider.Event {
		return &provider.OrderUpdate{Order: provider.OrderState{ClientOrderID: "p-1", Instrument: "BTCUSDT", Status: status, Quantity: events.Int(1)}}
	}
	account := &provider.AccountUpdate{Balances: []provider.Balance{{Asset: "USDT", Wallet: events.Int(5)}}}
	for _, e := range []provider.Event{order(provider.StatusWorking), order(provider.StatusFilled), account, order(provider.StatusWorking)} {
		sess.stream <- e
	}
	r.Resume("a1", intended(t))
	got := records(2, 0)
	if len(got) != 2 {
		t.Fatalf("%d records of four waiting events, want 2: %+v", len(got), got)
	}
	if o := got[0]; len(o.Orders) != 2 || o.Orders[0].Status != string(provider.StatusWorking) || o.Orders[1].Status != string(provider.StatusFilled) ||
		len(o.Balances) != 1 {
		t.Fatalf("the first record: %+v", o)
	}
	if o := got[1]; len(o.Orders) != 1 || len(o.Balances) != 0 {
		t.Fatalf("the order reported after the account update: %+v", o)
	}
}

// Since answers the events of an account's commits after one it holds up
// to another, only when it holds every commit between them (an order's
// answer is made from them; otherwise it reads the read models).
func TestSinceHoldsTheCommitsBetween(t *testing.T) {
	r := providers.New(providers.Config{
		Providers:        map[string]provider.Provider{"fake": &fakeProv{sess: &fakeSess{}}},
		Open:             openFake,
		Exec:             func(context.Context, string, commands.Command) error { return nil },
		NeverPlacedAfter: time.Hour,
	})
	defer r.Close()
	s := intended(t)
	commit := func(seq uint64) events.Committed {
		return events.Committed{Subject: "evt.account.a1", Seq: seq, Commit: events.Commit{Events: []events.Event{evacct.IntentSettled{ProviderClientOrderID: fmt.Sprint(seq)}}}}
	}
	for _, seq := range []uint64{10, 14, 15} {
		r.TrackCommit("a1", s, commit(seq))
	}
	reasons := func(evs []events.Event) (out []string) {
		for _, e := range evs {
			out = append(out, e.(evacct.IntentSettled).ProviderClientOrderID)
		}
		return out
	}
	for _, tc := range []struct {
		from, to uint64
		want     []string
		ok       bool
	}{
		{10, 15, []string{"14", "15"}, true},
		{10, 14, []string{"14"}, true},
		{14, 15, []string{"15"}, true},
		{15, 15, nil, true},
		{9, 15, nil, false},  // the intent's commit is not held
		{10, 16, nil, false}, // a commit past those held
	} {
		evs, ok := r.Since("a1", tc.from, tc.to)
		if ok != tc.ok || (ok && !slices.Equal(reasons(evs), tc.want)) {
			t.Errorf("Since(%d, %d) = %v, %v; want %v, %v", tc.from, tc.to, reasons(evs), ok, tc.want, tc.ok)
		}
	}
	for _, seq := range []uint64{16, 17, 18} { // the commit at 10 leaves the last four
		r.TrackCommit("a1", s, commit(seq))
	}
	if _, ok := r.Since("a1", 10, 18); ok {
		t.Error("Since answered from a commit no longer held")
	}
	if evs, ok := r.Since("a1", 15, 18); !ok || len(evs) != 3 {
		t.Errorf("Since(15, 18) = %d events, %v", len(evs), ok)
	}
	r.Resume("a1", s) // a takeover: nothing before it is known here
	if _, ok := r.Since("a1", 17, 18); ok {
		t.Error("Since answered across a resume")
	}
}

// The stream's reports of an order whose request is out (a market order's
// acceptance, then its fill a moment later) are one record, not one each,
// when the fill comes before the provider's answer: the order's answer
// waits for one commit of the stream, not two.
func TestAnOrdersReportsWhileItsRequestIsOutAreOneRecord(t *testing.T) {
	sess := &fakeSess{stream: make(chan provider.Event, 8)}
	release := make(chan struct{})
	sess.place = func(o provider.Order) (provider.OrderState, error) {
		report := func(st provider.Status) {
			sess.stream <- &provider.OrderUpdate{Order: provider.OrderState{ClientOrderID: o.ClientOrderID, Instrument: o.Instrument, Status: st, Quantity: o.Quantity}}
		}
		report(provider.StatusWorking)
		time.Sleep(time.Millisecond) // the fill comes apart from the acceptance
		report(provider.StatusFilled)
		<-release // the provider's answer comes later still
		return provider.OrderState{ClientOrderID: o.ClientOrderID, Instrument: o.Instrument, Status: provider.StatusFilled, Quantity: o.Quantity}, nil
	}
	r, records := streamRecords(sess)
	defer r.Close()
	defer close(release)
	r.Track("a1", intended(t))
	got := records(1, 20*time.Millisecond) // and a second, if any
	if len(got) != 1 || len(got[0].Orders) != 2 || got[0].Orders[0].Status != string(provider.StatusWorking) || got[0].Orders[1].Status != string(provider.StatusFilled) {
		t.Fatalf("the records of an order's acceptance and fill while its request is out: %+v", got)
	}
}

// streamRecords is a reactor on sess and what it recorded of the stream:
// records waits (at most 3 s) until it recorded n, then linger more, and
// answers them.
func streamRecords(sess *fakeSess) (*providers.Reactor, func(n int, linger time.Duration) []*providercmd.Observe) {
	var mu sync.Mutex
	var got []*providercmd.Observe
	r := providers.New(providers.Config{
		Providers: map[string]provider.Provider{"fake": &fakeProv{sess: sess}},
		Open:      openFake,
		Exec: func(_ context.Context, _ string, c commands.Command) error {
			if o, ok := c.(*providercmd.Observe); ok && o.Cause == "stream" {
				mu.Lock()
				got = append(got, o)
				mu.Unlock()
			}
			return nil
		},
		NeverPlacedAfter: time.Hour,
		Retry:            10 * time.Millisecond,
	})
	return r, func(n int, linger time.Duration) []*providercmd.Observe {
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(got)
		}
		for deadline := time.Now().Add(3 * time.Second); count() < n && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(linger)
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// An intent goes out within SendWithin of its decision or never: one whose
// session connects later (the provider was down at a start) settles as not
// sent at that moment, without waiting for the session, and one whose
// request is held past it before it leaves is not sent either (the
// trader's 503 provider_unavailable: nothing was placed). Sent late, it could be carried out after a lookup had found
// nothing and settled it as never placed.
func TestAnIntentIsNeverSentLate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		connectsIn  time.Duration
		hold        time.Duration
		wantPlace   int32
		wantOutcome string
	}{
		{"a session that connects in time sends it once", 20 * time.Millisecond, 0, 1, evacct.OutcomeAccepted},
		{"a session that connects after the moment sends nothing", 400 * time.Millisecond, 0, 0, evacct.OutcomeNotSent},
		{"a request held past the moment before it leaves is not sent", 0, 400 * time.Millisecond, 0, evacct.OutcomeNotSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opens := make(chan struct{})
			sess := &fakeSess{streamOpens: opens, hold: tc.hold}
			time.AfterFunc(tc.connectsIn, func() { close(opens) })
			settles := make(chan *providercmd.Settle, 4)
			r := providers.New(providers.Config{
				Providers: map[string]provider.Provider{"fake": &fakeProv{sess: sess}},
				Open:      openFake,
				Exec: func(_ context.Context, _ string, c commands.Command) error {
					if st, ok := c.(*providercmd.Settle); ok {
						settles <- st
					}
					return nil
				},
				SendWithin:       200 * time.Millisecond,
				NeverPlacedAfter: time.Hour,
				Retry:            10 * time.Millisecond,
			})
			defer r.Close()
			r.Track("a1", intended(t))
			select {
			case st := <-settles:
				if st.Outcome != tc.wantOutcome {
					t.Fatalf("settled %q (%q), want %q", st.Outcome, st.Reason, tc.wantOutcome)
				}
				if tc.wantOutcome == evacct.OutcomeNotSent && st.Reason != evacct.ReasonUnavailable {
					t.Fatalf("not sent for %q, want %q", st.Reason, evacct.ReasonUnavailable)
				}
				if tc.connectsIn > 0 && tc.wantOutcome == evacct.OutcomeNotSent && sess.live.Load() {
					t.Fatal("settled only once the session connected: the trader waited for the provider")
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the intent was not settled in 3 s")
			}
			time.Sleep(100 * time.Millisecond)
			if n := sess.places.Load(); n != tc.wantPlace {
				t.Fatalf("%d placements, want %d", n, tc.wantPlace)
			}
		})
	}
}

// windowedProv is fakeProv with a receive window of its own.
type windowedProv struct {
	fakeProv
	window time.Duration
}

func (p *windowedProv) ReceiveWindow() time.Duration { return p.window }

// An order the provider does not know is settled as never placed only once
// its moment to be sent and the provider's own receive window have both
// passed since its intent (provider.Windowed): never before a request of it
// could still be carried out.
func TestNeverPlacedWaitsForTheProvidersWindow(t *testing.T) {
	for _, window := range []time.Duration{300 * time.Millisecond, 900 * time.Millisecond} {
		t.Run(window.String(), func(t *testing.T) {
			settles := make(chan time.Time, 4)
			r := providers.New(providers.Config{
				Providers: map[string]provider.Provider{"fake": &windowedProv{fakeProv: fakeProv{sess: &fakeSess{}}, window: window}},
				Open:      openFake,
				Exec: func(_ context.Context, _ string, c commands.Command) error {
					if st, ok := c.(*providercmd.Settle); ok && st.Outcome == evacct.OutcomeNeverPlaced {
						settles <- time.Now()
					}
					return nil
				},
				SendWithin: 100 * time.Millisecond,
				Retry:      10 * time.Millisecond,
			})
			defer r.Close()
			s := intended(t)
			at := s.OpenIntents()[0].At
			r.Resume("a1", s) // looked up, never sent
			select {
			case got := <-settles:
				if after, least := got.Sub(at), 100*time.Millisecond+window; after < least || after > least+time.Second {
					t.Fatalf("settled never placed %v after its intent, want from %v", after, least)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("not settled in 5 s")
			}
		})
	}
}

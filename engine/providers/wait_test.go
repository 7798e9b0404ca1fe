package providers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/events"
)

// waited is what one Wait answered, and what its look was shown.
type waited struct {
	settled, shown bool
	rev            uint64
	open           bool // the intent was still open in the state shown
}

// waitFor runs Wait for key on a1 and answers once it has registered.
func waitFor(r *providers.Reactor, key string) <-chan waited {
	registered, out := make(chan struct{}), make(chan waited, 1)
	var once sync.Once
	go func() {
		var w waited
		w.settled, w.shown = r.Wait(context.Background(), "a1", key, func() bool { once.Do(func() { close(registered) }); return true },
			5*time.Second, func(s *account.State, v uint64) { w.rev, w.open = v, len(s.OpenIntents()) > 0 })
		out <- w
	}()
	<-registered
	return out
}

// An order's answer is shown the account's state of the commit that
// settled its intent, as that commit is applied, so it need not ask the
// account again; and the commit recording the provider's answer closes the
// request's channel (Sending) itself, before the sender hears of it. A
// start or takeover wakes it without a state: it reads the account then.
func TestAnAnswerIsShownTheCommitThatSettledItsIntent(t *testing.T) {
	var (
		r   *providers.Reactor
		mu  sync.Mutex
		s   = intended(t)
		seq = uint64(10) // the intent's commit
	)
	in := s.OpenIntents()[0]
	key := providercmd.IntentKey(in.Op, in.ProviderClientOrderID)
	atCommit := make(chan bool, 1) // whether the request's channel was still open once its answer's record was applied
	r = providers.New(providers.Config{
		Providers: map[string]provider.Provider{"fake": &fakeProv{sess: &fakeSess{}}},
		Open:      openFake,
		// Exec does what the account's mailbox does: decide, apply, then
		// hand the commit to the reactor (the account's After hook).
		Exec: func(_ context.Context, id string, c commands.Command) error {
			settle, ok := c.(*providercmd.Settle)
			if !ok {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			evs, err := account.Decide(s, commands.Envelope{ID: ulid.Make(), At: time.Now(), Cmd: settle})
			if err != nil {
				return err
			}
			for _, e := range evs {
				s = account.Apply(s, e)
			}
			seq++
			r.TrackCommit(id, s, events.Committed{Subject: "evt.account." + id, Seq: seq, Commit: events.Commit{Events: evs}})
			atCommit <- r.Sending(id, key) != nil
			return nil
		},
		NeverPlacedAfter: time.Hour,
	})
	defer r.Close()

	answer := waitFor(r, key)
	mu.Lock()
	r.TrackCommit("a1", s, events.Committed{Subject: "evt.account.a1", Seq: seq, Commit: events.Commit{Events: []events.Event{in}}}) // the intent's: sent
	mu.Unlock()
	var w waited
	select {
	case w = <-answer:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer was never woken")
	}
	if !w.settled || !w.shown || w.rev != 11 || w.open {
		t.Fatalf("the answer's wait: %+v, want settled and shown the state of the settling commit at 11, the intent no longer open", w)
	}
	select {
	case open := <-atCommit:
		if open {
			t.Fatal("the request's channel was still open once the commit recording its answer had been applied")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's answer was never recorded")
	}

	// A takeover (Resume) finds the intent settled: the waiter wakes with
	// nothing shown, and reads the account itself.
	again := waitFor(r, key)
	mu.Lock()
	r.Resume("a1", s)
	mu.Unlock()
	select {
	case w = <-again:
	case <-time.After(5 * time.Second):
		t.Fatal("a resume did not wake the waiter")
	}
	if !w.settled || w.shown {
		t.Fatalf("after a resume: %+v, want settled with nothing shown", w)
	}
}

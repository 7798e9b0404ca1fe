package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
)

// Two reactors that both believe they deliver (a leader paused past its
// lease, then resumed, beside the new one) never send one attempt twice:
// each attempt is claimed in the endpoint's ledger before it is sent, and
// every event is delivered once. A third reactor started afterwards (the
// next leader) finds nothing left to send.
func TestTwoDeliverersNeverSendAnAttemptTwice(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{} // event id / attempt -> times received
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID string `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		got[ev.ID+"/"+r.Header.Get(AttemptHeader)]++
		mu.Unlock()
	}))
	defer srv.Close()
	log, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	reg := events.Merge(evacct.Registry(), evfirm.Registry())
	at := time.Now().UTC()
	appendCommit := func(subject string, evs ...events.Event) {
		t.Helper()
		data, err := reg.Encode(events.Commit{CommandID: ulid.Make().String(), At: at, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		last, err := log.LastSubjectSeq(context.Background(), subject)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := log.Append(context.Background(), subject, last, ulid.Make().String(), data); err != nil {
			t.Fatal(err)
		}
	}
	appendCommit("evt.firm.f", evfirm.WebhookRegistered{WebhookID: "w1", URL: srv.URL + "/in", At: at})
	appendCommit("evt.account.a1", evacct.Opened{AccountID: "a1", TenantID: "f", AccountNumber: "EV1", At: at})
	const n = 20
	for i := range n {
		if i%2 == 0 {
			appendCommit("evt.account.a1", evacct.FirmHalted{At: at})
		} else {
			appendCommit("evt.account.a1", evacct.FirmResumed{At: at})
		}
	}
	start := func() *Reactor {
		r, err := New(Config{Log: log, Registry: reg, Key: make([]byte, 32), Client: srv.Client(), AllowPrivate: true,
			Timeout: 5 * time.Second, Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := start(), start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		events := len(got)
		mu.Unlock()
		if events >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.Close(time.Second)
	b.Close(time.Second)
	c := start()
	time.Sleep(300 * time.Millisecond)
	c.Close(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d events delivered, want %d: %v", len(got), n, got)
	}
	for k, times := range got {
		if times != 1 {
			t.Fatalf("%s received %d times", k, times)
		}
		if k[len(k)-2:] != "/1" {
			t.Fatalf("%s: want every event on its first attempt", k)
		}
	}
}

// The ledger's decision on a claim: an attempt is taken once; a try of the
// claim that took it (its commit stored, its answer lost) goes on without
// a commit; any other claim, one of a commit made before claims were named,
// and the claim of an attempt already made are refused.
func TestAClaimTriedAgainIsKnownAsItsOwn(t *testing.T) {
	start := func(attempt int, claim string) commands.Envelope {
		return commands.Envelope{Cmd: &firmcmd.StartAttempt{Start: evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: attempt, Claim: claim}}}
	}
	for _, tc := range []struct {
		name    string
		before  []events.Event
		try     commands.Envelope
		wantEvs int
		wantErr error
	}{
		{"a first claim takes the attempt", nil, start(1, "A"), 1, nil},
		{"the same claim again goes on, nothing committed", []events.Event{evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 1, Claim: "A"}}, start(1, "A"), 0, nil},
		{"another claim of the attempt is refused", []events.Event{evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 1, Claim: "A"}}, start(1, "B"), 0, ErrAttemptTaken},
		{"a claim without a name is refused", []events.Event{evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 1, Claim: "A"}}, start(1, ""), 0, ErrAttemptTaken},
		{"an attempt started before claims were named is refused", []events.Event{evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 1}}, start(1, "A"), 0, ErrAttemptTaken},
		{"the claim of an attempt already made is refused", []events.Event{evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 1, Claim: "A"},
			evfirm.DeliveryAttempted{DeliveryID: "d1", Attempt: 1, Status: "failed"}}, start(1, "A"), 0, ErrAttemptTaken},
		{"the next attempt is claimed anew", []events.Event{evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 1, Claim: "A"},
			evfirm.DeliveryAttempted{DeliveryID: "d1", Attempt: 1, Status: "failed"}}, start(2, "C"), 1, nil},
		{"a later attempt's claim is not an earlier one's", []events.Event{evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 1, Claim: "A"},
			evfirm.DeliveryStarted{DeliveryID: "d1", Attempt: 2, Claim: "B"}}, start(1, "A"), 0, ErrAttemptTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &ledger{taken: map[string]int{}, claims: map[string]string{}}
			for _, e := range tc.before {
				l = applyLedger(l, e)
			}
			evs, err := decideLedger(l, tc.try)
			if !errors.Is(err, tc.wantErr) || len(evs) != tc.wantEvs {
				t.Fatalf("got %d events, %v; want %d, %v", len(evs), err, tc.wantEvs, tc.wantErr)
			}
		})
	}
}

// Through the ledger on a real log: a claim whose commit was stored and
// whose answer was lost is tried again by the same delivery and goes on to
// send; a claim by another delivery object (another node's) is refused.
func TestAClaimStoredWithItsAnswerLostStillSends(t *testing.T) {
	log, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	r, err := New(Config{Log: log, Registry: events.Merge(evacct.Registry(), evfirm.Registry()), Key: make([]byte, 32),
		AllowPrivate: true, Timeout: 5 * time.Second, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	ep, d := &endpoint{tenant: "f", id: "w1"}, &delivery{ev: Event{ID: "ev1"}}
	if err := r.claim(ep, d, 1); err != nil { // stored; say its answer was lost
		t.Fatal(err)
	}
	if err := r.claim(ep, d, 1); err != nil {
		t.Fatalf("the same claim tried again: %v", err)
	}
	if err := r.claim(ep, &delivery{ev: Event{ID: "ev1"}}, 1); !errors.Is(err, ErrAttemptTaken) {
		t.Fatalf("another node's claim of the attempt: %v", err)
	}
}

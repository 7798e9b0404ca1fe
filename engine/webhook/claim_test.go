package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

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

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
)

// markRig is a log on an embedded JetStream and one HTTPS receiver whose
// paths are the endpoints; /fail/... answers 500 until healed.
type markRig struct {
	t   *testing.T
	log *eventlog.Log
	reg events.Registry
	srv *httptest.Server
	at  time.Time

	mu      sync.Mutex
	healed  bool
	got     map[string]int            // path event-id attempt -> times answered 2xx
	tries   map[string]int            // path event-id -> attempts received
	payload map[string]map[string]any // event id -> data
}

func newMarkRig(t *testing.T) *markRig {
	t.Helper()
	g := &markRig{t: t, reg: events.Merge(evacct.Registry(), evfirm.Registry()), at: time.Now().UTC(),
		got: map[string]int{}, tries: map[string]int{}, payload: map[string]map[string]any{}}
	g.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID   string         `json:"id"`
			Data map[string]any `json:"data"`
		}
		_ = json.NewDecoder(r.Body).Decode(&ev)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.tries[r.URL.Path+" "+ev.ID]++
		g.payload[ev.ID] = ev.Data
		if strings.HasPrefix(r.URL.Path, "/fail/") && !g.healed {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		g.got[r.URL.Path+" "+ev.ID+" "+r.Header.Get(AttemptHeader)]++
	}))
	t.Cleanup(g.srv.Close)
	var err error
	g.log, err = eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "interval", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.log.Close)
	return g
}

// commit appends one commit and returns its sequence.
func (g *markRig) commit(subject string, evs ...events.Event) uint64 {
	g.t.Helper()
	ctx := context.Background()
	data, err := g.reg.Encode(events.Commit{CommandID: ulid.Make().String(), At: g.at, Events: evs})
	if err != nil {
		g.t.Fatal(err)
	}
	last, err := g.log.LastSubjectSeq(ctx, subject)
	if err != nil {
		g.t.Fatal(err)
	}
	seq, err := g.log.Append(ctx, subject, last, ulid.Make().String(), data)
	if err != nil {
		g.t.Fatal(err)
	}
	return seq
}

func (g *markRig) register(firm, id, path string) uint64 {
	return g.commit("evt.firm."+firm, evfirm.WebhookRegistered{WebhookID: id, URL: g.srv.URL + path, At: g.at})
}

func (g *markRig) open(firm, account, number string) uint64 {
	return g.commit("evt.account."+account, evacct.Opened{AccountID: account, TenantID: firm, AccountNumber: number, At: g.at})
}

// halt appends a commit on account that yields one risk.locked, and
// returns its event id.
func (g *markRig) halt(account string) string {
	return fmt.Sprintf("evt_%d_0", g.commit("evt.account."+account, evacct.FirmHalted{At: g.at}))
}

// start starts a reactor whose failed attempts are retried after wait.
func (g *markRig) start(wait time.Duration) *Reactor {
	g.t.Helper()
	r, err := New(Config{Log: g.log, Registry: g.reg, Key: make([]byte, 32), Client: g.srv.Client(), AllowPrivate: true,
		Timeout: 5 * time.Second, Now: time.Now, MarkEvery: 20 * time.Millisecond,
		Backoff: []time.Duration{wait, wait, wait, wait, wait}})
	if err != nil {
		g.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		g.t.Fatal(err)
	}
	return r
}

// delivered is how many times path answered 2xx to event id at attempt.
func (g *markRig) delivered(path, id string, attempt int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got[path+" "+id+" "+strconv.Itoa(attempt)]
}

// sent is how many attempts of event id path received.
func (g *markRig) sent(path, id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tries[path+" "+id]
}

func (g *markRig) heal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.healed = true
}

// saved is the mark in the bucket (0: none).
func (g *markRig) saved() uint64 {
	g.t.Helper()
	ctx := context.Background()
	kv, err := g.log.JetStream().KeyValue(ctx, MarkBucket(g.log.StreamName()))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0
	}
	if err != nil {
		g.t.Fatal(err)
	}
	e, err := kv.Get(ctx, markKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0
	}
	if err != nil {
		g.t.Fatal(err)
	}
	var m savedMark
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		g.t.Fatal(err)
	}
	return m.Seq
}

// putMark writes a mark into the bucket as a reactor would.
func (g *markRig) putMark(m savedMark) {
	g.t.Helper()
	ctx := context.Background()
	kv, err := g.log.JetStream().KeyValue(ctx, MarkBucket(g.log.StreamName()))
	if err != nil {
		g.t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	if _, err := kv.Put(ctx, markKey, b); err != nil {
		g.t.Fatal(err)
	}
}

func (g *markRig) last() uint64 {
	g.t.Helper()
	n, err := g.log.LastSeq(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	return n
}

// seqOf is the sequence of the commit an event id names (evt_<seq>_<i>).
func seqOf(id string) uint64 {
	n, _ := strconv.ParseUint(strings.Split(id, "_")[1], 10, 64)
	return n
}

// A delivery whose endpoint fails holds the mark back while other
// endpoints' deliveries move on; after a restart from that mark it is tried
// again on its schedule and delivered, and nothing delivered before is sent
// again.
func TestADeliveryPendingAcrossARestartIsStillDelivered(t *testing.T) {
	g := newMarkRig(t)
	g.register("f", "w1", "/fail/w1")
	g.register("g", "w2", "/w2")
	g.open("f", "a1", "EV1")
	g.open("g", "b1", "EV2")
	a := g.start(3 * time.Second)
	pending := g.halt("a1")
	seq := seqOf(pending)
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if n := g.sent("/fail/w1", pending); n != 1 {
			return fmt.Errorf("%d attempts of %s", n, pending)
		}
		return nil
	})
	var others []string
	for range 5 {
		others = append(others, g.halt("b1"))
	}
	g.register("g", "w3", "/w3") // a firm commit past the mark
	enginetest.WaitFor(t, 5*time.Second, func() error {
		for _, id := range others {
			if g.delivered("/w2", id, 1) != 1 {
				return fmt.Errorf("%s not delivered", id)
			}
		}
		if m := g.saved(); m != seq {
			return fmt.Errorf("mark %d, want %d (the pending delivery's commit)", m, seq)
		}
		return nil
	})
	a.Close(time.Second)
	g.heal()
	b := g.start(3 * time.Second)
	defer b.Close(time.Second)
	enginetest.WaitFor(t, 10*time.Second, func() error {
		if g.delivered("/fail/w1", pending, 2) != 1 {
			return fmt.Errorf("%s not delivered on its second attempt", pending)
		}
		return nil
	})
	fresh := g.halt("b1")
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if g.delivered("/w2", fresh, 1) != 1 || g.delivered("/w3", fresh, 1) != 1 {
			return fmt.Errorf("%s not delivered to w2 and w3", fresh)
		}
		return nil
	})
	for _, id := range others {
		if n := g.sent("/w2", id); n != 1 {
			t.Fatalf("%s sent %d times", id, n)
		}
	}
	if n := g.sent("/fail/w1", pending); n != 2 {
		t.Fatalf("%s tried %d times, want 2", pending, n)
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if m := g.saved(); m <= seq {
			return fmt.Errorf("mark %d did not pass %d once it was delivered", m, seq)
		}
		return nil
	})
}

// Deliveries finished before the mark are never sent again after a
// restart, and an account opened before the mark still has its events
// delivered, with its number.
func TestARestartFromTheMarkSendsNothingTwiceAndKnowsOldAccounts(t *testing.T) {
	g := newMarkRig(t)
	g.register("f", "w1", "/w1")
	g.open("f", "a1", "EV1")
	a := g.start(time.Second)
	var ids []string
	for range 3 {
		ids = append(ids, g.halt("a1"))
	}
	enginetest.WaitFor(t, 5*time.Second, func() error {
		for _, id := range ids {
			if g.delivered("/w1", id, 1) != 1 {
				return fmt.Errorf("%s not delivered", id)
			}
		}
		return nil
	})
	a.Close(time.Second)
	if m, seq := g.saved(), seqOf(ids[2]); m <= seq {
		t.Fatalf("mark %d after a close with nothing pending, want past %d", m, seq)
	}
	b := g.start(time.Second)
	defer b.Close(time.Second)
	late := g.halt("a1")
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if g.delivered("/w1", late, 1) != 1 {
			return fmt.Errorf("%s not delivered", late)
		}
		return nil
	})
	for _, id := range ids {
		if n := g.sent("/w1", id); n != 1 {
			t.Fatalf("%s sent %d times", id, n)
		}
	}
	g.mu.Lock()
	number := g.payload[late]["accountNumber"]
	g.mu.Unlock()
	if number != "EV1" {
		t.Fatalf("accountNumber %v, want EV1", number)
	}
}

// A start with a mark reads the firm subjects before it and the log after
// it, not the history of accounts.
func TestAStartWithTheMarkReadsLittleOfTheLog(t *testing.T) {
	g := newMarkRig(t)
	g.register("f", "w1", "/w1")
	g.commit("evt.firm.g", evfirm.RegistrationLinked{RegistrationID: "r", At: g.at}) // a firm without endpoints
	g.open("f", "a1", "EV1")
	g.open("g", "b1", "EV2")
	const history = 1000
	for range history {
		g.halt("b1")
	}
	a := g.start(time.Second)
	first := g.halt("a1")
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if g.delivered("/w1", first, 1) != 1 {
			return fmt.Errorf("%s not delivered", first)
		}
		return nil
	})
	if n := a.reads.Load(); n < history {
		t.Fatalf("a start without a mark read %d commits, want the whole log", n)
	}
	a.Close(time.Second)
	total := g.last()
	b := g.start(time.Second)
	defer b.Close(time.Second)
	if n := b.reads.Load(); n > 10 {
		t.Fatalf("the start read %d commits of %d, want the firms' few", n, total)
	}
	next := g.halt("a1")
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if g.delivered("/w1", next, 1) != 1 {
			return fmt.Errorf("%s not delivered", next)
		}
		return nil
	})
	if n := g.sent("/w1", first); n != 1 {
		t.Fatalf("%s sent %d times", first, n)
	}
}

// A mark of another log, past the log's end, or naming another commit
// before it (a log restored from an older backup keeps its identity) is
// ignored: the start reads the whole log.
func TestAMarkThisLogCannotUseIsIgnored(t *testing.T) {
	g := newMarkRig(t)
	g.register("f", "w1", "/w1")
	g.open("f", "a1", "EV1")
	for range 20 {
		g.halt("a1")
	}
	a := g.start(time.Second)
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if m := g.saved(); m != g.last()+1 {
			return fmt.Errorf("mark %d, want %d", m, g.last()+1)
		}
		return nil
	})
	a.Close(time.Second)
	last := g.last()
	before, err := g.log.At(context.Background(), last)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mark savedMark
	}{
		{"another log", savedMark{Format: markFormat, Log: "01OTHERLOG", Seq: last + 1, Before: before.ID}},
		{"past the end", savedMark{Format: markFormat, Log: g.log.ID(), Seq: last + 5, Before: before.ID}},
		{"another commit before it", savedMark{Format: markFormat, Log: g.log.ID(), Seq: last + 1, Before: "01OTHERCOMMIT"}},
		{"another format", savedMark{Format: markFormat + 1, Log: g.log.ID(), Seq: last + 1, Before: before.ID}},
	} {
		g.putMark(c.mark)
		r := g.start(time.Second)
		reads := r.reads.Load()
		r.Close(time.Second)
		if reads != int64(last) {
			t.Fatalf("%s: the start read %d commits, want the whole log's %d", c.name, reads, last)
		}
	}
	g.putMark(savedMark{Format: markFormat, Log: g.log.ID(), Seq: last + 1, Before: before.ID})
	r := g.start(time.Second)
	reads := r.reads.Load()
	r.Close(time.Second)
	if reads > 2 {
		t.Fatalf("a good mark: the start read %d commits of %d", reads, last)
	}
}

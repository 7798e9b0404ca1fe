package eventlog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// A new log's first commit is its identity: an empty commit that any reader
// decodes, whose id is the log's id; reopening keeps it and writes no other.
func TestNewLogBeginsWithItsIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := embedded(dir)(t)
	id := l.ID()
	if _, err := ulid.ParseStrict(id); err != nil {
		t.Fatalf("log id %q: %v", id, err)
	}
	var first []eventlog.Msg
	if _, err := l.Replay(ctx, 0, func(m eventlog.Msg) error { first = append(first, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Seq != 1 || first[0].Subject != l.IDSubject() || first[0].ID != id {
		t.Fatalf("a new log holds %+v, want its identity commit at 1", first)
	}
	c, err := events.Registry{}.Decode(first[0].Data)
	if err != nil || c.CommandID != id || len(c.Events) != 0 {
		t.Fatalf("the identity commit decodes as %+v, %v", c, err)
	}
	if _, err := l.Append(ctx, l.Subject("account.a"), 0, ulid.Make().String(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = embedded(dir)(t)
	defer l.Close()
	if l.ID() != id {
		t.Fatalf("reopened log id %s, was %s", l.ID(), id)
	}
	if last, err := l.LastSeq(ctx); err != nil || last != 2 {
		t.Fatalf("reopened log ends at %d (%v), want 2: no second identity", last, err)
	}
}

// A stream from before logs had ids gets its identity after its last commit,
// once; a read-only open writes none.
func TestOldLogGetsAnIdentityOnce(t *testing.T) {
	ctx := context.Background()
	url := tcpServer(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, fmt.Sprintf("old.account.a%d", i), []byte("c")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := eventlog.Config{URL: url, Sync: "always", Replicas: 1, Stream: "OLD", Prefix: "old"}
	ro := cfg
	ro.ReadOnly = true
	r, err := eventlog.Open(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID() != "" {
		t.Fatalf("read-only open of an old log has id %q", r.ID())
	}
	r.Close()
	l, err := eventlog.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := l.ID()
	l.Close()
	if id == "" {
		t.Fatal("no id for an old log")
	}
	l, err = eventlog.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if last, err := l.LastSubjectSeq(ctx, l.IDSubject()); err != nil || last != 4 || l.ID() != id {
		t.Fatalf("identity at %d (%v) id %s, want 4 and %s", last, err, l.ID(), id)
	}
}

// Engines opening a new stream of an external server at once agree on one
// identity.
func TestConcurrentOpensAgreeOnOneIdentity(t *testing.T) {
	url := tcpServer(t)
	const n = 4
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := eventlog.Open(context.Background(), eventlog.Config{URL: url, Sync: "always", Replicas: 1})
			if err != nil {
				t.Error(err)
				return
			}
			defer l.Close()
			ids[i] = l.ID()
		}()
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] || id == "" {
			t.Fatalf("ids %v", ids)
		}
	}
	l := externalLogOn(t, url)
	if n, err := l.LastSeq(context.Background()); err != nil || n != 1 {
		t.Fatalf("stream ends at %d (%v), want one identity commit", n, err)
	}
}

func externalLogOn(t *testing.T, url string) *eventlog.Log {
	l, err := eventlog.Open(context.Background(), eventlog.Config{URL: url, Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"golang.org/x/mod/semver"

	"github.com/svc/engine/engine/eventlog"
)

// opener opens a log for the suite; the same suite runs on every kind of log.
type opener func(t *testing.T) *eventlog.Log

func embedded(dir string) opener {
	return func(t *testing.T) *eventlog.Log {
		l, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: dir, Sync: "always", Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// externalURL is NATS_URL, or the machine's NATS at 127.0.0.1:4222 when it answers.
func externalURL(t *testing.T) string {
	if u := os.Getenv("NATS_URL"); u != "" {
		return u
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:4222", 200*time.Millisecond)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no external NATS at 127.0.0.1:4222 under CI")
		}
		t.Skip("no external NATS")
	}
	c.Close()
	return "nats://127.0.0.1:4222"
}

func suite(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	defer l.Close()
	subj := l.Subject("account.t" + ulid.Make().String())
	other := l.Subject("account.o" + ulid.Make().String())

	s1, err := l.Append(ctx, subj, 0, ulid.Make().String(), []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	// Another subject moving does not disturb the first one's expectation.
	if _, err := l.Append(ctx, other, 0, ulid.Make().String(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A writer deciding on a stale revision is refused.
	if _, err := l.Append(ctx, subj, 0, ulid.Make().String(), []byte("stale")); !errors.Is(err, eventlog.ErrConcurrency) {
		t.Fatalf("stale append: %v", err)
	}
	s2, err := l.Append(ctx, subj, s1, ulid.Make().String(), []byte("two"))
	if err != nil || s2 <= s1 {
		t.Fatalf("second append %d after %d: %v", s2, s1, err)
	}
	// The same message id inside the dedupe window stores nothing new.
	id := ulid.Make().String()
	s3, err := l.Append(ctx, subj, s2, id, []byte("three"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := l.Append(ctx, subj, s3, id, []byte("three")); err != nil && !errors.Is(err, eventlog.ErrConcurrency) {
		t.Fatalf("duplicate append: %d %v", again, err)
	}
	var got []string
	last, err := l.Load(ctx, subj, func(m eventlog.Msg) error { got = append(got, string(m.Data)); return nil })
	if err != nil || last != s3 || fmt.Sprint(got) != "[one two three]" {
		t.Fatalf("load %v last %d: %v", got, last, err)
	}
	if n, err := l.LastSubjectSeq(ctx, l.Subject("account.none")); err != nil || n != 0 {
		t.Fatalf("empty subject %d %v", n, err)
	}
	// Replay from s1 sees everything after it, in order.
	var seqs []uint64
	if _, err := l.Replay(ctx, s1, func(m eventlog.Msg) error { seqs = append(seqs, m.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] || seqs[0] <= s1 {
			t.Fatalf("replay out of order: %v", seqs)
		}
	}
	// Follow delivers commits appended later.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	seen := make(chan uint64, 16)
	go func() {
		_ = l.Follow(fctx, s3, func(m eventlog.Msg) error { seen <- m.Seq; return nil })
	}()
	s4, err := l.Append(ctx, subj, s3, ulid.Make().String(), []byte("four"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case s := <-seen:
			if s == s4 {
				return
			}
		case <-fctx.Done():
			t.Fatal("follow did not deliver the new commit")
		}
	}
}

func TestEmbedded(t *testing.T) { suite(t, embedded(t.TempDir())) }

// externalLog opens a log on the NATS at url, in a stream of its own that
// is deleted afterwards.
func externalLog(url string, groupAbove int) opener {
	stream := "T" + ulid.Make().String()
	return func(t *testing.T) *eventlog.Log {
		l, err := eventlog.Open(context.Background(), eventlog.Config{URL: url, Sync: "always", Replicas: 1,
			Stream: stream, Prefix: "t" + stream, GroupAbove: groupAbove})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteStream(t, url, stream) })
		return l
	}
}

// deleteStream removes a test's stream through a connection of its own (the
// test may have closed the log's), and fails the test when it cannot.
func deleteStream(t *testing.T, url, stream string) {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Errorf("cleanup: connect: %v", err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		err = js.DeleteStream(context.Background(), stream)
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("cleanup: delete stream %s: %v", stream, err)
	}
}

// streamNames lists the streams on the server at url.
func streamNames(t *testing.T, url string) []string {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := js.StreamNames(context.Background())
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// A test on an external server leaves no stream behind, also when it closed
// its log before its cleanup ran.
func TestExternalTestsLeaveNoStream(t *testing.T) {
	url := externalURL(t)
	before := streamNames(t, url)
	t.Run("uses a stream", func(t *testing.T) {
		l := externalLog(url, 0)(t)
		if _, err := l.Append(context.Background(), l.Subject("account.x"), 0, ulid.Make().String(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		l.Close()
	})
	if after := streamNames(t, url); !slices.Equal(before, after) {
		t.Fatalf("streams before %v, after %v", before, after)
	}
}

// The machine's NATS (or NATS_URL): group commit is on exactly when the
// server is 2.12 or later (the one here is older, and appends go one by one).
func TestExternal(t *testing.T) {
	open := externalLog(externalURL(t), 0)
	l := open(t)
	version := l.Conn().ConnectedServerVersion()
	if want := semver.Compare("v"+version, "v2.12.0") >= 0; l.GroupCommit() != want {
		t.Fatalf("server %s: group commit %v, want %v", version, l.GroupCommit(), want)
	}
	l.Close()
	suite(t, open)
}

// tcpServer is a nats-server of this module's version on a free port of
// 127.0.0.1, outside the engine's process connection: an external server
// new enough for atomic batches.
func tcpServer(t *testing.T) string { return natsServer(t).ClientURL() }

// natsServer is that server itself (fsync always), which a test may shut
// down; it is shut down at the test's end.
func natsServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), SyncAlways: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}

// An external server of 2.12 or later gets group commit: every append
// grouped, the acceptance suite holds.
func TestExternalGroupCommit(t *testing.T) {
	open := externalLog(tcpServer(t), -1)
	l := open(t)
	if !l.GroupCommit() {
		t.Fatalf("no group commit on nats-server %s", l.Conn().ConnectedServerVersion())
	}
	l.Close()
	suite(t, open)
}

func TestEmbeddedKeepsCommitsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	l := embedded(dir)(t)
	subj := l.Subject("account.r")
	seq, err := l.Append(context.Background(), subj, 0, ulid.Make().String(), []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = embedded(dir)(t)
	defer l.Close()
	if last, err := l.LastSubjectSeq(context.Background(), subj); err != nil || last != seq {
		t.Fatalf("after restart last %d, want %d: %v", last, seq, err)
	}
}

// Follow and Replay call fn from one goroutine at a time, and never once they
// returned: a caller may close what fn writes to as soon as Follow is back.
// Replay stops at its last sequence; an error from fn ends either with it.
func TestFollowNeverCallsBackAfterReturning(t *testing.T) {
	ctx := context.Background()
	l := embedded(t.TempDir())(t)
	defer l.Close()
	subj := l.Subject("account.f")
	var last uint64
	for i := range 50 {
		seq, err := l.Append(ctx, subj, last, ulid.Make().String(), []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	var inside, calls atomic.Int32
	returned := atomic.Bool{}
	slow := func(eventlog.Msg) error {
		if returned.Load() {
			t.Error("fn called after Follow returned")
		}
		if inside.Add(1) != 1 {
			t.Error("fn called concurrently")
		}
		calls.Add(1)
		time.Sleep(5 * time.Millisecond)
		inside.Add(-1)
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, 60*time.Millisecond)
	defer cancel()
	if err := l.Follow(fctx, 0, slow); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Follow = %v, want the deadline", err)
	}
	returned.Store(true)
	if inside.Load() != 0 {
		t.Fatal("fn still running after Follow returned")
	}
	n := calls.Load()
	time.Sleep(50 * time.Millisecond)
	if calls.Load() != n || n == 0 || n >= 50 {
		t.Fatalf("fn calls: %d after return, %d later", n, calls.Load())
	}

	var seqs []uint64 // the identity commit is 1, these 2..51
	got, err := l.Replay(ctx, 10, func(m eventlog.Msg) error { seqs = append(seqs, m.Seq); return nil })
	if err != nil || got != last || len(seqs) != 41 || seqs[0] != 11 || seqs[40] != last {
		t.Fatalf("Replay from 10 = %d, %v; saw %d commits", got, err, len(seqs))
	}
	boom := errors.New("boom")
	_, err = l.Replay(ctx, 0, func(m eventlog.Msg) error {
		if m.Seq == 7 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Replay with a failing fn = %v", err)
	}
}

// Two logs may not take the same subjects on one server: the second is
// refused with an error naming the stream that holds them. With prefixes of
// their own, both open.
func TestASecondStreamOnTheSameSubjectsIsRefusedNamingTheFirst(t *testing.T) {
	url := externalURL(t)
	first, second := "T"+ulid.Make().String(), "T"+ulid.Make().String()
	prefix := "t" + first
	l, err := eventlog.Open(context.Background(), eventlog.Config{URL: url, Sync: "always", Replicas: 1, Stream: first, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteStream(t, url, first) })
	defer l.Close()
	_, err = eventlog.Open(context.Background(), eventlog.Config{URL: url, Sync: "always", Replicas: 1, Stream: second, Prefix: prefix})
	if !errors.Is(err, eventlog.ErrSubjectsTaken) || !strings.Contains(err.Error(), first) {
		t.Fatalf("second stream on the same subjects: %v", err)
	}
	l2, err := eventlog.Open(context.Background(), eventlog.Config{URL: url, Sync: "always", Replicas: 1, Stream: second, Prefix: "t" + second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteStream(t, url, second) })
	defer l2.Close()
	// The same logical subject lands in each deployment's own stream.
	for _, lg := range []*eventlog.Log{l, l2} {
		if _, err := lg.Append(context.Background(), "evt.account.same", 0, ulid.Make().String(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		var got []string
		if _, err := lg.Load(context.Background(), "evt.account.same", func(m eventlog.Msg) error { got = append(got, m.Subject); return nil }); err != nil || len(got) != 1 || got[0] != "evt.account.same" {
			t.Fatalf("load: %v %v", got, err)
		}
	}
}

// While the server is gone an append is refused at once, before sending,
// with ErrLogUnavailable: never buffered to leave after a reconnect, never an
// unknown outcome.
func TestAnAppendWhileTheServerIsGoneIsRefusedAtOnce(t *testing.T) {
	s, l := logOnItsOwnServer(t)
	s.Shutdown()
	s.WaitForShutdown()
	// The client notices the loss (an append caught in flight at that moment
	// may have reached the server: that one alone is an unknown outcome).
	for deadline := time.Now().Add(5 * time.Second); l.Connected(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client never noticed the server is gone")
		}
	}
	for i := 0; i < 3; i++ {
		began := time.Now()
		_, err := l.Append(context.Background(), l.Subject("account.down"), 0, ulid.Make().String(), []byte("x"))
		if !errors.Is(err, eventlog.ErrLogUnavailable) || errors.Is(err, eventlog.ErrOutcomeUnknown) {
			t.Fatalf("append while the server is gone: %v", err)
		}
		if took := time.Since(began); took > time.Second {
			t.Fatalf("the refusal took %v", took)
		}
	}
}

// A CommitContext ends with the connection it was made on: an append on it
// after that connection broke is refused before sending, with
// ErrLogUnavailable, even once the log has reconnected, while an append on
// a context of the new connection is stored.
func TestACommitContextEndsWithItsConnection(t *testing.T) {
	dir := t.TempDir()
	start := func(port int) *server.Server {
		s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true,
			StoreDir: dir, SyncAlways: true, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		return s
	}
	s := start(server.RANDOM_PORT)
	port := s.Addr().(*net.TCPAddr).Port
	l, err := eventlog.Open(context.Background(), eventlog.Config{URL: s.ClientURL(), Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	subj := l.Subject("account.c" + ulid.Make().String())
	ctx, cancel := l.CommitContext(time.Now().Add(10 * time.Second))
	defer cancel()
	seq, err := l.Append(ctx, subj, 0, ulid.Make().String(), []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	// The client notices the broken connection on its own goroutine: until
	// then it reports itself connected, and an append sent meanwhile meets
	// the break in flight (an unknown outcome, rightly). The context ends
	// once it has noticed.
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the commit context did not end with its connection")
	}
	s = start(port)
	defer s.Shutdown()
	for deadline := time.Now().Add(10 * time.Second); !l.Connected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the log never reconnected")
		}
	}
	if _, err := l.Append(ctx, subj, seq, ulid.Make().String(), []byte("two")); !errors.Is(err, eventlog.ErrLogUnavailable) {
		t.Fatalf("append on the broken connection's context: %v", err)
	}
	ctx2, cancel2 := l.CommitContext(time.Now().Add(10 * time.Second))
	defer cancel2()
	if _, err := l.Append(ctx2, subj, seq, ulid.Make().String(), []byte("two")); err != nil {
		t.Fatalf("append on the new connection's context: %v", err)
	}
}

// A read while the log cannot be reached is ErrLogUnavailable: a command
// that needed it (an account's load) answers log_unavailable, safe to
// retry, not a failure of its own.
func TestAReadWhileTheLogIsDownIsUnavailable(t *testing.T) {
	s, l := logOnItsOwnServer(t)
	subj := l.Subject("account.r" + ulid.Make().String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.Append(ctx, subj, 0, ulid.Make().String(), []byte("one")); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	if _, _, err := l.Last(ctx, subj); !errors.Is(err, eventlog.ErrLogUnavailable) {
		t.Fatalf("last with the log down: %v", err)
	}
	if _, err := l.LastSubjectSeq(ctx, subj); !errors.Is(err, eventlog.ErrLogUnavailable) {
		t.Fatalf("last sequence with the log down: %v", err)
	}
	if _, err := l.At(ctx, 1); !errors.Is(err, eventlog.ErrLogUnavailable) {
		t.Fatalf("a commit by sequence with the log down: %v", err)
	}
}

// logOnItsOwnServer opens a log on a natsServer of its own, which the test
// may shut down; the log closes at the test's end.
func logOnItsOwnServer(t *testing.T) (*server.Server, *eventlog.Log) {
	t.Helper()
	s := natsServer(t)
	l, err := eventlog.Open(context.Background(), eventlog.Config{URL: s.ClientURL(), Sync: "always", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return s, l
}

// Every read of the log makes a consumer on the server, and the server
// allows 1,000 a stream by default. A read that ended must not leave its
// consumer behind for minutes: a node loading its aggregates after a few
// restarts reached the limit and was refused every read.
func TestEndedReadsLeaveNoConsumers(t *testing.T) {
	ctx := context.Background()
	l := embedded(t.TempDir())(t)
	defer l.Close()
	var subjects []string
	for i := range 40 {
		subj := l.Subject(fmt.Sprintf("account.r%d", i))
		if _, err := l.Append(ctx, subj, 0, ulid.Make().String(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, subj)
	}
	for _, subj := range subjects {
		if _, err := l.Load(ctx, subj, func(eventlog.Msg) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Replay(ctx, 0, func(eventlog.Msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	stream, err := l.JetStream().Stream(ctx, l.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Consumers == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers left 5 s after 41 reads ended", info.State.Consumers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// More reads at once than the server's 1,000 consumers a stream all
// succeed: they wait their turn rather than being refused.
func TestABurstOfReadsPastTheConsumerLimitSucceeds(t *testing.T) {
	ctx := context.Background()
	l := embedded(t.TempDir())(t)
	defer l.Close()
	const n = 1200
	subjects := make([]string, n)
	for i := range n {
		subjects[i] = l.Subject(fmt.Sprintf("account.b%d", i))
		if _, err := l.Append(ctx, subjects[i], 0, ulid.Make().String(), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, n)
	for _, subj := range subjects {
		go func() {
			var got int
			_, err := l.Load(ctx, subj, func(eventlog.Msg) error { got++; return nil })
			if err == nil && got != 1 {
				err = fmt.Errorf("%s: %d commits read, want 1", subj, got)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

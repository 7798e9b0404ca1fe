package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/svc/engine/engine/eventlog"
)

func grouped(t *testing.T) *eventlog.Log {
	l, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: t.TempDir(), Sync: "always", Replicas: 1, GroupAbove: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// The acceptance suite holds when every append goes through group commit.
func TestEmbeddedGroupCommit(t *testing.T) {
	dir := t.TempDir()
	suite(t, func(t *testing.T) *eventlog.Log {
		l, err := eventlog.Open(context.Background(), eventlog.Config{DataDir: dir, Sync: "always", Replicas: 1, GroupAbove: -1})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// Concurrent appends grouped into atomic batches: each answer is the sequence
// that really holds that commit, a stale guard in a batch fails only its own
// append, and a repeated id answers the first append's sequence.
func TestGroupCommitAnswersEachAppendItsOwnSequence(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { groupedSequences(t, grouped(t)) })
	t.Run("external", func(t *testing.T) {
		l := externalLog(tcpServer(t), -1)(t)
		t.Cleanup(l.Close)
		groupedSequences(t, l)
	})
}

func groupedSequences(t *testing.T, l *eventlog.Log) {
	ctx := context.Background()
	const writers, each = 32, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subject := l.Subject(fmt.Sprintf("account.g%d", w))
			var last uint64
			for i := range each {
				data := []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				if i == 10 { // a stale guard: refused, alone
					if _, err := l.Append(ctx, subject, last+7, fmt.Sprintf("stale-%d", w), data); !errors.Is(err, eventlog.ErrConcurrency) {
						errs <- fmt.Errorf("stale append of %d: %v, want ErrConcurrency", w, err)
					}
				}
				seq, err := l.Append(ctx, subject, last, fmt.Sprintf("id-%d-%d", w, i), data)
				if err != nil {
					errs <- err
					return
				}
				m, err := l.JetStream().Stream(ctx, l.StreamName())
				if err != nil {
					errs <- err
					return
				}
				raw, err := m.GetMsg(ctx, seq)
				if err != nil {
					errs <- fmt.Errorf("message %d: %v", seq, err)
					return
				}
				// the log keeps the logical subject under its own prefix
				_, stored, _ := strings.Cut(raw.Subject, ".")
				_, sent, _ := strings.Cut(subject, ".")
				if stored != sent || !bytes.Equal(raw.Data, data) {
					errs <- fmt.Errorf("append answered %d, which holds %s %s, not %s %s", seq, raw.Subject, raw.Data, subject, data)
					return
				}
				last = seq
			}
			again, err := l.Append(ctx, subject, last, fmt.Sprintf("id-%d-%d", w, each-1), nil)
			if err != nil || again != last {
				errs <- fmt.Errorf("repeat of the last id answered %d, %v; want %d", again, err, last)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total, err := l.LastSeq(ctx)
	if err != nil || total != writers*each+1 { // and the identity commit
		t.Errorf("stream ends at %d (%v), want %d commits after the identity commit", total, err, writers*each)
	}
}

// A reader learns from each commit which of its subject's sequences it was
// appended after, for appends on their own and in atomic batches alike: the
// cluster's follower applies another node's commit only on top of that one.
func TestFollowTellsTheSequenceEachCommitWasAppendedAfter(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *eventlog.Log{
		"direct": func(t *testing.T) *eventlog.Log {
			l := embedded(t.TempDir())(t)
			t.Cleanup(l.Close)
			return l
		},
		"grouped": grouped,
	} {
		t.Run(name, func(t *testing.T) {
			l := open(t)
			ctx := context.Background()
			subject := l.Subject("account.prev")
			var want []uint64
			var last uint64
			for i := range 3 {
				seq, err := l.Append(ctx, subject, last, fmt.Sprintf("prev-%s-%d", name, i), []byte("x"))
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, last)
				last = seq
			}
			var got []uint64
			if _, err := l.Load(ctx, subject, func(m eventlog.Msg) error {
				if !m.HasPrev {
					t.Fatalf("commit %d does not say what it was appended after", m.Seq)
				}
				got = append(got, m.Prev)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("appended after %v, want %v", got, want)
			}
		})
	}
}

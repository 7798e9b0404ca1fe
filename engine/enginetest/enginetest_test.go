package enginetest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
)

type state struct {
	Balance events.Decimal
	Limit   *events.Decimal
	At      time.Time
	Tags    []string
	Keys    map[string]int
}

func TestDiff(t *testing.T) {
	at := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	base := func() state {
		l := events.MustDecimal("130.00")
		return state{Balance: events.MustDecimal("2.50"), Limit: &l, At: at, Tags: []string{}, Keys: map[string]int{"a": 1}}
	}
	same := base()
	same.Balance, same.At = events.MustDecimal("2.5"), at.In(time.FixedZone("", 0))
	if d := enginetest.Diff(base(), same); len(d) != 0 {
		t.Errorf("the same decimal text and instant differ: %v", d)
	}
	other := base()
	other.Balance, other.Limit, other.At, other.Tags, other.Keys = events.MustDecimal("2.6"), nil, at.Add(time.Second), nil, map[string]int{"b": 1}
	got := strings.Join(enginetest.Diff(base(), other), "\n")
	if got != ".Balance: want 2.5, got 2.6\n.Limit: want non-nil *events.Decimal, got nil\n.At: want 2026-11-02T14:00:00Z, got 2026-11-02T14:00:01Z\n.Tags: want non-nil []string, got nil\n.Keys[a]: missing\n.Keys[b]: not wanted" {
		t.Errorf("diff:\n%s", got)
	}
	if got := enginetest.Diff(base(), &other); len(got) != 1 || got[0] != "(value): want a enginetest_test.state, got a *enginetest_test.state" {
		t.Errorf("diff of a value and a pointer: %v", got)
	}
	got = strings.Join(enginetest.Diff(&state{Keys: map[string]int{"a": 1}}, &state{Keys: map[string]int{"a": 2}}), "\n")
	if got != ".Keys[a]: want 1, got 2" {
		t.Errorf("diff:\n%s", got)
	}
}

// fatal stands in for a test: Fatalf records the message and ends WaitFor.
type fatal struct {
	testing.TB
	msg string
}

type stop struct{}

func (f *fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stop{})
}

func TestWaitFor(t *testing.T) {
	calls := 0
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("%d calls", calls)
	}
	f := &fatal{TB: t}
	func() {
		defer func() {
			if v := recover(); v != nil && v != (stop{}) {
				panic(v)
			}
		}()
		n := 0
		enginetest.WaitFor(f, 30*time.Millisecond, func() error { n++; return fmt.Errorf("%d subscribers", n) })
	}()
	if !strings.HasPrefix(f.msg, "condition not met in 30ms: ") || !strings.HasSuffix(f.msg, " subscribers") {
		t.Errorf("failure message %q", f.msg)
	}
}

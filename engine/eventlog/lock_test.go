package eventlog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/engine/eventlog"
)

// One open per embedded data directory: a second Open, read-only or not, is
// refused at once naming the directory, and leaves the first one working;
// once the first is closed the directory opens again.
func TestOneOpenPerDataDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := embedded(dir)(t)
	for _, readOnly := range []bool{false, true} {
		_, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "always", Replicas: 1, ReadOnly: readOnly})
		var locked *eventlog.LockedError
		if !errors.Is(err, eventlog.ErrLocked) || !errors.As(err, &locked) {
			t.Fatalf("second Open (read-only %v) = %v, want ErrLocked", readOnly, err)
		}
		abs, _ := filepath.Abs(dir)
		if locked.Dir != abs || locked.PID != os.Getpid() {
			t.Errorf("locked by %+v, want %s and pid %d", locked, abs, os.Getpid())
		}
		if msg := err.Error(); !strings.Contains(msg, abs) || !strings.Contains(msg, "another engine process") {
			t.Errorf("message %q names neither the directory nor the other process", msg)
		}
	}
	if _, err := l.Append(ctx, l.Subject("account.a"), 0, ulid.Make().String(), []byte("x")); err != nil {
		t.Fatalf("the first log after a refused Open: %v", err)
	}
	l.Close()
	l = embedded(dir)(t)
	defer l.Close()
	if n, err := l.LastSubjectSeq(ctx, l.Subject("account.a")); err != nil || n == 0 {
		t.Fatalf("after reopening: %d %v", n, err)
	}
}

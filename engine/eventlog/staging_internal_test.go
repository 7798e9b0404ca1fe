package eventlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// appendConcurrently appends n commits from n writers at once, through
// group commit, and fails the test on any error.
func appendConcurrently(t *testing.T, l *Log, tag string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subject := l.Subject(fmt.Sprintf("account.%s%d", tag, i))
			if _, err := l.Append(context.Background(), subject, 0, fmt.Sprintf("%s-%d", tag, i), []byte(`{}`)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The embedded server stages its atomic batches in the memory directory:
// the stream's batches directory is a link there, batches commit through it,
// a clean stop removes both, and the next start makes them again. A
// directory left by an earlier start (a real one, or a link elsewhere) is
// replaced.
func TestBatchesAreStagedInMemory(t *testing.T) {
	mem := t.TempDir()
	defer func(old string) { memDir = old }(memDir)
	memDir = mem
	data := t.TempDir()
	link := filepath.Join(data, "nats", "jetstream", "$G", "streams", "EVT", "batches")
	open := func() *Log {
		l, err := Open(context.Background(), Config{DataDir: data, Sync: "always", Replicas: 1, GroupAbove: -1})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("the stream's batches directory is not a link: %v", err)
	}
	if filepath.Dir(target) != mem {
		t.Fatalf("batches staged in %s, want under %s", target, mem)
	}
	appendConcurrently(t, l, "a", 64)
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Fatalf("after group commits: link %q (%v), want %q", got, err, target)
	}
	if n, err := l.LastSeq(context.Background()); err != nil || n != 65 {
		t.Fatalf("log ends at %d (%v), want 64 commits after the identity", n, err)
	}
	l.Close()
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the link outlived a clean stop: %v", err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the staging directory outlived a clean stop: %v", err)
	}

	// An earlier start's leftovers: a real directory where the link goes.
	if err := os.MkdirAll(filepath.Join(link, "stale"), 0o700); err != nil {
		t.Fatal(err)
	}
	l = open()
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Fatalf("after a start over a real batches directory: link %q (%v), want %q", got, err, target)
	}
	appendConcurrently(t, l, "b", 64)
	if n, err := l.LastSeq(context.Background()); err != nil || n != 129 {
		t.Fatalf("log ends at %d (%v), want 128 commits after the identity", n, err)
	}
	l.Close()
}

// Without a memory directory the server stages batches on disk, as it does
// by itself, and group commit works the same.
func TestBatchesStageOnDiskWithoutAMemoryDirectory(t *testing.T) {
	defer func(old string) { memDir = old }(memDir)
	memDir = filepath.Join(t.TempDir(), "absent")
	data := t.TempDir()
	l, err := Open(context.Background(), Config{DataDir: data, Sync: "always", Replicas: 1, GroupAbove: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendConcurrently(t, l, "c", 64)
	if n, err := l.LastSeq(context.Background()); err != nil || n != 65 {
		t.Fatalf("log ends at %d (%v), want 64 commits after the identity", n, err)
	}
	link := filepath.Join(data, "nats", "jetstream", "$G", "streams", "EVT", "batches")
	if _, err := os.Readlink(link); err == nil {
		t.Errorf("batches directory is a link with no memory directory")
	}
}

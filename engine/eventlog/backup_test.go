package eventlog_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/engine/eventlog"
)

// backupOf writes a backup of l to a file and returns its path.
func backupOf(t *testing.T, l *eventlog.Log) (string, eventlog.BackupInfo) {
	t.Helper()
	var buf bytes.Buffer
	info, err := l.Backup(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "log.backup")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, info
}

func restore(cfg eventlog.Config, path string) (eventlog.BackupInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return eventlog.BackupInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return eventlog.BackupInfo{}, err
	}
	return eventlog.Restore(context.Background(), cfg, f, st.Size())
}

func all(t *testing.T, l *eventlog.Log) []eventlog.Msg {
	t.Helper()
	var out []eventlog.Msg
	if _, err := l.Replay(context.Background(), 0, func(m eventlog.Msg) error {
		m.Data = slices.Clone(m.Data)
		out = append(out, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A backup restored into an empty data directory, or onto an external
// server, is the same log: the same commits at the same sequences, the same
// identity. A restore over a log with commits, into a locked directory or
// from a damaged file is refused.
func TestBackupRestoresTheSameLog(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: src, Sync: "interval", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Incompressible and past one chunk (128 KiB) several times over, so
	// the snapshot's flow control runs.
	last := map[string]uint64{}
	for i := range 600 {
		subj := l.Subject(fmt.Sprintf("account.b%d", i%7))
		data := make([]byte, 1024)
		_, _ = rand.Read(data)
		seq, err := l.Append(ctx, subj, last[subj], ulid.Make().String(), data)
		if err != nil {
			t.Fatal(err)
		}
		last[subj] = seq
	}
	want := all(t, l)
	path, info := backupOf(t, l) // while the log is open and in use
	if info.LogID != l.ID() || info.LastSeq != 601 || info.Msgs != 601 || info.Size < 600*1024 {
		t.Fatalf("backup info %+v", info)
	}
	if got, err := readInfo(path); err != nil || got.LogID != info.LogID || got.LastSeq != info.LastSeq {
		t.Fatalf("ReadBackup = %+v, %v", got, err)
	}

	check := func(t *testing.T, cfg eventlog.Config) {
		t.Helper()
		r, err := eventlog.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.ID() != l.ID() {
			t.Errorf("restored log id %s, backed up %s", r.ID(), l.ID())
		}
		got := all(t, r)
		if len(got) != len(want) {
			t.Fatalf("restored %d commits, backed up %d", len(got), len(want))
		}
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].Subject != want[i].Subject || got[i].ID != want[i].ID || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("commit %d restored as %s %d %s, backed up %s %d %s", i, got[i].Subject, got[i].Seq, got[i].ID, want[i].Subject, want[i].Seq, want[i].ID)
			}
		}
		// The restored log takes new commits where the old one stopped.
		subj := l.Subject("account.b0")
		if seq, err := r.Append(ctx, subj, last[subj], ulid.Make().String(), []byte("after")); err != nil || seq != 602 {
			t.Fatalf("append after restore: %d %v", seq, err)
		}
	}

	t.Run("embedded", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "data")
		cfg := eventlog.Config{DataDir: dst, Sync: "always", Replicas: 1}
		got, err := restore(cfg, path)
		if err != nil || got.LogID != l.ID() {
			t.Fatalf("restore: %+v %v", got, err)
		}
		check(t, cfg)
		if _, err := restore(cfg, path); !errors.Is(err, eventlog.ErrRestoreRefused) {
			t.Fatalf("restore over a log with commits: %v", err)
		}
		held := embedded(dst)(t)
		defer held.Close()
		if _, err := restore(cfg, path); !errors.Is(err, eventlog.ErrLocked) {
			t.Fatalf("restore into a directory in use: %v", err)
		}
	})
	t.Run("over a log with nothing but its identity", func(t *testing.T) {
		dst := t.TempDir()
		embedded(dst)(t).Close() // an engine started once, never written to
		cfg := eventlog.Config{DataDir: dst, Sync: "always", Replicas: 1}
		if _, err := restore(cfg, path); err != nil {
			t.Fatal(err)
		}
		check(t, cfg)
	})
	t.Run("external", func(t *testing.T) {
		cfg := eventlog.Config{URL: tcpServer(t), Sync: "always", Replicas: 1}
		if _, err := restore(cfg, path); err != nil {
			t.Fatal(err)
		}
		check(t, cfg)
	})
	t.Run("damaged", func(t *testing.T) {
		b, _ := os.ReadFile(path)
		for name, bad := range map[string][]byte{
			"truncated":    b[:len(b)-200],
			"altered":      append(append(slices.Clone(b[:len(b)/2]), b[len(b)/2]^1), b[len(b)/2+1:]...),
			"not a backup": []byte("hello\n"),
		} {
			p := filepath.Join(t.TempDir(), "bad")
			_ = os.WriteFile(p, bad, 0o600)
			dst := t.TempDir()
			if _, err := restore(eventlog.Config{DataDir: dst, Sync: "always", Replicas: 1}, p); !errors.Is(err, eventlog.ErrBadBackup) {
				t.Errorf("%s backup: %v, want ErrBadBackup", name, err)
			}
			if _, err := os.Stat(filepath.Join(dst, "nats")); err == nil {
				t.Errorf("%s backup: a log was made", name)
			}
		}
	})
	t.Run("other stream", func(t *testing.T) {
		if _, err := restore(eventlog.Config{DataDir: t.TempDir(), Sync: "always", Replicas: 1, Stream: "OTHER"}, path); err == nil {
			t.Fatal("a backup of EVT restored as OTHER")
		}
	})
}

func readInfo(path string) (eventlog.BackupInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return eventlog.BackupInfo{}, err
	}
	defer f.Close()
	st, _ := f.Stat()
	return eventlog.ReadBackup(f, st.Size())
}

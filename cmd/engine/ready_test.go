package main_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// The real binary opens its port before it replays: on a log long enough to
// take a while, /readyz answers 503 with Retry-After first, then 200.
func TestReadinessDuringALongReplay(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "interval", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	data, err := engine.Registry().Encode(events.Commit{CommandID: "c", At: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.FillLog(t, l, 60000, data)
	l.Close()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ENGINE_DATA_DIR="+dir, "ENGINE_LISTEN="+addr, "ENGINE_LOG_LEVEL=warn", "NATS_URL=", "DATABASE_URL=")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	var starting, ready bool
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !ready; time.Sleep(5 * time.Millisecond) {
		r, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			continue // the port is not open yet
		}
		r.Body.Close()
		switch r.StatusCode {
		case http.StatusServiceUnavailable:
			if r.Header.Get("Retry-After") != "1" {
				t.Fatalf("503 without Retry-After: %v", r.Header)
			}
			starting = true
		case http.StatusOK:
			ready = true
		default:
			t.Fatalf("/readyz answered %d", r.StatusCode)
		}
	}
	if !starting || !ready {
		t.Fatalf("503 while replaying %v, then ready %v:\n%s", starting, ready, out)
	}
}

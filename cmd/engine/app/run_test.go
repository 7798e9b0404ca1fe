package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The port opens before the replay: /healthz answers 200 and /readyz 503 with
// Retry-After while the engine warms up, the replay reports its progress, and
// once started the same port serves the API and /readyz answers 200.
func TestRunAnswersWhileItReplaysThenServes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := eventlog.Open(ctx, eventlog.Config{DataDir: dir, Sync: "interval", Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	data, err := engine.Registry().Encode(events.Commit{CommandID: "c", At: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	const commits = 30000
	enginetest.FillLog(t, l, commits, data)
	l.Close()

	logs := &syncBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	every := ProgressEvery
	ProgressEvery = time.Millisecond
	t.Cleanup(func() { ProgressEvery = every })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, err := ParseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.Listen = dir, addr
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, Options{ManualFeed: true}) }()
	t.Cleanup(func() {
		stop()
		<-done
	})

	get := func(path string) (int, http.Header, string) {
		r, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, nil, err.Error()
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, r.Header, string(b)
	}
	var sawStarting bool
	phases := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("never ready:\n%s", logs)
		}
		status, h, body := get("/readyz")
		if status == http.StatusServiceUnavailable {
			var ans struct{ Status, Error string }
			if h.Get("Retry-After") != "1" || json.Unmarshal([]byte(body), &ans) != nil || ans.Status != "starting" {
				t.Fatalf("/readyz while starting: %d %v %s", status, h, body)
			}
			phase, ok := strings.CutPrefix(ans.Error, "the engine is starting: ")
			if !ok || !slices.Contains([]string{PhaseLog, PhaseStore, PhaseReplay, PhaseReadModel, PhaseDemo}, phase) {
				t.Fatalf("/readyz while starting names no phase of the start: %s", body)
			}
			phases[phase] = true
			if hs, _, _ := get("/healthz"); hs != http.StatusOK {
				t.Fatalf("/healthz while starting: %d", hs)
			}
			// The engine may finish starting between two requests: only an
			// answer of the starting handler is held to its shape.
			if s, _, b := get("/api/account/list"); s == http.StatusServiceUnavailable && !strings.Contains(b, "engine_starting") {
				t.Fatalf("an API route while starting: %d %s", s, b)
			} else if s == http.StatusServiceUnavailable {
				sawStarting = true
			}
		}
		if status == http.StatusOK {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if !sawStarting {
		t.Fatal("the port never answered 503 while the engine started")
	}
	if !phases[PhaseReplay] {
		t.Fatalf("/readyz never said the engine was replaying its 30,000 commits; it said %v", phases)
	}
	if s, _, b := get("/api/account/list"); s != http.StatusUnauthorized || !strings.Contains(b, "invalid_key") {
		t.Fatalf("after start: %d %s", s, b)
	}
	var progress, serving bool
	for _, line := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch m["msg"] {
		case "replay progress":
			progress = progress || m["of"] != nil && m["commitsPerSecond"] != nil && m["secondsLeft"] != nil
		case "serving":
			serving = m["startSeconds"] != nil && m["commits"].(float64) >= commits
		}
	}
	if !progress || !serving {
		t.Fatalf("progress %v, serving line %v:\n%s", progress, serving, logs)
	}
}

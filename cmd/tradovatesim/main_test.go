package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRunSeedsLoginsAndServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	env := map[string]string{"TRADOVATESIM_PASSWORD": "from-env"}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-prices", "ES=5100.25"}, out, func(k string) string { return env[k] })
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "ZN months") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no banner: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	text := out.String()
	if strings.Contains(text, "from-env") {
		t.Fatal("the password was printed")
	}
	var base string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "REST base:") {
			base = strings.TrimSpace(strings.TrimPrefix(line, "REST base:"))
		}
	}
	body := strings.NewReader(`{"name":"live-trader","password":"from-env"}`)
	res, err := http.Post(base+"/auth/accesstokenrequest", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	var ans map[string]any
	_ = json.NewDecoder(res.Body).Decode(&ans)
	res.Body.Close()
	if ans["accessToken"] == nil || ans["hasMarketData"] != true {
		t.Fatalf("login = %v", ans)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not stop")
	}
}

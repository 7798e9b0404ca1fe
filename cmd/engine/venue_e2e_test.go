package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// keyed sends a venue write with an Idempotency-Key; it answers the status,
// the body and whether the answer was a replay.
func keyed(base, key, idem, path string, body any) (int, []byte, bool, error) {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(j))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get("Idempotent-Replayed") == "true", err
}

// An Idempotency-Key's first answer survives a kill -9: writers register
// provider versions under their own keys while the binary is SIGKILLed;
// after a restart every acknowledged key answers its first answer byte for
// byte, every unacknowledged one is either replayed or made now, and no key
// made two versions.
func TestKillNineKeepsIdempotentAnswers(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	raw, err := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ VenueID, VenueKey string }
	if err := json.Unmarshal(raw, &c); err != nil || c.VenueKey == "" {
		t.Fatalf("credentials: %v", err)
	}
	path := "/api/partner/venues/" + c.VenueID + "/providers"
	body := func(i string) map[string]any {
		return map[string]any{"name": "Kill " + i, "manifest": map[string]any{"providerVersion": "1", "protocolVersion": "1",
			"schemaDigest": strings.Repeat("ab", 32), "capabilities": map[string]any{"marketData": true}}}
	}
	type answer struct {
		status int
		body   []byte
	}
	var mu sync.Mutex
	acked, tried := map[string]answer{}, map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("w%d-%d", w, i)
				mu.Lock()
				tried[k] = true
				mu.Unlock()
				status, b, _, err := keyed(p.base, c.VenueKey, k, path, body(k))
				if err != nil {
					return
				}
				if status == http.StatusCreated {
					mu.Lock()
					acked[k] = answer{status, b}
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(800 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = p.cmd.Process.Wait()
	close(stop)
	wg.Wait()
	if len(acked) < 20 {
		t.Fatalf("only %d writes acknowledged before the kill", len(acked))
	}

	p = start(t, bin, dir, addr)
	for k := range tried {
		status, b, replayed, err := keyed(p.base, c.VenueKey, k, path, body(k))
		if err != nil || status != http.StatusCreated {
			t.Fatalf("%s after the restart: %d %s %v", k, status, b, err)
		}
		if a, ok := acked[k]; ok && (!replayed || !bytes.Equal(a.body, b)) {
			t.Fatalf("%s: the acknowledged answer changed across the kill:\n%s\n%s", k, a.body, b)
		}
	}
	status, b, err := call(p.base, c.VenueKey, http.MethodGet, path, nil)
	var list struct {
		Providers []struct{ CreationKey string }
	}
	if err != nil || status != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("list: %d %s %v", status, b, err)
	}
	seen := map[string]bool{}
	for _, pv := range list.Providers {
		if seen[pv.CreationKey] {
			t.Fatalf("key %s made two provider versions", pv.CreationKey)
		}
		seen[pv.CreationKey] = true
	}
	if len(seen) != len(tried) {
		t.Fatalf("%d keys tried, %d versions", len(tried), len(seen))
	}
	t.Logf("%d keyed writes tried, %d acknowledged before SIGKILL, all answered alike after", len(tried), len(acked))
}

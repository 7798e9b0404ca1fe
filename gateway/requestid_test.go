package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// syncBuffer is a log sink the server's goroutines write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// line finds the request log line with id.
func (s *syncBuffer) line(id string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "request" && m["id"] == id {
			return m
		}
	}
	return nil
}

// Every answer carries X-Request-Id and is logged under that id; every error
// body repeats it as requestId, and 404 and 405 answers carry a code. A
// path that is not clean is no route (no redirect a client would follow
// with its write turned into a GET).
func TestEveryAnswerHasARequestIDThatErrorsAndTheLogRepeat(t *testing.T) {
	logs := &syncBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	e := start(t, nil)

	for _, tc := range []struct {
		name, method, path, body string
		key                      bool
		status                   int
		code, route, allow       string
	}{
		{name: "an answer that is no error", method: "GET", path: "/healthz", status: 200, route: "/healthz"},
		{name: "no such route", method: "GET", path: "/api/nowhere", status: 404, code: "not_found", route: "/api/nowhere"},
		{name: "no such route under a credential's prefix", method: "GET", path: "/api/partner/nowhere", status: 404, code: "not_found", route: "/api/partner/nowhere"},
		{name: "a path that is not clean", method: "POST", path: "/api//trading/order", body: `{}`, key: true, status: 404, code: "not_found", route: "/api//trading/order"},
		{name: "a method the route does not take", method: "DELETE", path: "/api/account/list", status: 405, code: "method_not_allowed", route: "/api/account/list", allow: "GET"},
		{name: "a route of two methods", method: "PATCH", path: "/api/risk", status: 405, code: "method_not_allowed", route: "/api/risk", allow: "GET, PUT"},
		{name: "a missing key", method: "GET", path: "/api/account/list", status: 401, code: "invalid_key", route: "/api/account/list"},
		{name: "a refused body", method: "POST", path: "/api/trading/order", body: `{"nope":1}`, key: true, status: 400, code: "invalid_request", route: "/api/trading/order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, e.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.key {
				req.Header.Set("Authorization", "Bearer "+e.Key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			id := resp.Header.Get("X-Request-Id")
			if len(id) != 26 {
				t.Fatalf("X-Request-Id %q is no ULID", id)
			}
			if got := resp.Header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
			if tc.code != "" {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatalf("error body %s: %v", b, err)
				}
				if m["code"] != tc.code || m["requestId"] != id || m["error"] == "" {
					t.Errorf("error body %s: want code %s and requestId %s", b, tc.code, id)
				}
			}
			// The line is written once the handler returns, which may be just
			// after the client has read the answer.
			var line map[string]any
			apptest.WaitFor(t, 5*time.Second, func() error {
				if line = logs.line(id); line == nil {
					return fmt.Errorf("no log line with id %s", id)
				}
				return nil
			})
			if line["status"] != float64(tc.status) || line["route"] != tc.route || line["method"] != tc.method {
				t.Errorf("log line %v: want status %d, route %s", line, tc.status, tc.route)
			}
			if code, _ := line["code"].(string); code != tc.code {
				t.Errorf("log line code %q, want %q", code, tc.code)
			}
		})
	}
}

package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// cutter is a TCP proxy to PostgreSQL that a test can cut (every connection
// closed, new ones refused) and restore on the same address: PostgreSQL as
// seen by an engine whose database went away, without stopping the shared one.
type cutter struct {
	t      *testing.T
	addr   string // the proxy's
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{t: t, addr: ln.Addr().String(), target: target}
	c.serve(ln)
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) serve(ln net.Listener) {
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", c.target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) restore() {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.serve(ln)
}

// With the read-model store unreachable, a valid key is never told it is
// invalid: a key not seen before answers 503 store_unavailable with
// Retry-After, a key seen before still passes and its read answers 503
// store_unavailable, /readyz says the store is unreachable, and everything
// recovers by itself when the store is back.
func TestAStoreOutageIsA503NeverA401(t *testing.T) {
	raw := apptest.PostgresURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutter(t, u.Host)
	u.Host = proxy.addr
	every := app.HealthEvery
	app.HealthEvery = 20 * time.Millisecond
	t.Cleanup(func() { app.HealthEvery = every })
	e := apptest.Start(t, apptest.Options{Postgres: true, DatabaseURL: u.String(), ManualFeed: true})

	get := func(path string) (int, http.Header, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, e.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, resp.Header, m
	}
	unavailable := func(what string, status int, h http.Header, m map[string]any) {
		t.Helper()
		if status != http.StatusServiceUnavailable || m["code"] != "store_unavailable" || h.Get("Retry-After") == "" {
			t.Fatalf("%s while the store is down: %d %v %v", what, status, h, m)
		}
	}

	proxy.cut()
	status, h, m := get("/api/account/list")
	unavailable("a key never seen", status, h, m)
	if status, _, m := get("/readyz"); status != http.StatusServiceUnavailable || m["error"] != "the read-model store is unreachable" {
		t.Fatalf("/readyz while the store is down: %d %v", status, m)
	}

	apptest.WaitFor(t, 5*time.Second, func() error { return metric(e.URL, `engine_dependency_up{dependency="store"} 0`) })

	proxy.restore()
	apptest.WaitFor(t, 15*time.Second, func() error {
		if status, _, m := get("/api/account/list"); status != http.StatusOK {
			return &waitErr{status, m}
		}
		return metric(e.URL, `engine_dependency_up{dependency="store"} 1`)
	})

	proxy.cut()
	status, h, m = get("/api/account/list")
	unavailable("a read with a key seen before", status, h, m)

	proxy.restore()
	apptest.WaitFor(t, 15*time.Second, func() error {
		if status, _, m := get("/readyz"); status != http.StatusOK {
			return &waitErr{status, m}
		}
		if status, _, m := get("/api/account/list"); status != http.StatusOK {
			return &waitErr{status, m}
		}
		return nil
	})
}

type waitErr struct {
	status int
	body   map[string]any
}

func (w *waitErr) Error() string {
	b, _ := json.Marshal(w.body)
	return http.StatusText(w.status) + " " + string(b)
}

// metric is nil when /metrics holds line.
func metric(base, line string) error {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), line) {
		return fmt.Errorf("/metrics lacks %s", line)
	}
	return nil
}

package app_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
)

// listen serves h with the server Serve runs, on a loopback port.
func listen(t *testing.T, h http.Handler) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := app.NewServer(h)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, ln.Addr().String()
}

func ok() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
}

// closedWithin reads c until it fails; a read still blocked at deadline fails the test.
func closedWithin(t *testing.T, c net.Conn, deadline time.Time) {
	t.Helper()
	_ = c.SetReadDeadline(deadline)
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open at the deadline")
	}
}

func TestStalledHeadersAreDisconnected(t *testing.T) {
	_, addr := listen(t, ok())
	partials := []string{
		"GET /healthz HT",                         // inside the request line
		"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A", // inside the headers
	}
	conns := make([]net.Conn, len(partials))
	start := time.Now()
	for i, partial := range partials {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, partial); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	for i, c := range conns {
		closedWithin(t, c, start.Add(app.ReadHeaderTimeout+3*time.Second))
		if d := time.Since(start); d < app.ReadHeaderTimeout/2 {
			t.Fatalf("%q: closed after %v, before the header timeout", partials[i], d)
		}
	}
}

func TestServerLimits(t *testing.T) {
	srv := app.NewServer(ok())
	if srv.ReadHeaderTimeout != app.ReadHeaderTimeout || srv.ReadTimeout != app.ReadTimeout || srv.IdleTimeout != app.IdleTimeout ||
		srv.MaxHeaderBytes != app.MaxHeaderBytes || srv.WriteTimeout != 0 {
		t.Fatalf("server limits %v %v %v %v %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout, srv.MaxHeaderBytes, srv.WriteTimeout)
	}
}

func TestOversizedHeadersAre431(t *testing.T) {
	_, addr := listen(t, ok())
	get := func(header int) *http.Response {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", header) + "\r\n\r\n"
		go func() { _, _ = io.WriteString(c, req) }()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%d bytes of header: %v", header, err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get(app.MaxHeaderBytes / 2); r.StatusCode != http.StatusOK {
		t.Fatalf("a header under the limit: %d", r.StatusCode)
	}
	if r := get(app.MaxHeaderBytes + 8<<10); r.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a header over the limit: %d", r.StatusCode)
	}
}

func TestKeepAliveConnectionAfterAResponseStillGets431(t *testing.T) {
	// The gateway's write deadline of one response (gateway.DefaultWriteTimeout)
	// must not cut net/http's own answer to the connection's next request.
	// The handler leaves a deadline already past once its whole answer is out.
	_, addr := listen(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, _ = io.WriteString(w, "ok\n")
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		_ = rc.SetWriteDeadline(time.Now().Add(-time.Second))
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	go func() {
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", app.MaxHeaderBytes+8<<10)+"\r\n\r\n")
	}()
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("second: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("second: %d", resp.StatusCode)
	}
}

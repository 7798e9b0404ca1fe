package httpx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// Heartbeat is the interval of SSE comment heartbeats.
var Heartbeat = 15 * time.Second

// SSE writes one server-sent event stream.
type SSE struct {
	w http.ResponseWriter
	f http.Flusher
}

// StartSSE admits the stream (AdmitStream), lifts the response's write
// deadline (a stream lives as long as its client) and sends the stream's
// headers. It fails when the stream is refused or the writer cannot
// flush; nothing is written then.
func StartSSE(w http.ResponseWriter) (*SSE, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, Errorf(http.StatusInternalServerError, "", "streaming unsupported")
	}
	if err := AdmitStream(w); err != nil {
		return nil, err
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &SSE{w: w, f: f}, nil
}

// streamGate is a writer that admits the stream its request starts, once.
type streamGate struct {
	http.ResponseWriter
	admit    func() (release func(), err error)
	admitted bool
	release  func()
}

func (g *streamGate) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (g *streamGate) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// GateStreams serves r with next through a writer whose stream, if next starts
// one, must first be admitted by admit (AdmitStream, StartSSE); the release
// admit returned is called when next returns. Credential middleware uses it to
// bound a credential's concurrent streams.
func GateStreams(w http.ResponseWriter, r *http.Request, next http.Handler, admit func() (release func(), err error)) {
	g := &streamGate{ResponseWriter: w, admit: admit}
	defer func() {
		if g.release != nil {
			g.release()
		}
	}()
	next.ServeHTTP(g, r)
}

// AdmitStream admits the request's stream through the gate of w's chain
// (GateStreams), once; its error is the refusal to answer. A handler calls it
// before the work of setting a stream up, so a refusal costs nothing; StartSSE
// calls it otherwise. A writer without a gate admits every stream.
func AdmitStream(w http.ResponseWriter) error {
	for w != nil {
		if g, ok := w.(*streamGate); ok {
			if g.admitted {
				return nil
			}
			release, err := g.admit()
			if err != nil {
				return err
			}
			g.admitted, g.release = true, release
			return nil
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// FormatEvent renders one event with a name, an optional id and data, as the
// bytes a stream writes; a hub renders a frame once for all its subscribers.
func FormatEvent(name, id string, data []byte) []byte {
	b := make([]byte, 0, len(data)+64)
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		b = append(append(append(b, "data: "...), line...), '\n')
	}
	return append(b, '\n')
}

// FormatComment renders one comment (a heartbeat) as the bytes a stream writes.
func FormatComment(text string) []byte { return []byte(": " + text + "\n\n") }

// AppendChunk appends b framed as one HTTP/1.1 chunk, as a detached stream
// (Conn) writes it; a hub frames an event once for all its subscribers.
func AppendChunk(dst, b []byte) []byte {
	dst = strconv.AppendUint(dst, uint64(len(b)), 16)
	dst = append(append(append(dst, "\r\n"...), b...), "\r\n"...)
	return dst
}

// Event writes one event with a name, an optional id and JSON data, and flushes.
func (s *SSE) Event(name, id string, data []byte) error {
	if _, err := s.w.Write(FormatEvent(name, id, data)); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// Write writes rendered events without flushing; Flush sends them.
func (s *SSE) Write(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

// Flush sends what was written.
func (s *SSE) Flush() { s.f.Flush() }

// Comment writes a comment line (a heartbeat) and flushes.
func (s *SSE) Comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// Pump runs a stream until the client goes (ctx), the server drains (done), in
// closes or a write fails: a heartbeat comment every Heartbeat, and send for
// each value from in. The stream's end is never an error to report.
func Pump[T any](ctx context.Context, s *SSE, done <-chan struct{}, in <-chan T, send func(T) error) error {
	beat := time.NewTicker(Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-beat.C:
			if s.Comment("heartbeat") != nil {
				return nil
			}
		case v, ok := <-in:
			if !ok || send(v) != nil {
				return nil
			}
		}
	}
}

// endChunk ends a chunked body.
var endChunk = []byte("0\r\n\r\n")

// Conn is a stream's HTTP/1.1 connection taken over from net/http once the
// headers are sent: what a stream writes to it is chunk-framed (AppendChunk),
// and TryWrite writes without blocking, so one goroutine can feed many
// streams. A Conn allows one writer at a time, besides Hold.
type Conn struct {
	c  net.Conn
	rc syscall.RawConn // nil: every TryWrite would block, Write does the work
	// TryWrite's one write, made once: b in, n and err out
	try func(fd uintptr) bool
	b   []byte
	n   int
	err error
}

// Detach takes the stream's connection over from net/http for a plain HTTP/1.1
// request, after StartSSE. It reports false, and the stream stays as it was,
// when the request is not HTTP/1.1 over plain TCP or the writer cannot be
// hijacked. After Detach the handler must write through the Conn only and
// End it before returning.
func (s *SSE) Detach(r *http.Request) (*Conn, bool) {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || r.TLS != nil || r.Method == http.MethodHead ||
		s.w.Header().Get("Transfer-Encoding") != "" || s.w.Header().Get("Content-Length") != "" {
		return nil, false
	}
	c, _, err := http.NewResponseController(s.w).Hijack()
	if err != nil {
		return nil, false
	}
	out := &Conn{c: c}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			out.rc = rc
		}
	}
	out.try = func(fd uintptr) bool {
		for {
			out.n, out.err = syscall.Write(int(fd), out.b)
			if out.err != syscall.EINTR {
				return true
			}
		}
	}
	return out, true
}

// TryWrite writes what it can of b at once and never blocks: n < len(b) with a
// nil error means the socket's buffer is full and Write must send the rest.
func (c *Conn) TryWrite(b []byte) (int, error) {
	if c.rc == nil || len(b) == 0 {
		return 0, nil
	}
	c.b, c.n, c.err = b, 0, nil
	rerr := c.rc.Write(c.try)
	n, err := max(c.n, 0), c.err
	c.b, c.err = nil, nil
	if rerr != nil {
		return 0, rerr
	}
	if errors.Is(err, syscall.EAGAIN) {
		err = nil
	}
	return n, err
}

// Write writes all of b, blocking until the client takes it or the connection fails.
func (c *Conn) Write(b []byte) error {
	_, err := c.c.Write(b)
	return err
}

// Hold reads and discards what the client sends until it closes the
// connection, a read fails or Release is called.
func (c *Conn) Hold() {
	b := make([]byte, 512)
	for {
		if _, err := c.c.Read(b); err != nil {
			return
		}
	}
}

// Release makes Hold return.
func (c *Conn) Release() { _ = c.c.SetReadDeadline(time.Now()) }

// Bound makes a blocked Write fail after d.
func (c *Conn) Bound(d time.Duration) { _ = c.c.SetWriteDeadline(time.Now().Add(d)) }

// End closes the connection; clean first ends the chunked body (within one
// second), so the client sees the stream end rather than break.
func (c *Conn) End(clean bool) {
	if clean {
		c.Bound(time.Second)
		_ = c.Write(endChunk)
	}
	_ = c.c.Close()
}

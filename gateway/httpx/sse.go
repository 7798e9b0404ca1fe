package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/svc/engine/commands"
)

// Heartbeat is the interval of SSE comment heartbeats.
var Heartbeat = 15 * time.Second

// SSE writes one server-sent event stream.
type SSE struct {
	w   http.ResponseWriter
	f   http.Flusher
	end *StreamEnd // nil: no credential ends the stream
}

// StreamEnd ends a stream before its client goes: the credential that opened
// it ended (a key revoked or expired, a session ended). The credential
// middleware makes one for each stream it admits (GateStreams); StartSSE
// carries it to the stream, whose writer sends Final and ends. A nil
// *StreamEnd never ends.
type StreamEnd struct {
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
	err   *Error
	hooks []func()
}

// NewStreamEnd makes a StreamEnd not yet ended.
func NewStreamEnd() *StreamEnd { return &StreamEnd{done: make(chan struct{})} }

// End ends the stream with err (its code and sentence are the final event's),
// once; later calls change nothing. It never blocks on the stream.
func (e *StreamEnd) End(err *Error) {
	e.once.Do(func() {
		e.mu.Lock()
		e.err = err
		hooks := e.hooks
		e.hooks = nil
		close(e.done)
		e.mu.Unlock()
		for _, f := range hooks {
			f()
		}
	})
}

// Done is closed when the stream is ended; nil for a nil StreamEnd.
func (e *StreamEnd) Done() <-chan struct{} {
	if e == nil {
		return nil
	}
	return e.done
}

// Ended reports whether the stream is ended.
func (e *StreamEnd) Ended() bool {
	select {
	case <-e.Done():
		return e != nil
	default:
		return false
	}
}

// afterEnd runs f when the stream is ended, or now if it is.
func (e *StreamEnd) afterEnd(f func()) {
	e.mu.Lock()
	select {
	case <-e.done:
		e.mu.Unlock()
		f()
		return
	default:
	}
	e.hooks = append(e.hooks, f)
	e.mu.Unlock()
}

// Final renders the last event of an ended stream: `error`, its data the
// error shape of the trading routes (error, code, params), so the client
// knows why and does not reconnect with the same credential.
func (e *StreamEnd) Final() []byte {
	e.mu.Lock()
	err := e.err
	e.mu.Unlock()
	if err == nil {
		err = &Error{Code: commands.CodeCredentialRevoked, Msg: "the credential that opened this stream no longer authenticates"}
	}
	body := map[string]any{"error": err.Msg, "code": err.Code}
	if err.Params != nil {
		body["params"] = err.Params
	}
	b, _ := json.Marshal(body)
	return FormatEvent("error", "", b)
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
	return &SSE{w: w, f: f, end: streamEndOf(w)}, nil
}

// streamGate is a writer that admits the stream its request starts, once.
type streamGate struct {
	http.ResponseWriter
	admit    func(end *StreamEnd) (release func(), err error)
	admitted bool
	release  func()
	end      *StreamEnd
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
// bound a credential's concurrent streams, and to end them (the StreamEnd
// admit is handed) when the credential ends.
func GateStreams(w http.ResponseWriter, r *http.Request, next http.Handler, admit func(end *StreamEnd) (release func(), err error)) {
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
			end := NewStreamEnd()
			release, err := g.admit(end)
			if err != nil {
				return err
			}
			g.admitted, g.release, g.end = true, release, end
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

// streamEndOf is the StreamEnd of the stream w's gate admitted, or nil.
func streamEndOf(w http.ResponseWriter) *StreamEnd {
	for w != nil {
		if g, ok := w.(*streamGate); ok {
			return g.end
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
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		b = append(append(append(b, "data: "...), line...), '\n')
		if !more {
			return append(b, '\n')
		}
		data = rest
	}
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
// closes, a write fails or the credential that opened it ends (then its last
// event is StreamEnd.Final): a heartbeat comment every Heartbeat, and send for
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
		case <-s.end.Done():
			if s.Write(s.end.Final()) == nil {
				s.Flush()
			}
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
	c   net.Conn
	end *StreamEnd      // the stream's, from its SSE; nil: never ended early
	rc  syscall.RawConn // nil: every TryWrite would block, Write does the work
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
	out := &Conn{c: c, end: s.end}
	if s.end != nil {
		s.end.afterEnd(out.Release) // Hold returns once the credential ends
	}
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

// StreamEnd is the stream's StreamEnd (nil when no credential ends it): once it is
// ended, Hold returns, and the stream's last event is its Final.
func (c *Conn) StreamEnd() *StreamEnd { return c.end }

// Release makes Hold return.
func (c *Conn) Release() { _ = c.c.SetReadDeadline(time.Now()) }

// Bound makes a blocked Write fail after d.
func (c *Conn) Bound(d time.Duration) { _ = c.c.SetWriteDeadline(time.Now().Add(d)) }

// End closes the connection; clean first writes final, if any, as one chunk
// and ends the chunked body (within one second), so the client sees the
// stream end rather than break.
func (c *Conn) End(clean bool, final []byte) {
	if clean {
		c.Bound(time.Second)
		var b []byte
		if len(final) > 0 {
			b = AppendChunk(b, final)
		}
		_ = c.Write(append(b, endChunk...))
	}
	_ = c.c.Close()
}

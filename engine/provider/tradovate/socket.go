package tradovate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// The socket protocol (user data and market data alike): the server opens
// with the frame "o", sends "h" as its heartbeat, "a" followed by a JSON
// array of messages, and "c" followed by [code, "reason"] when it closes.
// A request is the text "endpoint\nid\nquery\nbody"; its answer is a
// message {"s": status, "i": id, "d": data}; an event is a message
// {"e": name, "d": data} (props for the user's entities, md and chart for
// market data, shutdown). The first request is authorize with the access
// token as its body; the client sends "[]" as its own heartbeat.

// maxFrame bounds one frame the adapter reads.
const maxFrame = 4 << 20

// eventBuffer is how many events wait for a slow reader before the socket
// stops reading (and the server, in time, drops it: a Gap follows).
const eventBuffer = 256

// frame is one parsed frame: its kind ('o', 'h', 'a', 'c') and, for 'a',
// its messages.
type frame struct {
	kind byte
	msgs []message
}

// message is one element of an 'a' frame.
type message struct {
	E string          `json:"e"` // an event's name
	S int             `json:"s"` // an answer's status
	I *int64          `json:"i"` // an answer's request id
	D json.RawMessage `json:"d"`
}

// parseFrame reads one frame. An unknown kind or an 'a' frame that is not
// a JSON array of objects is errMalformed.
func parseFrame(b []byte) (frame, error) {
	if len(b) == 0 {
		return frame{}, errMalformed
	}
	f := frame{kind: b[0]}
	switch b[0] {
	case 'o', 'h', 'c':
		return f, nil
	case 'a':
		if err := json.Unmarshal(b[1:], &f.msgs); err != nil {
			return frame{}, errMalformed
		}
		return f, nil
	}
	return frame{}, errMalformed
}

// encodeRequest writes a request's text.
func encodeRequest(endpoint string, rid int64, query string, body []byte) []byte {
	out := make([]byte, 0, len(endpoint)+len(query)+len(body)+24)
	out = append(out, endpoint...)
	out = append(out, '\n')
	out = strconv.AppendInt(out, rid, 10)
	out = append(out, '\n')
	out = append(out, query...)
	out = append(out, '\n')
	return append(out, body...)
}

// reply is an answer to a request.
type reply struct {
	status int
	data   json.RawMessage
}

// event is a server event.
type event struct {
	name string
	data json.RawMessage
}

// errSocketClosed: the socket ended before the answer came.
var errSocketClosed = errors.New("tradovate: socket closed")

// socket is one authorized connection. Its reader delivers answers to
// their requests and events to Events (in order); it ends on a read
// error, a close frame, or silence of four heartbeats. Safe for
// concurrent use.
type socket struct {
	c      *websocket.Conn
	events chan event
	done   chan struct{} // closed when the reader ended
	quit   chan struct{} // closed by close
	stale  time.Duration

	quitOnce sync.Once

	wmu  sync.Mutex
	next atomic.Int64
	last atomic.Int64 // unix nanos of the last frame

	mu      sync.Mutex
	waiting map[int64]chan reply
	cause   string // why the socket ended: "disconnected", "closed" or "silent"
}

// openSocket dials u, waits for the open frame and authorizes with token.
// A token the server does not take is errExpired; a penalty answer is the
// budget's error.
func (p *Provider) openSocket(ctx context.Context, b *budget, u, token string) (*socket, error) {
	dctx, cancel := p.call(ctx)
	defer cancel()
	c, err := adapterkit.Dial(dctx, u, p.opts.HTTP, maxFrame)
	if err != nil {
		return nil, err
	}
	s := &socket{c: c, events: make(chan event, eventBuffer), done: make(chan struct{}), quit: make(chan struct{}), waiting: map[int64]chan reply{},
		stale: 4 * p.opts.Heartbeat}
	s.touch()
	_, msg, err := c.Read(dctx)
	if err != nil {
		_ = c.CloseNow()
		return nil, provider.NewUnavailable(0, 0, adapterkit.CleanCause(err))
	}
	if f, err := parseFrame(msg); err != nil || f.kind != 'o' {
		_ = c.CloseNow()
		return nil, provider.NewUnavailable(0, 0, errMalformed)
	}
	go s.read()
	go s.heartbeat(p.opts.Heartbeat)
	r, err := s.request(dctx, "authorize", "", []byte(token))
	if err != nil {
		s.close()
		return nil, provider.NewUnavailable(0, 0, err)
	}
	if err := replyError(b, "authorize", r); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// replyError maps an answer's status: 200 is nil; 401 errExpired; 429 and
// penalty answers the budget's errors; others *statusError.
func replyError(b *budget, endpoint string, r reply) error {
	switch {
	case r.status == http.StatusOK:
		if pen, ok := penaltyOf(r.data); ok {
			return b.penalize("ws:"+endpoint, pen)
		}
		return nil
	case r.status == http.StatusUnauthorized:
		return errExpired
	case r.status == http.StatusTooManyRequests || r.status == http.StatusLocked:
		return b.observe(r.status, nil)
	}
	return &statusError{status: r.status}
}

func (s *socket) touch() { s.last.Store(time.Now().UnixNano()) }

// request sends one request and waits for its answer. The id of authorize
// is 0; later ones count up from 1.
func (s *socket) request(ctx context.Context, endpoint, query string, body []byte) (reply, error) {
	rid := int64(0)
	if endpoint != "authorize" {
		rid = s.next.Add(1)
	}
	ch := make(chan reply, 1)
	s.mu.Lock()
	s.waiting[rid] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, rid)
		s.mu.Unlock()
	}()
	if err := s.write(ctx, encodeRequest(endpoint, rid, query, body)); err != nil {
		return reply{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-s.done:
		return reply{}, errSocketClosed
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// requestJSON sends a request whose body is v as JSON.
func (s *socket) requestJSON(ctx context.Context, endpoint string, v any) (reply, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return reply{}, err
	}
	return s.request(ctx, endpoint, "", b)
}

func (s *socket) write(ctx context.Context, b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.c.Write(ctx, websocket.MessageText, b)
}

// read reads frames until the connection ends.
func (s *socket) read() {
	defer close(s.done)
	defer close(s.events)
	ctx := context.Background()
	for {
		_, msg, err := s.c.Read(ctx)
		if err != nil {
			s.end("disconnected")
			return
		}
		s.touch()
		f, err := parseFrame(msg)
		if err != nil {
			continue
		}
		switch f.kind {
		case 'c':
			s.end("closed")
			_ = s.c.CloseNow()
			return
		case 'a':
			for _, m := range f.msgs {
				if m.E != "" {
					select {
					case s.events <- event{name: m.E, data: m.D}:
					case <-s.quit:
						return
					}
					continue
				}
				if m.I == nil {
					continue
				}
				s.mu.Lock()
				ch := s.waiting[*m.I]
				s.mu.Unlock()
				if ch != nil {
					select {
					case ch <- reply{status: m.S, data: m.D}:
					default:
					}
				}
			}
		}
	}
}

// heartbeat sends "[]" every d and ends the connection after a silence of
// four heartbeats.
func (s *socket) heartbeat(d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if time.Since(time.Unix(0, s.last.Load())) > s.stale {
				s.end("silent")
				_ = s.c.CloseNow()
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), d)
			err := s.write(ctx, []byte("[]"))
			cancel()
			if err != nil {
				s.end("disconnected")
				_ = s.c.CloseNow()
				return
			}
		}
	}
}

// end records the first cause of the end.
func (s *socket) end(cause string) {
	s.mu.Lock()
	if s.cause == "" {
		s.cause = cause
	}
	s.mu.Unlock()
}

// why is the cause of the end ("disconnected" until known).
func (s *socket) why() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause == "" {
		return "disconnected"
	}
	return s.cause
}

// close ends the connection.
func (s *socket) close() {
	s.end("closed")
	s.quitOnce.Do(func() { close(s.quit) })
	_ = s.c.CloseNow()
}

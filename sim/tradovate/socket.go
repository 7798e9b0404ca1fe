package tradovate

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// wsConn is one socket, user data or market data, in the provider's SockJS-derived protocol: the
// server sends 'o' on open, 'h' heartbeats, 'a[…]' arrays of JSON messages and 'c[code,"reason"]' to
// close; the client sends "[]" heartbeats and requests "endpoint\nid\nquery\nbody". Frames queue on
// out; a writer goroutine sends them. A client that does not keep up (a full queue) is dropped.
// Every field but c and out is guarded by Sim.mu.
type wsConn struct {
	c      *websocket.Conn
	md     bool
	out    chan string
	ctx    context.Context
	cancel context.CancelFunc

	sess      *session // set by authorize
	synced    bool     // user/syncrequest done: props events flow
	quotes    map[int64]bool
	doms      map[int64]bool
	charts    map[int64]*chartSub // by realtime id
	lastHeard time.Time
	held      string
	heldTimer *time.Timer
	abrupt    bool
	closing   bool
}

// chartSub is a real-time chart subscription.
type chartSub struct {
	realtimeID, historicalID int64
	contract                 *contract
	size                     int
	daily                    bool
}

func (c *wsConn) send(frame string) {
	if c.closing {
		return
	}
	select {
	case c.out <- frame:
	default:
		c.drop()
	}
}

// drop ends the connection at once, without a close frame, as a network failure would.
func (c *wsConn) drop() {
	c.abrupt = true
	c.closing = true
	c.cancel()
}

// closeWith sends a close frame ('c[…]') after what is queued, then closes the connection.
func (c *wsConn) closeWith(frame string) {
	if c.closing {
		return
	}
	c.send(frame)
	c.closing = true
	close(c.out)
}

// event sends one props event frame through the stream faults (duplicate, reorder), with Sim.mu held.
func (s *Sim) event(c *wsConn, frame string) {
	n := 1
	if s.stream.Duplicate {
		n = 2
	}
	if !s.stream.Reorder {
		for i := 0; i < n; i++ {
			c.send(frame)
		}
		return
	}
	if c.held == "" {
		c.held = frame
		hold := s.stream.ReorderHold
		if hold <= 0 {
			hold = 200 * time.Millisecond
		}
		c.heldTimer = time.AfterFunc(hold, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			c.flushHeldN(n)
		})
		return
	}
	for i := 0; i < n; i++ {
		c.send(frame)
	}
	c.flushHeldN(n)
}

func (c *wsConn) flushHeld() { c.flushHeldN(1) }

func (c *wsConn) flushHeldN(n int) {
	if c.heldTimer != nil {
		c.heldTimer.Stop()
		c.heldTimer = nil
	}
	if c.held != "" {
		f := c.held
		c.held = ""
		for i := 0; i < n; i++ {
			c.send(f)
		}
	}
}

// propsEvent is the provider's server event for an entity created, updated or deleted.
type propsEvent struct {
	E string     `json:"e"`
	D propsInner `json:"d"`
}

type propsInner struct {
	EntityType string `json:"entityType"`
	EventType  string `json:"eventType"`
	Entity     any    `json:"entity"`
}

// emit sends a props event about ent to the user's synced user data sockets, with s.mu held. The
// entity is written now: later changes are later events.
func (s *Sim) emit(u *user, entityType, eventType string, ent any) {
	b, err := json.Marshal([]propsEvent{{E: "props", D: propsInner{EntityType: entityType, EventType: eventType, Entity: ent}}})
	if err != nil {
		return
	}
	frame := "a" + string(b)
	now := s.now()
	for c := range s.conns {
		if !c.md && c.synced && c.sess != nil && c.sess.user == u && c.sess.valid(now) {
			s.event(c, frame)
		}
	}
}

// response is the provider's response message to a client request.
type response struct {
	S int   `json:"s"`
	I int64 `json:"i"`
	D any   `json:"d,omitempty"`
}

// reply answers a socket request (or, under an accept-then-drop fault, cuts the socket instead) and
// then sends what the request queued to follow its answer; s.mu held.
func (s *Sim) reply(req *request, a answer) {
	c := req.conn
	if a.drop {
		c.drop()
		return
	}
	r := response{S: a.status, I: req.id}
	switch {
	case a.body != nil:
		r.D = a.body
	case a.text != "":
		r.D = a.text
	}
	b, err := json.Marshal([]response{r})
	if err != nil {
		return
	}
	c.send("a" + string(b))
	for _, f := range req.after {
		f()
	}
}

// authorize answers the socket's authorize request: an access token (on the market data socket an md
// access token too) makes the socket act for its session.
func (s *Sim) authorize(c *wsConn, body []byte, now time.Time) answer {
	t := s.tokens[strings.TrimSpace(string(body))]
	if t == nil || !t.valid(now) || (t.md && !c.md) {
		return unauthorized()
	}
	if c.sess != nil && c.sess.user != t.sess.user {
		c.synced = false
		c.quotes, c.doms, c.charts = map[int64]bool{}, map[int64]bool{}, map[int64]*chartSub{}
	}
	c.sess = t.sess
	return answer{status: http.StatusOK}
}

// serveSocket runs one socket: the open frame, then requests until the client or the simulator
// ends it.
func (s *Sim) serveSocket(w http.ResponseWriter, r *http.Request, md bool) {
	conn := &wsConn{md: md, out: make(chan string, 4096), quotes: map[int64]bool{}, doms: map[int64]bool{},
		charts: map[int64]*chartSub{}}
	conn.ctx, conn.cancel = context.WithCancel(context.Background())
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		conn.cancel()
		return
	}
	ws.SetReadLimit(1 << 20)
	conn.c = ws
	s.mu.Lock()
	select {
	case <-s.stop:
		s.mu.Unlock()
		conn.cancel()
		_ = ws.CloseNow()
		return
	default:
	}
	conn.lastHeard = time.Now()
	s.conns[conn] = struct{}{}
	conn.send("o")
	s.mu.Unlock()

	remote := remoteIP(r)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.readLoop(conn, remote)
	}()
	s.writeLoop(conn)

	s.mu.Lock()
	delete(s.conns, conn)
	if conn.heldTimer != nil {
		conn.heldTimer.Stop()
	}
	abrupt := conn.abrupt
	s.mu.Unlock()
	conn.cancel()
	if abrupt {
		_ = ws.CloseNow()
		return
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
}

func (s *Sim) writeLoop(conn *wsConn) {
	beat := time.NewTicker(s.opts.HeartbeatInterval)
	defer beat.Stop()
	lastWrite := time.Now()
	write := func(frame string) bool {
		wctx, cancel := context.WithTimeout(conn.ctx, 10*time.Second)
		defer cancel()
		lastWrite = time.Now()
		return conn.c.Write(wctx, websocket.MessageText, []byte(frame)) == nil
	}
	for {
		select {
		case <-conn.ctx.Done():
			return
		case frame, open := <-conn.out:
			if !open {
				return
			}
			if !write(frame) {
				return
			}
		case <-beat.C:
			if s.silent(conn) {
				s.mu.Lock()
				conn.closeWith(`c[3000,"Heartbeat timeout"]`)
				s.mu.Unlock()
				continue
			}
			// A socket streaming data sends no heartbeats, as the provider documents.
			if time.Since(lastWrite) >= s.opts.HeartbeatInterval && !write("h") {
				return
			}
		}
	}
}

// silent reports whether the client has said nothing for longer than Options.ClientSilence.
func (s *Sim) silent(conn *wsConn) bool {
	if s.opts.ClientSilence < 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !conn.closing && time.Since(conn.lastHeard) > s.opts.ClientSilence
}

func (s *Sim) readLoop(conn *wsConn, remote string) {
	for {
		_, msg, err := conn.c.Read(conn.ctx)
		if err != nil {
			s.mu.Lock()
			if !conn.closing {
				conn.drop()
			}
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		conn.lastHeard = time.Now() // wall time: silence is the network's, not the simulated clock's
		closing := conn.closing
		s.mu.Unlock()
		text := string(msg)
		if closing || text == "[]" {
			continue
		}
		req, bad := parseFrame(text)
		if bad != nil {
			s.mu.Lock()
			s.reply(&request{conn: conn}, *bad)
			s.mu.Unlock()
			continue
		}
		req.conn, req.remote = conn, remote
		s.handle(req)
	}
}

// parseFrame reads a client request "endpoint\nid\nquery\nbody" (query and body may be empty).
func parseFrame(text string) (*request, *answer) {
	parts := strings.SplitN(text, "\n", 4)
	if len(parts) < 2 {
		a := badRequest("Invalid request: expected endpoint, id, query and body separated by new lines")
		return nil, &a
	}
	id, err := strconv.ParseInt(strings.TrimSpace(parts[1]), 10, 64)
	if err != nil {
		a := badRequest("Invalid request id")
		return nil, &a
	}
	req := &request{endpoint: strings.ToLower(strings.Trim(strings.TrimSpace(parts[0]), "/")), id: id}
	if len(parts) > 2 && parts[2] != "" {
		q, err := url.ParseQuery(parts[2])
		if err != nil {
			a := badRequest("Invalid query")
			return nil, &a
		}
		req.query = q
	}
	if len(parts) > 3 {
		req.body = []byte(parts[3])
	}
	return req, nil
}

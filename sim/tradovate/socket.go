package tradovate

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/svc/engine/sim/internal/simkit"
)

// wsConn is one socket, user data or market data, in the provider's SockJS-derived protocol: the
// server sends 'o' on open, 'h' heartbeats, 'a[…]' arrays of JSON messages and 'c[code,"reason"]' to
// close; the client sends "[]" heartbeats and requests "endpoint\nid\nquery\nbody". Frames queue on
// out; a writer goroutine sends them. A client that does not keep up (a full queue) is dropped.
// Every field but c and out is guarded by Sim.mu.
type wsConn struct {
	simkit.Outbox[string]
	c  *websocket.Conn
	md bool

	sess      *session // set by authorize
	synced    bool     // user/syncrequest done: props events flow
	quotes    map[int64]bool
	doms      map[int64]bool
	charts    map[int64]*chartSub // by realtime id
	lastHeard time.Time
	reorder   simkit.Reorder[string] // a props event held back by the reorder fault
}

// chartSub is a real-time chart subscription.
type chartSub struct {
	realtimeID, historicalID int64
	contract                 *contract
	size                     int
	daily                    bool
}

// closeWith sends a close frame ('c[…]') after what is queued, then closes the connection.
func (c *wsConn) closeWith(frame string) {
	if c.Closing() {
		return
	}
	c.Send(frame)
	c.Close()
}

// event sends one props event frame through the stream faults (duplicate, reorder), with Sim.mu held.
func (s *Sim) event(c *wsConn, frame string) {
	n := s.stream.Copies()
	c.reorder.Pass(s.stream, &s.mu, frame, func(f string) {
		for range n {
			c.Send(f)
		}
	})
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
		c.Drop()
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
	c.Send("a" + string(b))
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
	conn := &wsConn{Outbox: simkit.NewOutbox[string](4096), md: md, quotes: map[int64]bool{}, doms: map[int64]bool{},
		charts: map[int64]*chartSub{}}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		conn.Shut(nil, true)
		return
	}
	ws.SetReadLimit(1 << 20)
	conn.c = ws
	s.mu.Lock()
	select {
	case <-s.server.Stopped():
		s.mu.Unlock()
		conn.Shut(ws, true)
		return
	default:
	}
	conn.lastHeard = time.Now()
	s.conns[conn] = struct{}{}
	conn.Send("o")
	s.mu.Unlock()

	remote := simkit.RemoteIP(r)
	s.server.Go(func() { s.readLoop(conn, remote) })
	s.writeLoop(conn)

	s.mu.Lock()
	delete(s.conns, conn)
	conn.reorder.Stop()
	abrupt := conn.Abrupt()
	s.mu.Unlock()
	conn.Shut(ws, abrupt)
}

func (s *Sim) writeLoop(conn *wsConn) {
	beat := time.NewTicker(s.opts.HeartbeatInterval)
	defer beat.Stop()
	lastWrite := time.Now()
	write := func(frame string) bool {
		lastWrite = time.Now()
		return simkit.Write(conn.Ctx, conn.c, []byte(frame)) == nil
	}
	for {
		select {
		case <-conn.Ctx.Done():
			return
		case frame, open := <-conn.Out:
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
	return !conn.Closing() && time.Since(conn.lastHeard) > s.opts.ClientSilence
}

func (s *Sim) readLoop(conn *wsConn, remote string) {
	for {
		_, msg, err := conn.c.Read(conn.Ctx)
		if err != nil {
			s.mu.Lock()
			if !conn.Closing() {
				conn.Drop()
			}
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		conn.lastHeard = time.Now() // wall time: silence is the network's, not the simulated clock's
		closing := conn.Closing()
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

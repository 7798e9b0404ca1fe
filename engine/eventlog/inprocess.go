package eventlog

import (
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// inProcess connects nats.go to the embedded server over the server's
// in-process pipe, with the pipe's write deadline kept coarse (coarseConn).
type inProcess struct{ srv *server.Server }

func (p inProcess) InProcessConn() (net.Conn, error) {
	c, err := p.srv.InProcessConn()
	if err != nil {
		return nil, err
	}
	return &coarseConn{Conn: c}, nil
}

// deadlineSlack is how much later than asked a coarseConn's write deadline
// may fall.
const deadlineSlack = time.Second

// coarseConn is a connection whose write deadline may fall up to
// deadlineSlack later than asked. nats.go sets a write deadline before every
// write it flushes and clears it after (a minute, its FlusherTimeout), and
// every deadline set on a net.Pipe makes a timer: two objects and 0.13 KB an
// append. Here the pipe's deadline moves only when the one asked for falls
// outside it by more than the slack, about twice a second under load, and a
// write still never blocks past the deadline asked plus the slack. A write
// with no deadline asked clears the pipe's first, so a deadline left from an
// earlier write never ends it.
type coarseConn struct {
	net.Conn
	mu   sync.Mutex
	want time.Time // the write deadline asked for; zero for none
	set  time.Time // the write deadline set on the pipe; zero for none
}

func (c *coarseConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want = t
	if t.IsZero() || (!c.set.IsZero() && !c.set.Before(t) && c.set.Sub(t) <= deadlineSlack) {
		return nil // none asked (Write clears the pipe's), or the pipe's is late by no more than the slack
	}
	c.set = t.Add(deadlineSlack / 2)
	return c.Conn.SetWriteDeadline(c.set)
}

func (c *coarseConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want, c.set = t, t
	return c.Conn.SetDeadline(t)
}

func (c *coarseConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.want.IsZero() && !c.set.IsZero() {
		c.set = time.Time{}
		_ = c.Conn.SetWriteDeadline(time.Time{})
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

package eventlog

import (
	"context"
	"sync"
	"time"
)

// commitCtx is the context CommitContext hands out: it ends at its deadline
// (DeadlineExceeded) or when the connection it was made on breaks
// (Canceled, cause errConnectionLost), as context.WithDeadline of the
// connection's context does. Its values are the connection's, so
// context.Cause gives that connection's cause. Unlike WithDeadline's, it is
// used again by later appends while it has not ended: its channel, its
// timer and its watch of the connection are made once, not for every
// append (a timer context, its timer, its channel and its place in the
// connection's children: about 0.37 KB an append).
type commitCtx struct {
	conn    context.Context // the connection's, when it was made
	done    chan struct{}
	timer   *time.Timer // runs expire
	unwatch func() bool // stops the connection's watch (context.AfterFunc)
	cancel  context.CancelFunc

	mu       sync.Mutex
	deadline time.Time
	live     bool  // handed out and not yet cancelled
	err      error // non-nil once done is closed
}

func newCommitCtx(conn context.Context) *commitCtx {
	c := &commitCtx{conn: conn, done: make(chan struct{})}
	c.timer = time.AfterFunc(time.Hour, c.expire)
	c.timer.Stop()
	c.unwatch = context.AfterFunc(conn, c.broke)
	c.cancel = c.release
	return c
}

func (c *commitCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

func (c *commitCtx) Done() <-chan struct{} { return c.done }

func (c *commitCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *commitCtx) Value(key any) any { return c.conn.Value(key) }

// end closes done with err, once.
func (c *commitCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// expire ends the context at its deadline; a timer that fires after its
// append let the context go (release) does nothing.
func (c *commitCtx) expire() {
	c.mu.Lock()
	live := c.live
	c.mu.Unlock()
	if live {
		c.end(context.DeadlineExceeded)
	}
}

// broke ends the context, in use or not, when its connection breaks.
func (c *commitCtx) broke() { c.end(context.Canceled) }

// release is the context's cancel: it lets the context go, and keeps it
// for the next append when it has not ended and its timer did not fire.
func (c *commitCtx) release() {
	c.mu.Lock()
	if !c.live {
		c.mu.Unlock()
		return // a second cancel
	}
	c.live = false
	ended := c.err != nil
	c.mu.Unlock()
	if !c.timer.Stop() || ended {
		c.unwatch()
		return // ended, or about to: never handed out again
	}
	commitCtxs.put(c)
}

// commitCtxs are the contexts kept for reuse, at most maxCommitCtxs: a
// sync.Pool would drop some at a collection, leaving their watches in the
// connection's context until it breaks.
var commitCtxs commitCtxPool

const maxCommitCtxs = 256

type commitCtxPool struct {
	mu   sync.Mutex
	free []*commitCtx
}

func (p *commitCtxPool) put(c *commitCtx) {
	p.mu.Lock()
	if len(p.free) < maxCommitCtxs {
		p.free = append(p.free, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.unwatch()
	}
}

// get hands out a context of conn until deadline: a kept one when one is
// of conn and has not ended, else a new one.
func (p *commitCtxPool) get(conn context.Context, deadline time.Time) *commitCtx {
	var c *commitCtx
	for {
		p.mu.Lock()
		if n := len(p.free); n > 0 {
			c = p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
		}
		p.mu.Unlock()
		if c == nil {
			c = newCommitCtx(conn)
			break
		}
		c.mu.Lock()
		ok := c.conn == conn && c.err == nil
		c.mu.Unlock()
		if ok {
			break
		}
		c.unwatch() // of a connection that broke, or ended while kept
		c = nil
	}
	c.mu.Lock()
	c.live, c.deadline = true, deadline
	c.mu.Unlock()
	if conn.Err() != nil {
		// Broken before its watch ran (context.AfterFunc calls it on a
		// goroutine of its own): ended now, as WithDeadline of a broken
		// connection's context is, so the append is refused before sending.
		c.end(context.Canceled)
	}
	c.timer.Reset(time.Until(deadline))
	return c
}

package eventlog

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// countingConn counts the write deadlines set on the pipe beneath.
type countingConn struct {
	net.Conn
	sets int
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.sets++
	return c.Conn.SetWriteDeadline(t)
}

func TestACoarseWriteDeadlineStillEndsAWriteNobodyReads(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := &coarseConn{Conn: a}
	start := time.Now()
	if err := c.SetWriteDeadline(start.Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Write([]byte("PUB x 1\r\n1\r\n")) // nobody reads b
	took := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the write ended with %v, want its deadline exceeded", err)
	}
	if took < 100*time.Millisecond || took > 100*time.Millisecond+deadlineSlack+time.Second {
		t.Fatalf("the write ended after %v, want between the deadline (100ms) and the deadline plus the slack (%v)", took, deadlineSlack)
	}
}

func TestACoarseWriteDeadlineNeverEndsALaterWrite(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	go func() { _, _ = io.Copy(io.Discard, b) }()
	pipe := &countingConn{Conn: a}
	c := &coarseConn{Conn: pipe}
	// nats.go's flusher: a deadline a minute out before each write, none after.
	for range 1000 {
		if err := c.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("+OK\r\n")); err != nil {
			t.Fatal(err)
		}
		if err := c.SetWriteDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if pipe.sets > 2 {
		t.Fatalf("the pipe's write deadline was set %d times for 1,000 writes, want once (the slack is %v)", pipe.sets, deadlineSlack)
	}
	// A short deadline, its write, then none: a write with no deadline
	// after the short one has passed still goes through.
	if err := c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("+OK\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(deadlineSlack)
	if _, err := c.Write([]byte("+OK\r\n")); err != nil {
		t.Fatalf("a write with no deadline failed after an earlier deadline passed: %v", err)
	}
	// And one with a deadline, after it passed, too.
	if err := c.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("+OK\r\n")); err != nil {
		t.Fatalf("a write within its deadline failed: %v", err)
	}
}

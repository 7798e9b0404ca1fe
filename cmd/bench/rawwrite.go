package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// rawFrame is the size of the baseline's frame: about what one subscriber
// of an account reads an order (the cost benchmark's 1,366-1,421 bytes an
// order over two subscribers).
const rawFrame = 700

// rawWriteBaseline is the floor of a stream's frame on this machine,
// measured in the run that measures the streams: the CPU one thread spends
// on one write of a frame-sized buffer to a TCP connection on 127.0.0.1
// whose reader, in another process, sleeps between frames, as the
// engine's subscribers do. conns connections are written round robin at
// rate writes a second for d; the writing thread's own CPU (RUSAGE_THREAD)
// less the same pacing without writes is divided by the writes.
func rawWriteBaseline(ctx context.Context, conns int, rate float64, d time.Duration) (time.Duration, error) {
	if conns < 1 || rate <= 0 {
		return 0, fmt.Errorf("raw write baseline: %d connections at %.0f/s", conns, rate)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute+2*d)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe, "write-sink", "-addr", ln.Addr().String(), "-n", strconv.Itoa(conns))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	cs := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for len(cs) < conns {
		if dl, ok := ln.(*net.TCPListener); ok {
			_ = dl.SetDeadline(time.Now().Add(30 * time.Second))
		}
		c, err := ln.Accept()
		if err != nil {
			return 0, fmt.Errorf("raw write baseline: %d of %d connections: %w", len(cs), conns, err)
		}
		cs = append(cs, c)
	}
	type out struct {
		per time.Duration
		err error
	}
	done := make(chan out, 1)
	go func() { // one locked thread, so its own CPU is the writes'
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		idle, _, err := pacedWrites(nil, rate, d/4)
		if err != nil {
			done <- out{0, err}
			return
		}
		busy, n, err := pacedWrites(cs, rate, d)
		if err == nil && n == 0 {
			err = errors.New("raw write baseline: nothing written")
		}
		if err != nil {
			done <- out{0, err}
			return
		}
		done <- out{max(0, busy-idle*4) / time.Duration(n), nil}
	}()
	r := <-done
	return r.per, r.err
}

// pacedWrites writes a frame to cs round robin at rate writes a second
// for d, a batch every millisecond (none when cs is empty: the pacing
// alone), and returns the calling thread's CPU over it and the writes.
func pacedWrites(cs []net.Conn, rate float64, d time.Duration) (time.Duration, int, error) {
	frame := make([]byte, rawFrame)
	copy(frame, "event: account\ndata: ")
	frame[len(frame)-2], frame[len(frame)-1] = '\n', '\n'
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start, cpu0 := time.Now(), threadCPU()
	n, next := 0, 0
	for now := range t.C {
		el := now.Sub(start)
		if el >= d {
			break
		}
		for want := int(rate * el.Seconds()); len(cs) > 0 && n < want; n++ {
			if _, err := cs[next].Write(frame); err != nil {
				return 0, n, err
			}
			next = (next + 1) % len(cs)
		}
	}
	return threadCPU() - cpu0, n, nil
}

// threadCPU is the calling thread's CPU time, user and system.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeSinkMain is the write-sink child of the raw write baseline: it
// opens -n connections to -addr (127.0.0.1 only), reads and discards what
// each receives, and exits when its input ends.
func writeSinkMain(args []string) error {
	fs := flag.NewFlagSet("write-sink", flag.ContinueOnError)
	addr := fs.String("addr", "", "host:port to connect to (127.0.0.1)")
	n := fs.Int("n", 1, "connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackChild("write sink", *addr, *n); err != nil {
		return err
	}
	for range *n {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			return err
		}
		defer c.Close()
		go func() { _, _ = io.Copy(io.Discard, c) }()
	}
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return nil
}

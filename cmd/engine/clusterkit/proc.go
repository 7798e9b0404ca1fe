package clusterkit

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// errNotRunning is a signal to a process that is not running.
var errNotRunning = errors.New("clusterkit: process is not running")

// proc is one child process that can be started again with the same command
// line, environment and log file. Its methods are safe for concurrent use.
type proc struct {
	name    string // for messages: c1, n2
	path    string
	args    []string
	env     []string // nil: this process's environment
	logPath string   // stdout and stderr, appended across starts

	mu      sync.Mutex
	run     *run // the latest start; nil before the first
	stopped bool // SIGSTOPped and not continued since
}

// run is one start of a proc. err is valid once done is closed.
type run struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // from cmd.Wait
}

// start starts the process; it fails if it is running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("clusterkit: %s is already running", p.name)
	}
	cmd, err := Launch(p.path, p.args, p.env, p.logPath)
	if err != nil {
		return fmt.Errorf("clusterkit: start %s: %w", p.name, err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	p.run, p.stopped = r, false
	return nil
}

// Launch starts path with args and env (nil: this process's), stdout and
// stderr appended to logPath, in a process group of its own (a Ctrl-C
// reaches only the caller, which ends it) and killed should the caller die
// first. The caller waits for it.
func Launch(path string, args, env []string, logPath string) (*exec.Cmd, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// runningLocked reports whether the process is running; p.mu must be held.
func (p *proc) runningLocked() bool {
	if p.run == nil {
		return false
	}
	select {
	case <-p.run.done:
		return false
	default:
		return true
	}
}

// running reports whether the process is running (stopped counts as running).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// isStopped reports whether the process is running but SIGSTOPped.
func (p *proc) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked() && p.stopped
}

// signal sends sig, or returns errNotRunning.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return fmt.Errorf("%w: %s", errNotRunning, p.name)
	}
	if err := p.run.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("clusterkit: signal %s: %w", p.name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return nil
}

// kill sends SIGKILL and waits until the process is gone; it does nothing
// to a process that is not running.
func (p *proc) kill() {
	p.mu.Lock()
	r := p.run
	if !p.runningLocked() {
		p.mu.Unlock()
		return
	}
	_ = r.cmd.Process.Kill()
	p.mu.Unlock()
	<-r.done
}

// term sends SIGTERM (and SIGCONT, so a stopped process sees it) and waits
// up to timeout for the exit, whose error it returns: nil for status 0. A
// process still running then is killed and term says so.
func (p *proc) term(timeout time.Duration) error {
	p.mu.Lock()
	r := p.run
	if !p.runningLocked() {
		p.mu.Unlock()
		return fmt.Errorf("%w: %s", errNotRunning, p.name)
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	p.stopped = false
	p.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("clusterkit: %s did not exit within %v of SIGTERM; killed", p.name, timeout)
	}
}

// log is everything the process has written so far.
func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// tail is the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// withLog is err followed by the last 40 lines of p's log, read when the
// error is printed, so a wait that polls it does not read the log each time.
type withLog struct {
	err error
	p   *proc
}

func (e withLog) Error() string {
	return fmt.Sprintf("%s: %v\nlast lines of %s:\n%s", e.p.name, e.err, e.p.logPath, e.p.tail(40))
}

// freePorts returns n distinct free TCP ports of 127.0.0.1, never 4222 (the
// machine's own NATS server). Another process may take one before it is used.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		if port := l.Addr().(*net.TCPAddr).Port; port != 4222 {
			ports = append(ports, port)
		}
	}
	return ports
}

// childEnv is this process's environment without the engine's settings
// (ENGINE_*, NATS_URL, DATABASE_URL), which a child gets only as it is told.
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ENGINE_") || strings.HasPrefix(kv, "NATS_URL=") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

package jepsen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svc/engine/cmd/engine/clusterkit"
)

// errNotRunning is a signal to a process that is not running.
var errNotRunning = errors.New("jepsen: process is not running")

// Proc is one process in a host's namespace (started through `ip netns
// exec`, which execs it: its pid is the process's own), started again with
// the same command line, environment and log. Its methods are safe for
// concurrent use.
type Proc struct {
	Name    string
	ns      string
	path    string
	args    []string
	env     []string
	logPath string
	// wholeNS: the process forks others that leave its process group
	// (PostgreSQL's backends), alone in its namespace: signals go to every
	// process in the namespace.
	wholeNS bool

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
}

// Start starts the process; it fails if it is running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("jepsen: %s is already running", p.Name)
	}
	cmd, err := clusterkit.Launch("ip", append([]string{"netns", "exec", p.ns, p.path}, p.args...), p.env, p.logPath)
	if err != nil {
		return fmt.Errorf("jepsen: start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done, p.stopped = cmd, done, false
	return nil
}

func (p *Proc) runningLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process runs (a stopped one does).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Stopped reports whether the process runs but is SIGSTOPped.
func (p *Proc) Stopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked() && p.stopped
}

// Signal sends sig, or returns errNotRunning.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return fmt.Errorf("%w: %s", errNotRunning, p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("jepsen: signal %s: %w", p.Name, err)
	}
	if p.wholeNS {
		signalNamespace(p.ns, sig)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return nil
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	p.mu.Lock()
	if !p.runningLocked() {
		p.mu.Unlock()
		return
	}
	done := p.done
	_ = p.cmd.Process.Kill()
	if p.wholeNS {
		signalNamespace(p.ns, syscall.SIGKILL)
	}
	p.mu.Unlock()
	<-done
	if p.wholeNS { // the rest are gone once reaped
		_ = waitFor(5*time.Second, func() error {
			if out, _ := exec.Command("ip", "netns", "pids", p.ns).Output(); len(bytes.TrimSpace(out)) > 0 {
				return errors.New("processes left")
			}
			return nil
		})
	}
}

// signalNamespace sends sig to every process in ns, each by its pid.
func signalNamespace(ns string, sig syscall.Signal) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// Tail is the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Log is everything the process wrote.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// waitFor polls f every 100 ms until it returns nil or d passes; the last
// error then.
func waitFor(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// childEnv is this process's environment without the engine's settings
// (ENGINE_*, NATS_URL, DATABASE_URL) and the harness's own (JEPSEN_*).
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ENGINE_") || strings.HasPrefix(kv, "NATS_URL=") || strings.HasPrefix(kv, "DATABASE_URL=") ||
			strings.HasPrefix(kv, "JEPSEN_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

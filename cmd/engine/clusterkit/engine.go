package clusterkit

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
)

// engineReady bounds the wait for an engine's /readyz to answer 200.
const engineReady = 60 * time.Second

// engineTerm bounds the wait for an engine to exit after SIGTERM.
const engineTerm = 30 * time.Second

// nodeName is what ENGINE_NODE may be.
var nodeName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// EngineOptions is how StartEngine runs an engine.
type EngineOptions struct {
	Node        string            // ENGINE_NODE: [a-z0-9-], 1-32 characters; empty: not set
	NATSURLs    string            // NATS_URL: comma-separated, as NATS.URLs gives them
	DatabaseURL string            // DATABASE_URL; empty: read models in memory
	Deployment  string            // ENGINE_DEPLOYMENT; required, distinct per test run (NewDeployment)
	Dir         string            // ENGINE_DATA_DIR; the log is Dir/engine.log
	SecretKey   []byte            // written to Dir/secret.key; 32 bytes, or nil for the engine's own
	Env         map[string]string // more variables, set last, so they override the above
}

// Engine is one engine process on a free port of 127.0.0.1. Methods taking
// no testing.TB fail the one StartEngine was given, so call them from the
// test's goroutine.
type Engine struct {
	t    testing.TB
	url  string
	proc *proc
}

// StartEngine starts EngineBinary with opts and ENGINE_ENV=sandbox,
// ENGINE_STREAM_REPLICAS=3 and ENGINE_LOG_LEVEL=warn (which opts.Env may
// override), and waits up to 60 s for /readyz to answer 200. The engine is
// killed when the test ends.
func StartEngine(t testing.TB, opts EngineOptions) *Engine {
	t.Helper()
	var errs []error
	if opts.Node != "" && !nodeName.MatchString(opts.Node) {
		errs = append(errs, fmt.Errorf("Node %q is not 1-32 characters of a-z, 0-9 and '-'", opts.Node))
	}
	if opts.Deployment == "" {
		errs = append(errs, errors.New("Deployment is required"))
	}
	if opts.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	if opts.SecretKey != nil && len(opts.SecretKey) != 32 {
		errs = append(errs, fmt.Errorf("SecretKey has %d bytes, want 32", len(opts.SecretKey)))
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("clusterkit: EngineOptions: %v", err)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if opts.SecretKey != nil {
		if err := os.WriteFile(filepath.Join(opts.Dir, "secret.key"), opts.SecretKey, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	env := append(childEnv(),
		"ENGINE_LISTEN="+addr,
		"ENGINE_DATA_DIR="+opts.Dir,
		"NATS_URL="+opts.NATSURLs,
		"DATABASE_URL="+opts.DatabaseURL,
		"ENGINE_DEPLOYMENT="+opts.Deployment,
		"ENGINE_ENV=sandbox",
		"ENGINE_STREAM_REPLICAS=3",
		"ENGINE_LOG_LEVEL=warn",
	)
	if opts.Node != "" {
		env = append(env, "ENGINE_NODE="+opts.Node)
	}
	for k, v := range opts.Env {
		env = append(env, k+"="+v) // the last of a name wins
	}
	name := opts.Node
	if name == "" {
		name = "engine"
	}
	e := &Engine{
		t:    t,
		url:  "http://" + addr,
		proc: &proc{name: name, path: EngineBinary(t), env: env, logPath: filepath.Join(opts.Dir, "engine.log")},
	}
	t.Cleanup(e.proc.kill)
	e.Start(t)
	return e
}

// URL is the engine's base URL: http://127.0.0.1:<port>.
func (e *Engine) URL() string { return e.url }

// Start starts the engine again, after Kill or Term, on the same port and
// data directory, and waits up to 60 s for /readyz to answer 200; t fails
// with the last 40 lines of the engine's log if it does not.
func (e *Engine) Start(t testing.TB) {
	t.Helper()
	if err := e.proc.start(); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: time.Second}
	enginetest.WaitFor(t, engineReady, func() error {
		if !e.proc.running() {
			return nil // reported below
		}
		resp, err := client.Get(e.url + "/readyz")
		if err != nil {
			return withLog{err, e.proc}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return withLog{fmt.Errorf("/readyz answers %d", resp.StatusCode), e.proc}
		}
		return nil
	})
	if !e.proc.running() {
		t.Fatal(withLog{errors.New("exited before /readyz answered 200"), e.proc})
	}
}

// Kill ends the engine with SIGKILL and waits until it is gone; an engine
// not running is left alone.
func (e *Engine) Kill() { e.proc.kill() }

// Stop freezes the engine with SIGSTOP.
func (e *Engine) Stop() {
	e.t.Helper()
	if err := e.proc.signal(syscall.SIGSTOP); err != nil {
		e.t.Fatal(err)
	}
}

// Cont lets a stopped engine run again with SIGCONT.
func (e *Engine) Cont() {
	e.t.Helper()
	if err := e.proc.signal(syscall.SIGCONT); err != nil {
		e.t.Fatal(err)
	}
}

// Term sends SIGTERM (and SIGCONT, so a stopped engine sees it) and waits
// up to 30 s for the engine to drain and exit. It returns the exit's error:
// nil for status 0, an *exec.ExitError otherwise, or an error saying the
// engine had to be killed or was not running.
func (e *Engine) Term() error { return e.proc.term(engineTerm) }

// Stacks ends the engine with SIGQUIT, which makes the Go runtime write
// every goroutine's stack before it exits, and returns the goroutines that
// run the engine's own code and are serving a request or had been blocked
// for a minute or more: where a test's write that was never answered is
// waiting. Only for a test that has already failed: the engine is gone
// afterwards.
func (e *Engine) Stacks() string {
	before := len(e.proc.log())
	if err := e.proc.signal(syscall.SIGQUIT); err != nil {
		return err.Error()
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.proc.running() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	e.proc.kill()
	log := e.proc.log()
	if len(log) < before {
		return ""
	}
	return stuckGoroutines(log[before:], 25)
}

// stuckGoroutines picks from a Go traceback the goroutines with a frame of
// the engine's own packages that serve an HTTP request or were blocked for a
// minute or more ("[chan receive, 2 minutes]"; the runtime knows how long
// only of goroutines a collection found blocked), no more than most of them, each
// as its header and the engine's frames.
func stuckGoroutines(dump string, most int) string {
	var b strings.Builder
	n := 0
	for _, g := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[0], "goroutine ") ||
			!strings.Contains(lines[0], " minutes]") && !strings.Contains(g, "\nnet/http.(*conn).serve(") {
			continue
		}
		var own []string
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "github.com/svc/engine/") {
				own = append(own, "    "+l)
			}
		}
		if len(own) == 0 {
			continue
		}
		if n++; n > most {
			fmt.Fprintf(&b, "(more goroutines left out)\n")
			break
		}
		b.WriteString(lines[0] + "\n" + strings.Join(own, "\n") + "\n")
	}
	return b.String()
}

// Running reports whether the engine's process is running (a stopped one is).
func (e *Engine) Running() bool { return e.proc.running() }

// Log is everything the engine has written to stdout and stderr, across starts.
func (e *Engine) Log() string { return e.proc.log() }

// NewSecretKey is 32 random bytes for EngineOptions.SecretKey; give every
// node of a deployment the same one.
func NewSecretKey() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// NewDeployment is a fresh ENGINE_DEPLOYMENT name, ck-<12 hex digits>, so
// test runs sharing a NATS cluster never share streams.
func NewDeployment() string {
	return fmt.Sprintf("ck-%x", NewSecretKey()[:6])
}

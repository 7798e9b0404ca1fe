package clusterkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/enginetest"
)

// ClusterName is the name of the NATS cluster StartNATS starts.
const ClusterName = "engine"

// natsReady bounds the wait for a server to serve JetStream.
const natsReady = 30 * time.Second

// NATS is a cluster of three nats-server processes on 127.0.0.1, c1, c2 and
// c3 (indexes 0, 1 and 2), with JetStream. Methods taking no testing.TB fail
// the one StartNATS was given, so call them from the test's goroutine.
type NATS struct {
	t       testing.TB
	names   []string
	urls    []string
	servers []*proc
}

// StartNATS starts the three servers, each with its config file, log
// (nats.log) and JetStream store under dir/c1..c3, on free ports, and waits
// until each one answers JetStream requests (there is a meta leader) and a
// three-replica stream can be placed. They are killed when the test ends.
func StartNATS(t testing.TB, dir string) *NATS {
	t.Helper()
	n := NewNATS(t, dir)
	for _, s := range n.servers {
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n.servers {
		n.waitReady(t, i)
	}
	n.waitPlacement(t)
	return n
}

// NewNATS writes the three servers' configs as StartNATS does and starts
// none of them: Start(i) starts one, StartAll the rest (a fresh cluster
// answers once two of the three run).
func NewNATS(t testing.TB, dir string) *NATS {
	t.Helper()
	bin := NATSBinary(t)
	ports := freePorts(t, 6) // client ports, then cluster ports
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
	}
	n := &NATS{t: t}
	for i := range 3 {
		name := fmt.Sprintf("c%d", i+1)
		sdir := filepath.Join(dir, name)
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream {
  store_dir: %q
}
cluster {
  name: %s
  listen: 127.0.0.1:%d
  routes: [
    %s
  ]
}
`, name, ports[i], filepath.Join(sdir, "store"), ClusterName, ports[3+i], strings.Join(routes, "\n    "))
		confPath := filepath.Join(sdir, "nats.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		n.names = append(n.names, name)
		n.urls = append(n.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		n.servers = append(n.servers, &proc{name: name, path: bin, args: []string{"-c", confPath}, logPath: filepath.Join(sdir, "nats.log")})
	}
	t.Cleanup(func() {
		for _, s := range n.servers {
			s.kill()
		}
	})
	return n
}

// waitPlacement waits until the meta leader places a three-replica stream:
// every server answering is not yet every peer known online to the leader
// (a test's R3 stream created 1 s after readiness met "no suitable peers for
// placement, peer offline" once under a loaded machine).
func (n *NATS) waitPlacement(t testing.TB) {
	t.Helper()
	enginetest.WaitFor(t, natsReady, func() error {
		nc, js, err := connectOnce(n.URLs())
		if err != nil {
			return err
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		const probe = "CLUSTERKIT_PLACEMENT"
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: probe, Subjects: []string{"clusterkit.placement"},
			Replicas: 3, Storage: jetstream.MemoryStorage}); err != nil {
			return err
		}
		return js.DeleteStream(ctx, probe)
	})
}

// URLs is every server's client URL, comma-separated, as NATS_URL takes them.
func (n *NATS) URLs() string { return strings.Join(n.urls, ",") }

// URL is server i's client URL.
func (n *NATS) URL(i int) string { return n.urls[i] }

// Name is server i's server_name: c1, c2 or c3.
func (n *NATS) Name(i int) string { return n.names[i] }

// Kill ends server i with SIGKILL and waits until it is gone; a server not
// running is left alone.
func (n *NATS) Kill(i int) { n.servers[i].kill() }

// Term shuts server i down with SIGTERM, as an operator's restart does (it
// tells the cluster it leaves, so the meta leader counts it offline at once),
// and waits up to 30 s for it to exit.
func (n *NATS) Term(i int) {
	n.t.Helper()
	if err := n.servers[i].term(30 * time.Second); err != nil {
		n.t.Fatal(err)
	}
}

// Stop freezes server i with SIGSTOP: its connections stay open and nothing
// on them is answered.
func (n *NATS) Stop(i int) {
	n.t.Helper()
	if err := n.servers[i].signal(syscall.SIGSTOP); err != nil {
		n.t.Fatal(err)
	}
}

// Cont lets a stopped server i run again with SIGCONT.
func (n *NATS) Cont(i int) {
	n.t.Helper()
	if err := n.servers[i].signal(syscall.SIGCONT); err != nil {
		n.t.Fatal(err)
	}
}

// Start starts server i again, after a Kill, with the same config, ports and
// store, and waits until it answers JetStream requests.
func (n *NATS) Start(i int) {
	n.t.Helper()
	if err := n.servers[i].start(); err != nil {
		n.t.Fatal(err)
	}
	n.waitReady(n.t, i)
}

// StartIn starts servers idx again after d, on a goroutine of its own, for
// a test that blocks meanwhile (an engine starting against the cluster). The
// returned wait must be called from the test's goroutine: it waits until each
// server answers JetStream requests and fails the test if one did not start.
// A test that ends before then still waits for the start, so the servers it
// starts are among those killed when the test ends.
func (n *NATS) StartIn(d time.Duration, idx ...int) (wait func()) {
	done := make(chan struct{})
	var startErr error
	go func() {
		defer close(done)
		time.Sleep(d)
		var errs []error
		for _, i := range idx {
			errs = append(errs, n.servers[i].start())
		}
		startErr = errors.Join(errs...)
	}()
	n.t.Cleanup(func() { <-done }) // runs before StartNATS's kill (cleanups run last first)
	return func() {
		n.t.Helper()
		if <-done; startErr != nil {
			n.t.Fatal(startErr)
		}
		for _, i := range idx {
			n.waitReady(n.t, i)
		}
	}
}

// StartAll starts every server that is not running, at once (one alone has
// no quorum and cannot answer), and waits until each answers.
func (n *NATS) StartAll() {
	n.t.Helper()
	var idle []int
	for i, s := range n.servers {
		if !s.running() {
			idle = append(idle, i)
		}
	}
	n.StartSome(idle...)
}

// StartSome starts servers idx at once and waits until each answers
// JetStream requests: two of the three are a quorum.
func (n *NATS) StartSome(idx ...int) {
	n.t.Helper()
	for _, i := range idx {
		if err := n.servers[i].start(); err != nil {
			n.t.Fatal(err)
		}
	}
	for _, i := range idx {
		n.waitReady(n.t, i)
	}
}

// Running reports whether server i is running (a stopped one is).
func (n *NATS) Running(i int) bool { return n.servers[i].running() }

// Log is everything server i has logged.
func (n *NATS) Log(i int) string { return n.servers[i].log() }

// StreamLeader is the index of the server leading stream, waiting up to
// 15 s for the stream to have one: after its leader is killed the others
// elect the next in 4-9 s (nats-server's raft election timeout).
func (n *NATS) StreamLeader(t testing.TB, stream string) int {
	t.Helper()
	leader := -1
	enginetest.WaitFor(t, 15*time.Second, func() error {
		info, err := n.streamInfo(stream)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("stream %s has no leader", stream)
		}
		for i, name := range n.names {
			if name == info.Cluster.Leader {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("stream %s: leader %q is none of %v", stream, info.Cluster.Leader, n.names)
	})
	return leader
}

// streamInfo asks the servers that are running and not stopped for stream's info.
func (n *NATS) streamInfo(stream string) (*jetstream.StreamInfo, error) {
	var urls []string
	for i, s := range n.servers {
		if s.running() && !s.isStopped() {
			urls = append(urls, n.urls[i])
		}
	}
	if len(urls) == 0 {
		return nil, errors.New("no server is running")
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(500*time.Millisecond), nats.NoReconnect(), nats.Name("clusterkit"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	return s.CachedInfo(), nil
}

// waitReady waits until server i answers a JetStream request of its own
// clients, which needs the cluster's meta leader; it fails t at once if the
// server exits.
func (n *NATS) waitReady(t testing.TB, i int) {
	t.Helper()
	s := n.servers[i]
	enginetest.WaitFor(t, natsReady, func() error {
		if !s.running() {
			return nil // reported below
		}
		if err := JetStreamReady(n.urls[i]); err != nil {
			return withLog{err, s}
		}
		return nil
	})
	if !s.running() {
		t.Fatal(withLog{errors.New("exited"), s})
	}
}

// JetStreamReady connects to url alone and asks JetStream for the account's
// info, which needs the cluster's meta leader: nil once the server serves.
func JetStreamReady(url string) error {
	nc, js, err := connectOnce(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// connectOnce connects to urls with no reconnect, for one question to the
// cluster; the caller closes nc.
func connectOnce(urls string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(urls, nats.Timeout(500*time.Millisecond), nats.NoReconnect(), nats.Name("clusterkit"))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

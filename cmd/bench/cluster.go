package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/clusterkit"
	"github.com/svc/engine/engine/cluster"
)

// clusterOpts shapes the cluster phase.
type clusterOpts struct {
	warm, dur   time.Duration // each load window
	rounds      int           // kill -9 rounds
	failClients int           // the light load during a kill
	pubDur      time.Duration // each raw append window
	natsSync    string        // the servers' sync_interval: always, or default (2 min)
	engine      string        // a built engine binary; empty: build ./cmd/engine
}

// clusterDeployment is ENGINE_DEPLOYMENT of every engine the phase starts.
const clusterDeployment = "bench"

// child is one process the cluster phase started, with its log file; it runs
// in its own process group (a Ctrl-C reaches the bench, which kills it) and
// gets SIGKILL should the bench die first. Its methods are safe for
// concurrent use.
type child struct {
	name    string
	path    string
	args    []string
	env     []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

func (c *child) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runningLocked() {
		return fmt.Errorf("%s is already running", c.name)
	}
	cmd, err := clusterkit.Launch(c.path, c.args, c.env, c.logPath)
	if err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	c.cmd, c.done = cmd, done
	return nil
}

func (c *child) runningLocked() bool {
	if c.cmd == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *child) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runningLocked()
}

// kill sends SIGKILL and waits until the process is gone; a process not
// running is left alone.
func (c *child) kill() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// cpu is the CPU time (user and system) the running process has used; 0
// when it is not running.
func (c *child) cpu() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.runningLocked() {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return statCPU(b)
}

// statCPU is utime+stime of a /proc/<pid>/stat line, in USER_HZ (100) ticks.
func statCPU(stat []byte) time.Duration {
	i := bytes.LastIndexByte(stat, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:])) // from field 3, state
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// failed is err with the last lines of c's log.
func (c *child) failed(err error) error {
	b, _ := os.ReadFile(c.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return fmt.Errorf("%s: %w\nlast lines of %s:\n%s", c.name, err, c.logPath, strings.Join(lines, "\n"))
}

// await calls fn every 50 ms until it returns nil, ctx ends or timeout passes.
func await(ctx context.Context, timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freeLoopbackPorts returns n distinct free TCP ports of 127.0.0.1, never
// 4222 (the machine's own NATS server).
func freeLoopbackPorts(n int) ([]int, error) {
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
			return nil, err
		}
		held = append(held, l)
		if p := l.Addr().(*net.TCPAddr).Port; p != 4222 {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// binaries builds ./cmd/engine into dir unless prebuilt names one, and
// nats-server of the version this bench embeds unless clusterkit's cache
// ($TMPDIR/engine-ci-nats) has it.
func binaries(ctx context.Context, dir, prebuilt string) (engine, natsServer string, err error) {
	if engine, err = engineBinary(ctx, dir, prebuilt); err != nil {
		return "", "", err
	}
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/nats-io/nats-server/v2" {
				version = m.Version
			}
		}
	}
	if version == "" {
		return "", "", errors.New("the bench's build info names no nats-server version")
	}
	cache := filepath.Join(os.TempDir(), "engine-ci-nats")
	natsServer = filepath.Join(cache, "nats-server-"+version)
	if _, err := os.Stat(natsServer); err == nil {
		return engine, natsServer, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", natsServer, os.Getpid())
	if err := goBuild(ctx, tmp, "github.com/nats-io/nats-server/v2"); err != nil {
		os.Remove(tmp)
		return "", "", err
	}
	return engine, natsServer, os.Rename(tmp, natsServer)
}

// engineBinary builds ./cmd/engine into dir unless prebuilt names one.
func engineBinary(ctx context.Context, dir, prebuilt string) (string, error) {
	if prebuilt != "" {
		_, err := os.Stat(prebuilt)
		return prebuilt, err
	}
	engine := filepath.Join(dir, "engine")
	return engine, goBuild(ctx, engine, "./cmd/engine")
}

// goBuild builds pkg of this module (or one it requires) into dst.
func goBuild(ctx context.Context, dst, pkg string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD (is go on PATH?): %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dst, pkg)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// node is one engine process on 127.0.0.1.
type node struct {
	*child
	url string
}

// deployment is nats-server processes and the engines on them.
type deployment struct {
	nats     []*child
	urls     []string // the servers' client URLs
	mon      []string // their monitoring URLs
	engines  []*node
	names    []string // ENGINE_NODE of each engine; nil on a single node
	key      string
	accounts []credAccount
	stream   string // the commit stream
}

// close kills every process of d.
func (d *deployment) close() {
	for _, e := range d.engines {
		e.kill()
	}
	for _, s := range d.nats {
		s.kill()
	}
}

// startNATS starts n nats-servers under dir (one JetStream cluster when n > 1)
// with monitoring ports, and waits until each answers JetStream requests.
func (d *deployment) startNATS(ctx context.Context, bin, dir string, n int, sync string) error {
	ports, err := freeLoopbackPorts(3 * n) // clients, routes, monitoring
	if err != nil {
		return err
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	for i := range n {
		name := fmt.Sprintf("c%d", i+1)
		sdir := filepath.Join(dir, name)
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return err
		}
		js := fmt.Sprintf("  store_dir: %q\n", filepath.Join(sdir, "store"))
		if sync == "always" {
			js += "  sync_interval: always\n"
		}
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\njetstream {\n%s}\n", name, ports[i], ports[2*n+i], js)
		if n > 1 {
			conf += fmt.Sprintf("cluster {\n  name: bench\n  listen: 127.0.0.1:%d\n  routes: [\n    %s\n  ]\n}\n", ports[n+i], strings.Join(routes, "\n    "))
		}
		path := filepath.Join(sdir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return err
		}
		s := &child{name: name, path: bin, args: []string{"-c", path}, logPath: filepath.Join(sdir, "nats.log")}
		if err := s.start(); err != nil {
			return err
		}
		d.nats = append(d.nats, s)
		d.urls = append(d.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		d.mon = append(d.mon, fmt.Sprintf("http://127.0.0.1:%d", ports[2*n+i]))
	}
	for i, s := range d.nats {
		err := await(ctx, 30*time.Second, func() error {
			if !s.running() {
				return nil
			}
			return clusterkit.JetStreamReady(d.urls[i])
		})
		if err == nil && !s.running() {
			err = errors.New("exited")
		}
		if err != nil {
			return s.failed(err)
		}
	}
	return nil
}

// addEngine makes (does not start) an engine on a free port with dir as its
// data directory: sandbox, ENGINE_SYNC=always, memory read models, accounts
// demo accounts, no rate limit, the stream at replicas; nodeName sets
// ENGINE_NODE, key (32 bytes) is written to dir/secret.key.
func (d *deployment) addEngine(bin, dir, nodeName string, key []byte, replicas, accounts int) (*node, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if key != nil {
		if err := os.WriteFile(filepath.Join(dir, "secret.key"), key, 0o600); err != nil {
			return nil, err
		}
	}
	ports, err := freeLoopbackPorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	env := engineEnv("ENGINE_LISTEN="+addr, "ENGINE_DATA_DIR="+dir, "NATS_URL="+strings.Join(d.urls, ","),
		"ENGINE_DEPLOYMENT="+clusterDeployment, "ENGINE_ENV=sandbox", "ENGINE_SYNC=always", "ENGINE_LOG_LEVEL=warn",
		"ENGINE_STREAM_REPLICAS="+strconv.Itoa(replicas), "ENGINE_DEMO_ACCOUNTS="+strconv.Itoa(accounts), "ENGINE_RATE_LIMIT=0")
	name := "engine"
	if nodeName != "" {
		env = append(env, "ENGINE_NODE="+nodeName)
		name = nodeName
		d.names = append(d.names, nodeName)
	}
	e := &node{child: &child{name: name, path: bin, env: env, logPath: filepath.Join(dir, "engine.log")}, url: "http://" + addr}
	d.engines = append(d.engines, e)
	return e, nil
}

// engineEnv is this process's environment without the engine's settings,
// and then settings: an engine the bench starts runs with those only.
func engineEnv(settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ENGINE_") && !strings.HasPrefix(kv, "NATS_URL=") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	return append(env, settings...)
}

var probeClient = &http.Client{Timeout: time.Second}

// startReady starts e and waits up to 60 s for its /readyz to answer 200.
func (e *node) startReady(ctx context.Context) error {
	if err := e.start(); err != nil {
		return err
	}
	err := await(ctx, 60*time.Second, func() error {
		if !e.running() {
			return nil
		}
		resp, err := probeClient.Get(e.url + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answers %d", resp.StatusCode)
		}
		return nil
	})
	if err == nil && !e.running() {
		err = errors.New("exited before /readyz answered 200")
	}
	if err != nil {
		return e.failed(err)
	}
	return nil
}

// metrics is e's /metrics, each metric summed over its series.
func (e *node) metrics() (map[string]float64, error) {
	resp, err := probeClient.Get(e.url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics answers %d", e.name, resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads a Prometheus text exposition: each series by its name
// and labels, and each metric by its name alone, summed over its series.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line+" ", "{ ")]
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		if series := strings.Join(f[:len(f)-1], " "); series != name {
			m[series] = v
		}
		m[name] += v
	}
	return m, sc.Err()
}

// readCredentials reads the sandbox's dev-credentials.json in dir.
func (d *deployment) readCredentials(dir string, accounts int) error {
	b, err := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err != nil {
		return err
	}
	var c struct {
		TradingKey string        `json:"tradingKey"`
		Accounts   []credAccount `json:"accounts"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	if len(c.Accounts) != accounts {
		return fmt.Errorf("%d demo accounts, want %d", len(c.Accounts), accounts)
	}
	d.key, d.accounts = c.TradingKey, c.Accounts
	return nil
}

// balanced reports whether every engine sees all of them live, owns some
// partitions, and the engines own every partition once between them.
func (d *deployment) balanced() error {
	total := 0
	for _, e := range d.engines {
		m, err := e.metrics()
		if err != nil {
			return err
		}
		if live := int(m["engine_cluster_live_nodes"]); live != len(d.engines) {
			return fmt.Errorf("%s sees %d live nodes", e.name, live)
		}
		owned := int(m["engine_cluster_partitions_owned"])
		if owned == 0 {
			return fmt.Errorf("%s owns no partition", e.name)
		}
		total += owned
	}
	if total != cluster.DefaultPartitions {
		return fmt.Errorf("%d partitions owned, want %d", total, cluster.DefaultPartitions)
	}
	return nil
}

// startSingle starts one nats-server (no cluster, the stream at R1) and one
// engine without ENGINE_NODE.
func startSingle(ctx context.Context, o opts, engineBin, natsBin, dir string) (*deployment, error) {
	d := &deployment{stream: app.Deployment{Name: clusterDeployment}.CommitStream()}
	if err := d.startNATS(ctx, natsBin, filepath.Join(dir, "nats"), 1, o.cluster.natsSync); err != nil {
		return d, err
	}
	e, err := d.addEngine(engineBin, filepath.Join(dir, "engine"), "", nil, 1, o.workers)
	if err != nil {
		return d, err
	}
	if err := e.startReady(ctx); err != nil {
		return d, err
	}
	return d, d.readCredentials(filepath.Join(dir, "engine"), o.workers)
}

// startCluster starts three nats-servers in one JetStream cluster and engines
// n1..n3 (stream at R3, one secret key): n1 first, until ready, then n2 and
// n3 together; it returns once the partitions are spread over all three.
func startCluster(ctx context.Context, o opts, engineBin, natsBin, dir string) (*deployment, error) {
	d := &deployment{stream: app.Deployment{Name: clusterDeployment}.CommitStream()}
	if err := d.startNATS(ctx, natsBin, filepath.Join(dir, "nats"), 3, o.cluster.natsSync); err != nil {
		return d, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	for i := range 3 {
		if _, err := d.addEngine(engineBin, filepath.Join(dir, fmt.Sprintf("n%d", i+1)), fmt.Sprintf("n%d", i+1), key, 3, o.workers); err != nil {
			return d, err
		}
	}
	if err := d.engines[0].startReady(ctx); err != nil {
		return d, err
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, e := range d.engines[1:] {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = e.startReady(ctx) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return d, err
	}
	if err := d.readCredentials(filepath.Join(dir, "n1"), o.workers); err != nil {
		return d, err
	}
	if err := await(ctx, 30*time.Second, d.balanced); err != nil {
		return d, fmt.Errorf("partitions: %w", err)
	}
	return d, nil
}

// order posts one market order of account through base and answers the
// status and body.
func (d *deployment) order(ctx context.Context, c *http.Client, base, account, clientOrderID string, i int) (int, []byte, error) {
	body := `{"clientOrderId":"` + clientOrderID + `","instrument":"BTC-PERP","side":"` + side(i) + `","orderType":"market","quantity":"0.01"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/trading/order?account="+account, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, b, err
}

// jsz is the part of a nats-server's /jsz?streams=true the phase reads.
type jsz struct {
	API struct {
		Total uint64 `json:"total"`
	} `json:"api"`
	Accounts []struct {
		Streams []struct {
			Name  string `json:"name"`
			State struct {
				LastSeq uint64 `json:"last_seq"`
			} `json:"state"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

func getJSZ(mon string) (jsz, error) {
	var j jsz
	resp, err := probeClient.Get(mon + "/jsz?streams=true")
	if err != nil {
		return j, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return j, fmt.Errorf("%s/jsz answers %d", mon, resp.StatusCode)
	}
	return j, json.NewDecoder(resp.Body).Decode(&j)
}

// snapshot is what the phase reads at each end of a window.
type snapshot struct {
	at            time.Time
	engines, nats []time.Duration // each process's CPU
	machine       time.Duration   // every process's CPU (/proc/stat)
	forwards      float64         // engine_cluster_forwards_total, summed over engines
	leases, nodes uint64          // last sequences of the lease and node buckets' streams
	api           uint64          // JetStream API requests, summed over servers
}

func (d *deployment) snapshot() snapshot {
	s := snapshot{at: time.Now(), machine: machineBusy()}
	for _, e := range d.engines {
		s.engines = append(s.engines, e.cpu())
	}
	for _, n := range d.nats {
		s.nats = append(s.nats, n.cpu())
	}
	for _, e := range d.engines {
		if m, err := e.metrics(); err == nil {
			s.forwards += m["engine_cluster_forwards_total"]
		}
	}
	for _, mon := range d.mon {
		j, err := getJSZ(mon)
		if err != nil {
			continue
		}
		s.api += j.API.Total
		for _, a := range j.Accounts {
			for _, st := range a.Streams {
				switch st.Name {
				case "KV_" + d.stream + "_LEASES":
					s.leases = max(s.leases, st.State.LastSeq)
				case "KV_" + d.stream + "_NODES":
					s.nodes = max(s.nodes, st.State.LastSeq)
				}
			}
		}
	}
	return s
}

// around takes a snapshot at from and another dur later, on its own
// goroutine; the returned func waits for both.
func (d *deployment) around(from time.Time, dur time.Duration) func() (snapshot, snapshot) {
	var a, b snapshot
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Until(from))
		a = d.snapshot()
		time.Sleep(time.Until(from.Add(dur)))
		b = d.snapshot()
	}()
	return func() (snapshot, snapshot) { <-done; return a, b }
}

// clusterLoad is one load window on a deployment.
type clusterLoad struct {
	sample                    // HTTP orders; CPU is the load generator's (this process) per order
	Engines   []time.Duration // each engine's CPU per order
	Servers   []time.Duration // each nats-server's CPU per order
	Engine    time.Duration   // summed over the engines
	NATS      time.Duration   // summed over the servers
	Busy      float64         // cores busy on the machine
	Others    float64         // of which not the deployment's processes nor this one
	Forwarded float64         // share of the orders an engine forwarded to another
	Leases    float64         // writes/s to the lease bucket
	Nodes     float64         // writes/s to the node bucket
	API       float64         // JetStream API requests/s, all servers
	Codes     map[string]int  // answers other than 200 in the window, by status
}

// load runs HTTP market orders from o.workers keep-alive clients, client w
// on account w, request i of a client to engine (w+i) mod engines.
func (d *deployment) load(ctx context.Context, o opts, tag string) clusterLoad {
	n := strconv.FormatInt(window.Add(1), 10)
	c := httpClient(o.workers)
	defer c.CloseIdleConnections()
	var mu sync.Mutex
	codes := map[string]int{}
	from := time.Now().Add(o.cluster.warm)
	wait := d.around(from, o.cluster.dur)
	s := drive(ctx, o.workers, o.cluster.warm, o.cluster.dur, func(ctx context.Context, w, i int) error {
		e := d.engines[(w+i)%len(d.engines)]
		code, b, err := d.order(ctx, c, e.url, d.accounts[w].AccountNumber, tag+"-"+n+"-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), i)
		if err == nil && (code != http.StatusOK || !bytes.Contains(b, filled)) {
			err = fmt.Errorf("%s: %d %.200s", e.name, code, b)
		}
		if err != nil && time.Now().After(from) {
			k := strconv.Itoa(code)
			if code == 0 {
				k = "error"
			}
			mu.Lock()
			codes[k]++
			mu.Unlock()
		}
		return err
	})
	a, b := wait()
	l := clusterLoad{sample: s, Codes: codes}
	per := func(d time.Duration) time.Duration {
		if s.N == 0 {
			return 0
		}
		return d / time.Duration(s.N)
	}
	for i := range a.engines {
		l.Engines = append(l.Engines, per(b.engines[i]-a.engines[i]))
		l.Engine += per(b.engines[i] - a.engines[i])
	}
	for i := range a.nats {
		l.Servers = append(l.Servers, per(b.nats[i]-a.nats[i]))
		l.NATS += per(b.nats[i] - a.nats[i])
	}
	secs := b.at.Sub(a.at).Seconds()
	l.Busy = (b.machine - a.machine).Seconds() / secs
	l.Others = l.Busy - (l.Engine+l.NATS+s.CPU).Seconds()*float64(s.N)/secs
	if s.N > 0 {
		l.Forwarded = (b.forwards - a.forwards) / float64(s.N)
	}
	l.Leases, l.Nodes = float64(b.leases-a.leases)/secs, float64(b.nodes-a.nodes)/secs
	l.API = float64(b.api-a.api) / secs
	return l
}

func (l clusterLoad) String() string {
	us := func(ds []time.Duration) string {
		var p []string
		for _, d := range ds {
			p = append(p, f0(float64(d)/1e3))
		}
		return strings.Join(p, "+")
	}
	return fmt.Sprintf("%s; engines %sus, servers %sus CPU/order; %.2f cores busy (%.2f by other processes); forwarded %.0f%%; non-200 %v",
		l.sample, us(l.Engines), us(l.Servers), l.Busy, l.Others, 100*l.Forwarded, l.Codes)
}

// rawAppend is one publisher on d's servers keeping inflight asynchronous
// publishes of payload pending to a fresh stream of replicas for warm+dur,
// and the servers' CPU per message.
type rawAppend struct {
	Rate   float64
	NATS   time.Duration // summed over the servers, per message
	Errors int
}

func (d *deployment) rawAppend(ctx context.Context, replicas, inflight int, payload []byte, warm, dur time.Duration) (rawAppend, error) {
	nc, err := nats.Connect(strings.Join(d.urls, ","), nats.Name("bench-raw"))
	if err != nil {
		return rawAppend{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(inflight))
	if err != nil {
		return rawAppend{}, err
	}
	const stream = "BENCHRAW"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = js.CreateStream(cctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"benchraw.>"}, Replicas: replicas, Storage: jetstream.FileStorage})
	cancel()
	if err != nil {
		return rawAppend{}, fmt.Errorf("stream %s: %w", stream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(dctx, stream)
	}()
	from := time.Now().Add(warm)
	end := from.Add(dur)
	wait := d.around(from, dur)
	futures := make(chan jetstream.PubAckFuture, inflight)
	var acked, errs int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range futures {
			select {
			case <-f.Ok():
				if t := time.Now(); !t.Before(from) && !t.After(end) {
					acked++
				}
			case <-f.Err():
				errs++
			}
		}
	}()
	for i := 0; ctx.Err() == nil && time.Now().Before(end); i++ {
		f, err := js.PublishAsync("benchraw."+strconv.Itoa(i%64), payload, jetstream.WithStallWait(5*time.Second))
		if err != nil {
			errs++
			time.Sleep(time.Millisecond)
			continue
		}
		futures <- f
	}
	close(futures)
	<-done
	a, b := wait()
	r := rawAppend{Rate: float64(acked) / dur.Seconds(), Errors: errs}
	if acked > 0 {
		for i := range a.nats {
			r.NATS += (b.nats[i] - a.nats[i]) / time.Duration(acked)
		}
	}
	return r, ctx.Err()
}

// failover is one kill -9 round.
type failover struct {
	Victim      string
	All, Moved  []time.Duration // kill to each account's first 200; Moved: the accounts the victim owned
	Unserved    int             // accounts with no 200 within 30 s
	Conflicts   int             // accounts answered 409: an attempt whose answer was lost had placed it
	Retries     int             // attempts answered otherwise (503, cut connection)
	Slowest     string          // the attempts of the account served last
	Counters    []string        // each survivor's forward, account command and lease counters that moved in the round
	LightOK     int             // the light load's 200s during the round
	LightOthers map[string]int  // and its other answers, by status
	LightFirst  string          // the first of them
	LightMax    time.Duration   // the light load's slowest answer
	LightSlow   int             // its answers that took over 5 s
	Restart     time.Duration   // start again to /readyz 200
	Rebalance   time.Duration   // then to the partitions spread over all three
}

// failover kills engine victim with SIGKILL while o.cluster.failClients
// clients place orders through the other two, and times, for each account,
// the kill to the first 200 of an order sent through a survivor once the
// victim is gone (retried with the same clientOrderId on anything else,
// every 50 ms). The light load's slowest answers are the requests in flight
// at the kill. Then it starts the victim again and waits for the
// partitions to spread.
func (d *deployment) failover(ctx context.Context, o opts, round, victim int) (failover, error) {
	e := d.engines[victim]
	f := failover{Victim: e.name, LightOthers: map[string]int{}}
	var survivors []*node
	for i, s := range d.engines {
		if i != victim {
			survivors = append(survivors, s)
		}
	}
	owned := map[int]bool{}
	for a, acct := range d.accounts {
		if cluster.Rendezvous(cluster.Partition(acct.AccountID, cluster.DefaultPartitions), d.names) == e.name {
			owned[a] = true
		}
	}
	// Longer than the engine's 10 s forward timeout, so its answer shows.
	c := &http.Client{Timeout: 15 * time.Second, Transport: httpClient(o.workers + o.cluster.failClients).Transport}
	defer c.CloseIdleConnections()

	// The light load, from a second before the kill until every account is served.
	stop := make(chan struct{})
	var mu sync.Mutex
	var lwg sync.WaitGroup
	for w := range o.cluster.failClients {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				a := (w + k*o.cluster.failClients) % len(d.accounts)
				s := survivors[k%len(survivors)]
				t0 := time.Now()
				code, b, err := d.order(ctx, c, s.url, d.accounts[a].AccountNumber, fmt.Sprintf("fl-%d-%d-%d", round, w, k), k)
				took := time.Since(t0)
				mu.Lock()
				f.LightMax = max(f.LightMax, took)
				if took > 5*time.Second {
					f.LightSlow++
				}
				switch {
				case err == nil && code == http.StatusOK:
					f.LightOK++
				case err != nil:
					f.LightOthers["error"]++
				default:
					f.LightOthers[strconv.Itoa(code)]++
				}
				if f.LightFirst == "" && (err != nil || code != http.StatusOK) {
					f.LightFirst = fmt.Sprintf("via %s %dms %s", s.name, took.Milliseconds(), answer(code, b, err))
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	stopLight := func() { close(stop); lwg.Wait() }
	select {
	case <-ctx.Done():
		stopLight()
		return f, ctx.Err()
	case <-time.After(time.Second):
	}

	before := make([]map[string]float64, len(survivors))
	for i, s := range survivors {
		before[i], _ = s.metrics()
	}
	killed := time.Now()
	e.kill() // and waits until it is gone
	took := make([]time.Duration, len(d.accounts))
	trails := make([][]string, len(d.accounts))
	var pwg sync.WaitGroup
	for a, acct := range d.accounts {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			took[a] = -1
			coid := fmt.Sprintf("fo-%d-%d", round, a)
			for try := 0; ctx.Err() == nil && time.Since(killed) < 30*time.Second; try++ {
				sent := time.Now()
				via := survivors[(a+try)%len(survivors)]
				code, b, err := d.order(ctx, c, via.url, acct.AccountNumber, coid, a)
				trails[a] = append(trails[a], fmt.Sprintf("via %s %dms %s", via.name, time.Since(sent).Milliseconds(), answer(code, b, err)))
				if err == nil && (code == http.StatusOK || code == http.StatusConflict) {
					took[a] = time.Since(killed)
					mu.Lock()
					if code == http.StatusConflict {
						f.Conflicts++
					}
					mu.Unlock()
					return
				}
				mu.Lock()
				f.Retries++
				mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	pwg.Wait()
	stopLight()
	for i, s := range survivors {
		after, _ := s.metrics()
		f.Counters = append(f.Counters, s.name+" "+counterMoves(before[i], after))
	}
	last := 0
	for a, t := range took {
		if t < 0 || took[last] >= 0 && t > took[last] {
			last = a
		}
	}
	f.Slowest = d.accounts[last].AccountNumber + ": " + strings.Join(trails[last], ", ")
	for a, t := range took {
		if t < 0 {
			f.Unserved++
			continue
		}
		f.All = append(f.All, t)
		if owned[a] {
			f.Moved = append(f.Moved, t)
		}
	}
	if ctx.Err() != nil {
		return f, ctx.Err()
	}
	began := time.Now()
	if err := e.startReady(ctx); err != nil {
		return f, err
	}
	f.Restart = time.Since(began)
	if err := await(ctx, 30*time.Second, d.balanced); err != nil {
		return f, fmt.Errorf("partitions after restarting %s: %w", e.name, err)
	}
	f.Rebalance = time.Since(began) - f.Restart
	return f, nil
}

// counterMoves lists the forward, account command and lease move series
// that grew from a to b, with how much.
func counterMoves(a, b map[string]float64) string {
	var out []string
	for k, v := range b {
		name, labels, ok := strings.Cut(k, "{")
		if !ok || v == a[k] || !(name == "engine_cluster_forwards_total" || name == "engine_cluster_lease_moves_total" ||
			name == "engine_commands_total" && strings.Contains(labels, `aggregate="account"`)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s{%s+%.0f", strings.TrimSuffix(strings.TrimPrefix(name, "engine_"), "_total"), labels, v-a[k]))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// answer is a short form of an order's answer: the status and the error's code.
func answer(code int, body []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &e)
	return strings.TrimSpace(strconv.Itoa(code) + " " + e.Code)
}

// durs renders p50 / p99 / max of ds in ms.
func durs(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%.0f / %.0f / %.0f", float64(percentile(s, 0.5))/1e6, float64(percentile(s, 0.99))/1e6, float64(s[len(s)-1])/1e6)
}

// leaseWrites is the KV writes per second a cluster of nodes makes at steady
// state: every TTL/4 each node announces itself (the node bucket) and the
// owners renew every partition and the leader lease (the lease bucket).
func leaseWrites(nodes, partitions int, ttl time.Duration) (leases, announce float64) {
	ticks := float64(time.Second) / float64(ttl/4)
	return float64(partitions+1) * ticks, float64(nodes) * ticks
}

// clusterReport is the cluster phase's table and model.
type clusterReport struct {
	t     table
	title string
	notes []string
}

func (r *clusterReport) print(w io.Writer) {
	r.t.print(w, r.title)
	for _, n := range r.notes {
		fmt.Fprintln(w, n)
	}
}

// clusterPhase measures the engine as real processes on loopback ports: HTTP
// market orders to one engine on one nats-server (stream R1) and to three
// engine nodes on a 3-server JetStream cluster (stream R3, requests
// round-robin over the nodes, so about 2/3 are forwarded to their owner);
// kill -9 rounds (kill to each account's first 200 on a survivor); the lease
// buckets' write rate; and the raw append rate of one publisher with 64
// publishes in flight to an R1 and an R3 stream. Every process it starts is
// killed when it returns.
func clusterPhase(ctx context.Context, o opts, payload []byte) (*clusterReport, error) {
	co := o.cluster
	root, err := os.MkdirTemp(o.tmp, "bench-cluster-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	engineBin, natsBin, err := binaries(ctx, root, co.engine)
	if err != nil {
		return nil, err
	}
	syncing := "sync_interval: always"
	if co.natsSync != "always" {
		syncing = "sync_interval default (2 min)"
	}
	progress("cluster: engine %s, %s; nats-server %s; windows %s + %s, %d clients on %d accounts", engineBin, natsBin, syncing, co.warm, co.dur, o.workers, o.workers)

	single, err := startSingle(ctx, o, engineBin, natsBin, filepath.Join(root, "single"))
	defer single.close()
	if err != nil {
		return nil, fmt.Errorf("single node: %w", err)
	}
	one := single.load(ctx, o, "s")
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if one.N == 0 {
		return nil, fmt.Errorf("single node: no order answered 200 in the window: %s", one.FirstErr)
	}
	progress("single node: %s", one)
	raw1, err := single.rawAppend(ctx, 1, 64, payload, 500*time.Millisecond, co.pubDur)
	if err != nil {
		return nil, fmt.Errorf("raw R1 append: %w", err)
	}
	progress("raw R1 append, 64 in flight: %.0f msgs/s, %.0fus server CPU/msg, %d errors", raw1.Rate, float64(raw1.NATS)/1e3, raw1.Errors)
	single.close()

	began := time.Now()
	three, err := startCluster(ctx, o, engineBin, natsBin, filepath.Join(root, "cluster"))
	defer three.close()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	progress("cluster: 3 servers and 3 engines ready, partitions spread, in %v", time.Since(began).Round(time.Millisecond))
	idle := three.around(time.Now(), co.pubDur)
	ia, ib := idle()
	isecs := ib.at.Sub(ia.at).Seconds()
	idleLeases, idleNodes, idleAPI := float64(ib.leases-ia.leases)/isecs, float64(ib.nodes-ia.nodes)/isecs, float64(ib.api-ia.api)/isecs
	progress("cluster idle %.1fs: lease bucket %.1f writes/s, node bucket %.1f writes/s, %.1f JetStream API requests/s", isecs, idleLeases, idleNodes, idleAPI)
	many := three.load(ctx, o, "c")
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if many.N == 0 {
		return nil, fmt.Errorf("cluster: no order answered 200 in the window: %s", many.FirstErr)
	}
	progress("cluster: %s; lease bucket %.1f/s, node bucket %.1f/s, API %.1f/s", many, many.Leases, many.Nodes, many.API)
	raw3, err := three.rawAppend(ctx, 3, 64, payload, 500*time.Millisecond, co.pubDur)
	if err != nil {
		return nil, fmt.Errorf("raw R3 append: %w", err)
	}
	progress("raw R3 append, 64 in flight: %.0f msgs/s, %.0fus server CPU/msg, %d errors", raw3.Rate, float64(raw3.NATS)/1e3, raw3.Errors)
	var fos []failover
	for r := range co.rounds {
		f, err := three.failover(ctx, o, r, r%len(three.engines))
		if err != nil {
			return nil, fmt.Errorf("failover round %d (kill %s): %w", r+1, f.Victim, err)
		}
		progress("failover %d: kill -9 %s: all %d accounts p50/p99/max %s ms, its %d accounts %s ms; %d unserved, %d retries, %d 409, served last %s; light load %d ok, others %v (first: %s), max %v, %d over 5 s; counters %s; restart %v, rebalance %v",
			r+1, f.Victim, len(f.All), durs(f.All), len(f.Moved), durs(f.Moved), f.Unserved, f.Retries, f.Conflicts, f.Slowest, f.LightOK, f.LightOthers, f.LightFirst, f.LightMax.Round(time.Millisecond), f.LightSlow, strings.Join(f.Counters, "; "),
			f.Restart.Round(time.Millisecond), f.Rebalance.Round(time.Millisecond))
		fos = append(fos, f)
	}

	rep := &clusterReport{title: fmt.Sprintf("Cluster (real binaries on loopback, nats-server %s; baseline = 1 engine on 1 nats-server, stream R1; engine = 3 engines n1..n3 on a 3-server JetStream cluster, stream R3, requests round-robin over the nodes; %d clients on %d accounts, window %s after %s; %d cores)",
		syncing, o.workers, o.workers, co.dur, co.warm, runtime.NumCPU())}
	t := &rep.t
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return f2(a/b) + "x"
	}
	row3 := func(metric string, a, b float64, f func(float64) string) {
		t.add(row{metric, f(a), f(b), ratio(b, a), "-", "-"})
	}
	row3("HTTP market orders rate (orders/s)", one.Rate, many.Rate, f0)
	row3("HTTP market orders p50 (ms)", float64(one.P50)/1e6, float64(many.P50)/1e6, f2)
	row3("HTTP market orders p99 (ms)", float64(one.P99)/1e6, float64(many.P99)/1e6, f2)
	row3("engine CPU per order, summed over engines (us)", us(one.Engine), us(many.Engine), f0)
	row3("nats-server CPU per order, summed over servers (us)", us(one.NATS), us(many.NATS), f0)
	row3("  the busiest nats-server's CPU per order (us)", us(slices.Max(one.Servers)), us(slices.Max(many.Servers)), f0)
	row3("load generator (bench) CPU per order (us)", us(one.CPU), us(many.CPU), f0)
	row3("machine busy during the window (cores)", one.Busy, many.Busy, f2)
	t.add(row{"  of which other processes than these and the bench (cores)", f2(one.Others), f2(many.Others), "-", "~0", "-"})
	t.add(row{"orders forwarded to their owner (share)", "-", fmt.Sprintf("%.0f%%", 100*many.Forwarded), "-", "~67% (2 of 3 nodes)", "-"})
	t.add(row{"non-200 answers in the window", fmt.Sprint(one.Errors), fmt.Sprint(many.Errors), "-", "0", passIf(one.Errors == 0 && many.Errors == 0)})
	row3("raw append, 1 publisher, 64 async in flight (msgs/s)", raw1.Rate, raw3.Rate, f0)
	row3("  nats-server CPU per raw message, summed (us)", us(raw1.NATS), us(raw3.NATS), f0)
	for i, f := range fos {
		var mx time.Duration
		if len(f.All) > 0 {
			mx = slices.Max(f.All)
		}
		t.add(row{fmt.Sprintf("failover %d: kill -9 %s, kill to each account's first 200, p50 / p99 / max (ms)", i+1, f.Victim), "-", durs(f.All), "-", "max <= 5 s",
			passIf(f.Unserved == 0 && len(f.All) > 0 && mx <= 5*time.Second)})
		t.add(row{fmt.Sprintf("  the %d accounts %s owned, p50 / p99 / max (ms)", len(f.Moved), f.Victim), "-", durs(f.Moved), "-", "-", "-"})
		others := 0
		for _, n := range f.LightOthers {
			others += n
		}
		t.add(row{fmt.Sprintf("  light load (%d clients via the survivors): 200s / others / slowest (ms)", o.cluster.failClients), "-",
			fmt.Sprintf("%d / %d / %.0f", f.LightOK, others, float64(f.LightMax)/1e6), "-", "-", "-"})
	}
	leases, announce := leaseWrites(len(three.engines), cluster.DefaultPartitions, cluster.DefaultTTL)
	t.add(row{"lease bucket writes/s, cluster (baseline: computed; engine: idle / under load)", f1(leases), f1(idleLeases) + " / " + f1(many.Leases), ratio(many.Leases, leases), "-", "-"})
	t.add(row{"node bucket writes/s, cluster (baseline: computed; engine: idle / under load)", f1(announce), f1(idleNodes) + " / " + f1(many.Nodes), ratio(many.Nodes, announce), "-", "-"})
	t.add(row{fmt.Sprintf("  lease + node writes/s per account (%d accounts)", len(three.accounts)), f2((leases + announce) / float64(len(three.accounts))),
		f2((many.Leases + many.Nodes) / float64(len(three.accounts))), "-", "-", "-"})
	t.add(row{"JetStream API requests/s, all servers, under load", f1(one.API), f1(many.API), "-", "-", "-"})
	t.add(row{"  idle cluster", "-", f1(idleAPI), "-", "-", "-"})

	// Nodes on separate machines, one core each for the engine: each node
	// handles a third of the orders and spends the summed CPU per order on it
	// (its own orders, the forwards it sends and serves, following the log).
	cpuBound := 3 / many.Engine.Seconds()
	perMachine := many.Engine/3 + slices.Max(many.Servers) // and the busiest nats-server beside it
	machineBound := 1 / perMachine.Seconds()
	bound, neck := cpuBound, "engine CPU"
	if raw3.Rate < bound {
		bound, neck = raw3.Rate, "the R3 stream leader's append rate"
	}
	rep.notes = append(rep.notes,
		fmt.Sprintf("model: 3 nodes on separate machines = 3 x (1 core-second / %.0fus engine CPU per order) = %.0f orders/s, bounded by the R3 append rate of one publisher with 64 in flight (%.0f msgs/s, one message per publish, all three servers on this box; the engine groups concurrent commits into atomic batches, so this bound is conservative) -> %.0f orders/s; bottleneck: %s.",
			us(many.Engine), cpuBound, raw3.Rate, bound, neck),
		fmt.Sprintf("model, an engine and a nats-server sharing each machine's core: 1 core-second / (%.0fus engine/3 + %.0fus busiest server) = %.0f orders/s (against %.0f measured here on %d shared cores).",
			us(many.Engine), us(slices.Max(many.Servers)), machineBound, many.Rate, runtime.NumCPU()))
	return rep, nil
}

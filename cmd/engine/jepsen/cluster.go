package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/cmd/engine/clusterkit"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/events"
)

// The ports every host uses on its own address (never 4222: the machine's
// own NATS server's, though each host has a namespace of its own).
const (
	natsPort   = 14222
	routePort  = 16222
	enginePort = 8080
	// proxyPort is the first of the unfenced proxy's ports on an engine's
	// address, one per nats-server.
	proxyPort = 24222
)

// Options shape a cluster.
type Options struct {
	Dir          string // configs, stores and logs
	Engines      int    // engine nodes: n1, n2, ...
	DemoAccounts int    // the sandbox's demo accounts (ENGINE_DEMO_ACCOUNTS)
	// Unfenced runs each engine's NATS connections through a proxy in its
	// namespace that takes the fencing headers off every publish
	// (proxy.go): the deliberately broken deployment.
	Unfenced bool
	// Postgres runs one PostgreSQL server of the run's own (pg.go) in a
	// namespace of its own, and the engines' read models in it
	// (DATABASE_URL); else each engine keeps its read models in memory.
	Postgres bool
	Env      map[string]string // more engine settings
	// NetEnv, when set, is called once the network is made, before the
	// engines start: more engine settings that need it (a service the test
	// runs on Net.ClientIP, which every namespace reaches).
	NetEnv func(n *Net) (map[string]string, error)
}

// Cluster is three nats-servers (c1..c3, one R3 JetStream cluster), the
// engine nodes (n1..) and, with Options.Postgres, the read models'
// PostgreSQL (pg), each in a namespace of its own on one Net; the harness's
// clients reach them from the root namespace.
type Cluster struct {
	Net        *Net
	NATS       []*Proc
	Engines    []*Proc
	PG         *Proc   // Options.Postgres
	Proxies    []*Proc // Unfenced: one per engine
	Deployment string
	Creds      Creds
	dir        string
}

// Creds is what the first engine wrote to dev-credentials.json.
type Creds struct {
	TradingKey        string `json:"tradingKey"`
	PartnerKey        string `json:"partnerKey"`
	OperatorSession   string `json:"operatorSession"`
	SessionCookieName string `json:"sessionCookieName"`
	VenueID           string `json:"venueId"`
	Accounts          []struct {
		AccountNumber string `json:"accountNumber"`
		AccountID     string `json:"accountId"`
	} `json:"accounts"`
}

// NATSNames and EngineNames name the hosts.
func natsName(i int) string   { return fmt.Sprintf("c%d", i+1) }
func engineName(i int) string { return fmt.Sprintf("n%d", i+1) }

// StartCluster builds the binaries (clusterkit), makes the network, starts
// the servers and waits until JetStream places an R3 stream, then starts
// the engines one after the other (the first makes the sandbox's demo
// tenant) and waits for each one's /readyz. Everything is torn down when
// the test ends, also after a failure.
func StartCluster(t testing.TB, opts Options) (*Cluster, error) {
	began := time.Now()
	natsBin, engineBin := clusterkit.NATSBinary(t), clusterkit.EngineBinary(t)
	t.Logf("jepsen: binaries in %v", time.Since(began).Round(time.Millisecond))
	var names []string
	for i := range 3 {
		names = append(names, natsName(i))
	}
	for i := range opts.Engines {
		names = append(names, engineName(i))
	}
	if opts.Postgres {
		names = append(names, pgHost)
	}
	nw, err := NewNet(names)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Net: nw, Deployment: clusterkit.NewDeployment(), dir: opts.Dir}
	t.Cleanup(c.Close)
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://%s:%d", nw.Host(natsName(i)).IP, routePort))
	}
	for i := range 3 {
		h := nw.Host(natsName(i))
		dir := filepath.Join(opts.Dir, h.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return c, err
		}
		conf := fmt.Sprintf("server_name: %s\nlisten: %s:%d\njetstream {\n  store_dir: %q\n}\ncluster {\n  name: jepsen\n  listen: %s:%d\n  routes: [\n    %s\n  ]\n}\n",
			h.Name, h.IP, natsPort, filepath.Join(dir, "store"), h.IP, routePort, strings.Join(routes, "\n    "))
		confPath := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			return c, err
		}
		p := &Proc{Name: h.Name, ns: h.NS, path: natsBin, args: []string{"-c", confPath}, env: childEnv(), logPath: filepath.Join(dir, "nats.log")}
		c.NATS = append(c.NATS, p)
		if err := p.Start(); err != nil {
			return c, err
		}
	}
	for i := range 3 {
		if err := c.WaitNATS(i, 30*time.Second); err != nil {
			return c, err
		}
	}
	if err := c.waitPlacement(); err != nil {
		return c, err
	}
	t.Logf("jepsen: NATS ready at %v", time.Since(began).Round(time.Millisecond))
	dbURL := ""
	if opts.Postgres {
		if err := c.startPostgres(filepath.Join(opts.Dir, pgHost)); err != nil {
			return c, err
		}
		dbURL = c.PGURL()
		t.Logf("jepsen: PostgreSQL ready at %v", time.Since(began).Round(time.Millisecond))
	}
	extra := opts.Env
	if opts.NetEnv != nil {
		more, err := opts.NetEnv(nw)
		if err != nil {
			return c, err
		}
		extra = maps.Clone(extra)
		if extra == nil {
			extra = map[string]string{}
		}
		maps.Copy(extra, more)
	}
	key := clusterkit.NewSecretKey()
	self, err := os.Executable()
	if err != nil {
		return c, err
	}
	for i := range opts.Engines {
		h := nw.Host(engineName(i))
		dir := filepath.Join(opts.Dir, h.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return c, err
		}
		if err := os.WriteFile(filepath.Join(dir, "secret.key"), key, 0o600); err != nil {
			return c, err
		}
		urls := c.NATSURLs()
		if opts.Unfenced {
			var listen, local []string
			for j := range 3 {
				listen = append(listen, fmt.Sprintf("%s:%d=%s:%d", h.IP, proxyPort+j, nw.Host(natsName(j)).IP, natsPort))
				local = append(local, fmt.Sprintf("nats://%s:%d", h.IP, proxyPort+j))
			}
			px := &Proc{Name: h.Name + "-proxy", ns: h.NS, path: self, env: append(childEnv(), proxyEnv+"="+strings.Join(listen, ",")),
				logPath: filepath.Join(dir, "proxy.log")}
			c.Proxies = append(c.Proxies, px)
			if err := px.Start(); err != nil {
				return c, err
			}
			if err := waitFor(10*time.Second, func() error { return dial(fmt.Sprintf("%s:%d", h.IP, proxyPort)) }); err != nil {
				return c, fmt.Errorf("jepsen: %s: %w\n%s", px.Name, err, px.Tail(10))
			}
			urls = strings.Join(local, ",")
		}
		env := append(childEnv(),
			fmt.Sprintf("ENGINE_LISTEN=%s:%d", h.IP, enginePort),
			"ENGINE_DATA_DIR="+dir,
			"NATS_URL="+urls,
			"DATABASE_URL="+dbURL,
			"ENGINE_DEPLOYMENT="+c.Deployment,
			"ENGINE_ENV=sandbox",
			"ENGINE_STREAM_REPLICAS=3",
			"ENGINE_LOG_LEVEL="+engineLogLevel(),
			"ENGINE_NODE="+h.Name,
			"ENGINE_DEMO_ACCOUNTS="+strconv.Itoa(opts.DemoAccounts),
			"ENGINE_RATE_LIMIT=0",
		)
		for k, v := range extra {
			env = append(env, k+"="+v)
		}
		p := &Proc{Name: h.Name, ns: h.NS, path: engineBin, env: env, logPath: filepath.Join(dir, "engine.log")}
		c.Engines = append(c.Engines, p)
		if err := p.Start(); err != nil {
			return c, err
		}
		if err := c.WaitEngine(i, 90*time.Second); err != nil {
			return c, err
		}
	}
	b, err := os.ReadFile(filepath.Join(opts.Dir, engineName(0), "dev-credentials.json"))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c.Creds); err != nil {
		return c, fmt.Errorf("jepsen: dev-credentials.json: %w", err)
	}
	return c, nil
}

// engineLogLevel is the engines' ENGINE_LOG_LEVEL: JEPSEN_ENGINE_LOG_LEVEL
// (debug, info, ...) when set, else info: the leases' hand-overs and the
// projector's stalls a missed serving floor is read from (a few lines a
// fault).
func engineLogLevel() string {
	if l := os.Getenv("JEPSEN_ENGINE_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// Close kills every process, then removes the network.
func (c *Cluster) Close() {
	for _, p := range c.Engines {
		p.Kill()
	}
	for _, p := range c.Proxies {
		p.Kill()
	}
	for _, p := range c.NATS {
		p.Kill()
	}
	if c.PG != nil {
		c.PG.Kill()
	}
	c.Net.Close()
}

// NATSURL is server i's client URL as the harness reaches it.
func (c *Cluster) NATSURL(i int) string {
	return fmt.Sprintf("nats://%s:%d", c.Net.Host(natsName(i)).IP, natsPort)
}

// NATSURLs is every server's, comma-separated.
func (c *Cluster) NATSURLs() string {
	var urls []string
	for i := range 3 {
		urls = append(urls, c.NATSURL(i))
	}
	return strings.Join(urls, ",")
}

// EngineURL is engine i's base URL.
func (c *Cluster) EngineURL(i int) string {
	return fmt.Sprintf("http://%s:%d", c.Net.Host(engineName(i)).IP, enginePort)
}

// WaitNATS waits until server i answers JetStream requests of its own
// clients (which needs the cluster's meta leader).
func (c *Cluster) WaitNATS(i int, d time.Duration) error {
	p := c.NATS[i]
	err := waitFor(d, func() error {
		if !p.Running() {
			return nil
		}
		return clusterkit.JetStreamReady(c.NATSURL(i))
	})
	if err == nil && !p.Running() {
		err = errors.New("exited")
	}
	if err != nil {
		return fmt.Errorf("jepsen: %s: %w\n%s", p.Name, err, p.Tail(30))
	}
	return nil
}

// WaitEngine waits until engine i's /readyz answers 200.
func (c *Cluster) WaitEngine(i int, d time.Duration) error {
	p := c.Engines[i]
	client := &http.Client{Timeout: time.Second}
	err := waitFor(d, func() error {
		if !p.Running() {
			return nil
		}
		resp, err := client.Get(c.EngineURL(i) + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answers %d", resp.StatusCode)
		}
		return nil
	})
	if err == nil && !p.Running() {
		err = errors.New("exited")
	}
	if err != nil {
		return fmt.Errorf("jepsen: %s: %w\n%s", p.Name, err, p.Tail(30))
	}
	return nil
}

// Leader is the engine whose /metrics says it holds the leader lease
// (engine_cluster_leader 1), 0 when none does.
func (c *Cluster) Leader() int {
	client := &http.Client{Timeout: time.Second}
	for i, p := range c.Engines {
		if !p.Running() {
			continue
		}
		resp, err := client.Get(c.EngineURL(i) + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "engine_cluster_leader{") && strings.HasSuffix(line, " 1") {
				return i
			}
		}
	}
	return 0
}

// dial reports whether addr takes a TCP connection.
func dial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
	}
	return err
}

// waitPlacement waits until the meta leader places a three-replica stream.
func (c *Cluster) waitPlacement() error {
	return waitFor(30*time.Second, func() error {
		nc, err := nats.Connect(c.NATSURLs(), nats.Timeout(time.Second), nats.NoReconnect(), nats.Name("jepsen"))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		const probe = "JEPSEN_PLACEMENT"
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: probe, Subjects: []string{"jepsen.placement"},
			Replicas: 3, Storage: jetstream.MemoryStorage}); err != nil {
			return err
		}
		return js.DeleteStream(ctx, probe)
	})
}

// OpenLog opens the deployment's commit log to read it, through every
// server: the stream and subjects cmd/engine/app's Deployment names
// (<NAME>_EVT, <name>.evt.>; a log not found there is an error).
func (c *Cluster) OpenLog(ctx context.Context) (*eventlog.Log, error) {
	stream := strings.ToUpper(strings.ReplaceAll(c.Deployment, "-", "_")) + "_EVT"
	return eventlog.Open(ctx, eventlog.Config{URL: c.NATSURLs(), Sync: "always", Stream: stream,
		Prefix: c.Deployment + "." + events.SubjectRoot, Replicas: 1, ReadOnly: true})
}

// Describe lists the processes and where their logs are.
func (c *Cluster) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deployment %s under %s; %s", c.Deployment, c.dir, c.Net.Describe())
	return b.String()
}

package clustertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/clusterkit"
)

var client = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func call(base, key, method, path string, body any) (int, []byte, error) {
	return callClient(client, base, key, method, path, body)
}

func callClient(c *http.Client, base, key, method, path string, body any) (int, []byte, error) {
	return clusterkit.Call(c, base, key, method, path, body)
}

type creds struct {
	TradingKey string `json:"tradingKey"`
	PartnerKey string `json:"partnerKey"`
	Accounts   []struct {
		AccountNumber string `json:"accountNumber"`
		AccountID     string `json:"accountId"`
	} `json:"accounts"`
}

func readCreds(t *testing.T, dir string) creds {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c creds
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// deployment is three NATS servers and n engine nodes sharing one secret key.
type deployment struct {
	nats    *clusterkit.NATS
	engines []*clusterkit.Engine
	dirs    []string
	creds   creds
	name    string // ENGINE_DEPLOYMENT
}

func startDeployment(t *testing.T, n int, databaseURL string, accounts int, env map[string]string) *deployment {
	t.Helper()
	root := t.TempDir()
	name := clusterkit.NewDeployment()
	d := &deployment{nats: clusterkit.StartNATS(t, filepath.Join(root, "nats")), name: name}
	key := clusterkit.NewSecretKey()
	vars := map[string]string{"ENGINE_DEMO_ACCOUNTS": strconv.Itoa(accounts), "ENGINE_RATE_LIMIT": "0"}
	for k, v := range env {
		vars[k] = v
	}
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("n%d", i+1))
		// One node after the other: the first makes the sandbox's demo tenant.
		e := clusterkit.StartEngine(t, clusterkit.EngineOptions{Node: fmt.Sprintf("n%d", i+1), NATSURLs: d.nats.URLs(), DatabaseURL: databaseURL,
			Deployment: name, Dir: dir, SecretKey: key, Env: vars})
		d.engines = append(d.engines, e)
		d.dirs = append(d.dirs, dir)
	}
	t.Cleanup(func() { // before the engines are stopped
		for i, e := range d.engines {
			if t.Failed() && !e.Running() {
				lines := strings.Split(strings.TrimRight(e.Log(), "\n"), "\n")
				t.Logf("n%d is not running; the end of its log:\n%s", i+1, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	d.creds = readCreds(t, d.dirs[0])
	if len(d.creds.Accounts) != accounts {
		t.Fatalf("the demo tenant has %d accounts, want %d", len(d.creds.Accounts), accounts)
	}
	return d
}

// order places a market order through node i, retrying with the same
// clientOrderId on a 503, a cut connection or an unknown outcome, until
// deadline. It returns the answer's status and how long it took.
func (d *deployment) order(i int, account, coid string, deadline time.Time) (int, []byte, time.Duration) {
	start := time.Now()
	for {
		code, b, err := call(d.engines[i].URL(), d.creds.TradingKey, "POST", "/api/trading/order?account="+account,
			map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"})
		if err == nil && code != http.StatusServiceUnavailable {
			return code, b, time.Since(start)
		}
		if time.Now().After(deadline) {
			return code, b, time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitOrders(t *testing.T, base, key, account string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b, err := call(base, key, "GET", "/api/account/orders?limit=500&account="+account, nil)
		var page struct {
			Orders []struct {
				ClientOrderID string `json:"clientOrderId"`
			} `json:"orders"`
		}
		if err == nil && code == 200 && json.Unmarshal(b, &page) == nil && len(page.Orders) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: account %s: %d %s, want %d orders", base, account, code, b, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leader is the index of the node holding the leader lease, from /metrics.
func (d *deployment) leader(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for i, e := range d.engines {
			if !e.Running() {
				continue
			}
			resp, err := client.Get(e.URL() + "/metrics")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Contains(b, []byte(fmt.Sprintf("engine_cluster_leader{node=\"n%d\"} 1", i+1))) {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no node leads")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

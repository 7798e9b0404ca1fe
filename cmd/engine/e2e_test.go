package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/clusterkit"
	"github.com/svc/engine/events"
)

// proc is the engine binary running as a subprocess.
type proc struct {
	cmd  *exec.Cmd
	base string
	out  *lockedBuffer
}

// lockedBuffer collects the process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// engineBin is the engine binary the tests of this package run, built once
// (each build linked it again: a dozen links of the engine and its embedded
// nats-server took a minute of the suite's two cores).
var engineBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// build returns the path of the engine binary built from this package.
func build(t *testing.T) string {
	t.Helper()
	engineBin.once.Do(func() {
		engineBin.dir, engineBin.err = os.MkdirTemp("", "engine-bin-")
		if engineBin.err != nil {
			return
		}
		engineBin.path = filepath.Join(engineBin.dir, "engine")
		if out, err := exec.Command("go", "build", "-o", engineBin.path, ".").CombinedOutput(); err != nil {
			engineBin.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if engineBin.err != nil {
		t.Fatalf("build: %v", engineBin.err)
	}
	return engineBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if engineBin.dir != "" {
		os.RemoveAll(engineBin.dir)
	}
	os.Exit(code)
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func start(t *testing.T, bin, dir, addr string, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ENGINE_DATA_DIR="+dir, "ENGINE_LISTEN="+addr, "ENGINE_DEMO_ACCOUNTS=32",
		"ENGINE_RATE_LIMIT=0", "ENGINE_LOG_LEVEL=warn", "NATS_URL=", "DATABASE_URL=")
	cmd.Env = append(cmd.Env, extra...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, base: "http://" + addr, out: out}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() { // what the engine warned of tells why (it logs at warn)
			tail := out.String()
			if len(tail) > 16<<10 {
				tail = "..." + tail[len(tail)-16<<10:]
			}
			t.Logf("the engine's log (%s):\n%s", addr, tail)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(p.base + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("engine not ready:\n%s", out)
	return nil
}

type creds struct {
	TradingKey string `json:"tradingKey"`
	Accounts   []struct {
		AccountNumber string `json:"accountNumber"`
		AccountID     string `json:"accountId"`
	} `json:"accounts"`
}

func readCreds(t *testing.T, dir string) creds {
	b, err := os.ReadFile(filepath.Join(dir, "dev-credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, "dev-credentials.json"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("dev-credentials.json mode %v", st.Mode().Perm())
	}
	var c creds
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func call(base, key, method, path string, body any) (int, []byte, error) {
	return clusterkit.Call(client, base, key, method, path, body)
}

type sent struct {
	account, coid string
	answered      bool
}

// TestKillNineLosesNoAcknowledgedOrder drives the real binary with concurrent
// clients, kills it with SIGKILL mid-stream, restarts it and checks that every
// acknowledged order exists exactly once, every used clientOrderId answers 409,
// money equals a recomputation from fills, and revisions never go back.
func TestKillNineLosesNoAcknowledgedOrder(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	c := readCreds(t, dir)
	if strings.Contains(p.out.String(), c.TradingKey) {
		t.Fatal("the engine logged its key")
	}

	// An SSE subscriber remembers the newest revision it saw.
	var maxRev sync.Map // accountNumber -> int
	for _, a := range c.Accounts {
		go func(acct string) {
			req, _ := http.NewRequest("GET", p.base+"/api/account/stream?account="+acct, nil)
			req.Header.Set("Authorization", "Bearer "+c.TradingKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
					n, _ := strconv.Atoi(id)
					maxRev.Store(acct, n)
				}
			}
		}(a.AccountNumber)
	}

	var mu sync.Mutex
	var all []sent
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				acct := c.Accounts[rng.IntN(len(c.Accounts))].AccountNumber
				side := []string{"buy", "sell"}[rng.IntN(2)]
				s := sent{account: acct, coid: fmt.Sprintf("w%d-%d", w, i)}
				code, _, err := call(p.base, c.TradingKey, "POST", "/api/trading/order?account="+acct,
					map[string]any{"clientOrderId": s.coid, "instrument": "BTC-PERP", "side": side, "orderType": "market", "quantity": fmt.Sprintf("0.%d", 1+rng.IntN(9))})
				s.answered = err == nil && code == 200
				mu.Lock()
				all = append(all, s)
				mu.Unlock()
				if err != nil {
					return // the engine is gone
				}
			}
		}(w)
	}
	time.Sleep(700 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = p.cmd.Process.Wait()
	close(stop)
	wg.Wait()
	acked := 0
	for _, s := range all {
		if s.answered {
			acked++
		}
	}
	if acked < 50 {
		t.Fatalf("only %d orders acknowledged before the kill", acked)
	}
	seen := map[string]int{}
	maxRev.Range(func(k, v any) bool { seen[k.(string)] = v.(int); return true })

	p = start(t, bin, dir, addr)
	if c2 := readCreds(t, dir); c2.TradingKey != c.TradingKey {
		t.Fatal("restart re-created the demo tenant")
	}
	// Every acknowledged order exists exactly once.
	byAcct := map[string]map[string]int{}
	for _, a := range c.Accounts {
		_, b, err := call(p.base, c.TradingKey, "GET", "/api/account/orders?limit=500&account="+a.AccountNumber, nil)
		if err != nil {
			t.Fatal(err)
		}
		var os struct {
			Orders []struct {
				ClientOrderID string `json:"clientOrderId"`
			} `json:"orders"`
		}
		if err := json.Unmarshal(b, &os); err != nil {
			t.Fatal(err)
		}
		if len(os.Orders) >= 500 {
			t.Fatalf("too many orders per account for one page")
		}
		m := map[string]int{}
		for _, o := range os.Orders {
			m[o.ClientOrderID]++
		}
		byAcct[a.AccountNumber] = m
	}
	for _, s := range all {
		n := byAcct[s.account][s.coid]
		if s.answered && n != 1 {
			t.Fatalf("acknowledged order %s on %s exists %d times", s.coid, s.account, n)
		}
		if n > 1 {
			t.Fatalf("order %s placed %d times", s.coid, n)
		}
	}
	// Retrying every used clientOrderId answers 409 and places nothing.
	for i, s := range all {
		if !s.answered && i%4 != 0 {
			continue
		}
		code, b, err := call(p.base, c.TradingKey, "POST", "/api/trading/order?account="+s.account,
			map[string]any{"clientOrderId": s.coid, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.1"})
		if err != nil {
			t.Fatal(err)
		}
		if s.answered && code != 409 {
			t.Fatalf("retry of acknowledged %s answered %d %s", s.coid, code, b)
		}
		if !s.answered && code != 409 && code != 200 {
			t.Fatalf("retry of unanswered %s answered %d %s", s.coid, code, b)
		}
	}
	// Money and positions equal a recomputation from the fills; revisions never went back.
	for _, a := range c.Accounts {
		revision, _, err := clusterkit.CheckLedger(client, p.base, c.TradingKey, a.AccountNumber, events.Int(50000))
		if err != nil {
			t.Fatal(err)
		}
		// A fresh subscriber's first frame is at least the newest revision seen before the kill.
		req, _ := http.NewRequest("GET", p.base+"/api/account/stream?account="+a.AccountNumber, nil)
		req.Header.Set("Authorization", "Bearer "+c.TradingKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		first := -1
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				first, _ = strconv.Atoi(id)
				break
			}
		}
		resp.Body.Close()
		if first < seen[a.AccountNumber] || first != revision {
			t.Fatalf("%s: first frame after restart at %d, saw %d before the kill, snapshot %d", a.AccountNumber, first, seen[a.AccountNumber], revision)
		}
	}
	t.Logf("%d orders sent, %d acknowledged before SIGKILL", len(all), acked)
}

// TestSigtermDrains checks that SIGTERM ends streams and exits 0.
func TestSigtermDrains(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	c := readCreds(t, dir)
	req, _ := http.NewRequest("GET", p.base+"/api/account/stream", nil)
	req.Header.Set("Authorization", "Bearer "+c.TradingKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(ended) }()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(15 * time.Second):
		t.Fatal("stream did not end on SIGTERM")
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out)
	}
	// --help lists every setting.
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	for _, k := range []string{"ENGINE_LISTEN", "ENGINE_DATA_DIR", "NATS_URL", "DATABASE_URL", "ENGINE_ENV", "ENGINE_ALLOWED_ORIGINS", "ENGINE_SYNC", "CHALLENGES_ENABLED", "ENGINE_DEMO_ACCOUNTS"} {
		if !strings.Contains(string(out), k) {
			t.Fatalf("--help lacks %s:\n%s", k, out)
		}
	}
}

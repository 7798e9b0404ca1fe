package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCluster is a throwaway PostgreSQL server of the test's own, which it
// stops and starts (the shared server at 127.0.0.1:5432 is never touched).
type pgCluster struct {
	bin, dir, port string
	cred           *syscall.Credential
	cmd            *exec.Cmd
	done           chan struct{}
}

// newPG makes a cluster with initdb, as the postgres OS user (initdb and
// postgres refuse root), in a directory of its own. It skips when the
// binaries are missing, unless CI is "true".
func newPG(t *testing.T) *pgCluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(bins, func(i, j int) bool { // the newest version
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bins[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bins[j]))))
		return vi > vj
	})
	u, uerr := user.Lookup("postgres")
	if len(bins) == 0 || uerr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL binaries (/usr/lib/postgresql/*/bin) or the postgres user are missing: %v", uerr)
		}
		t.Skip("no PostgreSQL binaries under /usr/lib/postgresql/*/bin, or no postgres user")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "pgoutage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	pg := &pgCluster{bin: filepath.Dir(bins[0]), dir: dir, port: strings.TrimPrefix(freePort(t), "127.0.0.1:")}
	if os.Geteuid() != uid {
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	initdb := exec.Command(filepath.Join(pg.bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	t.Cleanup(func() { pg.stop(t) })
	return pg
}

func (pg *pgCluster) url() string {
	return "postgres://postgres@127.0.0.1:" + pg.port + "/postgres?sslmode=disable"
}

// start runs the server and waits until it answers a query.
func (pg *pgCluster) start(t *testing.T) {
	t.Helper()
	pg.cmd = exec.Command(filepath.Join(pg.bin, "postgres"), "-D", filepath.Join(pg.dir, "data"), "-p", pg.port, "-k", pg.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=60")
	pg.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	out := &lockedBuffer{}
	pg.cmd.Stdout, pg.cmd.Stderr = out, out
	if err := pg.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pg.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(pg.cmd, pg.done)
	waitFor(t, 20*time.Second, func() error {
		select {
		case <-pg.done:
			t.Fatalf("postgres exited:\n%s", out)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, pg.url())
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.Ping(ctx)
	})
}

// stop ends the server with a fast shutdown (SIGINT), as pg_ctl stop -m fast
// does, and waits for it.
func (pg *pgCluster) stop(t *testing.T) {
	if pg.cmd == nil {
		return
	}
	_ = pg.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-pg.done:
	case <-time.After(20 * time.Second):
		_ = pg.cmd.Process.Kill()
		<-pg.done
	}
	pg.cmd = nil
}

// waitFor polls fn until it returns nil, failing t with fn's last error
// after d.
func waitFor(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answer is a GET's status, error code and Retry-After.
type answer struct {
	status           int
	code, retryAfter string
	body             []byte
}

func get(base, key, path string) answer {
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := faultClient.Do(req)
	if err != nil {
		return answer{code: err.Error()}
	}
	defer resp.Body.Close()
	var b json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&b)
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &e)
	return answer{status: resp.StatusCode, code: e.Code, retryAfter: resp.Header.Get("Retry-After"), body: b}
}

// metric is a gauge's value in /metrics, or an error.
func metric(base, name string) (float64, error) {
	resp, err := faultClient.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(sb.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// PostgreSQL stopped under a running engine with a write in the outage, then
// started again: the write is answered from its decision, the writer's reads
// answer 503 read_models_behind with Retry-After (never engine_overloaded)
// and /readyz, the log and /metrics tell of the stalled projector while the
// store is down; once it is back the projector folds again from its
// checkpoint by itself, the read shows both orders within seconds, and
// /readyz never says ready while that read would still be refused.
func TestPostgresOutageWithAWriteRecovers(t *testing.T) {
	pg := newPG(t)
	pg.start(t)
	bin := build(t)
	dir := t.TempDir()
	p := start(t, bin, dir, freePort(t), "DATABASE_URL="+pg.url(), "ENGINE_DEMO_ACCOUNTS=1")
	c := readCreds(t, dir)
	acct := c.Accounts[0].AccountID
	orders := "/api/account/orders?account=" + acct

	if a := placeMarket(p.base, c.TradingKey, acct, "before-outage"); a.status != http.StatusOK {
		t.Fatalf("order before the outage: %v", a)
	}
	if a := get(p.base, c.TradingKey, orders); a.status != http.StatusOK {
		t.Fatalf("orders before the outage: %d %s", a.status, a.body)
	}

	pg.stop(t)
	if a := placeMarket(p.base, c.TradingKey, acct, "in-outage"); a.status != http.StatusOK {
		t.Fatalf("order in the outage (the log is the truth): %v", a)
	}
	waitFor(t, 10*time.Second, func() error {
		a := get(p.base, c.TradingKey, orders)
		if a.status != http.StatusServiceUnavailable || a.code != "read_models_behind" || a.retryAfter == "" {
			return fmt.Errorf("orders in the outage: %d %q Retry-After %q %s", a.status, a.code, a.retryAfter, a.body)
		}
		return nil
	})
	waitFor(t, 10*time.Second, func() error {
		if v, err := metric(p.base, "engine_projector_stalled_seconds"); err != nil || v <= 0 {
			return fmt.Errorf("engine_projector_stalled_seconds %v %v", v, err)
		}
		if !strings.Contains(p.out.String(), "read models stalled") {
			return fmt.Errorf("no stall in the log:\n%s", p.out)
		}
		return nil
	})
	if code, why, _ := readyz(p.base); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz in the outage: %d %q", code, why)
	}

	pg.start(t)
	back := time.Now()
	// From the store's return, /readyz stays 503 until the read would pass.
	waitFor(t, 15*time.Second, func() error {
		code, why, err := readyz(p.base)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz after the outage: %d %q %v", code, why, err)
		}
		return nil
	})
	a := get(p.base, c.TradingKey, orders)
	if a.status != http.StatusOK {
		t.Fatalf("orders once /readyz said ready, %s after the store came back: %d %q %s", time.Since(back), a.status, a.code, a.body)
	}
	if took := time.Since(back); took > 8*time.Second {
		t.Errorf("the read models took %s to come back", took)
	}
	for _, coid := range []string{"before-outage", "in-outage"} {
		if !strings.Contains(string(a.body), `"`+coid+`"`) {
			t.Errorf("order %s missing after the outage: %s", coid, a.body)
		}
	}
	if v, err := metric(p.base, "engine_projector_stalled_seconds"); err != nil || v != 0 {
		t.Errorf("engine_projector_stalled_seconds after the outage %v %v", v, err)
	}
	waitFor(t, 5*time.Second, func() error {
		if !strings.Contains(p.out.String(), "read models resumed") {
			return fmt.Errorf("no resumption in the log:\n%s", p.out)
		}
		return nil
	})
	// Writes and reads go on as before.
	if a := placeMarket(p.base, c.TradingKey, acct, "after-outage"); a.status != http.StatusOK {
		t.Fatalf("order after the outage: %v", a)
	}
	if a := get(p.base, c.TradingKey, orders); a.status != http.StatusOK || !strings.Contains(string(a.body), `"after-outage"`) {
		t.Fatalf("orders after the outage: %d %s", a.status, a.body)
	}
}

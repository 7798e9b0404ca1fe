package main_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc/engine/projections/postgres/pgtest"
)

// run runs the binary to its end (at most a minute) with the environment
// the tests start the engine with, plus env; it returns the output and the
// exit code.
func run(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "NATS_URL=", "DATABASE_URL=", "ENGINE_LOG_LEVEL=warn", "ENGINE_DEMO_ACCOUNTS=1", "ENGINE_RATE_LIMIT=0")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	return "", 0
}

// stop ends p with SIGTERM, as an operator does, and waits for it.
func stop(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out)
	}
}

func wantRefused(t *testing.T, what, out string, code int, says ...string) {
	t.Helper()
	if code == 0 {
		t.Fatalf("%s succeeded:\n%s", what, out)
	}
	for _, s := range says {
		if !strings.Contains(out, s) {
			t.Errorf("%s: the message does not say %q:\n%s", what, s, out)
		}
	}
}

// A fresh ENGINE_DATA_DIR with the DATABASE_URL of another log (what
// deleting the data to reset does) is refused at start with the ways out,
// never served; after engine rebuild-read-models the engine starts on it.
func TestFreshDataDirWithAnOldDatabaseIsRefused(t *testing.T) {
	bin := build(t)
	db := "DATABASE_URL=" + pgtest.URL(t)
	old := t.TempDir()
	stop(t, start(t, bin, old, freePort(t), db))

	fresh := t.TempDir()
	out, code := run(t, bin, []string{"ENGINE_DATA_DIR=" + fresh, "ENGINE_LISTEN=" + freePort(t), db})
	wantRefused(t, "a fresh data dir with an old database", out, code,
		"belong to another commit log", "DATABASE_URL", "ENGINE_DATA_DIR", "engine rebuild-read-models")

	if out, code := run(t, bin, []string{db}, "rebuild-read-models"); code != 0 || !strings.Contains(out, "emptied the read models") {
		t.Fatalf("rebuild-read-models exited %d:\n%s", code, out)
	}
	p := start(t, bin, fresh, freePort(t), db)
	c := readCreds(t, fresh)
	if code, b, err := call(p.base, c.TradingKey, "GET", "/api/account/list", nil); err != nil || code != http.StatusOK {
		t.Fatalf("the rebuilt read models: %d %s %v", code, b, err)
	}
}

// A second process on one data directory, the engine or engine log or
// engine backup, is refused at once naming the directory; the first one
// serves on.
func TestSecondProcessOnOneDataDirIsRefused(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	p := start(t, bin, dir, freePort(t))
	env := []string{"ENGINE_DATA_DIR=" + dir, "ENGINE_LISTEN=" + freePort(t)}
	for _, args := range [][]string{nil, {"log"}, {"backup", "-o", filepath.Join(t.TempDir(), "b")}} {
		out, code := run(t, bin, env, args...)
		wantRefused(t, "engine "+strings.Join(args, " ")+" beside a running engine", out, code, dir, "another engine process")
	}
	if r, err := http.Get(p.base + "/readyz"); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("the first engine after the refusals: %v %v", r, err)
	}
}

// engine backup of a stopped engine's data directory, engine restore into
// an empty one: the engine started there serves the same orders to the same
// key.
func TestBackupThenRestore(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	p := start(t, bin, dir, freePort(t))
	c := readCreds(t, dir)
	acct := "?account=" + c.Accounts[0].AccountNumber
	code, b, err := call(p.base, c.TradingKey, "POST", "/api/trading/order"+acct,
		map[string]any{"clientOrderId": "backed-up", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	if err != nil || code != http.StatusOK {
		t.Fatalf("order: %d %s %v", code, b, err)
	}
	_, before, err := call(p.base, c.TradingKey, "GET", "/api/account/orders"+acct, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, p)

	file := filepath.Join(t.TempDir(), "engine.backup")
	if out, code := run(t, bin, []string{"ENGINE_DATA_DIR=" + dir}, "backup", "-o", file); code != 0 {
		t.Fatalf("backup exited %d:\n%s", code, out)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if out, code := run(t, bin, []string{"ENGINE_DATA_DIR=" + restored}, "restore", "-i", file); code != 0 {
		t.Fatalf("restore exited %d:\n%s", code, out)
	}
	out, code := run(t, bin, []string{"ENGINE_DATA_DIR=" + restored}, "restore", "-i", file)
	wantRefused(t, "a restore over a log with commits", out, code, "restore refused")

	p = start(t, bin, restored, freePort(t))
	_, after, err := call(p.base, c.TradingKey, "GET", "/api/account/orders"+acct, nil)
	if err != nil || !strings.Contains(string(after), "backed-up") || string(after) != string(before) {
		t.Fatalf("orders after restore:\n%s\nbefore:\n%s\n%v", after, before, err)
	}
}

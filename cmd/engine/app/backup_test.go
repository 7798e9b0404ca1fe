package app_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/eventlog"
)

// opCmd runs an engine subcommand (app.Backup, app.Restore) on the embedded
// log in dir.
func opCmd(t *testing.T, cmd func(context.Context, []string, func(string) string, io.Writer, io.Writer) error, dir string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cmd(context.Background(), args, func(k string) string {
		if k == "ENGINE_DATA_DIR" {
			return dir
		}
		return ""
	}, &out, &errOut)
	return out.String() + errOut.String(), err
}

// served is what the trader of key reads of their accounts, orders and fills.
func served(t *testing.T, e *apptest.Env, key string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range []string{"/api/account/list", "/api/account/orders?state=all", "/api/account/orders?state=open", "/api/account/fills"} {
		r := e.Do(apptest.Req{Method: http.MethodGet, Path: path, Key: key})
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		out[path] = string(r.Body)
	}
	return out
}

// A backup of a stopped engine's log, restored into an empty data directory,
// is the same log: started on it, the engine serves the same accounts,
// orders and fills to the same key. Backup and restore refuse a data
// directory an engine is running on, and restore one that holds commits.
func TestBackupRestoredIntoAnEmptyDirectoryServesTheSameAccounts(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	order(t, e, map[string]any{"clientOrderId": "b-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	order(t, e, map[string]any{"clientOrderId": "b-2", "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "1", "limitPrice": "1000.50", "timeInForce": "gtc"})
	before, key, logID := served(t, e, e.Key), e.Key, e.App.Log.ID()
	if !strings.Contains(before["/api/account/orders?state=all"], "b-1") || !strings.Contains(before["/api/account/orders?state=open"], "b-2") {
		t.Fatalf("orders before the backup: %v", before)
	}
	file := filepath.Join(t.TempDir(), "log.backup")
	if out, err := opCmd(t, app.Backup, e.DataDir, "-o", file); !errors.Is(err, eventlog.ErrLocked) {
		t.Fatalf("backup beside the running engine: %v (%s)", err, out)
	}
	e.Stop()

	out, err := opCmd(t, app.Backup, e.DataDir, "-o", file)
	if err != nil || !strings.Contains(out, logID) {
		t.Fatalf("backup: %v (%s)", err, out)
	}
	t.Logf("backup: %s", out)
	fresh := filepath.Join(t.TempDir(), "restored")
	if out, err = opCmd(t, app.Restore, fresh, "-i", file); err != nil || !strings.Contains(out, logID) || !strings.Contains(out, "rebuild-read-models") {
		t.Fatalf("restore: %v (%s)", err, out)
	}
	t.Logf("restore: %s", out)
	if out, err := opCmd(t, app.Restore, fresh, "-i", file); !errors.Is(err, eventlog.ErrRestoreRefused) {
		t.Fatalf("restore over the restored log: %v (%s)", err, out)
	}

	r := apptest.Start(t, apptest.Options{DataDir: fresh, ManualFeed: true})
	if r.App.Log.ID() != logID {
		t.Errorf("restored log id %s, backed up %s", r.App.Log.ID(), logID)
	}
	after := served(t, r, key)
	for path, b := range before {
		if after[path] != b {
			t.Errorf("GET %s after restore:\n got %s\nwant %s", path, after[path], b)
		}
	}
}

// Restoring a backup older than the PostgreSQL read models leaves them ahead
// of the log: the start refuses them, and after engine rebuild-read-models
// they serve what the backup holds, not what came after it.
func TestRestoreOfAnOlderBackupNeedsARebuild(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Postgres: true, ManualFeed: true})
	order(t, e, map[string]any{"clientOrderId": "kept", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	key, dbURL := e.Key, e.App0URL()
	e.Stop()
	file := filepath.Join(t.TempDir(), "log.backup")
	if out, err := opCmd(t, app.Backup, e.DataDir, "-o", file); err != nil {
		t.Fatalf("backup: %v (%s)", err, out)
	}
	e = e.Restart()
	order(t, e, map[string]any{"clientOrderId": "lost", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	e.Stop()

	fresh := filepath.Join(t.TempDir(), "restored")
	if out, err := opCmd(t, app.Restore, fresh, "-i", file); err != nil {
		t.Fatalf("restore: %v (%s)", err, out)
	}
	checkRefusal(t, startErr(t, fresh, dbURL), app.ErrReadModelsAhead)
	rebuild(t, dbURL)
	r := apptest.Start(t, apptest.Options{DataDir: fresh, Postgres: true, DatabaseURL: dbURL, ManualFeed: true})
	orders := served(t, r, key)["/api/account/orders?state=all"]
	if !strings.Contains(orders, "kept") || strings.Contains(orders, "lost") {
		t.Fatalf("orders after restore and rebuild: %s", orders)
	}
}

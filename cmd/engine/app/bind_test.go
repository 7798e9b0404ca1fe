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

	"github.com/jackc/pgx/v5"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// startErr starts the service on dir and dbURL, expecting a refusal.
func startErr(t *testing.T, dir, dbURL string) error {
	t.Helper()
	cfg, err := app.ParseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.DatabaseURL, cfg.RateLimit = dir, dbURL, 0
	a, err := app.Start(context.Background(), cfg, app.Options{ManualFeed: true})
	if err == nil {
		a.Close()
		t.Fatal("the engine started")
	}
	return err
}

// rebuild runs engine rebuild-read-models on dbURL.
func rebuild(t *testing.T, dbURL string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := app.RebuildReadModels(context.Background(), []string{"-database-url", dbURL}, func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatalf("rebuild-read-models: %v (%s)", err, errOut.String())
	}
	return out.String()
}

// checkRefusal checks that err is a refusal of the read models for want,
// saying what happened and both ways out.
func checkRefusal(t *testing.T, err, want error) *app.ReadModelsError {
	t.Helper()
	var re *app.ReadModelsError
	if !errors.Is(err, want) || !errors.As(err, &re) {
		t.Fatalf("start: %v, want %v", err, want)
	}
	for _, s := range []string{want.Error(), "DATABASE_URL", "NATS_URL", "ENGINE_DATA_DIR", "engine rebuild-read-models"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("refusal %q does not say %q", err, s)
		}
	}
	return re
}

// The read models in PostgreSQL are bound to the log they were folded from.
// The same DATABASE_URL with a new ENGINE_DATA_DIR (a new log) is refused at
// start, never served; the old data directory still serves them; once
// rebuilt, they are folded from the new log and serve it.
func TestReadModelsOfAnotherLogAreRefused(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Postgres: true, ManualFeed: true})
	order(t, e, map[string]any{"clientOrderId": "old-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	dbURL, oldKey, oldLog := e.App0URL(), e.Key, e.App.Log.ID()
	e.Stop()

	fresh := filepath.Join(t.TempDir(), "data")
	re := checkRefusal(t, startErr(t, fresh, dbURL), app.ErrReadModelsOfAnotherLog)
	if re.StoreLogID != oldLog || re.LogID == oldLog || re.LogID == "" {
		t.Errorf("refusal names store log %s and log %s; the read models' log is %s", re.StoreLogID, re.LogID, oldLog)
	}
	t.Logf("refused: %v", re)

	e = e.Restart() // the log they belong to serves them still
	if r := e.Get("/api/account/orders?state=all"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "old-1") {
		t.Fatalf("old log's orders: %d %s", r.Status, r.Body)
	}
	e.Stop()

	if out := rebuild(t, dbURL); !strings.Contains(out, "emptied") {
		t.Errorf("rebuild-read-models said %q", out)
	}
	n := apptest.Start(t, apptest.Options{DataDir: fresh, Postgres: true, DatabaseURL: dbURL, ManualFeed: true})
	if r := n.Get("/api/account/orders?state=all"); r.Status != http.StatusOK || strings.Contains(string(r.Body), "old-1") {
		t.Fatalf("the new log serves %d %s", r.Status, r.Body)
	}
	if r := n.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/orders", Key: oldKey}); r.Status != http.StatusUnauthorized {
		t.Fatalf("the old log's key on the new log: %d %s", r.Status, r.Body)
	}
}

// A store bound to no log (one from before logs had ids) is refused on a
// log shorter than its checkpoint, and on its own log binds to it.
func TestUnboundReadModelsAheadOfTheLogAreRefused(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Postgres: true, ManualFeed: true})
	order(t, e, map[string]any{"clientOrderId": "old-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	dbURL, logID := e.App0URL(), e.App.Log.ID()
	e.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE checkpoints SET log_id = NULL`); err != nil {
		t.Fatal(err)
	}
	re := checkRefusal(t, startErr(t, t.TempDir(), dbURL), app.ErrReadModelsAhead)
	if re.Checkpoint <= re.LastSeq {
		t.Errorf("refusal: checkpoint %d, log ends at %d", re.Checkpoint, re.LastSeq)
	}
	e = e.Restart()
	if id, err := e.App.Store.LogID(ctx); err != nil || id != logID {
		t.Fatalf("store bound to %q (%v), want %s", id, err, logID)
	}
}

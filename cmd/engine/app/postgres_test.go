package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// readModels is what a trader reads back: orders, fills, PnL per day and the
// account frame (positions, working orders, balance, revision).
func readModels(t *testing.T, e *apptest.Env) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range []string{"/api/account/orders?state=all", "/api/account/orders?state=open",
		"/api/account/fills", "/api/account/pnl-history", "/api/account/snapshot", "/api/account/list"} {
		r := e.Get(path)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		out[path] = string(r.Body)
	}
	return out
}

func jsonOf(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// rowVersions is each document's row version (xmin): a rewrite changes it.
func rowVersions(t *testing.T, url string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT coll || '|' || key, xmin::text FROM docs`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func order(t *testing.T, e *apptest.Env, body map[string]any) map[string]any {
	t.Helper()
	r := e.Post("/api/trading/order", body)
	if r.Status != http.StatusOK {
		t.Fatalf("order %v: %d %s", body, r.Status, r.Body)
	}
	return r.Map(t)["order"].(map[string]any)
}

// TestPostgresReadModelsSurviveRestart: with DATABASE_URL the read models
// live in PostgreSQL. After a restart, what a trader reads is identical, and
// the projector resumes from its checkpoint: no document is folded again.
func TestPostgresReadModelsSurviveRestart(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Postgres: true, ManualFeed: true})
	order(t, e, map[string]any{"clientOrderId": "pg-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	order(t, e, map[string]any{"clientOrderId": "pg-2", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.25"})
	order(t, e, map[string]any{"clientOrderId": "pg-3", "instrument": "BTC-PERP", "side": "sell", "orderType": "market", "quantity": "0.3"})
	order(t, e, map[string]any{"clientOrderId": "pg-4", "instrument": "ETH-PERP", "side": "sell", "orderType": "market", "quantity": "2"})
	rest := order(t, e, map[string]any{"clientOrderId": "pg-5", "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "1", "limitPrice": "1000.50", "timeInForce": "gtc"})
	gone := order(t, e, map[string]any{"clientOrderId": "pg-6", "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "1", "limitPrice": "1000", "timeInForce": "gtc"})
	if r := e.Post("/api/trading/cancel", map[string]any{"brokerOrderId": gone["brokerOrderId"]}); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	last, err := e.App.Log.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.App.Projector.WaitFor(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	before := readModels(t, e)
	var fills struct {
		Fills []map[string]any `json:"fills"`
	}
	if err := jsonOf(before["/api/account/fills"], &fills); err != nil || len(fills.Fills) != 4 {
		t.Fatalf("fills before restart: %v %s", err, before["/api/account/fills"])
	}
	url := e.App0URL()
	cp, err := e.App.Store.Checkpoint(context.Background())
	if err != nil || cp < last {
		t.Fatalf("checkpoint %d before restart, log at %d: %v", cp, last, err)
	}

	e.Stop()
	versions := rowVersions(t, url)
	e = e.Restart()
	if got := e.App0URL(); got != url {
		t.Fatalf("restart switched database: %s", got)
	}
	after := readModels(t, e)
	for path, b := range before {
		if after[path] != b {
			t.Errorf("GET %s after restart:\n got %s\nwant %s", path, after[path], b)
		}
	}
	// Resumed from the checkpoint: every document written before the restart
	// is the same row version, so no commit was folded twice.
	for k, v := range rowVersions(t, url) {
		if old, ok := versions[k]; ok && old != v {
			t.Errorf("document %s was rewritten after the restart", k)
		}
	}
	if cp2, err := e.App.Store.Checkpoint(context.Background()); err != nil || cp2 < cp {
		t.Fatalf("checkpoint %d after restart, %d before: %v", cp2, cp, err)
	}

	// The resumed projector follows new commits.
	order(t, e, map[string]any{"clientOrderId": "pg-7", "instrument": "BTC-PERP", "side": "sell", "orderType": "market", "quantity": "0.45"})
	if r := e.Post("/api/trading/cancel", map[string]any{"brokerOrderId": rest["brokerOrderId"]}); r.Status != http.StatusOK {
		t.Fatalf("cancel after restart: %d %s", r.Status, r.Body)
	}
	if r := e.Post("/api/trading/order", map[string]any{"clientOrderId": "pg-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "1"}); r.Status != http.StatusConflict {
		t.Fatalf("reused clientOrderId after restart: %d %s", r.Status, r.Body)
	}
	var now struct {
		Fills []map[string]any `json:"fills"`
	}
	e.Get("/api/account/fills").JSON(t, &now)
	if len(now.Fills) != 5 || now.Fills[0]["quantity"] != "0.45" {
		t.Fatalf("fills after restart: %v", now.Fills)
	}
	var frame struct {
		Positions []map[string]any `json:"positions"`
		Orders    []map[string]any `json:"orders"`
	}
	e.Get("/api/account/snapshot").JSON(t, &frame)
	if len(frame.Orders) != 0 {
		t.Fatalf("working orders after cancel: %v", frame.Orders)
	}
	qty := map[string]string{}
	for _, p := range frame.Positions {
		qty[fmt.Sprint(p["instrument"])] = fmt.Sprint(p["side"], " ", p["quantity"])
	}
	if len(qty) != 1 || qty["ETH-PERP"] != "short 2" {
		t.Fatalf("positions after restart: %v", frame.Positions)
	}
}

// With PostgreSQL read models the projector writes behind (a linger), yet
// nobody reads behind their own write: a read after the caller's order ends
// the linger at once, and so does a commit of a streamed account. The
// linger here is an hour, so a read or frame that waited for it would fail.
func TestPostgresLingerNeverHoldsAReader(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Postgres: true, ManualFeed: true, Configure: func(c *app.Config) { c.ProjectorLinger = time.Hour }})
	placed := order(t, e, map[string]any{"clientOrderId": "linger-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.5"})
	r := e.Get("/api/account/orders?state=all")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), placed["brokerOrderId"].(string)) {
		t.Fatalf("the writer's own read after its order: %d %s", r.Status, r.Body)
	}

	frames := e.Stream("/api/account/stream")
	apptest.Next(t, frames) // the frame on connect
	w := e.Post("/api/trading/order", map[string]any{"clientOrderId": "linger-2", "instrument": "BTC-PERP", "side": "sell", "orderType": "market", "quantity": "0.5"})
	if w.Status != http.StatusOK {
		t.Fatalf("order: %d %s", w.Status, w.Body)
	}
	seq, err := strconv.ParseUint(w.Header.Get("X-Engine-Seq"), 10, 64)
	if err != nil {
		t.Fatalf("X-Engine-Seq %q: %v", w.Header.Get("X-Engine-Seq"), err)
	}
	for {
		ev := apptest.Next(t, frames) // fails after 10 s without a frame
		if rev, _ := strconv.ParseUint(ev.ID, 10, 64); ev.Name == "account" && rev >= seq {
			break
		}
	}
}

package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgSchema makes a fresh schema in the database at dbURL for one service's
// read models and answers the URL that selects it, and a drop for after.
func pgSchema(ctx context.Context, dbURL string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop := func() {
		c, err := pgx.Connect(context.Background(), dbURL)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
			c.Close(context.Background())
		}
	}
	return u.String(), drop, nil
}

// pgPhase runs HTTP market orders against two engines, one with memory
// read models and one whose read models are in PostgreSQL, in alternating
// windows, and adds the ratios: PostgreSQL's rate against memory's (issue
// 22: at least 0.9x) and its p99 against memory's (at most 1.2x). Each
// engine is a process of its own (cmd/engine, embedded JetStream), as a
// deployment runs one: in this process the two shared one heap, and a
// collection of the memory engine's read models landed in whichever
// window ran, often the PostgreSQL one.
func pgPhase(ctx context.Context, o opts, t *table) error {
	if o.databaseURL == "" {
		return fmt.Errorf("bench: the pg phase needs -database-url (or DATABASE_URL)")
	}
	dbURL, drop, err := pgSchema(ctx, o.databaseURL)
	if err != nil {
		return fmt.Errorf("bench: a schema for the read models: %w", err)
	}
	defer drop()
	dir, err := os.MkdirTemp(o.tmp, "bench-pg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := engineBinary(ctx, dir, o.cluster.engine)
	if err != nil {
		return err
	}
	mem, memNode, err := startEngineProcess(ctx, bin, filepath.Join(dir, "memory"), o, "")
	if memNode != nil {
		defer memNode.kill()
	}
	if err != nil {
		return fmt.Errorf("bench: the memory engine: %w", err)
	}
	pg, pgNode, err := startEngineProcess(ctx, bin, filepath.Join(dir, "postgres"), o, dbURL)
	if pgNode != nil {
		defer pgNode.kill()
	}
	if err != nil {
		return fmt.Errorf("bench: the PostgreSQL engine: %w", err)
	}
	var ms, ps []sample
	for r := range o.runs {
		m := mem.httpPath(ctx, o)
		progress("run %d HTTP, memory read models:     %s", r+1, m)
		p := pg.httpPath(ctx, o)
		progress("run %d HTTP, PostgreSQL read models: %s", r+1, p)
		ms, ps = append(ms, m), append(ps, p)
	}
	rr, lr := ratios(rates(ps), rates(ms)), ratios(p99s(ps), p99s(ms))
	t.add(row{"HTTP orders rate, PostgreSQL read models (orders/s; baseline: memory)", spread(rates(ms), "", f0), spread(rates(ps), "", f0), spread(rr, "x", f2), ">= 0.9x", passIf(median(rr) >= 0.9)})
	t.add(row{"HTTP orders p99, PostgreSQL read models (ms; baseline: memory)", spread(p99s(ms), "", f2), spread(p99s(ps), "", f2), spread(lr, "x", f2), "<= 1.2x", passIf(median(lr) <= 1.2)})
	t.add(row{"HTTP orders p50, PostgreSQL read models (ms; baseline: memory)", spread(p50s(ms), "", f2), spread(p50s(ps), "", f2), spread(ratios(p50s(ps), p50s(ms)), "x", f2), "-", "-"})
	t.add(row{"engine CPU per HTTP order, PostgreSQL read models (us; baseline: memory)", spread(cpus(ms), "", f0), spread(cpus(ps), "", f0), spread(ratios(cpus(ps), cpus(ms)), "x", f2), "-", "-"})
	return nil
}

// startEngineProcess starts bin, the engine, on dir with o's workers as
// demo accounts and its read models in PostgreSQL at databaseURL (""
// memory), its JetStream embedded, and answers it as the HTTP load's
// target once /readyz answers 200. The caller kills the node.
func startEngineProcess(ctx context.Context, bin, dir string, o opts, databaseURL string) (target, *node, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return target{}, nil, err
	}
	ports, err := freeLoopbackPorts(1)
	if err != nil {
		return target{}, nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	env := engineEnv("ENGINE_LISTEN="+addr, "ENGINE_DATA_DIR="+dir, "ENGINE_ENV=sandbox", "ENGINE_SYNC="+o.sync,
		"ENGINE_LOG_LEVEL=warn", "ENGINE_DEMO_ACCOUNTS="+strconv.Itoa(o.workers), "ENGINE_RATE_LIMIT=0")
	if databaseURL != "" {
		env = append(env, "DATABASE_URL="+databaseURL)
	}
	for _, k := range []string{"ENGINE_SNAPSHOTS", "ENGINE_PROJECTOR_LINGER"} { // to measure them on and off
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	n := &node{child: &child{name: "engine " + filepath.Base(dir), path: bin, env: env, logPath: filepath.Join(dir, "engine.log")}, url: "http://" + addr}
	if err := n.startReady(ctx); err != nil {
		return target{}, n, err
	}
	var d deployment
	if err := d.readCredentials(dir, o.workers); err != nil {
		return target{}, n, err
	}
	return target{url: n.url, key: d.key, accounts: d.accounts, cpu: n.cpu}, n, nil
}

package main

import (
	"context"
	"fmt"
	"net/url"
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

// pgPhase runs HTTP market orders against the memory-backed service and one
// whose read models are in PostgreSQL, in alternating windows, and adds the
// ratios: PostgreSQL's rate against memory's (issue 22: at least 0.9x) and
// its p99 against memory's (at most 1.2x).
func pgPhase(ctx context.Context, o opts, mem *service, t *table) error {
	if o.databaseURL == "" {
		return fmt.Errorf("bench: the pg phase needs -database-url (or DATABASE_URL)")
	}
	dbURL, drop, err := pgSchema(ctx, o.databaseURL)
	if err != nil {
		return fmt.Errorf("bench: a schema for the read models: %w", err)
	}
	defer drop()
	pg, err := startService(ctx, o, o.sync, o.workers, true, dbURL)
	if err != nil {
		return err
	}
	defer pg.Close()
	var ms, ps []sample
	for r := range o.runs {
		m := mem.httpPath(ctx, o)
		progress("run %d HTTP, memory read models:     %s", r+1, m)
		p, _ := profiled(o, fmt.Sprintf("pg-http-%d", r), func() (sample, error) { return pg.httpPath(ctx, o), nil })
		progress("run %d HTTP, PostgreSQL read models: %s", r+1, p)
		ms, ps = append(ms, m), append(ps, p)
	}
	rr, lr := ratios(rates(ps), rates(ms)), ratios(p99s(ps), p99s(ms))
	t.add(row{"HTTP orders rate, PostgreSQL read models (orders/s; baseline: memory)", spread(rates(ms), "", f0), spread(rates(ps), "", f0), spread(rr, "x", f2), ">= 0.9x", passIf(median(rr) >= 0.9)})
	t.add(row{"HTTP orders p99, PostgreSQL read models (ms; baseline: memory)", spread(p99s(ms), "", f2), spread(p99s(ps), "", f2), spread(lr, "x", f2), "<= 1.2x", passIf(median(lr) <= 1.2)})
	t.add(row{"HTTP orders p50, PostgreSQL read models (ms; baseline: memory)", spread(p50s(ms), "", f2), spread(p50s(ps), "", f2), spread(ratios(p50s(ps), p50s(ms)), "x", f2), "-", "-"})
	return nil
}

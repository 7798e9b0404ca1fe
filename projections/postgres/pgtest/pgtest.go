// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema in the database of DATABASE_URL, dropped when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URL creates a schema t_<random> in DATABASE_URL's database and returns
// DATABASE_URL with search_path set to it, so whatever the test creates lives
// there; the schema is dropped at t.Cleanup. Without DATABASE_URL the test is
// skipped, except under CI=true, where it fails: the PostgreSQL tests must run.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DATABASE_URL is not set under CI: the PostgreSQL tests must run")
		}
		t.Skip("DATABASE_URL not set; PostgreSQL tests need a database")
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(t, base, schema)
}

// WithSearchPath returns the connection string u with search_path set to
// schema; u is a URL (postgres://...) or a keyword/value string.
func WithSearchPath(t testing.TB, u, schema string) string {
	t.Helper()
	if !strings.Contains(u, "://") {
		return u + " search_path=" + schema
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	q := p.Query()
	q.Set("search_path", schema)
	p.RawQuery = q.Encode()
	return p.String()
}

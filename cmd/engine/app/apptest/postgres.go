package apptest

import (
	"os"
	"testing"
)

// PostgresURL is DATABASE_URL; without it the test is skipped, except under
// CI=true, where a missing database fails the test.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DATABASE_URL is not set under CI: the PostgreSQL tests must run")
		}
		t.Skip("DATABASE_URL not set; PostgreSQL tests need a database")
	}
	return u
}

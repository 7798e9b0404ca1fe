package apptest

import (
	"testing"

	"github.com/svc/engine/projections/postgres/pgtest"
)

// PostgresURL is DATABASE_URL with search_path set to a fresh schema of its
// own (t_<random>), dropped when the test ends; each call makes a new one.
// Without DATABASE_URL the test is skipped, except under CI=true, where a
// missing database fails the test.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return pgtest.URL(t)
}

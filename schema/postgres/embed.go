// Package postgres holds the numbered PostgreSQL migrations of the read models
// (NNN_name.sql, applied in order at start by projections/postgres).
package postgres

import "embed"

// Migrations are the migration files.
//
//go:embed *.sql
var Migrations embed.FS

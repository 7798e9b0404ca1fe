package app

import (
	"context"

	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/postgres"
)

// openPostgres opens the read models in the PostgreSQL database at url,
// applying the migrations of schema/postgres first.
func openPostgres(ctx context.Context, url string) (projections.Store, error) {
	return postgres.Open(ctx, url)
}

package app

import (
	"context"
	"errors"

	"github.com/svc/engine/projections"
)

func openPostgres(ctx context.Context, url string) (projections.Store, error) {
	return nil, errors.New("postgres store: not built yet")
}

package engine

import (
	"context"

	"github.com/svc/engine/commands"
)

// LiveGate runs the live trading gate on a command for the account, as an
// order's decision runs it before anything is decided or sent (live.go).
func (e *Engine) LiveGate(ctx context.Context, accountID string, cmd commands.Command) error {
	return e.liveGate(ctx, accountID, cmd)
}

package engine

import (
	"context"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/plan"
	evplan "github.com/svc/engine/events/plan"
)

func newPlans(cfg Config, e *Engine) *mailbox.Group[*plan.State] {
	return mailbox.NewGroup(mailbox.Kind[*plan.State]{
		Name:    "plans",
		Subject: evplan.Subject,
		New:     plan.New,
		Decide:  plan.Decide,
		Apply:   plan.Apply,
	}, cfg.Log, e.reg, cfg.Metrics)
}

// Plans runs cmd on the saved exit plans of the principal ownerID and commits its events.
func (e *Engine) Plans(ctx context.Context, ownerID string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	return e.plans.Execute(ctx, ownerID, env)
}

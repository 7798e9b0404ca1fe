package engine

import (
	"context"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
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

// Plan reads the saved exit plan planID of the principal ownerID from its
// aggregate (not a read model): its content and current revision; ok false
// when there is no such plan.
func (e *Engine) Plan(ctx context.Context, ownerID, planID string) (spec evplan.Spec, revision string, ok bool, err error) {
	err = e.plans.Inspect(ctx, ownerID, func(s *plan.State, _ uint64) {
		var p plan.Plan
		if p, ok = s.Plans[planID]; ok {
			spec, revision = p.Spec, p.Revision
		}
	})
	return spec, revision, ok, err
}

// BracketPlan reads the saved exit plan planID of the principal ownerID from
// its aggregate for a bracket at revision rev: refused (409
// exit_plan_conflict) when it was deleted or edited since (trading.PlanAt).
func (e *Engine) BracketPlan(ctx context.Context, ownerID, planID, rev string) (*trading.BracketPlan, error) {
	spec, current, ok, err := e.Plan(ctx, ownerID, planID)
	if err != nil {
		return nil, err
	}
	return trading.PlanAt(planID, rev, spec, current, ok)
}

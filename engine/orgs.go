package engine

import (
	"context"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/org"
	evorg "github.com/svc/engine/events/org"
)

func newOrgs(cfg Config, e *Engine) *mailbox.Group[*org.State] {
	return mailbox.NewGroup(mailbox.Kind[*org.State]{
		Name:    "org",
		Subject: evorg.Subject,
		New:     org.New,
		Decide:  org.Decide,
		Apply:   org.Apply,
	}, cfg.Log, e.reg, cfg.Metrics)
}

// Org runs cmd on the organization orgID and commits its events.
func (e *Engine) Org(ctx context.Context, orgID string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	return e.orgs.Execute(ctx, orgID, env)
}

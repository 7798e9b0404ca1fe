package engine

import (
	"context"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/venue"
	evvenue "github.com/svc/engine/events/venue"
)

func newVenues(cfg Config, e *Engine) *mailbox.Group[*venue.State] {
	return mailbox.NewGroup(mailbox.Kind[*venue.State]{
		Name:    "venue",
		Subject: evvenue.Subject,
		New:     venue.New,
		Decide:  venue.Decide,
		Apply:   venue.Apply,
	}, cfg.Log, e.reg, cfg.Metrics)
}

// Venue runs cmd on the venue venueID and commits its events.
func (e *Engine) Venue(ctx context.Context, venueID string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	return e.venues.Execute(ctx, venueID, env)
}

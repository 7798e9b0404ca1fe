package engine

import (
	"context"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evvenue "github.com/svc/engine/events/venue"
)

func newVenues(cfg Config, e *Engine) *mailbox.Group[*venue.State] {
	return mailbox.NewGroup(mailbox.Kind[*venue.State]{
		Name:    "venue",
		Subject: evvenue.Subject,
		New:     venue.New,
		Decide:  venue.Decide,
		Apply:   venue.Apply,
		After: func(id string, s *venue.State, c events.Committed) {
			e.setTerms(id, venue.Terms(s, c.Seq))
			e.noteHolds(id, s) // live.go
		},
	}, cfg.Log, e.reg, cfg.Metrics)
}

// Venue runs cmd on the venue venueID and commits its events.
func (e *Engine) Venue(ctx context.Context, venueID string, env commands.Envelope) (Result, error) {
	if err := env.Cmd.Validate(); err != nil {
		return Result{}, err
	}
	return e.venues.Execute(ctx, venueID, env)
}

// Terms are the compiled terms of a venue's group as of the venue's last
// commit, or false when the venue holds no such live group.
func (e *Engine) Terms(venueID, groupID string) (trading.Terms, bool) {
	if t := e.terms.Load(); t != nil {
		if g, ok := (*t)[venueID+"/"+groupID]; ok {
			return *g, true
		}
	}
	return trading.Terms{}, false
}

// VenuePolicy reads a risk policy from the venue's aggregate: its versions
// and the one in force, as answered; false when the venue stated none.
func (e *Engine) VenuePolicy(ctx context.Context, venueID, policyID string) (view map[string]any, found bool, err error) {
	err = e.venues.Inspect(ctx, venueID, func(s *venue.State, _ uint64) {
		if p := s.Policies[policyID]; p != nil {
			view, found = venue.PolicyView(policyID, p), true
		}
	})
	return view, found, err
}

package account

import (
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// Risk is the account's risk controls and lock state (issue 3 fills it in).
type Risk struct{}

// applyRisk folds risk events.
func applyRisk(s *State, e events.Event) {}

// decideRisk decides risk commands; ok is false for a command it does not know.
func decideRisk(s *State, env commands.Envelope) (evs []events.Event, ok bool, err error) {
	return nil, false, nil
}

// riskHolds names the holds risk places on the account at time at.
func riskHolds(s *State, at time.Time) []string { return nil }

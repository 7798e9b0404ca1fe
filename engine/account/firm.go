package account

import (
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// Firm is the account's back-office state: firm halt, reconciliation hold, ledger (issue 4 fills it in).
type Firm struct{}

// applyFirm folds back-office events.
func applyFirm(s *State, e events.Event) {}

// decideFirm decides back-office commands; ok is false for a command it does not know.
func decideFirm(s *State, env commands.Envelope) (evs []events.Event, ok bool, err error) {
	return nil, false, nil
}

// firmHolds names the holds the firm places on the account at time at.
func firmHolds(s *State, at time.Time) []string { return nil }

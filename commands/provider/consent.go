package provider

import (
	"github.com/svc/engine/commands"
	evacct "github.com/svc/engine/events/account"
)

// WithdrawLiveConsent withdraws the trader's consent to live trading by
// the Connect app an account was linked through: from then the app's
// orders on the account are refused before anything is sent (engine's
// live.go). Cause is hosted (the trader withdrew it on hosted Connect's
// page) or disconnect (the trader disconnected the app from the account,
// which ends it). Only a link grants it (Link.LiveConsent): granting takes
// the credential again, which the app never holds.
type WithdrawLiveConsent struct {
	Cause string
}

// Validate checks the shape.
func (c *WithdrawLiveConsent) Validate() error {
	if c.Cause != evacct.ConsentHosted && c.Cause != evacct.ConsentDisconnect {
		return commands.Invalid("a withdrawal of live consent names how it was withdrawn: hosted or disconnect")
	}
	return nil
}

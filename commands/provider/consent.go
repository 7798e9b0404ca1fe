package provider

import (
	"github.com/svc/engine/commands"
	evacct "github.com/svc/engine/events/account"
)

// SetLiveConsent records the trader's word on live trading by the Connect
// app an account was linked through: while it is withheld the app's
// orders on the account are refused before anything is sent (engine's
// live.go). Granting it takes the credential again (Link with
// LiveConsent); hosted Connect's page withdraws it (Cause hosted), and a
// disconnect of the app from the account ends it (Cause disconnect).
type SetLiveConsent struct {
	Granted bool
	Cause   string
}

// Validate checks the shape.
func (c *SetLiveConsent) Validate() error {
	switch c.Cause {
	case evacct.ConsentLink, evacct.ConsentRelink, evacct.ConsentHosted, evacct.ConsentDisconnect:
		return nil
	}
	return commands.Invalid("a live consent names how it was given: link, relink, hosted or disconnect")
}

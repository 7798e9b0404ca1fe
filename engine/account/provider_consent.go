package account

import (
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// An account linked through a Connect app (hosted Connect; State.AppID)
// belongs to the app's tenant, which no user's live trading switch speaks
// for: the trader who linked it says instead whether the app may trade it
// live, on the link form (Link.LiveConsent), each link again saying anew.
// The word is recorded (LiveConsentSet) and the engine's live gate reads it
// (engine's live.go); withdrawing it, or disconnecting the app from the
// account, ends it. Only a link grants it: granting takes the credential
// again, which the app never holds.

// LiveConsent is the trader's word on live trading by the app; the zero
// value when none was given (the engine's default for a switch never set
// applies: off in production).
type LiveConsent struct {
	Set     bool // the trader said (Granted), at At, by Cause
	Granted bool
	Cause   string
	At      time.Time
}

// On reports whether the app's orders may reach the provider: the
// trader's word, else byDefault.
func (c LiveConsent) On(byDefault bool) bool {
	if c.Set {
		return c.Granted
	}
	return byDefault
}

func applyConsent(s *State, e evacct.LiveConsentSet) {
	if s.Provider != nil {
		s.Provider.Consent = LiveConsent{Set: true, Granted: e.Granted, Cause: e.Cause, At: e.At}
	}
}

// linkConsent is the word a link of an app's account gave, recorded when
// it changes what stands (before: the account's consent so far; the zero
// value on a new account); nil otherwise.
func linkConsent(before LiveConsent, env commands.Envelope, c *providercmd.Link, cause string) []events.Event {
	if c.AppID == "" || c.LiveConsent == nil || (before.Set && before.Granted == *c.LiveConsent) {
		return nil
	}
	return []events.Event{evacct.LiveConsentSet{Granted: *c.LiveConsent, Cause: cause, At: env.At}}
}

// decideWithdrawConsent withdraws the trader's consent: recorded unless it
// is withdrawn already or the account is unlinked (nothing is sent for it
// again anyway). An account not linked through an app has none.
func decideWithdrawConsent(s *State, env commands.Envelope, c *providercmd.WithdrawLiveConsent) ([]events.Event, error) {
	p := s.Provider
	if s.AppID == "" {
		return nil, commands.Invalid("the account was not linked through a Connect app: its user's live trading switch applies")
	}
	if !p.Linked || (p.Consent.Set && !p.Consent.Granted) {
		return nil, nil
	}
	return []events.Event{evacct.LiveConsentSet{Granted: false, Cause: c.Cause, At: env.At}}, nil
}

package account

import (
	"bytes"
	"slices"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// An account linked through a login (a provider the trader signs in to
// with a login name and password, such as a futures broker) keeps the
// login's tokens, sealed, in place of a credential: each renewal the
// provider makes, and each time the trader signs in again, replaces them
// (ProviderTokenRenewed), so a start resumes from the freshest. Once the
// provider no longer takes them (ProviderLoginLost) nothing can be sent
// for the account: its trading commands are refused with
// provider_relink_required until the trader signs in to the login again.

// Login is the provider side of an account linked through a login; the
// zero value on an account linked with a key.
type Login struct {
	LoginName   string   // the login name (not secret)
	Account     string   // the provider's id of the account: what a session resumes on
	AccountName string   // its name or number at the provider
	Environment string   // live or demo
	TimeInForce []string // the times in force the provider takes; empty: ProviderTIFs
	// LoginLost: the provider no longer takes the sealed tokens; the trader
	// signs in again.
	LoginLost bool
}

// ByLogin reports whether the account was linked through a login.
func (l Login) ByLogin() bool { return l.Account != "" }

// TIFs are the times in force the account's provider takes.
func (l Login) TIFs() []string {
	if len(l.TimeInForce) > 0 {
		return l.TimeInForce
	}
	return ProviderTIFs
}

func loginOf(e evacct.ProviderLinked) Login {
	return Login{LoginName: e.Login, Account: e.Account, AccountName: e.AccountName, Environment: e.Environment,
		TimeInForce: slices.Clone(e.TimeInForce)}
}

// applyProviderToken folds the events of a login's tokens.
func applyProviderToken(s *State, e events.Event) {
	p := s.Provider
	if p == nil {
		return
	}
	switch e := e.(type) {
	case evacct.ProviderTokenRenewed:
		p.Sealed, p.LoginLost = e.Sealed, false
	case evacct.ProviderLoginLost:
		p.LoginLost = true
	case evacct.LiveConsentSet:
		applyConsent(s, e) // provider_consent.go
	}
}

// decideProviderToken decides the commands of a login's tokens, and
// refuses a trading command while the login is lost; ok is false for a
// command it leaves to the others.
func decideProviderToken(s *State, env commands.Envelope) ([]events.Event, bool, error) {
	p := s.Provider
	switch c := env.Cmd.(type) {
	case *providercmd.RenewToken:
		if !p.Linked || bytes.Equal(p.Sealed, c.Sealed) {
			return nil, true, nil
		}
		return []events.Event{evacct.ProviderTokenRenewed{Sealed: c.Sealed, ExpiresAt: c.ExpiresAt, Cause: c.Cause, At: env.At}}, true, nil
	case *providercmd.WithdrawLiveConsent:
		evs, err := decideWithdrawConsent(s, env, c) // provider_consent.go
		return evs, true, err
	case *providercmd.LoseLogin:
		if !p.Linked || p.LoginLost || !bytes.Equal(p.Sealed, c.Sealed) {
			return nil, true, nil // lost already, or tokens the account no longer holds
		}
		return []events.Event{evacct.ProviderLoginLost{At: env.At}}, true, nil
	}
	if err := loginExits(p, env.Cmd); err != nil {
		return nil, true, err
	}
	if !p.LoginLost || !p.Linked {
		return nil, false, nil
	}
	var coid string
	switch c := env.Cmd.(type) {
	case *trading.PlaceOrder:
		coid = c.ClientOrderID
	case *trading.ClosePosition:
		coid = c.ClientOrderID
	case *trading.Reverse:
		coid = c.ClientOrderID
	case *trading.Flatten:
		coid = c.ClientOrderID
	case *trading.CancelOrder, *trading.ReplaceOrder, *trading.Protect, *trading.ChangeBracket, *trading.WithdrawBracket:
	default:
		return nil, false, nil
	}
	if coid != "" {
		if err := placedAgain(s, coid); err != nil {
			return nil, true, err // a clientOrderId used before answers as it settled
		}
	}
	return nil, true, RelinkRequired(p.Name)
}

// loginExits refuses an exit plan on a login's account: its provider (a
// futures broker) has no native reduce-only order, so a leg left resting
// after its sibling closed the position could open a new one; the frame's
// capabilities.exitPlanSupport is empty there (provider.ExitPlanSupport).
func loginExits(p *Provider, cmd commands.Command) error {
	if !p.ByLogin() {
		return nil
	}
	field := ""
	switch c := cmd.(type) {
	case *trading.PlaceOrder:
		if c.Bracket != nil {
			field = "exitPlan"
		}
	case *trading.Protect:
		field = "planId"
	}
	if field == "" {
		return nil
	}
	return commands.InvalidField(field, map[string]any{"provider": p.Name},
		"this provider account serves no exit plan (capabilities.exitPlanSupport is empty): its provider has no reduce-only orders")
}

// RelinkRequired is the refusal of a command on an account whose login the
// provider no longer takes.
func RelinkRequired(providerName string) error {
	return commands.Refuse(commands.CodeProviderRelinkRequired,
		"the provider no longer takes this account's login: nothing was sent. Sign in to the login again (link it with its password) and the account resumes",
		map[string]any{"provider": providerName})
}

// relink is the same link again: a login's newer tokens replace the
// sealed ones (and end a lost login), and the trader's word on live
// trading by the app, when it changes, is recorded (provider_consent.go);
// nothing else changes.
func relink(s *State, env commands.Envelope, c *providercmd.Link) []events.Event {
	p := s.Provider
	consent := linkConsent(p.Consent, env, c, evacct.ConsentRelink)
	if !p.ByLogin() || c.Account != p.Account || bytes.Equal(p.Sealed, c.Sealed) {
		return consent
	}
	return append([]events.Event{evacct.ProviderTokenRenewed{Sealed: c.Sealed, ExpiresAt: c.ExpiresAt, Cause: providercmd.TokenRelink, At: env.At}},
		consent...)
}

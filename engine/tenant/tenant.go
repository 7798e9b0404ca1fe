// Package tenant is the aggregate of a tenant and its API keys. A user is a
// tenant of kind user: its identity (password digest, email verification,
// password resets, sessions, operator grants) lives here too.
package tenant

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	evtenant "github.com/svc/engine/events/tenant"
)

// State is a tenant as its commits leave it.
// Tenant state is owned by its mailbox goroutine; never touch it from another.
type State struct {
	ID      string
	Created bool
	Name    string
	Kind    string
	Email   string
	Keys    map[string]evtenant.KeyIssued // by key id
	Revoked map[string]bool

	Verified     bool
	PasswordHash string
	Verify       Token                // the pending verification
	Reset        Token                // the pending password reset
	Sessions     map[string]time.Time // live sessions: id -> absolute end
	Operator     map[string][]string  // venue id -> scopes
	Demos        []string             // demo accounts reserved, by account id
	Live         Live                 // the live trading switch (live.go)
}

// Token is a single-use token by its digest.
type Token struct {
	Digest string
	Until  time.Time
	Used   bool
}

func (t Token) live(digest string, at time.Time) bool {
	return t.Digest != "" && t.Digest == digest && !t.Used && at.Before(t.Until)
}

// New is the state of a tenant with no commits.
func New(id string) *State {
	return &State{ID: id, Keys: map[string]evtenant.KeyIssued{}, Revoked: map[string]bool{},
		Sessions: map[string]time.Time{}, Operator: map[string][]string{}}
}

// Apply folds one event into the state.
func Apply(s *State, e events.Event) *State {
	switch e := e.(type) {
	case evtenant.Created:
		s.Created, s.Name, s.Kind, s.Email = true, e.Name, e.Kind, e.Email
	case evtenant.KeyIssued:
		s.Keys[e.KeyID] = e
	case evtenant.KeyRevoked:
		s.Revoked[e.KeyID] = true
	case evtenant.PasswordSet:
		s.PasswordHash = e.Hash
		if e.ResetDigest != "" && e.ResetDigest == s.Reset.Digest {
			s.Reset.Used = true
		}
	case evtenant.VerificationIssued:
		s.Verify = Token{Digest: e.Digest, Until: e.ExpiresAt}
	case evtenant.EmailVerified:
		s.Verified = true
		if e.Digest != "" && e.Digest == s.Verify.Digest {
			s.Verify.Used = true
		}
	case evtenant.ResetIssued:
		s.Reset = Token{Digest: e.Digest, Until: e.ExpiresAt}
	case evtenant.SessionStarted:
		s.Sessions[e.SessionID] = e.ExpiresAt
	case evtenant.SessionEnded:
		delete(s.Sessions, e.SessionID)
	case evtenant.DemoReserved:
		s.Demos = append(s.Demos, e.AccountID)
	case evtenant.LiveTradingSet:
		applyLive(s, e)
	case evtenant.OperatorGranted:
		if len(e.Scopes) == 0 {
			delete(s.Operator, e.VenueID)
		} else {
			s.Operator[e.VenueID] = append([]string(nil), e.Scopes...)
		}
	}
	return s
}

// invalidToken is the refusal of a token that is unknown, used or expired.
func invalidToken(what string) error {
	return commands.Refuse(commands.CodeInvalidToken,
		fmt.Sprintf("the %s token is invalid, already used or expired; request a new one", what), nil)
}

// Decide runs one tenant command.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	switch c := env.Cmd.(type) {
	case *tenantcmd.CreateTenant:
		if s.Created {
			return nil, nil
		}
		return []events.Event{evtenant.Created{TenantID: s.ID, Name: c.Name, Kind: c.Kind, Email: c.Email, At: env.At}}, nil
	case *tenantcmd.SignUp:
		if s.Created {
			return nil, nil // the address has an account: the caller mails its owner, and answers as for a new one
		}
		email := tenantcmd.NormalEmail(c.Email)
		return []events.Event{
			evtenant.Created{TenantID: s.ID, Name: email, Kind: "user", Email: email, At: env.At},
			evtenant.PasswordSet{Hash: c.PasswordHash, At: env.At},
			evtenant.VerificationIssued{Digest: c.VerifyDigest, ExpiresAt: c.VerifyUntil, At: env.At},
		}, nil
	}
	if !s.Created {
		return nil, commands.Refuse(commands.CodeNotFound, "tenant not found", nil)
	}
	switch c := env.Cmd.(type) {
	case *tenantcmd.IssueKey:
		if _, ok := s.Keys[c.KeyID]; ok {
			return nil, nil
		}
		if c.ByUser {
			if !s.Verified {
				return nil, emailUnverified()
			}
			if n := s.LiveKeys(env.At); n >= tenantcmd.MaxKeys {
				return nil, commands.Refuse(commands.CodeKeyLimitReached,
					fmt.Sprintf("at most %d keys may be live at once; revoke one first", tenantcmd.MaxKeys), map[string]any{"limit": tenantcmd.MaxKeys})
			}
			if !c.ExpiresAt.IsZero() && !c.ExpiresAt.After(env.At) {
				return nil, commands.InvalidField("expiresAt", nil, "expiresAt must be in the future")
			}
		}
		return []events.Event{evtenant.KeyIssued{KeyID: c.KeyID, Digest: c.Digest, Kind: c.Kind, Prefix: c.Prefix,
			Name: c.Name, ExpiresAt: c.ExpiresAt, At: env.At}}, nil
	case *tenantcmd.RevokeKey:
		if _, ok := s.Keys[c.KeyID]; !ok {
			return nil, commands.Refuse(commands.CodeNotFound, "key not found", nil)
		}
		if s.Revoked[c.KeyID] {
			return nil, nil
		}
		return []events.Event{evtenant.KeyRevoked{KeyID: c.KeyID, At: env.At}}, nil
	case *tenantcmd.VerifyEmail:
		if !s.Verify.live(c.Digest, env.At) {
			return nil, invalidToken("verification")
		}
		return []events.Event{evtenant.EmailVerified{Digest: c.Digest, At: env.At}}, nil
	case *tenantcmd.MarkVerified:
		if s.Verified {
			return nil, nil
		}
		return []events.Event{evtenant.EmailVerified{At: env.At}}, nil
	case *tenantcmd.IssueVerification:
		if s.Verified {
			return nil, nil
		}
		return []events.Event{evtenant.VerificationIssued{Digest: c.Digest, ExpiresAt: c.Until, At: env.At}}, nil
	case *tenantcmd.RequestReset:
		return []events.Event{evtenant.ResetIssued{Digest: c.Digest, ExpiresAt: c.Until, At: env.At}}, nil
	case *tenantcmd.ConfirmReset:
		if !s.Reset.live(c.Digest, env.At) {
			return nil, invalidToken("password reset")
		}
		evs := []events.Event{evtenant.PasswordSet{Hash: c.PasswordHash, ResetDigest: c.Digest, At: env.At}}
		return append(evs, s.endSessions("password_reset", env.At)...), nil
	case *tenantcmd.SetPassword:
		evs := []events.Event{evtenant.PasswordSet{Hash: c.PasswordHash, At: env.At}}
		return append(evs, s.endSessions("password_set", env.At)...), nil
	case *tenantcmd.StartSession:
		if s.Kind != "user" {
			return nil, commands.Refuse(commands.CodePermissionDenied, "only users sign in", nil)
		}
		if _, ok := s.Sessions[c.SessionID]; ok {
			return nil, nil
		}
		return []events.Event{evtenant.SessionStarted{SessionID: c.SessionID, ExpiresAt: c.Until, At: env.At}}, nil
	case *tenantcmd.EndSession:
		if _, ok := s.Sessions[c.SessionID]; !ok {
			return nil, nil // ended already, or never started: logging out twice is fine
		}
		return []events.Event{evtenant.SessionEnded{SessionID: c.SessionID, Reason: c.Reason, At: env.At}}, nil
	case *tenantcmd.ReserveDemo:
		if s.Kind != "user" {
			return nil, commands.Refuse(commands.CodePermissionDenied, "demo accounts are opened by signed-up users", nil)
		}
		if !s.Verified {
			return nil, emailUnverified()
		}
		if slices.Contains(s.Demos, c.AccountID) {
			return nil, nil
		}
		if len(s.Demos) >= tenantcmd.MaxDemoAccounts {
			return nil, commands.Refuse(commands.CodeAccountLimitReached,
				fmt.Sprintf("at most %d demo accounts per user", tenantcmd.MaxDemoAccounts), map[string]any{"limit": tenantcmd.MaxDemoAccounts})
		}
		return []events.Event{evtenant.DemoReserved{AccountID: c.AccountID, At: env.At}}, nil
	case *tenantcmd.SetLiveTrading:
		return decideLive(s, env, c)
	case *tenantcmd.GrantOperator:
		return []events.Event{evtenant.OperatorGranted{VenueID: c.VenueID, Scopes: c.Scopes, At: env.At}}, nil
	}
	return nil, fmt.Errorf("tenant: no decision for %T", env.Cmd)
}

// emailUnverified refuses what needs a verified email.
func emailUnverified() error {
	return commands.Refuse(commands.CodeEmailUnverified, "verify your email address first: follow the link in the mail sent at sign-up", nil)
}

// LiveKeys counts the keys neither revoked nor expired at at.
func (s *State) LiveKeys(at time.Time) int {
	n := 0
	for id, k := range s.Keys {
		if !s.Revoked[id] && (k.ExpiresAt.IsZero() || at.Before(k.ExpiresAt)) {
			n++
		}
	}
	return n
}

// endSessions ends every live session, in a stable order (replay gives the same events).
func (s *State) endSessions(reason string, at time.Time) []events.Event {
	ids := make([]string, 0, len(s.Sessions))
	for id := range s.Sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]events.Event, 0, len(ids))
	for _, id := range ids {
		out = append(out, evtenant.SessionEnded{SessionID: id, Reason: reason, At: at})
	}
	return out
}

// Package connect holds the aggregates of Connect: an app (its settings and
// API keys), a link (created, mounted, connected, closed or failed) and a
// redeemed statement id, each with the record of the Idempotency-Keys its
// writes answered (engine/idem).
package connect

import (
	"fmt"
	"time"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
)

// Key is an app key as the aggregate knows it.
type Key struct {
	evconnect.KeyIssued
	Revoked bool
}

// App is an app as its commits leave it.
// App state is owned by its mailbox goroutine; never touch it from another.
type App struct {
	ID        string
	Open      bool
	Created   evconnect.AppCreated
	Current   evconnect.Settings
	UpdatedAt time.Time
	Keys      map[string]*Key
	Idem      idem.Record
}

// NewApp is the state of an app with no commits.
func NewApp(id string) *App { return &App{ID: id, Keys: map[string]*Key{}, Idem: idem.Record{}} }

// ApplyApp folds one event into the app.
func ApplyApp(s *App, e events.Event) *App {
	switch e := e.(type) {
	case evconnect.AppCreated:
		s.Open, s.Created, s.Current, s.UpdatedAt = true, e, e.Settings, e.At
	case evconnect.AppUpdated:
		s.Current, s.UpdatedAt = e.Settings, e.At
	case evconnect.KeyIssued:
		s.Keys[e.KeyID] = &Key{KeyIssued: e}
	case evconnect.KeyRevoked:
		if k, ok := s.Keys[e.KeyID]; ok {
			k.Revoked = true
		}
	default:
		s.Idem.Apply(e)
	}
	return s
}

// View is the app as answered.
func (s *App) View() connectcmd.AppView {
	return connectcmd.ViewApp(s.ID, s.Created, s.Current, s.UpdatedAt)
}

// owner refuses an actor who is not a verified owner of the app's organization now.
func owner(by connectcmd.Owner) error {
	switch {
	case !by.Verified:
		return commands.Refuse(commands.CodeEmailUnverified, "verify your email before managing a Connect app", nil)
	case !by.Owner:
		return commands.Refuse(commands.CodePermissionDenied, "only an owner of the app's organization manages it", nil)
	}
	return nil
}

// DecideApp runs one app command; every write goes through idem.Write.
func DecideApp(s *App, env commands.Envelope) ([]events.Event, error) {
	if _, creating := env.Cmd.(*connectcmd.CreateApp); !creating && !s.Open {
		return nil, commands.Refuse(commands.CodeNotFound, "no Connect app of yours has that id", nil)
	}
	switch c := env.Cmd.(type) {
	case *connectcmd.CreateApp:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if s.Open {
				return nil, 0, nil, commands.Refuse(commands.CodeIdempotencyConflict, "this app exists already", nil)
			}
			if err := owner(c.By); err != nil {
				return nil, 0, nil, err
			}
			e := evconnect.AppCreated{AppID: s.ID, OrgID: c.OrgID, TenantID: c.TenantID, Env: c.Env, Counterpart: c.Counterpart,
				Settings: c.Settings, CreatedBy: c.By.UserID, At: env.At}
			return []events.Event{e}, commands.Created, map[string]any{"app": connectcmd.ViewApp(s.ID, e, e.Settings, e.At)}, nil
		})
	case *connectcmd.UpdateApp:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if err := owner(c.By); err != nil {
				return nil, 0, nil, err
			}
			e := evconnect.AppUpdated{Settings: c.Settings, By: c.By.UserID, At: env.At}
			return []events.Event{e}, commands.Done, map[string]any{"app": connectcmd.ViewApp(s.ID, s.Created, e.Settings, e.At)}, nil
		})
	case *connectcmd.IssueKey:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if err := owner(c.By); err != nil {
				return nil, 0, nil, err
			}
			live := 0
			for _, k := range s.Keys {
				if !k.Revoked && env.At.Before(k.ExpiresAt) {
					live++
				}
			}
			if live >= connectcmd.MaxKeys {
				return nil, 0, nil, commands.Refuse(commands.CodeKeyLimitReached,
					fmt.Sprintf("an app has at most %d live keys; revoke one first", connectcmd.MaxKeys), map[string]any{"limit": connectcmd.MaxKeys})
			}
			e := evconnect.KeyIssued{KeyID: c.KeyID, Digest: c.Digest, Prefix: c.Prefix, Name: c.Name, Env: c.Env,
				CreatedBy: c.By.UserID, ExpiresAt: c.ExpiresAt.UTC(), At: env.At}
			// The answer a retry gets again carries no secret: only the first answer shows it.
			return []events.Event{e}, commands.Created, map[string]any{"key": connectcmd.ViewKey(s.ID, e, false), "secret": nil}, nil
		})
	case *connectcmd.RevokeKey:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if err := owner(c.By); err != nil {
				return nil, 0, nil, err
			}
			k, ok := s.Keys[c.KeyID]
			if !ok {
				return nil, 0, nil, commands.Refuse(commands.CodeNotFound, "no key of this app has that id", nil)
			}
			view := map[string]any{"key": connectcmd.ViewKey(s.ID, k.KeyIssued, true)}
			if k.Revoked {
				return nil, commands.Done, view, nil
			}
			return []events.Event{evconnect.KeyRevoked{KeyID: c.KeyID, By: c.By.UserID, At: env.At}}, commands.Done, view, nil
		})
	}
	return nil, fmt.Errorf("connect: no app decision for %T", env.Cmd)
}

// Link is a link as its commits leave it, with its answered keys.
// Link state is owned by its mailbox goroutine; never touch it from another.
type Link struct {
	evconnect.Link
	Idem idem.Record
}

// NewLink is the state of a link with no commits.
func NewLink(id string) *Link { return &Link{Link: evconnect.Link{ID: id}, Idem: idem.Record{}} }

// ApplyLink folds one event into the link.
func ApplyLink(s *Link, e events.Event) *Link {
	switch e := e.(type) {
	case evconnect.LinkCreated:
		s.AppID, s.Trader, s.KeyID, s.State, s.ExpiresAt, s.CreatedAt, s.UpdatedAt =
			e.AppID, e.Trader, e.KeyID, evconnect.StateCreated, e.ExpiresAt, e.At, e.At
	case evconnect.LinkMounted:
		s.State, s.UpdatedAt = evconnect.StateMounted, e.At
	case evconnect.LinkConnected:
		s.State, s.AccountID, s.UpdatedAt = evconnect.StateConnected, e.AccountID, e.At
	case evconnect.LinkClosed:
		s.State, s.UpdatedAt = evconnect.StateClosed, e.At
	case evconnect.LinkDisconnected:
		s.State, s.Disconnected, s.UpdatedAt = evconnect.StateClosed, true, e.At
	case evconnect.LinkFailed:
		s.State, s.Reason, s.UpdatedAt = evconnect.StateFailed, e.Reason, e.At
	default:
		s.Idem.Apply(e)
	}
	return s
}

// Refusals of hosted Connect's steps on a link that can no longer take them.
func linkEnded(l evconnect.Link, now time.Time) error {
	switch {
	case l.Disconnected:
		return commands.Refuse(commands.CodeLinkClosed, "you disconnected the app from the account this Connect link connected; ask the app for a new link to connect again", nil)
	case l.State == evconnect.StateClosed:
		return commands.Refuse(commands.CodeLinkClosed, "this Connect link was closed by the app; ask the app for a new one", nil)
	case l.State == evconnect.StateConnected:
		return commands.Refuse(commands.CodeLinkConnected, "this Connect link has connected an account already; ask the app for a new one to connect another", nil)
	case l.State == evconnect.StateFailed || l.Expired(now):
		return commands.Refuse(commands.CodeLinkExpired, "this Connect link expired before an account was connected; ask the app for a new one", nil)
	}
	return nil
}

// DecideLink runs one link command. Creating and closing are keyed writes
// (idem.Write); hosted Connect's steps (mount, connect) and the trader's
// disconnect are the link's own, idempotent by their state: a disconnect of
// a link that does not grant that account (any more) records nothing.
func DecideLink(s *Link, env commands.Envelope) ([]events.Event, error) {
	if _, creating := env.Cmd.(*connectcmd.CreateLink); !creating && s.State == "" {
		return nil, commands.Refuse(commands.CodeNotFound, "no link of the app has that id in this environment", nil)
	}
	now := env.At
	switch c := env.Cmd.(type) {
	case *connectcmd.CreateLink:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if s.State != "" {
				return nil, 0, nil, commands.Refuse(commands.CodeIdempotencyConflict, "this link exists already", nil)
			}
			e := evconnect.LinkCreated{LinkID: s.ID, AppID: c.AppID, Trader: c.Trader, KeyID: c.KeyID, ExpiresAt: c.ExpiresAt.UTC(), At: now}
			l := ApplyLink(NewLink(s.ID), e).Link
			return []events.Event{e}, commands.Created, map[string]any{"link": connectcmd.ViewLink(l, now)}, nil
		})
	case *connectcmd.MountLink:
		if err := linkEnded(s.Link, now); err != nil {
			return nil, err
		}
		if s.State == evconnect.StateMounted {
			return nil, nil
		}
		return []events.Event{evconnect.LinkMounted{At: now}}, nil
	case *connectcmd.ConnectLink:
		if s.State == evconnect.StateConnected && s.AccountID == c.AccountID {
			return nil, nil // the same connection again: nothing new
		}
		if err := linkEnded(s.Link, now); err != nil {
			return nil, err
		}
		return []events.Event{evconnect.LinkConnected{AccountID: c.AccountID, At: now}}, nil
	case *connectcmd.DisconnectLink:
		if s.State != evconnect.StateConnected || s.AccountID != c.AccountID {
			return nil, nil
		}
		return []events.Event{evconnect.LinkDisconnected{By: c.By, At: now}}, nil
	case *connectcmd.CloseLink:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			var evs []events.Event
			switch {
			case s.Expired(now):
				evs = []events.Event{evconnect.LinkFailed{Reason: "expired", At: s.ExpiresAt}}
			case !s.Ended():
				evs = []events.Event{evconnect.LinkClosed{At: now}}
			}
			l := s.Link
			for _, e := range evs {
				l = ApplyLink(&Link{Link: l, Idem: idem.Record{}}, e).Link
			}
			return evs, commands.Done, map[string]any{"link": connectcmd.ViewLink(l, now)}, nil
		})
	}
	return nil, fmt.Errorf("connect: no link decision for %T", env.Cmd)
}

// Statement is a statement id as its commits leave it: redeemed or not.
type Statement struct {
	ID       string
	Redeemed bool
}

// NewStatement is the state of a statement id never redeemed.
func NewStatement(id string) *Statement { return &Statement{ID: id} }

// ApplyStatement folds one event into the statement.
func ApplyStatement(s *Statement, e events.Event) *Statement {
	if _, ok := e.(evconnect.StatementRedeemed); ok {
		s.Redeemed = true
	}
	return s
}

// DecideStatement redeems a statement id once; a second redemption is 401 invalid_statement.
func DecideStatement(s *Statement, env commands.Envelope) ([]events.Event, error) {
	c, ok := env.Cmd.(*connectcmd.RedeemStatement)
	if !ok {
		return nil, fmt.Errorf("connect: no statement decision for %T", env.Cmd)
	}
	if s.Redeemed {
		return nil, commands.Refuse(commands.CodeInvalidStatement, "this statement was exchanged already: a statement is good for one exchange; ask production for a new one",
			map[string]any{"reason": "replayed"})
	}
	return []events.Event{evconnect.StatementRedeemed{ID: c.ID, Email: c.Email, Expires: c.Expires.UTC(), At: env.At}}, nil
}

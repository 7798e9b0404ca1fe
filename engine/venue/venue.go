// Package venue is the aggregate of one venue: its organization, its keys,
// its provider versions, its configuration, its risk policies and its holds
// on live trading, with the record of the Idempotency-Keys its
// writes answered (engine/idem).
package venue

import (
	"fmt"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evvenue "github.com/svc/engine/events/venue"
)

// Key is a venue key as the aggregate knows it.
type Key struct {
	evvenue.KeyIssued
	Revoked bool
}

// State is a venue as its commits leave it.
// Venue state is owned by its mailbox goroutine; never touch it from another.
type State struct {
	ID           string
	Open         bool
	OrgID        string
	FirmTenantID string
	Name         string
	Keys         map[string]*Key
	Providers    map[string]evvenue.Provider
	Config       map[string]map[string]*Item // kind -> id -> item (config.go)
	Policies     map[string]*Policy          // risk policies by id (policy.go)
	Live         Live                        // holds on live trading (livehold.go)
	Idem         idem.Record
}

// New is the state of a venue with no commits.
func New(id string) *State {
	return &State{ID: id, Keys: map[string]*Key{}, Providers: map[string]evvenue.Provider{}, Config: map[string]map[string]*Item{}, Policies: map[string]*Policy{}, Idem: idem.Record{}}
}

// StateVersion is the version of the venue's state in snapshots
// (engine/snapshot.Shape): raise it when Apply folds an event differently.
// A change of State's fields changes the shape by itself.
const StateVersion = 1

// Apply folds one event into the state.
func Apply(s *State, e events.Event) *State {
	switch e := e.(type) {
	case evvenue.Created:
		s.Open, s.OrgID, s.FirmTenantID, s.Name = true, e.OrgID, e.FirmTenantID, e.Name
	case evvenue.KeyIssued:
		s.Keys[e.KeyID] = &Key{KeyIssued: e}
	case evvenue.KeyRevoked:
		if k, ok := s.Keys[e.KeyID]; ok {
			k.Revoked = true
		}
	case evvenue.ProviderRegistered:
		s.Providers[e.Provider.ID] = e.Provider
	case evvenue.ConfigSet:
		applyConfig(s, e)
	case evvenue.PolicyStated, evvenue.PolicyPublished:
		applyPolicy(s, e)
	case evvenue.LiveHeld, evvenue.LiveReleased:
		applyLive(&s.Live, e)
	default:
		s.Idem.Apply(e)
	}
	return s
}

func notFound() error {
	return commands.Refuse(commands.CodeNotFound, "no venue of yours has that id", nil)
}

// owner refuses an actor who is not a verified owner of the venue's organization now.
func owner(by venuecmd.Owner) error {
	switch {
	case !by.Verified:
		return commands.Refuse(commands.CodeEmailUnverified, "verify your email before managing a venue", nil)
	case !by.Owner:
		return commands.Refuse(commands.CodePermissionDenied, "only an owner of the venue's organization manages it", nil)
	}
	return nil
}

// Decide runs one venue command. Every write goes through idem.Write: the
// Idempotency-Key and the answer are recorded in the write's commit.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	if _, creating := env.Cmd.(*venuecmd.CreateVenue); !creating && !s.Open {
		return nil, notFound()
	}
	switch c := env.Cmd.(type) {
	case *venuecmd.CreateVenue:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if s.Open {
				return nil, 0, nil, commands.Refuse(commands.CodeIdempotencyConflict, "this venue exists already", nil)
			}
			if err := owner(c.By); err != nil {
				return nil, 0, nil, err
			}
			e := evvenue.Created{VenueID: s.ID, OrgID: c.OrgID, FirmTenantID: c.FirmTenantID, Name: c.Name, CreatedBy: c.By.UserID, At: env.At}
			return []events.Event{e}, commands.Created, map[string]any{"venue": venuecmd.VenueView(s.ID, e)}, nil
		})
	case *venuecmd.IssueKey:
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
			if live >= venuecmd.MaxKeys {
				return nil, 0, nil, commands.Refuse(commands.CodeKeyLimitReached,
					fmt.Sprintf("a venue has at most %d live keys; revoke one first", venuecmd.MaxKeys), map[string]any{"limit": venuecmd.MaxKeys})
			}
			e := evvenue.KeyIssued{KeyID: c.KeyID, Digest: c.Digest, Prefix: c.Prefix, Name: c.Name, Env: c.Env, Scopes: c.Scopes,
				CreatedBy: c.By.UserID, ExpiresAt: c.ExpiresAt.UTC(), At: env.At}
			// The answer a retry gets again carries no secret: it is shown once, by the first answer only.
			return []events.Event{e}, commands.Created, map[string]any{"key": venuecmd.ViewOf(e, false), "secret": nil}, nil
		})
	case *venuecmd.RevokeKey:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if err := owner(c.By); err != nil {
				return nil, 0, nil, err
			}
			k, ok := s.Keys[c.KeyID]
			if !ok {
				return nil, 0, nil, commands.Refuse(commands.CodeNotFound, "no key of this venue has that id", nil)
			}
			if k.Revoked {
				return nil, commands.Done, map[string]any{"key": venuecmd.ViewOf(k.KeyIssued, true)}, nil
			}
			return []events.Event{evvenue.KeyRevoked{KeyID: c.KeyID, By: c.By.UserID, At: env.At}}, commands.Done,
				map[string]any{"key": venuecmd.ViewOf(k.KeyIssued, true)}, nil
		})
	case *venuecmd.RegisterProvider:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			p := evvenue.Provider{ID: ProviderID(env), VenueID: s.ID, Name: c.Name, Manifest: c.Canonical, ManifestHash: c.ManifestHash,
				State: "candidate", CreationKey: env.Key, CreationHash: c.CreationHash, CreatedAt: env.At}
			return []events.Event{evvenue.ProviderRegistered{Provider: p}}, commands.Created, map[string]any{"provider": venuecmd.ProviderView(p)}, nil
		})
	case *venuecmd.SetConfig:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) { return decideConfig(s, env, c) })
	case *venuecmd.StatePolicy:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) { return decideStatePolicy(s, env, c) })
	case *venuecmd.PublishPolicy:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) { return decidePublish(s, env, c) })
	case *venuecmd.HoldLive:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) { return decideHold(s, env, c) })
	case *venuecmd.ReleaseLive:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) { return decideRelease(s, env, c) })
	}
	return nil, fmt.Errorf("venue: no decision for %T", env.Cmd)
}

// ProviderID is the uuid of the provider version a command registers, derived from the command id.
func ProviderID(env commands.Envelope) string {
	b := env.ID
	b[6] = (b[6] & 0x0f) | 0x80 // a version-8 (custom) uuid over the command's ulid
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

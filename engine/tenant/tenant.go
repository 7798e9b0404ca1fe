// Package tenant is the aggregate of a tenant and its API keys.
package tenant

import (
	"fmt"
	"net/http"

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
	Keys    map[string]evtenant.KeyIssued // by key id
	Revoked map[string]bool
}

// New is the state of a tenant with no commits.
func New(id string) *State {
	return &State{ID: id, Keys: map[string]evtenant.KeyIssued{}, Revoked: map[string]bool{}}
}

// Apply folds one event into the state.
func Apply(s *State, e events.Event) *State {
	switch e := e.(type) {
	case evtenant.Created:
		s.Created, s.Name, s.Kind = true, e.Name, e.Kind
	case evtenant.KeyIssued:
		s.Keys[e.KeyID] = e
	case evtenant.KeyRevoked:
		s.Revoked[e.KeyID] = true
	}
	return s
}

// Decide runs one tenant command.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	switch c := env.Cmd.(type) {
	case *tenantcmd.CreateTenant:
		if s.Created {
			return nil, nil
		}
		return []events.Event{evtenant.Created{TenantID: s.ID, Name: c.Name, Kind: c.Kind, Email: c.Email, At: env.At}}, nil
	}
	if !s.Created {
		return nil, commands.Refuse(http.StatusNotFound, "not_found", "tenant not found", nil)
	}
	switch c := env.Cmd.(type) {
	case *tenantcmd.IssueKey:
		if _, ok := s.Keys[c.KeyID]; ok {
			return nil, nil
		}
		return []events.Event{evtenant.KeyIssued{KeyID: c.KeyID, Digest: c.Digest, Kind: c.Kind, Prefix: c.Prefix, At: env.At}}, nil
	case *tenantcmd.RevokeKey:
		if _, ok := s.Keys[c.KeyID]; !ok {
			return nil, commands.Refuse(http.StatusNotFound, "not_found", "key not found", nil)
		}
		if s.Revoked[c.KeyID] {
			return nil, nil
		}
		return []events.Event{evtenant.KeyRevoked{KeyID: c.KeyID, At: env.At}}, nil
	}
	return nil, fmt.Errorf("tenant: no decision for %T", env.Cmd)
}

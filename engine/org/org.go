// Package org is the aggregate of an organization: its members and their
// roles, and pending invitations. At least one owner always remains.
package org

import (
	"fmt"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	orgcmd "github.com/svc/engine/commands/org"
	"github.com/svc/engine/events"
	evorg "github.com/svc/engine/events/org"
)

// Member is one member of an organization.
type Member struct {
	Email  string
	Role   string
	Joined time.Time
}

// State is an organization as its commits leave it.
// Organization state is owned by its mailbox goroutine; never touch it from another.
type State struct {
	ID      string
	Created bool
	Name    string
	Digest  string
	Members map[string]Member // by user id
	Invites map[string]string // email -> role
}

// New is the state of an organization with no commits.
func New(id string) *State {
	return &State{ID: id, Members: map[string]Member{}, Invites: map[string]string{}}
}

// Apply folds one event into the state.
func Apply(s *State, e events.Event) *State {
	switch e := e.(type) {
	case evorg.Created:
		s.Created, s.Name, s.Digest = true, e.Name, e.Digest
		s.Members[e.OwnerID] = Member{Email: e.OwnerEmail, Role: orgcmd.RoleOwner, Joined: e.At}
	case evorg.MemberInvited:
		s.Invites[e.Email] = e.Role
	case evorg.MemberJoined:
		delete(s.Invites, e.Email)
		s.Members[e.UserID] = Member{Email: e.Email, Role: e.Role, Joined: e.At}
	case evorg.MemberRemoved:
		delete(s.Members, e.UserID)
	case evorg.InvitationWithdrawn:
		delete(s.Invites, e.Email)
	}
	return s
}

// Role is the user's role, or "".
func (s *State) Role(userID string) string { return s.Members[userID].Role }

func (s *State) owners() int {
	n := 0
	for _, m := range s.Members {
		if m.Role == orgcmd.RoleOwner {
			n++
		}
	}
	return n
}

func notFound() error {
	return commands.Refuse(commands.CodeNotFound, "no organization of yours has that id", nil)
}

func ownersOnly() error {
	return commands.Refuse(commands.CodePermissionDenied, "only an owner of the organization can do this", nil)
}

// Decide runs one organization command.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	if c, ok := env.Cmd.(*orgcmd.Create); ok {
		if !c.By.Verified {
			return nil, commands.Refuse(commands.CodeEmailUnverified, "verify your email address before you create an organization", nil)
		}
		if s.Created {
			if s.Digest != c.Digest {
				return nil, commands.Refuse(commands.CodeIdempotencyConflict, "this Idempotency-Key was used with another request", nil)
			}
			return nil, nil
		}
		return []events.Event{evorg.Created{OrgID: s.ID, Name: c.Name, OwnerID: c.By.UserID, OwnerEmail: c.By.Email, Digest: c.Digest, At: env.At}}, nil
	}
	if !s.Created {
		return nil, notFound()
	}
	switch c := env.Cmd.(type) {
	case *orgcmd.Invite:
		if _, ok := s.Members[c.By.UserID]; !ok {
			return nil, notFound()
		}
		if s.Role(c.By.UserID) != orgcmd.RoleOwner {
			return nil, ownersOnly()
		}
		email := strings.ToLower(c.Email)
		for _, m := range s.Members {
			if m.Email == email {
				return nil, commands.Refuse(commands.CodeAlreadyMember, "that address is a member already", nil)
			}
		}
		if s.Invites[email] == c.Role {
			return nil, nil
		}
		if len(s.Members)+len(s.Invites) >= orgcmd.MaxMembers {
			return nil, commands.Refuse(commands.CodeMemberLimitReached,
				fmt.Sprintf("an organization has at most %d members and invitations", orgcmd.MaxMembers), map[string]any{"limit": orgcmd.MaxMembers})
		}
		return []events.Event{evorg.MemberInvited{Email: email, Role: c.Role, InvitedBy: c.By.UserID, At: env.At}}, nil
	case *orgcmd.AdmitOwner:
		if s.Members[c.UserID].Role == orgcmd.RoleOwner {
			return nil, nil
		}
		return []events.Event{evorg.MemberJoined{UserID: c.UserID, Email: c.Email, Role: orgcmd.RoleOwner, At: env.At}}, nil
	case *orgcmd.Accept:
		if _, ok := s.Members[c.By.UserID]; ok {
			return nil, nil
		}
		r, ok := s.Invites[c.By.Email]
		if !ok {
			return nil, commands.Refuse(commands.CodeNotFound, "no invitation of this organization names your address", nil)
		}
		if !c.By.Verified {
			return nil, commands.Refuse(commands.CodeEmailUnverified, "verify your email address before you accept an invitation", nil)
		}
		return []events.Event{evorg.MemberJoined{UserID: c.By.UserID, Email: c.By.Email, Role: r, At: env.At}}, nil
	case *orgcmd.Remove:
		by, ok := s.Members[c.By.UserID]
		if !ok {
			return nil, notFound()
		}
		if c.UserID != c.By.UserID && by.Role != orgcmd.RoleOwner {
			return nil, ownersOnly()
		}
		m, ok := s.Members[c.UserID]
		if !ok {
			return nil, commands.Refuse(commands.CodeNotFound, "no member has that user id", nil)
		}
		if m.Role == orgcmd.RoleOwner && s.owners() == 1 {
			return nil, commands.Refuse(commands.CodeLastOwner, "an organization keeps at least one owner: make another owner first", nil)
		}
		return []events.Event{evorg.MemberRemoved{UserID: c.UserID, By: c.By.UserID, At: env.At}}, nil
	case *orgcmd.Withdraw:
		if _, ok := s.Members[c.By.UserID]; !ok {
			return nil, notFound()
		}
		if s.Role(c.By.UserID) != orgcmd.RoleOwner {
			return nil, ownersOnly()
		}
		email := strings.ToLower(c.Email)
		if _, ok := s.Invites[email]; !ok {
			return nil, nil
		}
		return []events.Event{evorg.InvitationWithdrawn{Email: email, At: env.At}}, nil
	}
	return nil, fmt.Errorf("org: no decision for %T", env.Cmd)
}

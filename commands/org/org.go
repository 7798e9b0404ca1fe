// Package org holds the commands of organizations and their members.
package org

import (
	"github.com/svc/engine/commands"
)

// Roles a member holds.
const (
	RoleOwner  = "owner"
	RoleMember = "member"
	RoleReader = "reader"
)

// MaxMembers bounds an organization's members and pending invitations together.
const MaxMembers = 100

// MaxOrganizations bounds the organizations a user belongs to when making
// one: a user in MaxOrganizations makes no more (409
// organization_limit_reached); an invitation may still add them to others.
const MaxOrganizations = 10

// MaxVenues bounds the venues of one organization (409 venue_limit_reached).
const MaxVenues = 20

func role(r string) error {
	if r != RoleOwner && r != RoleMember && r != RoleReader {
		return commands.BadField("role", nil, "role is owner, member or reader")
	}
	return nil
}

// Actor is the signed-in user a command acts for, with what their session
// and their user record say of them.
type Actor struct {
	UserID   string
	Email    string // lower-cased
	Verified bool
}

// Create makes an organization whose first owner is the actor. Digest is the
// request's digest, so a repeated Idempotency-Key with another body is a conflict.
type Create struct {
	Name   string
	By     Actor
	Digest string
}

// Validate checks the shape.
func (c *Create) Validate() error { return commands.Identifier("name", c.Name, commands.MaxName) }

// Invite invites an email address with a role; only an owner invites.
type Invite struct {
	Email string
	Role  string
	By    Actor
}

// Validate checks the shape.
func (c *Invite) Validate() error {
	if err := commands.Email("email", c.Email); err != nil {
		return err
	}
	return role(c.Role)
}

// AdmitOwner makes a user an owner of the organization on the engine's own
// authority: a sandbox admits the owners a production statement names to the
// counterpart of their production organization.
type AdmitOwner struct {
	UserID string
	Email  string
}

// Validate checks the shape.
func (c *AdmitOwner) Validate() error {
	if err := commands.Identifier("userId", c.UserID, 64); err != nil {
		return err
	}
	return commands.Email("email", c.Email)
}

// Accept joins the actor to the organization whose invitation names their verified email.
type Accept struct{ By Actor }

// Validate checks the shape.
func (c *Accept) Validate() error { return nil }

// Remove removes a member (an owner removes anyone; a member removes
// themselves); at least one owner always remains.
type Remove struct {
	UserID string
	By     Actor
}

// Validate checks the shape.
func (c *Remove) Validate() error { return commands.Identifier("userId", c.UserID, 64) }

// Withdraw withdraws a pending invitation (an owner).
type Withdraw struct {
	Email string
	By    Actor
}

// Validate checks the shape.
func (c *Withdraw) Validate() error { return commands.Email("email", c.Email) }

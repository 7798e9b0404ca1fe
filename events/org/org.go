// Package org holds the events of an organization: a team of users with
// roles (owner, member, reader), shared by the back office and the Connect
// dashboard.
package org

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file org.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the organization with the given id.
func Subject(orgID string) string { return events.Subject(events.KindOrg, orgID) }

// Created records a new organization and its first owner.
type Created struct {
	OrgID      string    `json:"orgId"`
	Name       string    `json:"name"`
	OwnerID    string    `json:"ownerId"`
	OwnerEmail string    `json:"ownerEmail"`
	Digest     string    `json:"digest,omitempty"` // of the creating request, for its Idempotency-Key
	At         time.Time `json:"at"`
}

// MemberInvited records an invitation of an email address with a role.
type MemberInvited struct {
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	InvitedBy string    `json:"invitedBy"`
	At        time.Time `json:"at"`
}

// MemberJoined records that a verified user accepted an invitation.
type MemberJoined struct {
	UserID string    `json:"userId"`
	Email  string    `json:"email"`
	Role   string    `json:"role"`
	At     time.Time `json:"at"`
}

// MemberRemoved records that a user left or was removed.
type MemberRemoved struct {
	UserID string    `json:"userId"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// InvitationWithdrawn records that a pending invitation was withdrawn.
type InvitationWithdrawn struct {
	Email string    `json:"email"`
	At    time.Time `json:"at"`
}

func (Created) Type() string             { return "org.created.v1" }
func (MemberInvited) Type() string       { return "org.member_invited.v1" }
func (MemberJoined) Type() string        { return "org.member_joined.v1" }
func (MemberRemoved) Type() string       { return "org.member_removed.v1" }
func (InvitationWithdrawn) Type() string { return "org.invitation_withdrawn.v1" }

// Registry lists the organization event types.
func Registry() events.Registry {
	return events.Registry{
		Created{}.Type():             events.Of[Created](),
		MemberInvited{}.Type():       events.Of[MemberInvited](),
		MemberJoined{}.Type():        events.Of[MemberJoined](),
		MemberRemoved{}.Type():       events.Of[MemberRemoved](),
		InvitationWithdrawn{}.Type(): events.Of[InvitationWithdrawn](),
	}
}

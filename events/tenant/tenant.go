// Package tenant holds the events of a tenant (a user or firm and its credentials).
package tenant

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file tenant.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the tenant with the given id.
func Subject(tenantID string) string { return events.Subject(events.KindTenant, tenantID) }

// Created records a new tenant.
type Created struct {
	TenantID string    `json:"tenantId"`
	Name     string    `json:"name"`
	Kind     string    `json:"kind"` // user or firm
	Email    string    `json:"email,omitempty"`
	At       time.Time `json:"at"`
}

// KeyIssued records an API key by its SHA-256 digest; the key itself is never stored.
type KeyIssued struct {
	KeyID  string    `json:"keyId"`
	Digest string    `json:"digest"` // hex SHA-256 of the full key
	Kind   string    `json:"kind"`   // trading or partner
	Prefix string    `json:"prefix"` // the first characters, for display
	At     time.Time `json:"at"`
}

// KeyRevoked records that a key no longer authenticates.
type KeyRevoked struct {
	KeyID string    `json:"keyId"`
	At    time.Time `json:"at"`
}

func (Created) Type() string    { return "tenant.created.v1" }
func (KeyIssued) Type() string  { return "tenant.key_issued.v1" }
func (KeyRevoked) Type() string { return "tenant.key_revoked.v1" }

// Registry lists the tenant event types.
func Registry() events.Registry {
	return events.Registry{
		Created{}.Type():    events.Of[Created](),
		KeyIssued{}.Type():  events.Of[KeyIssued](),
		KeyRevoked{}.Type(): events.Of[KeyRevoked](),
	}
}

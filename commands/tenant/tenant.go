// Package tenant holds the commands of tenants, their keys and their accounts.
package tenant

import (
	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// CreateTenant creates a tenant.
type CreateTenant struct {
	Name  string
	Kind  string // user or firm
	Email string
}

// Validate checks the shape.
func (c *CreateTenant) Validate() error {
	if c.Name == "" || (c.Kind != "user" && c.Kind != "firm") {
		return commands.Invalid("tenant needs a name and a kind of user or firm")
	}
	return nil
}

// IssueKey records a new API key by its digest.
type IssueKey struct {
	KeyID  string
	Digest string
	Kind   string // trading or partner
	Prefix string
}

// Validate checks the shape.
func (c *IssueKey) Validate() error {
	if len(c.Digest) != 64 || c.KeyID == "" || (c.Kind != "trading" && c.Kind != "partner") {
		return commands.Invalid("key needs an id, a kind and a sha-256 digest")
	}
	return nil
}

// RevokeKey stops a key from authenticating.
type RevokeKey struct{ KeyID string }

// Validate checks the shape.
func (c *RevokeKey) Validate() error {
	if c.KeyID == "" {
		return commands.Invalid("keyId is required")
	}
	return nil
}

// OpenAccount opens a paper-book account for a tenant.
type OpenAccount struct {
	TenantID        string
	Broker          string
	AccountNumber   string
	Label           string
	Currency        string
	StartingBalance events.Decimal
	Kind            string // demo or evaluation
	Email           string
	ReferenceID     string
}

// Validate checks the shape.
func (c *OpenAccount) Validate() error {
	if c.TenantID == "" || c.AccountNumber == "" || c.Currency == "" || c.StartingBalance.Sign() < 0 {
		return commands.Invalid("account needs a tenant, a number, a currency and a balance of zero or more")
	}
	return nil
}

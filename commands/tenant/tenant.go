// Package tenant holds the commands of tenants, their keys and their accounts.
package tenant

import (
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// CreateTenant creates a tenant.
type CreateTenant struct {
	Name  string
	Kind  string // user or firm
	Email string
}

// Validate checks the shape: a name of 1 to 128 printable characters, a kind,
// and a plain email when one is given.
func (c *CreateTenant) Validate() error {
	if err := commands.Identifier("name", c.Name, commands.MaxName); err != nil {
		return err
	}
	if c.Kind != "user" && c.Kind != "firm" {
		return commands.InvalidField("kind", nil, "tenant needs a kind of user or firm")
	}
	if c.Email != "" {
		return commands.Email("email", c.Email)
	}
	return nil
}

// IssueKey records a new API key by its digest.
type IssueKey struct {
	KeyID  string
	Digest string
	Kind   string // trading or partner
	Prefix string
	Name   string
	// ExpiresAt, when set, is when the key stops authenticating.
	ExpiresAt time.Time
	// ByUser: the user issues it for themselves, which needs a verified
	// email and a free place among MaxKeys live keys.
	ByUser bool
}

// Validate checks the shape.
func (c *IssueKey) Validate() error {
	if len(c.Digest) != 64 || c.KeyID == "" || (c.Kind != "trading" && c.Kind != "partner") {
		return commands.Invalid("key needs an id, a kind and a sha-256 digest")
	}
	return commands.Text("name", c.Name, MaxKeyName)
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
	VenueID         string // issued by a venue into GroupID, at the group stage's StageVersion
	GroupID         string
	StageVersion    string
	AppID, Trader   string // a Connect app's white-label paper, for the app's trader
	// The group's risk policy in force at issue ("": none), bound from the first commit.
	PolicyID, PolicyVersion         string
	DailyLossLimit, WeeklyLossLimit *events.Decimal
}

// MaxAccountNumber bounds an account number.
const MaxAccountNumber = 64

// Validate checks the shape: a tenant, a number and a currency; a starting
// balance of zero to commands.MaxAmount (422, params.field startingBalance);
// a label of at most 128 printable characters, a plain email and a
// referenceId (commands.Identifier) when given.
func (c *OpenAccount) Validate() error {
	if c.TenantID == "" || c.Currency == "" {
		return commands.Invalid("account needs a tenant and a currency")
	}
	if err := commands.Identifier("accountNumber", c.AccountNumber, MaxAccountNumber); err != nil {
		return err
	}
	if err := commands.Text("label", c.Label, commands.MaxLabel); err != nil {
		return err
	}
	if c.Email != "" {
		if err := commands.Email("email", c.Email); err != nil {
			return err
		}
	}
	if c.ReferenceID != "" {
		if err := commands.Identifier("referenceId", c.ReferenceID, commands.MaxReference); err != nil {
			return err
		}
	}
	if c.StartingBalance.Sign() < 0 {
		return commands.InvalidField("startingBalance", nil, "startingBalance must be zero or more")
	}
	return commands.Amount("startingBalance", c.StartingBalance, commands.MaxAmount)
}

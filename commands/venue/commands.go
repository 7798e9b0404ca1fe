// Package venue holds the commands of the venue platform: venues, their keys
// and provider versions, and the rules of a provider's manifest.
package venue

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/svc/engine/commands"
)

// Venue key scopes. config:manage changes the venue's configuration
// (instruments, conditions, groups, routes, stages, rules), which
// account:read and config:manage read; provider:manage registers and reads provider versions;
// account:read reads accounts, receipts and usage; account:manage halts and
// resumes accounts and moves balances; webhook:manage registers and removes
// webhooks; trader:trade acts on a trader's accounts where a trading route
// takes a venue key.
const (
	ScopeProviderManage = "provider:manage"
	ScopeAccountRead    = "account:read"
	ScopeAccountManage  = "account:manage"
	ScopeWebhookManage  = "webhook:manage"
	ScopeTraderTrade    = "trader:trade"
	ScopeConfigManage   = "config:manage"
)

// Scopes are every venue key scope.
var Scopes = []string{ScopeProviderManage, ScopeAccountRead, ScopeAccountManage, ScopeWebhookManage, ScopeTraderTrade, ScopeConfigManage}

// Bounds of venue inputs.
const (
	MaxName    = 64
	MaxKeys    = 25 // live keys per venue
	MaxKeyLife = 2 * 366 * 24 * time.Hour
)

// Owner is who acts in the back office: a user, whether their email is
// verified and whether they are an owner of the venue's organization now,
// as the gateway read it; the aggregate decides from these facts.
type Owner struct {
	UserID   string
	Verified bool
	Owner    bool
}

// CreateVenue makes a venue of an organization whose verified owner asks.
type CreateVenue struct {
	OrgID        string `json:"orgId"`
	Name         string `json:"name"`
	FirmTenantID string `json:"-"`
	By           Owner  `json:"-"`
}

// Validate checks the shape.
func (c *CreateVenue) Validate() error {
	if err := commands.Key("orgId", c.OrgID, 64); err != nil {
		return err
	}
	return commands.Identifier("name", c.Name, MaxName)
}

// IssueKey issues a venue key; the gateway made the secret and sends its digest only.
type IssueKey struct {
	KeyID     string    `json:"-"`
	Digest    string    `json:"-"`
	Prefix    string    `json:"-"`
	Env       string    `json:"-"`
	Name      string    `json:"name"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"expiresAt"`
	Now       time.Time `json:"-"`
	By        Owner     `json:"-"`
}

// Validate checks the shape: a name, explicit known scopes without
// duplicates, and an expiry in the future within two years.
func (c *IssueKey) Validate() error {
	if err := commands.Identifier("name", c.Name, MaxName); err != nil {
		return err
	}
	if len(c.Scopes) == 0 {
		return commands.BadField("scopes", map[string]any{"allowed": Scopes}, "scopes must name at least one of %v", Scopes)
	}
	seen := map[string]bool{}
	for _, s := range c.Scopes {
		if !slices.Contains(Scopes, s) || seen[s] {
			return commands.BadField("scopes", map[string]any{"allowed": Scopes}, "scope %q is unknown or named twice; scopes are %v", s, Scopes)
		}
		seen[s] = true
	}
	switch {
	case c.ExpiresAt.IsZero():
		return commands.BadField("expiresAt", nil, "expiresAt is required: a venue key always expires")
	case !c.ExpiresAt.After(c.Now):
		return commands.BadField("expiresAt", nil, "expiresAt must be in the future")
	case c.ExpiresAt.Sub(c.Now) > MaxKeyLife:
		return commands.BadField("expiresAt", nil, "expiresAt is at most two years away")
	}
	return nil
}

// RevokeKey revokes a venue key.
type RevokeKey struct {
	KeyID string `json:"-"`
	By    Owner  `json:"-"`
}

// Validate checks the shape.
func (c *RevokeKey) Validate() error { return commands.Key("keyId", c.KeyID, 64) }

// RegisterProvider saves a candidate provider version from a strict manifest.
type RegisterProvider struct {
	Name     string          `json:"name"`
	Manifest json.RawMessage `json:"manifest"`
	// Set by Validate: the manifest in canonical form and its hashes.
	Canonical    []byte `json:"-"`
	ManifestHash string `json:"-"`
	CreationHash string `json:"-"`
}

// Validate checks the name and the manifest (ParseManifest, then its rules)
// and computes the manifest's canonical form and both hashes.
func (c *RegisterProvider) Validate() error {
	if err := commands.Identifier("name", c.Name, MaxName); err != nil {
		return err
	}
	if len(c.Manifest) == 0 {
		return commands.BadField("manifest", nil, "manifest is required")
	}
	m, err := ParseManifest(c.Manifest)
	if err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	c.Canonical, c.ManifestHash, c.CreationHash = m.Canonical(), ManifestHash(m), CreationHash(c.Name, m)
	return nil
}

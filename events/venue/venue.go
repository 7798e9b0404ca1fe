// Package venue holds the events of a venue's aggregate: the venue, its
// keys and its provider versions. Every keyed write also records an
// idempotency KeyUsed (events/idem) in the same commit.
package venue

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file venue.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the venue venueID.
func Subject(venueID string) string { return events.Subject(events.KindVenue, venueID) }

// Created records a venue of an organization. FirmTenantID is the tenant
// that holds its accounts, balance operations and webhooks (the legacy firm
// routes' tenant), so the venue door and the firm door run the same commands.
type Created struct {
	VenueID      string    `json:"venueId"`
	OrgID        string    `json:"orgId"`
	FirmTenantID string    `json:"firmTenantId"`
	Name         string    `json:"name"`
	CreatedBy    string    `json:"createdBy"` // the owner's user id
	At           time.Time `json:"at"`
}

// KeyIssued records a venue key: only its digest, never the key.
type KeyIssued struct {
	KeyID     string    `json:"keyId"`
	Digest    string    `json:"digest"`
	Prefix    string    `json:"prefix"`
	Name      string    `json:"name"`
	Env       string    `json:"environment"`
	Scopes    []string  `json:"scopes"`
	CreatedBy string    `json:"createdBy"`
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// KeyRevoked records a venue key's revocation.
type KeyRevoked struct {
	KeyID string    `json:"keyId"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
}

// Provider is a registered provider version.
type Provider struct {
	ID           string    `json:"id"`
	VenueID      string    `json:"venueId"`
	Name         string    `json:"name"`
	Manifest     []byte    `json:"manifest"` // the validated manifest, canonical JSON
	ManifestHash string    `json:"manifestHash"`
	State        string    `json:"state"`
	CreationKey  string    `json:"creationKey"`
	CreationHash string    `json:"creationHash"`
	CreatedAt    time.Time `json:"createdAt"`
}

// ProviderRegistered records a candidate provider version.
type ProviderRegistered struct {
	Provider Provider `json:"provider"`
}

func (Created) Type() string            { return "venue.created.v1" }
func (KeyIssued) Type() string          { return "venue.key_issued.v1" }
func (KeyRevoked) Type() string         { return "venue.key_revoked.v1" }
func (ProviderRegistered) Type() string { return "venue.provider_registered.v1" }

// Registry lists the venue event types. The idempotency record's
// (events/idem) is registered once, by the engine, for every aggregate.
func Registry() events.Registry {
	return events.Merge(events.Registry{
		Created{}.Type():            events.Of[Created](),
		KeyIssued{}.Type():          events.Of[KeyIssued](),
		KeyRevoked{}.Type():         events.Of[KeyRevoked](),
		ProviderRegistered{}.Type(): events.Of[ProviderRegistered](),
		ConfigSet{}.Type():          events.Of[ConfigSet](),
		PolicyStated{}.Type():       events.Of[PolicyStated](),
		PolicyPublished{}.Type():    events.Of[PolicyPublished](),
	}, liveRegistry())
}

// ConfigSet records one configuration item of the venue created, changed or
// retired, whole: its kind (instruments, conditions, groups, routes, stages,
// rules), id, version (1 on creation, +1 on each change) and body as
// validated canonical JSON.
type ConfigSet struct {
	Kind    string    `json:"kind"`
	ID      string    `json:"id"`
	Version int       `json:"version"`
	Retired bool      `json:"retired,omitempty"`
	Body    []byte    `json:"body"`
	At      time.Time `json:"at"`
}

func (ConfigSet) Type() string { return "venue.config_set.v1" }

// PolicyStated records a risk policy's version as the venue stated it: its
// canonical content, never changed afterwards.
type PolicyStated struct {
	PolicyID string    `json:"policyId"`
	Version  string    `json:"version"`
	Body     []byte    `json:"body"`
	At       time.Time `json:"at"`
}

// PolicyPublished records the version of a risk policy in force from now.
type PolicyPublished struct {
	PolicyID string    `json:"policyId"`
	Version  string    `json:"version"`
	At       time.Time `json:"at"`
}

func (PolicyStated) Type() string    { return "venue.policy_stated.v1" }
func (PolicyPublished) Type() string { return "venue.policy_published.v1" }

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
	KeyID  string `json:"keyId"`
	Digest string `json:"digest"` // hex SHA-256 of the full key
	Kind   string `json:"kind"`   // trading or partner
	Prefix string `json:"prefix"` // the first characters, for display
	Name   string `json:"name,omitempty"`
	// ExpiresAt is when the key stops authenticating; zero: never.
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// KeyRevoked records that a key no longer authenticates.
type KeyRevoked struct {
	KeyID string    `json:"keyId"`
	At    time.Time `json:"at"`
}

func (Created) Type() string    { return "tenant.created.v1" }
func (KeyIssued) Type() string  { return "tenant.key_issued.v1" }
func (KeyRevoked) Type() string { return "tenant.key_revoked.v1" }

// PasswordSet records a user's password as an argon2id digest in the PHC
// string form; the password itself is never stored. ResetDigest names the
// reset token it used, when a reset set it.
type PasswordSet struct {
	Hash        string    `json:"hash"`
	ResetDigest string    `json:"resetDigest,omitempty"`
	At          time.Time `json:"at"`
}

// VerificationIssued records a single-use email verification token by its
// SHA-256 digest; the token itself is only in the mail.
type VerificationIssued struct {
	Digest    string    `json:"digest"`
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// EmailVerified records that the user proved the address; Digest names the
// token used ("" when an operator marked it).
type EmailVerified struct {
	Digest string    `json:"digest,omitempty"`
	At     time.Time `json:"at"`
}

// ResetIssued records a single-use password reset token by its digest.
type ResetIssued struct {
	Digest    string    `json:"digest"`
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// SessionStarted records a signed-in session; it ends at ExpiresAt at the latest.
type SessionStarted struct {
	SessionID string    `json:"sessionId"`
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// SessionEnded records that a session no longer admits anyone (logout, a
// password reset).
type SessionEnded struct {
	SessionID string    `json:"sessionId"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

// OperatorGranted records a user's operator authority on a venue.
type OperatorGranted struct {
	VenueID string    `json:"venueId"`
	Scopes  []string  `json:"scopes"`
	At      time.Time `json:"at"`
}

// DemoReserved records a demo paper account the user opens, by its id,
// before the account itself is opened (the user's limit is decided here).
type DemoReserved struct {
	AccountID string    `json:"accountId"`
	At        time.Time `json:"at"`
}

func (DemoReserved) Type() string       { return "tenant.demo_reserved.v1" }
func (PasswordSet) Type() string        { return "tenant.password_set.v1" }
func (VerificationIssued) Type() string { return "tenant.verification_issued.v1" }
func (EmailVerified) Type() string      { return "tenant.email_verified.v1" }
func (ResetIssued) Type() string        { return "tenant.reset_issued.v1" }
func (SessionStarted) Type() string     { return "tenant.session_started.v1" }
func (SessionEnded) Type() string       { return "tenant.session_ended.v1" }
func (OperatorGranted) Type() string    { return "tenant.operator_granted.v1" }

// Registry lists the tenant event types.
func Registry() events.Registry {
	return events.Registry{
		Created{}.Type():    events.Of[Created](),
		KeyIssued{}.Type():  events.Of[KeyIssued](),
		KeyRevoked{}.Type(): events.Of[KeyRevoked](),

		PasswordSet{}.Type():        events.Of[PasswordSet](),
		VerificationIssued{}.Type(): events.Of[VerificationIssued](),
		EmailVerified{}.Type():      events.Of[EmailVerified](),
		ResetIssued{}.Type():        events.Of[ResetIssued](),
		SessionStarted{}.Type():     events.Of[SessionStarted](),
		SessionEnded{}.Type():       events.Of[SessionEnded](),
		OperatorGranted{}.Type():    events.Of[OperatorGranted](),
		DemoReserved{}.Type():       events.Of[DemoReserved](),
		LiveTradingSet{}.Type():     events.Of[LiveTradingSet](),
	}
}

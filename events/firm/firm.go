// Package firm holds the events of a firm's back-office aggregate (webhook
// endpoints and Connect pre-registrations) and of its webhook delivery ledger.
package firm

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file firm.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the firm with the given tenant id.
func Subject(tenantID string) string { return events.Subject(events.KindFirm, tenantID) }

// DeliverySubject is the log subject of one webhook endpoint's delivery ledger.
func DeliverySubject(key string) string { return events.Subject(events.KindWebhook, key) }

// Webhook event types a firm can receive.
const (
	TypeRegistrationLinked  = "registration.linked"
	TypeRegistrationRevoked = "registration.revoked"
	TypeAccountReset        = "account.reset"
	TypeBalanceRecorded     = "balance.recorded"
	TypeRiskLocked          = "risk.locked"
	TypeRiskUnlocked        = "risk.unlocked"
	TypePing                = "ping"
	// The enrollment lifecycle of a program authored for the firm's venue (issue 18).
	TypeEnrollmentRegistered = "enrollment.registered"
	TypeEnrollmentInProgress = "enrollment.in_progress"
	TypeEnrollmentPassed     = "enrollment.passed"
	TypeEnrollmentFailed     = "enrollment.failed"
	TypeEnrollmentCompleted  = "enrollment.completed"
	// A hold of the firm's venue on live trading for its traders, and its release.
	TypeLiveTradingHeld     = "live_trading.held"
	TypeLiveTradingReleased = "live_trading.released"
)

// WebhookTypes lists the webhook event types, in the spec's order.
var WebhookTypes = []string{TypeRegistrationLinked, TypeRegistrationRevoked, TypeAccountReset,
	TypeBalanceRecorded, TypeRiskLocked, TypeRiskUnlocked,
	TypeEnrollmentRegistered, TypeEnrollmentInProgress, TypeEnrollmentPassed, TypeEnrollmentFailed, TypeEnrollmentCompleted,
	TypeLiveTradingHeld, TypeLiveTradingReleased}

// WebhookRegistered records an endpoint. Its signing secret is not recorded:
// it is derived from the engine's secret key and the endpoint id.
type WebhookRegistered struct {
	WebhookID  string    `json:"webhookId"`
	URL        string    `json:"url"`
	EventTypes []string  `json:"eventTypes"`
	At         time.Time `json:"at"`
}

// WebhookRemoved records that an endpoint receives nothing more.
type WebhookRemoved struct {
	WebhookID string    `json:"webhookId"`
	At        time.Time `json:"at"`
}

// RegistrationCreated records a Connect pre-registration.
type RegistrationCreated struct {
	RegistrationID string    `json:"registrationId"`
	Email          string    `json:"email"`
	AccountNumber  string    `json:"accountNumber,omitempty"`
	LoginName      string    `json:"loginName,omitempty"`
	Provider       string    `json:"provider,omitempty"`
	ExpiresAt      time.Time `json:"expiresAt"`
	At             time.Time `json:"at"`
}

// RegistrationRefreshed records a registration sent again: its expiry moves.
type RegistrationRefreshed struct {
	RegistrationID string    `json:"registrationId"`
	ExpiresAt      time.Time `json:"expiresAt"`
	At             time.Time `json:"at"`
}

// RegistrationRevoked records a registration cancelled by the firm.
type RegistrationRevoked struct {
	RegistrationID string    `json:"registrationId"`
	At             time.Time `json:"at"`
}

// RegistrationLinked records the trader whose email matched linking it.
type RegistrationLinked struct {
	RegistrationID string    `json:"registrationId"`
	TraderID       string    `json:"traderId"`
	At             time.Time `json:"at"`
}

// DeliveryStarted claims attempt Attempt of a delivery before it is sent:
// the endpoint's ledger takes each attempt number once, so two nodes that
// both believe they deliver (a leader paused past its lease, then resumed)
// never both send it, and an attempt started whose outcome never came is
// known as made.
type DeliveryStarted struct {
	DeliveryID string    `json:"deliveryId"`
	TenantID   string    `json:"tenantId"`
	WebhookID  string    `json:"webhookId"`
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	// Claim names the claimant's own try at the attempt (one value for
	// every try of one claim): a try whose commit was stored but whose
	// answer was lost, tried again, finds its own claim and goes on,
	// instead of taking the attempt for another node's. Empty in commits
	// made before it existed.
	Claim string `json:"claim,omitempty"`
}

// DeliveryAttempted records one attempt to deliver a webhook event to an
// endpoint: its outcome and, when it failed and attempts remain, when the next
// one is due.
type DeliveryAttempted struct {
	DeliveryID   string     `json:"deliveryId"` // the event's id; one per event and endpoint
	TenantID     string     `json:"tenantId"`
	WebhookID    string     `json:"webhookId"`
	EventType    string     `json:"eventType"`
	SourceSeq    uint64     `json:"sourceSeq,omitempty"` // the commit the event came from; 0 for a ping
	Attempt      int        `json:"attempt"`
	Status       string     `json:"status"` // succeeded, failed
	ResponseCode int        `json:"responseCode,omitempty"`
	Error        string     `json:"error,omitempty"`
	NextAt       *time.Time `json:"nextAt,omitempty"` // nil: no further attempt
	At           time.Time  `json:"at"`
}

func (WebhookRegistered) Type() string     { return "firm.webhook_registered.v1" }
func (WebhookRemoved) Type() string        { return "firm.webhook_removed.v1" }
func (RegistrationCreated) Type() string   { return "firm.registration_created.v1" }
func (RegistrationRefreshed) Type() string { return "firm.registration_refreshed.v1" }
func (RegistrationRevoked) Type() string   { return "firm.registration_revoked.v1" }
func (RegistrationLinked) Type() string    { return "firm.registration_linked.v1" }
func (DeliveryAttempted) Type() string     { return "webhook.delivery_attempted.v1" }
func (DeliveryStarted) Type() string       { return "webhook.delivery_started.v1" }

// VenueID is the venue id (a UUID) under which operators reach the firm's
// records: derived from the tenant id, so it needs no event of its own.
func VenueID(tenantID string) string {
	sum := sha256.Sum256([]byte("venue:" + tenantID))
	sum[6] = (sum[6] & 0x0f) | 0x50 // version 5 style
	sum[8] = (sum[8] & 0x3f) | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

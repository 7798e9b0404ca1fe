package projections

import (
	"encoding/json"
	"time"

	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

// Collections of the core read models.
const (
	CollTenant        = "tenant"
	CollKey           = "key"            // by digest
	CollKeyID         = "key_id"         // key id -> digest
	CollAccount       = "account"        // by account id
	CollTenantAccount = "tenant_account" // tenantID/accountID -> account id
	CollAccountNumber = "account_number" // broker/accountNumber -> account id
	CollEmailAccount  = "email_account"  // EmailKey(email)/accountID -> account id: accounts issued to an address
	CollOrder         = "order"          // accountID/brokerOrderID
	CollOrderSeq      = "order_seq"      // accountID/seq/brokerOrderID -> brokerOrderID
	CollWorking       = "working"        // accountID/seq/brokerOrderID -> brokerOrderID, while it rests
	CollFill          = "fill"           // accountID/seq/fillID
	CollPosition      = "position"       // accountID/instrument
	CollPnLDay        = "pnl_day"        // accountID/YYYY-MM-DD
	CollBalanceOp     = "balance_entry"  // accountID/seq
	CollUser          = "user"           // by user (tenant) id: the identity of a tenant of kind user
	CollSession       = "session"        // by session id
	CollTenantKey     = "tenant_key"     // tenantID/keyID -> digest
	CollOperator      = "operator"       // venueID/userID -> Operator
	CollOrg           = "org"            // by organization id
	CollOrgMember     = "org_member"     // orgID/userID -> OrgMember
	CollUserOrg       = "user_org"       // userID/orgID -> role
	CollOrgInvite     = "org_invite"     // orgID/email -> OrgInvite
	CollPlan          = "exit_plan"      // ownerID/planID -> Plan
	CollBracket       = "bracket"        // accountID/bracketID -> evacct.Bracket, while active
	CollMark          = "mark"           // MarkKey(instrument, node) -> mark.Stack, the newest recorded
	CollVenue         = "venue"          // by venue id
	CollOrgVenue      = "org_venue"      // orgID/venueID -> venue id
	CollVenueKey      = "venue_key"      // venueID/keyID -> digest
	CollProvider      = "provider"       // venueID/providerID -> evvenue.Provider
	CollVenueConfig   = "venue_config"   // venueID/kind/id -> VenueConfig
	CollPolicyOwner   = "policy_owner"   // policyID -> the venue id that stated it first
)

// Plan is a saved exit plan as read.
type Plan struct {
	ID        string      `json:"id"`
	Revision  string      `json:"revision"`
	Requires  []string    `json:"requires"`
	Spec      evplan.Spec `json:"spec"`
	CreatedAt time.Time   `json:"createdAt"`
	UpdatedAt time.Time   `json:"updatedAt"`
}

// Venue is a venue as read.
type Venue struct {
	VenueID      string    `json:"venueId"`
	OrgID        string    `json:"orgId"`
	FirmTenantID string    `json:"firmTenantId"`
	Name         string    `json:"name"`
	CreatedBy    string    `json:"createdBy"`
	CreatedAt    time.Time `json:"createdAt"`
}

// VenueConfig is one item of a venue's configuration as read.
type VenueConfig struct {
	Kind      string          `json:"kind"`
	ID        string          `json:"id"`
	Version   int             `json:"version"`
	Retired   bool            `json:"retired"`
	Spec      json.RawMessage `json:"spec"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
}

// Org is an organization as read.
type Org struct {
	OrgID     string    `json:"orgId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// OrgMember is a member of an organization.
type OrgMember struct {
	UserID   string    `json:"userId"`
	Email    string    `json:"email"`
	Role     string    `json:"role"`
	JoinedAt time.Time `json:"joinedAt"`
}

// OrgInvite is a pending invitation.
type OrgInvite struct {
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	InvitedAt time.Time `json:"invitedAt"`
}

// User is a signed-up user as read. PasswordHash is the argon2id digest
// (PHC string), never the password.
type User struct {
	UserID        string    `json:"userId"`
	Email         string    `json:"email"`
	EmailVerified bool      `json:"emailVerified"`
	PasswordHash  string    `json:"passwordHash"`
	CreatedAt     time.Time `json:"createdAt"`
}

// Session is a signed-in session as read: it admits its user until it
// ends or expires.
type Session struct {
	SessionID string    `json:"sessionId"`
	UserID    string    `json:"userId"`
	StartedAt time.Time `json:"startedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	Ended     bool      `json:"ended"`
}

// Operator is a user's operator authority on a venue.
type Operator struct {
	VenueID string   `json:"venueId"`
	UserID  string   `json:"userId"`
	Scopes  []string `json:"scopes"`
}

// Tenant is a tenant as read.
type Tenant struct {
	TenantID  string    `json:"tenantId"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Email     string    `json:"email,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Key is an API key's record; the key itself is never stored, only its digest.
type Key struct {
	KeyID     string    `json:"keyId"`
	TenantID  string    `json:"tenantId"`
	Digest    string    `json:"digest"`
	Kind      string    `json:"kind"`
	Prefix    string    `json:"prefix"`
	Revoked   bool      `json:"revoked"`
	CreatedAt time.Time `json:"createdAt"`
	Name      string    `json:"name,omitempty"`
	// ExpiresAt is when the key stops authenticating; zero: never.
	ExpiresAt time.Time `json:"expiresAt"`
	// A venue key's venue, scopes, environment and the owner who issued it.
	VenueID   string   `json:"venueId,omitempty"`
	Scopes    []string `json:"scopes,omitempty"`
	Env       string   `json:"environment,omitempty"`
	CreatedBy string   `json:"createdBy,omitempty"`
	// A Connect app key's app (its environment and creator above).
	AppID string `json:"appId,omitempty"`
}

// Live reports whether the key authenticates at at.
func (k Key) Live(at time.Time) bool {
	return !k.Revoked && (k.ExpiresAt.IsZero() || at.Before(k.ExpiresAt))
}

// Account is an account as read.
type Account struct {
	AccountID       string         `json:"accountId"`
	TenantID        string         `json:"tenantId"`
	Broker          string         `json:"broker"`
	AccountNumber   string         `json:"accountNumber"`
	Label           string         `json:"label"`
	Currency        string         `json:"currency"`
	Kind            string         `json:"kind"`
	Email           string         `json:"email,omitempty"`
	ReferenceID     string         `json:"referenceId,omitempty"`
	StartingBalance events.Decimal `json:"startingBalance"`
	Balance         events.Decimal `json:"balance"`
	Realized        events.Decimal `json:"realized"`
	Commissions     events.Decimal `json:"commissions"` // paid on fills, in Balance already
	Brackets        int            `json:"brackets"`    // active brackets: the frame reads them only when there are some
	VenueID         string         `json:"venueId,omitempty"`
	GroupID         string         `json:"groupId,omitempty"`
	AppID           string         `json:"appId,omitempty"`     // a Connect app's white-label paper
	Trader          string         `json:"trader,omitempty"`    // the app's own id of its trader
	LoginLost       bool           `json:"loginLost,omitempty"` // the provider no longer takes the login's tokens: sign in again
	Revision        uint64         `json:"revision"`
	CreatedAt       time.Time      `json:"createdAt"`
	UpdatedAt       time.Time      `json:"updatedAt"`
}

// Order is an order as read, in any state.
type Order struct {
	AccountID      string          `json:"-"`
	BrokerOrderID  string          `json:"brokerOrderId"`
	ClientOrderID  string          `json:"clientOrderId"`
	Instrument     string          `json:"instrument"`
	Side           string          `json:"side"`
	OrderType      string          `json:"orderType"`
	Quantity       events.Decimal  `json:"quantity"`
	LimitPrice     *events.Decimal `json:"limitPrice"`
	StopPrice      *events.Decimal `json:"stopPrice"`
	TimeInForce    string          `json:"timeInForce"`
	ReduceOnly     bool            `json:"reduceOnly"`
	State          string          `json:"state"` // working, partially_filled, filled, canceled
	FilledQuantity events.Decimal  `json:"filledQuantity"`
	AvgFillPrice   *events.Decimal `json:"avgFillPrice"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	Seq            uint64          `json:"-"`
	BracketID      string          `json:"-"`                       // the bracket it enters or exits: a stop leg's level is derived from it (Stops)
	LeaderOrderID  string          `json:"leaderOrderId,omitempty"` // a copier follower's mirror: the leader's order it mirrors
}

// Working reports whether the order still rests.
func (o Order) Working() bool { return o.State == "working" || o.State == "partially_filled" }

// Fill is one execution.
type Fill struct {
	FillID        string         `json:"fillId"`
	BrokerOrderID string         `json:"brokerOrderId"`
	Instrument    string         `json:"instrument"`
	Side          string         `json:"side"`
	Quantity      events.Decimal `json:"quantity"`
	Price         events.Decimal `json:"price"`
	RealizedPnl   events.Decimal `json:"realizedPnl"`
	Commission    events.Decimal `json:"commission"` // charged by the venue's condition (0 elsewhere)
	Time          time.Time      `json:"time"`
}

// Position is a net position as read.
type Position struct {
	Instrument string         `json:"instrument"`
	Quantity   events.Decimal `json:"quantity"`
	AvgPrice   events.Decimal `json:"avgPrice"`
	Multiplier events.Decimal `json:"multiplier"`
	UpdatedAt  time.Time      `json:"updatedAt"`
}

// PnLDay is one trading day of an account's realized PnL.
type PnLDay struct {
	Date        string         `json:"date"`
	RealizedPnl events.Decimal `json:"realizedPnl"`
	Balance     events.Decimal `json:"balance"`
	Fills       int            `json:"fills"`
}

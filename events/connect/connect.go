// Package connect holds the events of Connect: apps (their settings and API
// keys), links (a trader's way through hosted Connect) and the single-use
// ids of redeemed Connect account statements. Every keyed write also records
// an idempotency KeyUsed (events/idem) in the same commit.
package connect

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file connect.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// AppSubject is the log subject of the app appID.
func AppSubject(appID string) string { return events.Subject(events.KindApp, appID) }

// LinkSubject is the log subject of the link linkID.
func LinkSubject(linkID string) string { return events.Subject(events.KindLink, linkID) }

// StatementSubject is the log subject of the statement whose single-use id is jti.
func StatementSubject(jti string) string { return events.Subject(events.KindStmt, jti) }

// WhiteLabel is an app's white-label paper: the paper account hosted Connect
// opens for a trader of the app, once per trader.
type WhiteLabel struct {
	Enabled         bool           `json:"enabled"`
	Label           string         `json:"label"`
	Currency        string         `json:"currency"`
	StartingBalance events.Decimal `json:"startingBalance"`
}

// Settings are what an app's owners set: its name, logo, the websites
// allowed to embed hosted Connect, and its white-label paper.
type Settings struct {
	Name       string     `json:"name"`
	LogoURL    string     `json:"logoUrl,omitempty"`
	Websites   []string   `json:"websites"`
	WhiteLabel WhiteLabel `json:"whiteLabel"`
}

// AppCreated records an app of an organization. TenantID is the tenant that
// holds its traders' accounts. Counterpart names the production app a
// sandbox app stands for ("" for an app made in this environment).
type AppCreated struct {
	AppID       string    `json:"appId"`
	OrgID       string    `json:"orgId"`
	TenantID    string    `json:"tenantId"`
	Env         string    `json:"environment"`
	Counterpart string    `json:"counterpart,omitempty"`
	Settings    Settings  `json:"settings"`
	CreatedBy   string    `json:"createdBy"`
	At          time.Time `json:"at"`
}

// AppUpdated records an app's settings, whole.
type AppUpdated struct {
	Settings Settings  `json:"settings"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// KeyIssued records an app API key: only its digest, never the key.
type KeyIssued struct {
	KeyID     string    `json:"keyId"`
	Digest    string    `json:"digest"`
	Prefix    string    `json:"prefix"`
	Name      string    `json:"name"`
	Env       string    `json:"environment"`
	CreatedBy string    `json:"createdBy"`
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// KeyRevoked records an app key's revocation.
type KeyRevoked struct {
	KeyID string    `json:"keyId"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
}

// LinkCreated records a link an app's backend made for one of its traders.
type LinkCreated struct {
	LinkID    string    `json:"linkId"`
	AppID     string    `json:"appId"`
	Trader    string    `json:"trader"`
	KeyID     string    `json:"keyId"`
	ExpiresAt time.Time `json:"expiresAt"`
	At        time.Time `json:"at"`
}

// LinkMounted records that hosted Connect opened the link.
type LinkMounted struct {
	At time.Time `json:"at"`
}

// LinkConnected records the account the trader connected (or the app's
// white-label paper opened for them).
type LinkConnected struct {
	AccountID string    `json:"accountId"`
	At        time.Time `json:"at"`
}

// LinkClosed records the app's close of a link not yet connected.
type LinkClosed struct {
	At time.Time `json:"at"`
}

// LinkDisconnected records that the trader disconnected the app from the
// account the link connected: the app no longer acts for the trader on it
// (until a later link connects it again). By names who asked: "hosted" for
// hosted Connect's frame session.
type LinkDisconnected struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// LinkFailed records a link that ended without a connection: its token
// expired before the trader connected (Reason "expired").
type LinkFailed struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// StatementRedeemed records that a Connect account statement was exchanged:
// its id can never be exchanged again.
type StatementRedeemed struct {
	ID      string    `json:"id"`
	Email   string    `json:"email"`
	Expires time.Time `json:"expires"`
	At      time.Time `json:"at"`
}

func (AppCreated) Type() string        { return "connect.app_created.v1" }
func (AppUpdated) Type() string        { return "connect.app_updated.v1" }
func (KeyIssued) Type() string         { return "connect.key_issued.v1" }
func (KeyRevoked) Type() string        { return "connect.key_revoked.v1" }
func (LinkCreated) Type() string       { return "connect.link_created.v1" }
func (LinkMounted) Type() string       { return "connect.link_mounted.v1" }
func (LinkConnected) Type() string     { return "connect.link_connected.v1" }
func (LinkClosed) Type() string        { return "connect.link_closed.v1" }
func (LinkFailed) Type() string        { return "connect.link_failed.v1" }
func (LinkDisconnected) Type() string  { return "connect.link_disconnected.v1" }
func (StatementRedeemed) Type() string { return "connect.statement_redeemed.v1" }

// Registry lists the Connect event types.
func Registry() events.Registry {
	return events.Registry{
		AppCreated{}.Type():        events.Of[AppCreated](),
		AppUpdated{}.Type():        events.Of[AppUpdated](),
		KeyIssued{}.Type():         events.Of[KeyIssued](),
		KeyRevoked{}.Type():        events.Of[KeyRevoked](),
		LinkCreated{}.Type():       events.Of[LinkCreated](),
		LinkMounted{}.Type():       events.Of[LinkMounted](),
		LinkConnected{}.Type():     events.Of[LinkConnected](),
		LinkClosed{}.Type():        events.Of[LinkClosed](),
		LinkFailed{}.Type():        events.Of[LinkFailed](),
		LinkDisconnected{}.Type():  events.Of[LinkDisconnected](),
		StatementRedeemed{}.Type(): events.Of[StatementRedeemed](),
	}
}

// Link states (the spec's ConnectLink.state).
const (
	StateCreated   = "created"
	StateMounted   = "mounted"
	StateConnected = "connected"
	StateFailed    = "failed"
	StateClosed    = "closed"
)

// Link is a link as its commits leave it (the aggregate's state and the read model).
//
//msgp:ignore Link
type Link struct {
	ID        string
	AppID     string
	Trader    string
	KeyID     string
	State     string
	Reason    string // why it failed
	AccountID string
	// Disconnected: the trader disconnected the app from AccountID; the
	// link reads closed, its result names the account it no longer grants.
	Disconnected bool
	ExpiresAt    time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Ended reports whether the link can move no more.
func (l Link) Ended() bool {
	return l.State == StateConnected || l.State == StateClosed || l.State == StateFailed
}

// Expired reports whether the link's token no longer opens hosted Connect at now
// while the link has not ended: it reads as failed from then on.
func (l Link) Expired(now time.Time) bool { return !l.Ended() && !now.Before(l.ExpiresAt) }

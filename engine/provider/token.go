package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/svc/engine/events"
)

// This file is the boundary of providers a trader signs in to with a login
// name and password (a futures broker's login) rather than an API key: the
// password is exchanged once for the provider's tokens, and only the tokens
// are kept, sealed, and renewed.

// The environments of a Token.
const (
	EnvLive = "live" // the provider's production system
	EnvDemo = "demo" // its test system: no market data, no real money
)

// Token is a login's tokens at a provider, what the engine seals and keeps
// instead of the password. Like Credentials it never prints: String,
// GoString, Format, MarshalText and LogValue give "[redacted]" (so
// encoding/json writes "[redacted]" too: a sealer copies the fields).
type Token struct {
	Access string // the bearer access token
	// MarketData is the market-data token where the provider issues its own;
	// empty: Access serves market data too.
	MarketData  string
	ExpiresAt   time.Time // Access stops working then unless renewed
	UserID      string    // the provider's id of the login (not secret)
	Login       string    // the login name (not secret)
	Environment string    // EnvLive or EnvDemo
}

func (Token) String() string               { return redacted }
func (Token) GoString() string             { return redacted }
func (Token) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (Token) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Token) LogValue() slog.Value         { return slog.StringValue(redacted) }

// ID is a stable, non-secret name of the login (a digest of its
// environment and user id): what budgets and logs key on. It does not
// change when the tokens are renewed.
func (t Token) ID() string {
	h := sha256.Sum256([]byte("provider-login\x00" + t.Environment + "\x00" + t.UserID))
	return hex.EncodeToString(h[:8])
}

// Valid reports whether the token names a login and holds an access token.
func (t Token) Valid() bool { return t.Access != "" && t.UserID != "" && t.Environment != "" }

// Expired reports whether the access token has expired at now.
func (t Token) Expired(now time.Time) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) }

// LoginAccount is one account a login may trade (a login may hold several).
type LoginAccount struct {
	ID     string // the provider's account id: what Resume takes
	Name   string // the account's name or number at the provider
	Active bool   // open and tradable: Resume takes it
}

// TokenProvider is a Provider whose trader signs in with a login name and
// password. Login exchanges them for tokens once and keeps neither; every
// later call takes the Token. Connect (the Provider's) is not how such a
// provider is linked: it would leave the password with the caller.
type TokenProvider interface {
	Provider
	// Login exchanges the trader's login name and password for the
	// provider's tokens. The password is used for this one request and
	// never kept, logged or put in an error; the caller may wipe it after.
	// A name or password the provider does not take is *Unauthorized; a
	// login the provider will not let trade is *KeyRefused.
	Login(ctx context.Context, name string, password []byte) (Token, error)
	// Accounts lists the accounts of the login.
	Accounts(ctx context.Context, t Token) ([]LoginAccount, error)
	// Resume opens a session on one account of the login (a LoginAccount's
	// ID) from its tokens. The session renews the tokens before they expire
	// and calls renewed (when not nil) with each renewed Token, so the
	// caller can seal it in place of the old one; renewed must not block.
	// Tokens that can no longer be renewed make the session's calls answer
	// *Unauthorized: the trader signs in again.
	Resume(ctx context.Context, t Token, accountID string, renewed func(Token)) (Session, error)
}

// ErrNotEntitled: the login may not receive the market data asked for (a
// demo login, no market-data subscription covering the product, or no
// login at all). The spec's 503 feed_requires_connection.
var ErrNotEntitled = errors.New("provider: not entitled to market data")

// Reasons a NotEntitled gives.
const (
	EntitlementLoginRequired  = "login_required"  // the prices need the trader's own login
	EntitlementDemoLogin      = "demo_login"      // a demo login carries no market data
	EntitlementNoSubscription = "no_subscription" // the login's market-data subscription does not cover it
)

// NotEntitled is a refusal of market data; Reason is one of the
// Entitlement constants. It holds no provider text.
type NotEntitled struct{ Reason string }

func (e *NotEntitled) Error() string { return "provider: not entitled to market data: " + e.Reason }
func (e *NotEntitled) Unwrap() error { return ErrNotEntitled }

// QuoteSession is a Session whose market data is the login's own, licensed
// to that trader alone (futures). Its quotes must never serve another
// trader. Quotes streams as Provider.Quotes does, or answers *NotEntitled
// before streaming when the login may not have the symbols' prices.
type QuoteSession interface {
	Quotes(ctx context.Context, symbols []string) (<-chan Quote, error)
}

// PriceFraction is how a product quoted in fractions of a point is written:
// Denominator (32 for thirty-seconds) and SubFraction (2 or 4: halves or
// quarters of them; 0: none).
type PriceFraction struct{ Denominator, SubFraction int }

// Contract is a futures contract with the facts of its product.
type Contract struct {
	Instrument                   // Symbol is the contract's name at the provider (ESZ5)
	ContractID    string         // the provider's id of the contract
	Product       string         // the product's root (ES)
	Currency      string         // the currency of ValuePerPoint, such as USD
	ValuePerPoint events.Decimal // currency per point of price per contract
	Fraction      *PriceFraction // nil for a product quoted in decimals
	Expiration    time.Time      // the contract's expiration; zero when not given
}

// ContractSession is a Session that reads contracts with the login's own
// token, for a provider whose contract library is not public. Symbols
// unknown to the provider are left out of the answer.
type ContractSession interface {
	Contracts(ctx context.Context, symbols []string) ([]Contract, error)
}

// Bar is one bar of a chart: its start and its prices and volume.
type Bar struct {
	Start                  time.Time
	Open, High, Low, Close events.Decimal
	Volume                 events.Decimal
}

// BarRequest asks for the bars of one symbol: Minutes long (or one a
// trading day when Daily), at most Count of them, the last one starting at
// or before To (zero: now).
type BarRequest struct {
	Symbol  string
	Minutes int
	Daily   bool
	Count   int
	To      time.Time
}

// ChartSession is a Session whose login reads charts from its own market
// data, licensed to that trader alone: Bars answers oldest first, or
// *NotEntitled as QuoteSession does.
type ChartSession interface {
	Bars(ctx context.Context, r BarRequest) ([]Bar, error)
}

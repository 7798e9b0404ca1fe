package provider

import (
	"errors"
	"fmt"
	"github.com/svc/engine/commands"
	"time"
)

// Sentinels name each failure; the typed errors below carry its data and
// match their sentinel with errors.Is. No error of this package holds
// provider text: codes, durations and fixed words only.
var (
	// ErrRejected: the provider refused the request itself (the spec's 422
	// order_rejected). Nothing happened; sending it again is refused again.
	ErrRejected = errors.New("provider: rejected")
	// ErrUnknown: the request may have reached the provider and its answer
	// was lost (timeout, connection dropped after sending, a 5xx on a
	// write). The spec's 503 outcome_unknown; settle with Session.Lookup.
	ErrUnknown = errors.New("provider: outcome unknown")
	// ErrRateLimited: the provider asked us to slow down; nothing was done.
	ErrRateLimited = errors.New("provider: rate limited")
	// ErrBanned: the provider banned the credential (or address) for a
	// while; no call is sent until the ban ends.
	ErrBanned = errors.New("provider: banned")
	// ErrUnauthorized: the key, secret or signature was not taken.
	ErrUnauthorized = errors.New("provider: unauthorized")
	// ErrUnavailable: the provider could not be reached, or failed, before
	// anything was done. Safe to retry.
	ErrUnavailable = errors.New("provider: unavailable")
	// ErrNotFound: the provider does not know the order.
	ErrNotFound = errors.New("provider: not found")
	// ErrModeUnsupported: the account is in a mode the engine does not
	// trade (hedge mode, multi-assets mode, portfolio margin).
	ErrModeUnsupported = errors.New("provider: account mode unsupported")
	// ErrKeyRefused: the key works but the engine will not hold it (it can
	// withdraw, or cannot trade futures).
	ErrKeyRefused = errors.New("provider: key refused")
	// ErrUnsupported: the provider has no way to do what was asked (an
	// order type or time in force outside its capabilities).
	ErrUnsupported = errors.New("provider: unsupported")
)

// Rejected is the provider's own refusal. Code is the provider's error code,
// for logs; its message is never kept.
type Rejected struct{ Code int64 }

func (e *Rejected) Error() string { return fmt.Sprintf("provider: rejected (code %d)", e.Code) }
func (e *Rejected) Unwrap() error { return ErrRejected }

// Unknown is a lost answer to a request that may have been carried out.
// Op names the operation (place, cancel, replace); Code is the provider's
// code when it answered one (such as a timeout code), else 0; Status the
// HTTP status when there was one.
type Unknown struct {
	Op     string
	Status int
	Code   int64
	cause  error
}

// NewUnknown wraps cause (a transport error; kept for errors.Is, not shown).
func NewUnknown(op string, status int, code int64, cause error) *Unknown {
	return &Unknown{Op: op, Status: status, Code: code, cause: cause}
}

func (e *Unknown) Error() string {
	return fmt.Sprintf("provider: %s outcome unknown (status %d, code %d)", e.Op, e.Status, e.Code)
}
func (e *Unknown) Unwrap() []error { return []error{ErrUnknown, e.cause} }

// RateLimited says to wait RetryAfter before the next call with this
// credential; the adapter sends nothing for it until then.
type RateLimited struct{ RetryAfter time.Duration }

func (e *RateLimited) Error() string {
	return fmt.Sprintf("provider: rate limited, retry after %s", e.RetryAfter)
}
func (e *RateLimited) Unwrap() error { return ErrRateLimited }

// Banned says the provider refuses every call of the credential until
// Until; the adapter sends nothing for it meanwhile.
type Banned struct{ Until time.Time }

func (e *Banned) Error() string {
	return "provider: banned until " + e.Until.UTC().Format(time.RFC3339)
}
func (e *Banned) Unwrap() error { return ErrBanned }

// Unauthorized is a key, secret, signature or permission the provider did
// not take; Code is the provider's code.
type Unauthorized struct{ Code int64 }

func (e *Unauthorized) Error() string {
	return fmt.Sprintf("provider: unauthorized (code %d)", e.Code)
}
func (e *Unauthorized) Unwrap() error { return ErrUnauthorized }

// Unavailable is a provider that could not be reached or failed before
// doing anything. Status is the HTTP status (0: none), Code the provider's
// code when it gave one.
type Unavailable struct {
	Status int
	Code   int64
	cause  error
}

// NewUnavailable wraps cause (kept for errors.Is, not shown).
func NewUnavailable(status int, code int64, cause error) *Unavailable {
	return &Unavailable{Status: status, Code: code, cause: cause}
}

func (e *Unavailable) Error() string {
	return fmt.Sprintf("provider: unavailable (status %d, code %d)", e.Status, e.Code)
}
func (e *Unavailable) Unwrap() []error { return []error{ErrUnavailable, e.cause} }

// NotFound is an order the provider does not know; Code is its code.
type NotFound struct{ Code int64 }

func (e *NotFound) Error() string { return fmt.Sprintf("provider: order not found (code %d)", e.Code) }
func (e *NotFound) Unwrap() error { return ErrNotFound }

// The settings a ModeUnsupported names.
const (
	SettingHedgeMode       = "hedge_mode"
	SettingMultiAssets     = string(commands.CodeMultiAssetsMode)
	SettingPortfolioMargin = string(commands.CodePortfolioMargin)
)

// ReportedPortfolioMargin is what a ModeUnsupported reports of an account
// under portfolio margin.
const ReportedPortfolioMargin = string(commands.CodePortfolioMargin)

// ModeUnsupported is an account mode the engine does not trade: Setting is
// one of the Setting constants, Reported what the provider reports,
// Supported what the engine needs. These are the params of the spec's
// hedge_position_mode, multi_assets_mode and portfolio_margin refusals.
type ModeUnsupported struct{ Setting, Reported, Supported string }

func (e *ModeUnsupported) Error() string {
	return fmt.Sprintf("provider: %s is %s, the engine needs %s", e.Setting, e.Reported, e.Supported)
}
func (e *ModeUnsupported) Unwrap() error { return ErrModeUnsupported }

// Reasons a key is refused.
const (
	KeyCanWithdraw = "can_withdraw" // the key may withdraw funds
	KeyCannotTrade = "cannot_trade" // the account or key may not trade
	KeyNoFutures   = "no_futures"   // the key is not enabled for futures
	KeyUnreadable  = "unreadable"   // the key may not read the account
)

// KeyRefused is a working key the engine will not hold; Reason is one of
// the Key constants.
type KeyRefused struct{ Reason string }

func (e *KeyRefused) Error() string { return "provider: key refused: " + e.Reason }
func (e *KeyRefused) Unwrap() error { return ErrKeyRefused }

// Unsupported names what the provider cannot do: Field (orderType,
// timeInForce) and its Value.
type Unsupported struct{ Field, Value string }

func (e *Unsupported) Error() string {
	return fmt.Sprintf("provider: %s %q unsupported", e.Field, e.Value)
}
func (e *Unsupported) Unwrap() error { return ErrUnsupported }

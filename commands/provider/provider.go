// Package provider holds the commands of accounts that live at a provider
// (clock observation): linking and unlinking, and the provider reactor's
// settlements and observations. The trading commands (commands/trading)
// are the same on every account; the account aggregate decides them as
// intents on a provider account.
package provider

import (
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// MaxLabel bounds an account label.
const MaxLabel = 64

// Link opens an account at a provider whose credential the engine checked
// (Connect) and sealed. Snapshot is the provider's complete account read at
// linking: recorded as the first observations.
type Link struct {
	Provider      string
	Broker        string
	TenantID      string
	Email         string
	AppID         string // a Connect app the account is linked through (hosted Connect), for Trader
	Trader        string // the app's own id of its trader
	AccountNumber string
	Label         string
	Currency      string
	CredentialID  string
	Sealed        []byte
	Snapshot      Observe
	// A login's account (token.go): the login name, the provider's id and
	// name of the account, the environment; Sealed holds the tokens.
	Login       string
	Account     string
	AccountName string
	Environment string
	ExpiresAt   time.Time // when the sealed access token expires
	// TimeInForce are the times in force the provider takes (its
	// capabilities); empty: gtc, ioc and fok.
	TimeInForce []string
	// LiveConsent is the trader's word on live trading by the app the
	// account is linked through (AppID): true grants it, false withholds
	// it; nil when the link form did not say (a link again keeps the word
	// given before). See consent.go.
	LiveConsent *bool
}

// Validate checks the shape.
func (c *Link) Validate() error {
	if c.Provider == "" || c.TenantID == "" || len(c.Sealed) == 0 || c.Currency == "" {
		return commands.Invalid("link needs a provider, an owner, a currency and a sealed credential")
	}
	if len(c.Label) > MaxLabel {
		return commands.InvalidField("label", nil, "label is at most %d characters", MaxLabel)
	}
	return nil
}

// Unlink ends the link: nothing is sent for the account again.
type Unlink struct{}

// Validate checks the shape.
func (c *Unlink) Validate() error { return nil }

// Order is an order as the provider reports it, in the engine's words.
type Order struct {
	ProviderClientOrderID string
	ProviderOrderID       string
	Instrument            string
	Side                  string // buy, sell
	OrderType             string // market, limit, stop, stop_limit, other
	TimeInForce           string
	Status                string // working, partially_filled, filled, canceled, rejected, expired
	Quantity              events.Decimal
	Filled                events.Decimal  // cumulative
	AvgPrice              *events.Decimal // of what filled
	LimitPrice            *events.Decimal
	StopPrice             *events.Decimal
	ReduceOnly            bool
	// The last fill, when the provider reported one with this change.
	LastPrice   *events.Decimal
	LastFee     *events.Decimal
	LastPnL     *events.Decimal
	LastTradeID string
	// LastAt is the provider's time of the last fill (its trade time);
	// zero: At stands for it.
	LastAt time.Time
	At     time.Time
	// Multiplier is the instrument's value per point (a futures
	// contract's), which a fill's realized PnL and the position carry; zero:
	// 1.
	Multiplier events.Decimal
}

// Final reports whether the order can no longer change.
func (o Order) Final() bool {
	return o.Status == "filled" || o.Status == "canceled" || o.Status == "rejected" || o.Status == "expired"
}

// Settle records the end of an intent: Outcome is one of evacct's Outcome
// constants; Order is the order as the provider answered (accepted), nil
// otherwise. Key names the intent (IntentKey). RetryAfter is, on a
// throttled not_sent, the whole seconds the provider's limit holds.
type Settle struct {
	Key        string
	Outcome    string
	Code       int64
	Reason     string
	RetryAfter int
	Order      *Order
}

// Validate checks the shape.
func (c *Settle) Validate() error {
	if c.Key == "" || c.Outcome == "" {
		return commands.Invalid("settle needs an intent and an outcome")
	}
	if c.RetryAfter < 0 || c.RetryAfter > MaxRetryAfter {
		return commands.Invalid("settle's retryAfter is outside 0..%d seconds", MaxRetryAfter)
	}
	return nil
}

// MaxRetryAfter bounds a settlement's RetryAfter in seconds: a week, the
// longest wait the adapters read from a provider.
const MaxRetryAfter = 7 * 24 * 60 * 60

// IntentKey names an intent in the account's state: its op and the
// provider's client order id (a place and the cancel of the same order are
// two intents).
func IntentKey(op, providerClientOrderID string) string { return op + ":" + providerClientOrderID }

// Observe records what the provider reported: order changes, balances,
// positions, settings. Complete says it is a whole snapshot (reconciliation):
// every working order and every position is in it, so a position it lacks
// is flat. Cause names the reading (stream, link, start, gap).
type Observe struct {
	Cause     string
	Complete  bool
	Orders    []Order
	Balances  []evacct.BalanceObserved
	Positions []evacct.Position
	Settings  *evacct.ProviderSettings
}

// Validate checks the shape.
func (c *Observe) Validate() error { return nil }

// RetryExits places again, on a provider account, every working bracket
// leg whose order did not reach the provider and whose retry time
// (BracketLeg.RetryAt) has come. The reactor sends it at that time; it
// changes nothing when none is due. Now places every such leg whatever its
// time: the provider answers again (a complete reading of the account
// after the stream's gap, or at a start).
type RetryExits struct {
	Now bool
}

// Validate checks the shape.
func (c *RetryExits) Validate() error { return nil }

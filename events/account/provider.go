package account

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file provider.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// An account that lives at a provider (clock observation) records what the
// engine intended and what it observed there: an intent is committed before
// anything is sent, its settlement when the provider answered (or when a
// lookup settled a lost answer), and every reading of the provider (its
// stream, a snapshot) as observations. The working orders, fills and
// positions it observes are the same OrderPlaced, OrderFilled and
// OrderCanceled every account records, so every fold of them serves both.

// ProviderSettings are the account's modes at the provider as last read.
type ProviderSettings struct {
	HedgeMode       bool `json:"hedgeMode,omitempty"`
	MultiAssets     bool `json:"multiAssets,omitempty"`
	PortfolioMargin bool `json:"portfolioMargin,omitempty"`
}

// ProviderLinked records the link of an account to its provider. Sealed is
// the credential sealed under the link's own data key (engine/seal): the
// log never holds the key or secret in the clear, and unlinking destroys
// the data key. CredentialID is a digest naming the credential (budgets).
//
// A login's account (a provider signed in to with a login name and
// password, such as a futures broker's) seals the login's tokens instead,
// never the password, and names the login and the account in it: Login is
// the login name, Account the provider's id of the account (what a session
// is resumed on), AccountName its name or number there, Environment live or
// demo. TimeInForce lists the times in force the provider takes (its
// capabilities); empty on links recorded before it was kept: gtc, ioc, fok.
type ProviderLinked struct {
	Provider     string           `json:"provider"`
	CredentialID string           `json:"credentialId"`
	Sealed       []byte           `json:"sealed"`
	Settings     ProviderSettings `json:"settings"`
	Login        string           `json:"login,omitempty"`
	Account      string           `json:"account,omitempty"`
	AccountName  string           `json:"accountName,omitempty"`
	Environment  string           `json:"environment,omitempty"`
	TimeInForce  []string         `json:"timeInForce,omitempty"`
	At           time.Time        `json:"at"`
}

// ProviderTokenRenewed records a login's newer tokens, sealed under the
// link's data key as ProviderLinked's are: the provider renewed them
// (Cause renewal) or the trader signed in again (Cause relink). A start
// resumes the session from the last one. ExpiresAt is when its access
// token expires unless renewed again (not secret).
type ProviderTokenRenewed struct {
	Sealed    []byte    `json:"sealed"`
	ExpiresAt time.Time `json:"expiresAt"`
	Cause     string    `json:"cause"`
	At        time.Time `json:"at"`
}

// ProviderLoginLost records that the provider no longer takes the login's
// tokens (they expired, or were revoked, before they could be renewed):
// nothing can be sent for the account until the trader signs in again
// (ProviderTokenRenewed, Cause relink).
type ProviderLoginLost struct {
	At time.Time `json:"at"`
}

// ProviderUnlinked records the end of the link: no order is sent for the
// account again, and its sealed credential can no longer be opened.
type ProviderUnlinked struct {
	At time.Time `json:"at"`
}

// Intent ops.
const (
	IntentPlace  = "place"
	IntentCancel = "cancel"
	// IntentReplace changes a resting order in place at the provider
	// (Order: the order as it is to be after the change).
	IntentReplace = "replace"
)

// OrderIntended records an order the engine is about to send to the
// provider under ProviderClientOrderID (for a cancel: the order to cancel;
// for a replace: the order as changed).
// Nothing was sent before it was committed.
type OrderIntended struct {
	Op                    string    `json:"op"`
	ProviderClientOrderID string    `json:"providerClientOrderId"`
	Order                 Order     `json:"order"` // the order as placed (place), or the order to cancel
	At                    time.Time `json:"at"`
}

// Intent outcomes.
const (
	// OutcomeAccepted: the provider took it (the order rests or filled; a
	// cancel was carried out). The observations in the same commit say how.
	OutcomeAccepted = "accepted"
	// OutcomeRejected: the provider refused it itself; nothing happened.
	OutcomeRejected = "rejected"
	// OutcomeNotSent: it was never sent (the provider was unavailable or
	// its rate limit held before sending).
	OutcomeNotSent = "not_sent"
	// OutcomeNeverPlaced: its answer was lost and, past the provider's
	// receive window, a lookup by its client order id found nothing.
	OutcomeNeverPlaced = "never_placed"
)

// Reasons of a not_sent outcome.
const (
	// ReasonThrottled: the provider's rate limit (or a ban) held it back;
	// IntentSettled.RetryAfter says how long.
	ReasonThrottled = "throttled"
	// ReasonUnavailable: the provider could not be reached (or the request
	// could not leave within its moment) before anything was sent: passing.
	ReasonUnavailable = "unavailable"
	// ReasonRefused: the provider refused the credential, the account's
	// mode or what was asked, before anything was sent: it holds until the
	// trader changes something. (Commits before this reason existed
	// recorded these as unavailable.)
	ReasonRefused = "refused"
)

// IntentSettled records how an intent ended. Code is the provider's own
// error code on a rejection (for logs; its text is never kept); Reason a
// fixed word on a not_sent (unavailable, throttled); RetryAfter, on a
// throttled one, the whole seconds the provider's limit still held then.
type IntentSettled struct {
	ProviderClientOrderID string    `json:"providerClientOrderId"`
	Outcome               string    `json:"outcome"`
	Code                  int64     `json:"code,omitempty"`
	Reason                string    `json:"reason,omitempty"`
	RetryAfter            int       `json:"retryAfter,omitempty"`
	At                    time.Time `json:"at"`
}

// BalanceObserved records the account's balance of Asset at the provider.
// AsOf is the provider's own time of the balance (the transaction it last
// changed with), zero when the provider gave none: a fill the provider
// reports at or before AsOf is in Wallet already.
type BalanceObserved struct {
	Asset     string         `json:"asset"`
	Wallet    events.Decimal `json:"wallet"`
	Available events.Decimal `json:"available"`
	AsOf      time.Time      `json:"asOf,omitzero"`
	At        time.Time      `json:"at"`
}

// PositionObserved records the account's net position in Instrument at the
// provider; a zero Quantity: flat.
type PositionObserved struct {
	Position Position  `json:"position"`
	At       time.Time `json:"at"`
}

// SettingsObserved records the account's modes at the provider.
type SettingsObserved struct {
	Settings ProviderSettings `json:"settings"`
	At       time.Time        `json:"at"`
}

// Reconciled records that a complete snapshot of the provider's account
// was read and recorded (the observations in the same commit): Orders,
// Positions are how many it held; Cause why it was read (link, start, gap).
type Reconciled struct {
	Cause     string    `json:"cause"`
	Orders    int       `json:"orders"`
	Positions int       `json:"positions"`
	At        time.Time `json:"at"`
}

func (ProviderLinked) Type() string       { return "account.provider_linked.v1" }
func (ProviderUnlinked) Type() string     { return "account.provider_unlinked.v1" }
func (OrderIntended) Type() string        { return "order.intended.v1" }
func (IntentSettled) Type() string        { return "order.intent_settled.v1" }
func (BalanceObserved) Type() string      { return "account.balance_observed.v1" }
func (PositionObserved) Type() string     { return "account.position_observed.v1" }
func (SettingsObserved) Type() string     { return "account.settings_observed.v1" }
func (Reconciled) Type() string           { return "account.reconciled.v1" }
func (ProviderTokenRenewed) Type() string { return "account.provider_token_renewed.v1" }
func (ProviderLoginLost) Type() string    { return "account.provider_login_lost.v1" }

func providerRegistry() events.Registry {
	return events.Registry{
		ProviderLinked{}.Type():       events.Of[ProviderLinked](),
		ProviderUnlinked{}.Type():     events.Of[ProviderUnlinked](),
		OrderIntended{}.Type():        events.Of[OrderIntended](),
		IntentSettled{}.Type():        events.Of[IntentSettled](),
		BalanceObserved{}.Type():      events.Of[BalanceObserved](),
		PositionObserved{}.Type():     events.Of[PositionObserved](),
		SettingsObserved{}.Type():     events.Of[SettingsObserved](),
		Reconciled{}.Type():           events.Of[Reconciled](),
		ProviderTokenRenewed{}.Type(): events.Of[ProviderTokenRenewed](),
		ProviderLoginLost{}.Type():    events.Of[ProviderLoginLost](),
		LiveConsentSet{}.Type():       events.Of[LiveConsentSet](), // consent.go
	}
}

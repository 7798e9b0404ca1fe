// Package firm holds the commands of a firm: balance operations,
// resets, halts, reconciliation holds, webhook endpoints and Connect
// pre-registrations.
package firm

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"net/url"
	"strings"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
)

// Environments a currency may be issued in.
const (
	Sandbox    = "sandbox"
	Production = "production"
)

// Issuable reports whether currency may be issued in env: USD everywhere, USDC
// in the sandbox only, nothing else.
func Issuable(currency, env string) bool {
	return currency == "USD" || (currency == "USDC" && env == Sandbox)
}

// NotIssuable is the 400 currency_not_issuable refusal.
func NotIssuable(currency, env string) *commands.Refusal {
	if env != Production {
		env = Sandbox
	}
	return commands.Refuse(commands.CodeCurrencyNotIssuable,
		"the currency is not issued here: USD everywhere, USDC in the sandbox only",
		map[string]any{"currency": currency, "environment": env})
}

// IssueCurrency is the currency an account's issue states, USD when it states
// none; a currency not issued in env is the 400 currency_not_issuable
// refusal. Every door that issues accounts (the partner route, the venue's)
// checks the currency through it, before anything else about the amount.
func IssueCurrency(currency, env string) (string, error) {
	if currency == "" {
		currency = "USD"
	}
	if !Issuable(currency, env) {
		return "", NotIssuable(currency, env)
	}
	return currency, nil
}

// PostingDecimals is how many decimals an account in currency posts in: 2 for
// USD, 6 for USDC on an issued (evaluation) account, else 2; false where the
// paper book holds no money in the currency.
func PostingDecimals(currency, kind string) (int, bool) {
	switch currency {
	case "USD":
		return 2, true
	case "USDC":
		if kind == "evaluation" {
			return 6, true
		}
		return 2, true
	}
	return 0, false
}

// CheckPrecision refuses an amount with more decimals than the currency posts
// in (trailing zeros do not count): 400 amount_precision_exceeded.
func CheckPrecision(amount events.Decimal, currency, kind string) error {
	n, ok := PostingDecimals(currency, kind)
	params := map[string]any{"currency": currency, "decimals": nil}
	if ok {
		params["decimals"] = n
	}
	if !ok || reducedDecimals(amount) > n {
		return commands.Refuse(commands.CodeAmountPrecisionExceeded,
			"the amount has more decimals than the account's currency posts in", params)
	}
	return nil
}

func reducedDecimals(d events.Decimal) int {
	s := Canonical(d)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// Canonical renders d in plain notation without trailing fractional zeros,
// so "10", "10.0" and "10.00" are one amount.
func Canonical(d events.Decimal) string {
	s := d.String()
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Digest is the hex SHA-256 of the parts of a request, joined unambiguously:
// the same key with the same digest is the same request.
func Digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidReference checks a referenceId: 1 to 128 printable characters
// (commands.Identifier); anything else is 400 invalid_request, params.field
// referenceId.
func ValidReference(ref string) error {
	return commands.Identifier("referenceId", ref, commands.MaxReference)
}

// MaxAccountNumber bounds an account number a firm sends.
const MaxAccountNumber = 64

// Balance operations.
const (
	OpCredit     = "credit"
	OpDebit      = "debit"
	OpAdjustment = "adjustment"
)

// BalanceOp moves money on an account outside trading, ledger-first on its
// referenceId: the same reference and body is the original receipt, a
// different body a conflict.
type BalanceOp struct {
	ReferenceID   string
	AccountNumber string
	Op            string
	Amount        events.Decimal
	Currency      string // empty: the account's
	Env           string // sandbox or production
	// Marks are the mark prices of the account's instruments, attached by the
	// engine so a debit can value open positions.
	Marks map[string]events.Decimal
}

// Validate checks the shape: reference, op, amount sign and size (at most
// commands.MaxAmount in magnitude: 422 invalid_request, params.field amount,
// params.max), issuable currency.
func (c *BalanceOp) Validate() error {
	if err := ValidReference(c.ReferenceID); err != nil {
		return err
	}
	if err := commands.Identifier("accountNumber", c.AccountNumber, MaxAccountNumber); err != nil {
		return err
	}
	switch {
	case c.Op != OpCredit && c.Op != OpDebit && c.Op != OpAdjustment:
		return commands.BadField("op", nil, "op must be credit, debit or adjustment")
	case c.Op != OpAdjustment && c.Amount.Sign() <= 0:
		return commands.BadField("amount", nil, "amount must be greater than zero")
	case c.Op == OpAdjustment && c.Amount.IsZero():
		return commands.BadField("amount", nil, "an adjustment must not be zero")
	case c.Currency != "" && !Issuable(c.Currency, c.Env):
		return NotIssuable(c.Currency, c.Env)
	}
	return commands.Amount("amount", c.Amount, commands.MaxAmount)
}

// Digest is the request's digest: account, op, amount and currency as resolved.
func (c *BalanceOp) Digest(accountCurrency string) string {
	cur := c.Currency
	if cur == "" {
		cur = accountCurrency
	}
	return Digest("balance-op", c.AccountNumber, c.Op, Canonical(c.Amount), cur)
}

// ResetAccount returns an account to its starting state, ledger-first.
type ResetAccount struct {
	ReferenceID string // empty: derived from the command id
}

// Validate checks the shape.
func (c *ResetAccount) Validate() error {
	if c.ReferenceID == "" {
		return nil
	}
	return ValidReference(c.ReferenceID)
}

// HaltAccount is the firm's halt of an account. Idempotent.
type HaltAccount struct{}

// Validate checks the shape.
func (c *HaltAccount) Validate() error { return nil }

// ResumeAccount clears the firm's own halt. Idempotent.
type ResumeAccount struct{}

// Validate checks the shape.
func (c *ResumeAccount) Validate() error { return nil }

// HoldForReconciliation is an operator's reconciliation hold on an account.
type HoldForReconciliation struct {
	Reason string
	By     string
}

// Validate checks the shape.
func (c *HoldForReconciliation) Validate() error {
	return commands.Text("reason", c.Reason, commands.MaxReason)
}

// ReleaseReconciliation releases an operator's reconciliation hold.
type ReleaseReconciliation struct{ By string }

// Validate checks the shape.
func (c *ReleaseReconciliation) Validate() error { return nil }

// MaxWebhooks is how many endpoints a firm may register.
const MaxWebhooks = 5

// RegisterWebhook adds an https endpoint to the firm, optionally filtered to event types.
type RegisterWebhook struct {
	ID         string
	URL        string
	EventTypes []string
}

// Validate checks the shape: an absolute https URL, known event type names.
func (c *RegisterWebhook) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.ID == "":
		return commands.BadRequest("webhook id is required")
	case err != nil || u.Scheme != "https" || u.Host == "" || len(c.URL) > 2048 || u.User != nil:
		return commands.BadRequest("url must be an absolute https:// URL")
	case len(c.EventTypes) > 32:
		return commands.BadRequest("eventTypes has at most 32 entries")
	}
	seen := map[string]bool{}
	for _, t := range c.EventTypes {
		if err := commands.Identifier("eventTypes", t, commands.MaxShortName); err != nil {
			return err
		}
		if seen[t] {
			return commands.BadField("eventTypes", nil, "eventTypes must be distinct names")
		}
		seen[t] = true
	}
	return nil
}

// RemoveWebhook removes an endpoint; removing a removed one changes nothing.
type RemoveWebhook struct{ ID string }

// Validate checks the shape.
func (c *RemoveWebhook) Validate() error {
	if c.ID == "" {
		return commands.BadRequest("webhook id is required")
	}
	return nil
}

// TestWebhook keeps the outcome of a test ping of an endpoint under the venue
// door's Idempotency-Key, so that a retry answers the first outcome again; it
// changes nothing else. The partner route's ping records nothing.
type TestWebhook struct {
	WebhookID string
	Outcome   *PingOutcome // nil only when the door asks, before the ping, what the key would meet (engine.AdviseFirm)
}

// PingOutcome is a test ping's outcome as its answer shows it.
type PingOutcome struct {
	Status       string  `json:"status"` // succeeded or failed
	ResponseCode *int    `json:"responseCode"`
	Error        *string `json:"error"`
}

// Validate checks the shape: the endpoint and the outcome.
func (c *TestWebhook) Validate() error {
	switch {
	case c.WebhookID == "":
		return commands.BadRequest("webhook id is required")
	case c.Outcome == nil || (c.Outcome.Status != "succeeded" && c.Outcome.Status != "failed"):
		return commands.BadRequest("a test ping's outcome is succeeded or failed")
	}
	return nil
}

// CreateRegistration pre-registers a trader's provider account for Connect.
// Sending the same email, provider and account number again refreshes it.
type CreateRegistration struct {
	ID            string // used when a new registration is made
	Email         string
	AccountNumber string
	LoginName     string
	Provider      string
}

// Validate checks the shape: a plain email (commands.Email); accountNumber
// and provider at most 64, loginName at most 128 printable characters.
func (c *CreateRegistration) Validate() error {
	if c.ID == "" {
		return commands.BadRequest("registration id is required")
	}
	if err := commands.Email("email", c.Email); err != nil {
		return err
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"accountNumber", c.AccountNumber, commands.MaxShortName},
		{"loginName", c.LoginName, commands.MaxName},
		{"provider", c.Provider, commands.MaxShortName},
	} {
		if err := commands.Text(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	c.Email = strings.ToLower(c.Email)
	return nil
}

// RevokeRegistration cancels an unused registration.
type RevokeRegistration struct{ ID string }

// Validate checks the shape.
func (c *RevokeRegistration) Validate() error {
	if c.ID == "" {
		return commands.BadRequest("registration id is required")
	}
	return nil
}

// LinkRegistration links a pending registration for the signed-in trader whose
// email matches it.
type LinkRegistration struct {
	ID       string
	Email    string // the trader's email
	Verified bool   // whether the trader proved the email: only a verified one links
	TraderID string // the trader's tenant
}

// Validate checks the shape.
func (c *LinkRegistration) Validate() error {
	if c.ID == "" || c.Email == "" || c.TraderID == "" {
		return commands.BadRequest("registration id and trader are required")
	}
	c.Email = strings.ToLower(c.Email)
	return nil
}

// RecordAttempts records webhook delivery attempts of one endpoint in its
// delivery ledger, as one commit.
type RecordAttempts struct {
	Attempts []evfirm.DeliveryAttempted
}

// Validate checks the shape.
func (c *RecordAttempts) Validate() error {
	for _, a := range c.Attempts {
		if a.DeliveryID == "" || a.WebhookID == "" || a.Attempt < 1 {
			return commands.BadRequest("an attempt needs a delivery, a webhook and an attempt number")
		}
	}
	return nil
}

// StartAttempt claims an attempt of a delivery in the endpoint's ledger
// before it is sent (evfirm.DeliveryStarted).
type StartAttempt struct {
	Start evfirm.DeliveryStarted
}

// Validate checks the shape.
func (c *StartAttempt) Validate() error {
	if c.Start.DeliveryID == "" || c.Start.WebhookID == "" || c.Start.Attempt < 1 {
		return commands.BadRequest("an attempt needs a delivery, a webhook and an attempt number")
	}
	return nil
}

// AccountID is the id of the account a firm provisions under referenceId:
// derived, so that provisioning is idempotent on the account's own aggregate.
func AccountID(tenantID, referenceID string) string {
	return "acct_" + strings.ToLower(b32(sha256.Sum256([]byte("account\x00" + tenantID + "\x00" + referenceID)))[:24])
}

// AccountNumber is the number of the account a firm provisions under referenceId.
func AccountNumber(tenantID, referenceID string) string {
	return "EV" + b32(sha256.Sum256([]byte("number\x00" + tenantID + "\x00" + referenceID)))[:10]
}

func b32(sum [32]byte) string {
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])
}

package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/svc/engine/commands"
)

// Users are tenants of kind user. Their identity commands carry digests made
// outside the decision (a password's argon2id digest, a token's SHA-256), so
// Decide stays pure and nothing secret reaches the log.

// Bounds of identity values.
const (
	MinPassword = 12  // characters
	MaxPassword = 256 // bytes: argon2 hashes whatever it is given, so bound it
	MaxKeyName  = 64
	MaxKeys     = 25 // live Trading API keys per user
)

// Password checks a password's shape: MinPassword characters to MaxPassword
// bytes of valid UTF-8 with no control characters (spaces are allowed).
func Password(field, v string) error {
	if utf8.RuneCountInString(v) < MinPassword || len(v) > MaxPassword {
		return commands.BadField(field, map[string]any{"min": MinPassword, "max": MaxPassword},
			"%s must be %d characters to %d bytes", field, MinPassword, MaxPassword)
	}
	if !utf8.ValidString(v) {
		return commands.BadField(field, nil, "%s must be valid UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return commands.BadField(field, nil, "%s must not hold control characters", field)
		}
	}
	return nil
}

// NormalEmail is the form addresses are compared in: lower-cased.
func NormalEmail(email string) string { return strings.ToLower(email) }

func digest(field, v string) error {
	if len(v) != 64 {
		return commands.Invalid("%s must be a sha-256 digest", field)
	}
	return nil
}

// SignUp creates a user with a password digest and a pending verification.
type SignUp struct {
	Email        string
	PasswordHash string
	VerifyDigest string
	VerifyUntil  time.Time
}

// Validate checks the shape.
func (c *SignUp) Validate() error {
	if err := commands.Email("email", c.Email); err != nil {
		return err
	}
	if c.PasswordHash == "" || c.VerifyUntil.IsZero() {
		return commands.Invalid("sign-up needs a password digest and a verification deadline")
	}
	return digest("verifyDigest", c.VerifyDigest)
}

// VerifyEmail spends a verification token.
type VerifyEmail struct{ Digest string }

// Validate checks the shape.
func (c *VerifyEmail) Validate() error { return digest("digest", c.Digest) }

// MarkVerified marks the email verified without a token (an operator's command).
type MarkVerified struct{}

// Validate checks the shape.
func (c *MarkVerified) Validate() error { return nil }

// IssueVerification replaces the pending verification token.
type IssueVerification struct {
	Digest string
	Until  time.Time
}

// Validate checks the shape.
func (c *IssueVerification) Validate() error { return digest("digest", c.Digest) }

// RequestReset records a password reset token.
type RequestReset struct {
	Digest string
	Until  time.Time
}

// Validate checks the shape.
func (c *RequestReset) Validate() error { return digest("digest", c.Digest) }

// ConfirmReset spends a reset token to set a new password and ends every session.
type ConfirmReset struct {
	Digest       string
	PasswordHash string
}

// Validate checks the shape.
func (c *ConfirmReset) Validate() error {
	if c.PasswordHash == "" {
		return commands.Invalid("a password digest is required")
	}
	return digest("digest", c.Digest)
}

// SetPassword sets a password (an operator's command).
type SetPassword struct{ PasswordHash string }

// Validate checks the shape.
func (c *SetPassword) Validate() error {
	if c.PasswordHash == "" {
		return commands.Invalid("a password digest is required")
	}
	return nil
}

// StartSession records a signed-in session; the password was checked by the caller.
type StartSession struct {
	SessionID string
	Until     time.Time
}

// Validate checks the shape.
func (c *StartSession) Validate() error {
	if c.SessionID == "" || c.Until.IsZero() {
		return commands.Invalid("a session needs an id and an end")
	}
	return nil
}

// EndSession ends a session.
type EndSession struct {
	SessionID string
	Reason    string
}

// Validate checks the shape.
func (c *EndSession) Validate() error {
	if c.SessionID == "" {
		return commands.Invalid("sessionId is required")
	}
	return nil
}

// GrantOperator gives a user operator authority on a venue.
type GrantOperator struct {
	VenueID string
	Scopes  []string
}

// Validate checks the shape.
func (c *GrantOperator) Validate() error {
	if err := commands.Identifier("venueId", c.VenueID, commands.MaxName); err != nil {
		return err
	}
	for _, s := range c.Scopes {
		if s != "account:read" && s != "account:write" {
			return commands.BadField("scopes", nil, "scopes are account:read and account:write")
		}
	}
	return nil
}

// UserID is the tenant id of the user with email: one address, one user,
// whatever its case, so a second sign-up meets the first in one aggregate.
func UserID(email string) string {
	sum := sha256.Sum256([]byte("user\x00" + NormalEmail(email)))
	return "usr_" + hex.EncodeToString(sum[:12])
}

// MaxDemoAccounts bounds the demo accounts one user opens.
const MaxDemoAccounts = 10

// ReserveDemo reserves a demo paper account for a verified user, at most
// MaxDemoAccounts; the account is opened next, with this id.
type ReserveDemo struct{ AccountID string }

// Validate checks the shape.
func (c *ReserveDemo) Validate() error {
	if c.AccountID == "" {
		return commands.Invalid("accountId is required")
	}
	return nil
}

package provider

import (
	"time"

	"github.com/svc/engine/commands"
)

// The commands of an account linked through a login (a provider signed in
// to with a login name and password): its sealed tokens are replaced as
// the provider renews them or the trader signs in again, and the account
// is marked when the provider no longer takes them.

// Token causes.
const (
	TokenRenewal = "renewal" // the provider renewed the tokens in a session
	TokenRelink  = "relink"  // the trader signed in to the login again
)

// RenewToken records the login's newer tokens, sealed (never the tokens in
// the clear). ExpiresAt is when their access token expires.
type RenewToken struct {
	Sealed    []byte
	ExpiresAt time.Time
	Cause     string
}

// Validate checks the shape.
func (c *RenewToken) Validate() error {
	if len(c.Sealed) == 0 || (c.Cause != TokenRenewal && c.Cause != TokenRelink) {
		return commands.Invalid("renew token needs sealed tokens and a cause")
	}
	return nil
}

// LoseLogin records that the provider no longer takes the login's tokens:
// the account needs the trader to sign in again. Sealed names the tokens
// the provider refused, so a refusal of tokens replaced meanwhile is not
// recorded.
type LoseLogin struct {
	Sealed []byte
}

// Validate checks the shape.
func (c *LoseLogin) Validate() error {
	if len(c.Sealed) == 0 {
		return commands.Invalid("lose login names the tokens refused")
	}
	return nil
}

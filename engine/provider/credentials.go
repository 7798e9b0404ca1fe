package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
)

const redacted = "[redacted]"

// Credentials are a trader's key at a provider. They are never printed:
// String, GoString, Format, MarshalText and LogValue all give "[redacted]",
// so a log line or an error that formats them shows nothing of them.
type Credentials struct {
	APIKey string
	Secret []byte
}

func (Credentials) String() string               { return redacted }
func (Credentials) GoString() string             { return redacted }
func (Credentials) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (Credentials) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Credentials) LogValue() slog.Value         { return slog.StringValue(redacted) }

// ID is a stable, non-secret name of the credential (a digest of the API
// key): what rate-limit budgets and logs key on.
func (c Credentials) ID() string {
	h := sha256.Sum256([]byte("provider-credential\x00" + c.APIKey))
	return hex.EncodeToString(h[:8])
}

// Valid reports whether both parts are present.
func (c Credentials) Valid() bool { return c.APIKey != "" && len(c.Secret) > 0 }

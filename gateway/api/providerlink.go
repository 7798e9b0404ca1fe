package api

import (
	"net/http"
	"strings"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/httpx"
)

// Bounds of a provider link request.
const (
	maxProviderName = 32
	maxAPIKey       = 256
	maxAPISecret    = 256
	maxLabel        = 64
)

// ProviderLink is a request to link a trader's account at a provider, the
// one body of the session route (POST /api/account/providers) and of hosted
// Connect's (POST /api/connect/hosted/providers). The secret is decoded
// into a Secret that never prints; neither it nor the key is ever answered
// or logged. The caller wipes the secret when done (defer l.APISecret.Wipe()).
type ProviderLink struct {
	Provider  string        `json:"provider"`
	APIKey    string        `json:"apiKey"`
	APISecret engine.Secret `json:"apiSecret"`
	Label     string        `json:"label"`
}

// DecodeProviderLink reads and bounds a ProviderLink: 422 invalid_request
// naming the field for a value out of bounds.
func DecodeProviderLink(r *http.Request) (ProviderLink, error) {
	var b ProviderLink
	if err := httpx.Decode(r, &b, 8<<10); err != nil {
		b.APISecret.Wipe()
		return ProviderLink{}, err
	}
	var err error
	switch {
	case b.Provider == "" || len(b.Provider) > maxProviderName:
		err = commands.InvalidField("provider", nil, "provider names one of the engine's providers, such as binance-futures")
	case b.APIKey == "" || len(b.APIKey) > maxAPIKey || strings.ContainsAny(b.APIKey, " \t\r\n"):
		err = commands.InvalidField("apiKey", nil, "apiKey is 1 to %d characters without spaces", maxAPIKey)
	case b.APISecret.IsZero() || b.APISecret.Len() > maxAPISecret:
		err = commands.InvalidField("apiSecret", nil, "apiSecret is 1 to %d characters", maxAPISecret)
	case len(b.Label) > maxLabel:
		err = commands.InvalidField("label", nil, "label is at most %d characters", maxLabel)
	}
	if err != nil {
		b.APISecret.Wipe()
		return ProviderLink{}, err
	}
	return b, nil
}

package api

import (
	"net/http"
	"strings"
	"unicode"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/httpx"
)

// Bounds of a provider link request.
const (
	maxProviderName   = 32
	maxAPIKey         = 256
	maxAPISecret      = 256
	maxLabel          = 64
	maxLoginName      = 64
	maxPassword       = 256
	maxAccountNumber  = 64
	environmentLive   = "live"
	environmentDemo   = "demo"
	providerLinkLimit = 8 << 10
)

// ProviderLink is a request to link a trader's account at a provider, the
// one body of the session route (POST /api/account/providers) and of hosted
// Connect's (POST /api/connect/hosted/providers). It comes in one of two
// forms: an API key and secret (apiKey, apiSecret: an exchange such as
// binance-futures), or a login (login, password, optionally environment
// demo or live and the accountNumber of the one account to link: a
// futures broker such as tradovate), never both. The secret and the
// password are decoded into Secrets that never print; neither they nor the
// key are ever answered or logged. The caller wipes them when done (defer
// l.Wipe()).
type ProviderLink struct {
	Provider      string        `json:"provider"`
	APIKey        string        `json:"apiKey"`
	APISecret     engine.Secret `json:"apiSecret"`
	Label         string        `json:"label"`
	Login         string        `json:"login"`
	Password      engine.Secret `json:"password"`
	Environment   string        `json:"environment"`
	AccountNumber string        `json:"accountNumber"`
	// LiveConsent is hosted Connect's alone: the trader's word on live
	// trading by the app on the account linked (nil: not said). The
	// session route refuses it: its accounts follow the user's own switch.
	LiveConsent *bool `json:"liveConsent"`
}

// ByLogin reports whether the link is a login's (login and password).
func (l ProviderLink) ByLogin() bool { return l.Login != "" || !l.Password.IsZero() }

// Wipe clears the secret and the password.
func (l ProviderLink) Wipe() {
	l.APISecret.Wipe()
	l.Password.Wipe()
}

// DecodeProviderLink reads and bounds a ProviderLink: 422 invalid_request
// naming the field for a value out of bounds, or for a field of the other
// form (an apiKey beside a login), or for liveConsent (hosted Connect's).
func DecodeProviderLink(r *http.Request) (ProviderLink, error) {
	b, err := DecodeHostedProviderLink(r)
	if err == nil && b.LiveConsent != nil {
		b.Wipe()
		return ProviderLink{}, commands.InvalidField("liveConsent", nil,
			"liveConsent is hosted Connect's (an app's trader consenting to live trading by the app); your accounts follow your own live trading switch")
	}
	return b, err
}

// DecodeHostedProviderLink is DecodeProviderLink for hosted Connect, which
// takes liveConsent.
func DecodeHostedProviderLink(r *http.Request) (ProviderLink, error) {
	var b ProviderLink
	if err := httpx.Decode(r, &b, providerLinkLimit); err != nil {
		b.Wipe()
		return ProviderLink{}, err
	}
	var err error
	switch {
	case b.Provider == "" || len(b.Provider) > maxProviderName:
		err = commands.InvalidField("provider", nil, "provider names one of the engine's providers, such as binance-futures or tradovate")
	case len(b.Label) > maxLabel:
		err = commands.InvalidField("label", nil, "label is at most %d characters", maxLabel)
	case b.ByLogin():
		err = checkLogin(b)
	case b.Environment != "" || b.AccountNumber != "":
		field := "environment"
		if b.Environment == "" {
			field = "accountNumber"
		}
		err = commands.InvalidField(field, nil, "%s goes with a login and password", field)
	case b.APIKey == "" || len(b.APIKey) > maxAPIKey || strings.ContainsAny(b.APIKey, " \t\r\n"):
		err = commands.InvalidField("apiKey", nil, "apiKey is 1 to %d characters without spaces", maxAPIKey)
	case b.APISecret.IsZero() || b.APISecret.Len() > maxAPISecret:
		err = commands.InvalidField("apiSecret", nil, "apiSecret is 1 to %d characters", maxAPISecret)
	}
	if err != nil {
		b.Wipe()
		return ProviderLink{}, err
	}
	return b, nil
}

// checkLogin bounds a login's form.
func checkLogin(b ProviderLink) error {
	switch {
	case b.APIKey != "" || !b.APISecret.IsZero():
		return commands.InvalidField("apiKey", nil, "a link is either a login and password or an API key and secret, not both")
	case b.Login == "" || len(b.Login) > maxLoginName || strings.IndexFunc(b.Login, unicode.IsControl) >= 0 || strings.TrimSpace(b.Login) != b.Login:
		return commands.InvalidField("login", nil, "login is the login name at the provider, 1 to %d characters", maxLoginName)
	case b.Password.IsZero() || b.Password.Len() > maxPassword:
		return commands.InvalidField("password", nil, "password is 1 to %d characters", maxPassword)
	case b.Environment != "" && b.Environment != environmentLive && b.Environment != environmentDemo:
		return commands.InvalidField("environment", nil, "environment is live or demo")
	case len(b.AccountNumber) > maxAccountNumber || strings.IndexFunc(b.AccountNumber, unicode.IsControl) >= 0:
		return commands.InvalidField("accountNumber", nil, "accountNumber is at most %d characters", maxAccountNumber)
	}
	return nil
}

// CheckProviderForm refuses a link whose form is not its provider's: a
// login for a provider linked with a key, or a key for one linked with a
// login (isLogin, as the engine says).
func CheckProviderForm(b ProviderLink, isLogin bool) error {
	switch {
	case isLogin && !b.ByLogin():
		return commands.InvalidField("login", map[string]any{"provider": b.Provider},
			"provider %s is linked with its login name and password (login, password)", b.Provider)
	case !isLogin && b.ByLogin():
		return commands.InvalidField("apiKey", map[string]any{"provider": b.Provider},
			"provider %s is linked with an API key and secret (apiKey, apiSecret)", b.Provider)
	}
	return nil
}

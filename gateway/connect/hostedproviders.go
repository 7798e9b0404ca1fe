package connect

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
)

// providerInfo is how hosted Connect presents a provider the engine links.
type providerInfo struct {
	Name  string `json:"name"`  // the engine's name of the provider
	Title string `json:"title"` // what the trader knows it as
	// KeyNote tells the trader what key to create there.
	KeyNote string `json:"keyNote"`
	// Login: the trader signs in with the provider's login name and
	// password (its form has login, password and environment) instead of
	// pasting a key.
	Login bool `json:"login,omitempty"`
}

// providerInfos are the words for the built-in providers; a provider
// missing here is shown by its name.
var providerInfos = map[string]providerInfo{
	"binance-futures": {Title: "Binance USDⓈ-M Futures",
		KeyNote: "Create an API key for this app in your Binance account (API Management): allow Reading and Futures trading, " +
			"and leave Withdrawals off. A key that can withdraw is refused. Your secret is sent once over this page's secure " +
			"connection, sealed by the service, and never shown to the app."},
	"tradovate": {Title: "Tradovate", Login: true,
		KeyNote: "Sign in with your Tradovate login name and password. Your password is sent once over this page's secure " +
			"connection to sign in to Tradovate and is never stored: the service keeps only Tradovate's sign-in tokens, sealed, " +
			"and never shows them to the app. Each account of the login is linked, or only the account number you name."},
}

// providers are the providers the engine links, as hosted Connect shows them.
func (h *Handlers) providers() []providerInfo {
	out := []providerInfo{}
	for _, n := range h.d.Engine.ProviderNames() {
		p, ok := providerInfos[n]
		if !ok {
			p = providerInfo{Title: n}
		}
		p.Name = n
		p.Login = p.Login || h.d.Engine.IsLoginProvider(n)
		out = append(out, p)
	}
	return out
}

// scopes says, in plain words, what an app may do on an account the trader
// connects: what a Connect app key reaches for its trader.
var scopes = []string{
	"See the account: its balance, positions, orders, fills and profit and loss.",
	"Place, change and cancel orders, and close positions, on the account.",
	"It cannot withdraw or move funds, and it never sees your password or API secret.",
	"You can disconnect it here at any time.",
}

// errorWords are the sentences hosted Connect's page shows for the codes
// its routes answer; any other code gets errorOther. The API's own
// sentence is never shown.
var errorWords = map[commands.Code]string{
	commands.CodeProviderCredentialsRefused: "The exchange did not accept this API key and secret. Check that you copied both exactly, then try again.",
	commands.CodeProviderKeyRefused:         "This API key cannot be used: it must allow reading and futures trading, and must not allow withdrawals. Create a new key with those settings.",
	commands.CodeProviderUnavailable:        "The exchange could not be reached. Nothing was linked. Try again in a moment.",
	commands.CodeProviderRateLimited:        "The exchange is limiting requests for this key right now. Nothing was linked. Try again in a minute.",
	commands.CodeProviderReadFailed:         "Your account at the exchange could not be read completely. Nothing was linked. Try again.",
	commands.CodeProviderNotSupported:       "This exchange cannot be linked here.",
	commands.CodeLinkClosed:                 "This connection request has ended. Go back to the app and start again.",
	commands.CodeLinkExpired:                "This connection request expired. Go back to the app and start again.",
	commands.CodeFrameSessionRequired:       "This page has expired. Go back to the app and start again.",
	commands.CodeInvalidRequest:             "Fill in both the API key and the secret, then try again.",
}

// loginErrorWords are the sentences of a login form (a provider signed in
// to with a login name and password) where they differ from errorWords.
var loginErrorWords = map[commands.Code]string{
	commands.CodeProviderCredentialsRefused: "The provider did not accept this login name and password. Check both, then try again.",
	commands.CodeProviderKeyRefused:         "This login has no account that can trade futures here.",
	commands.CodeProviderUnavailable:        "The provider could not be reached. Nothing was linked. Try again in a moment.",
	commands.CodeProviderRateLimited:        "The provider is limiting sign-ins for this login right now. Nothing was linked. Try again later.",
	commands.CodeProviderReadFailed:         "Your account at the provider could not be read completely. Nothing was linked. Try again.",
	commands.CodeInvalidRequest:             "Fill in your login name and password (and an account number only if you want just that account), then try again.",
}

// errorOther is the page's sentence for a failure without words of its own.
const errorOther = "Something went wrong. Nothing was changed. Try again in a moment."

// LinkProvider links the trader's account at a provider and connects the
// link to it (POST /api/connect/hosted/providers, the frame session): the
// engine checks the key at the provider and opens the account (clock
// observation) through the same door as the session route
// (engine.LinkProvider), for the app's trader; the link becomes connected
// with result {status: connected, accountId}, as the paper account's
// button does. The same key linked again by the same trader reaches the
// same account. liveConsent is the trader's word on live trading by the
// app on the account (the form's box; engine's live.go): true lets the
// app's orders reach the provider, false refuses them; a link again says
// anew, and only a link grants it (it takes the key or password again,
// which the app never holds).
func (h *Handlers) LinkProvider(w http.ResponseWriter, r *http.Request) error {
	b, err := api.DecodeHostedProviderLink(r)
	if err != nil {
		return err
	}
	defer b.Wipe()
	isLogin := h.d.Engine.IsLoginProvider(b.Provider)
	if err := api.CheckProviderForm(b, isLogin); err != nil {
		return err
	}
	l, a, err := h.frame(r)
	if err != nil {
		return err
	}
	if isLogin {
		// A login's accounts are named by the app, its trader and the login:
		// the same login linked again reaches the same accounts. The link
		// connects the first (the named one, with accountNumber).
		linked, err := h.d.Engine.LinkLogin(r.Context(), engine.LoginLinkRequest{Provider: b.Provider, Login: b.Login, Password: b.Password,
			Environment: b.Environment, AccountNumber: b.AccountNumber, Label: b.Label, TenantID: a.TenantID, AppID: a.AppID, Trader: l.Trader,
			Scope: strings.Join([]string{"hosted", a.AppID, l.Trader}, "\x00"), LiveConsent: b.LiveConsent, Principal: hostedSystem})
		if err != nil {
			return err
		}
		for _, res := range linked.Results {
			if err := h.d.Settle(r.Context(), res); err != nil {
				return err
			}
		}
		return h.connect(w, r, l.ID, linked.AccountIDs[0])
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{"hosted-provider", a.AppID, l.Trader, b.Provider, b.APIKey}, "\x00")))
	accountID := "acct_" + ulid.ULID(sum[:16]).String()
	res, err := h.d.Engine.LinkProvider(r.Context(), engine.LinkRequest{AccountID: accountID, Provider: b.Provider, APIKey: b.APIKey,
		Secret: b.APISecret, Label: b.Label, TenantID: a.TenantID, AppID: a.AppID, Trader: l.Trader, LiveConsent: b.LiveConsent,
		Principal: hostedSystem})
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	return h.connect(w, r, l.ID, accountID)
}

// Cancel is the trader's cancel in hosted Connect (POST
// /api/connect/hosted/cancel, the frame session): the link's close
// operation, as the app's DELETE runs it. A created or mounted link
// closes (result {status: closed}) and the frame session on it ends; a
// connected link stays connected. The answer is {link} as it stands, which
// the page hands back to the app.
func (h *Handlers) Cancel(w http.ResponseWriter, r *http.Request) error {
	var b struct{}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	l, _, err := h.frame(r)
	if err != nil {
		return err
	}
	// The close operation is keyed: the trader's cancel has one key (and digest) per link.
	env := h.d.Engine.Envelope(hostedSystem, cancelKey, &connectcmd.CloseLink{})
	env.Digest = idem.Digest(http.MethodPost, "/api/connect/hosted/cancel", "hosted:"+l.ID, nil)
	res, err := h.d.Engine.Link(r.Context(), l.ID, env)
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	l, _, err = h.d.Engine.LinkState(r.Context(), l.ID)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"link": connectcmd.ViewLink(l, h.cfg.Now())})
	return nil
}

// cancelKey is the Idempotency-Key of the trader's cancel on a link.
const cancelKey = "hosted:cancel"

// operator names who runs hosted Connect: the configured name, else the
// host of the service's address.
func (h *Handlers) operator() string {
	if h.cfg.Operator != "" {
		return h.cfg.Operator
	}
	if u, err := url.Parse(h.cfg.BaseURL); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "this service"
}

// logo is the app's logo as hosted Connect shows it: an https URL the app
// registered, else none.
func logo(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return ""
	}
	return u.String()
}

// pageWords is errorWords and errorOther as the page's script reads them.
var pageWords = func() string {
	m := map[string]string{"": errorOther}
	for c, s := range errorWords {
		m[string(c)] = s
	}
	for c, s := range loginErrorWords {
		m["login:"+string(c)] = s
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}()

package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/events"
)

// This file links a trader's login at a provider signed in to with a login
// name and password (a futures broker's): the password is exchanged for
// the login's tokens once and wiped; only the tokens are kept, sealed under
// each linked account's own data key, and renewed (engine/providers'
// tokens.go records each renewal).

// LoginProvider is a provider signed in to with a login, by environment
// (provider.EnvLive, provider.EnvDemo): each environment is its own system
// with its own addresses.
type LoginProvider struct {
	Environments map[string]provider.TokenProvider
	// Default is the environment of a link that names none.
	Default string
}

// LoginLinkRequest is a trader's request to link the accounts of a login.
type LoginLinkRequest struct {
	Provider    string
	Login       string
	Password    seal.Secret // wiped once the provider has answered
	Environment string      // "": the provider's default
	// AccountNumber names the one account of the login to link (its name
	// or number at the provider); "": every account the login may trade.
	AccountNumber string
	Label         string
	TenantID      string
	Email         string
	AppID         string // hosted Connect: the app the trader links through
	Trader        string // hosted Connect: the app's own id of the trader
	// Scope names who links (the session's user, or an app's trader): the
	// same scope signing in to the same login reaches the same accounts,
	// so signing in again renews their tokens instead of opening others.
	Scope string
	// LiveConsent is, on hosted Connect, the trader's word on live trading
	// by the app, for each account linked (nil: not said; live.go).
	LiveConsent *bool
	Principal   events.Principal
}

// LoginLinked is what a login's link did: each account linked (its commit)
// and what the provider confirmed of the login.
type LoginLinked struct {
	AccountIDs []string
	Results    []Result
	Confirmed  ConfirmedLogin
}

// ConfirmedLogin is a login the provider confirmed: its name, its
// environment and the names of the accounts linked from it.
type ConfirmedLogin struct {
	Provider    string
	Login       string
	Environment string
	Accounts    []string
}

// Matches reports whether the login is the one a pre-registration names:
// its login name when one is named, and the account when one is named,
// case-insensitively.
func (c ConfirmedLogin) Matches(loginName, accountNumber string) bool {
	if loginName != "" && !strings.EqualFold(loginName, c.Login) {
		return false
	}
	if accountNumber == "" {
		return true
	}
	return slices.ContainsFunc(c.Accounts, func(a string) bool { return strings.EqualFold(a, accountNumber) })
}

// loginProvider is the provider of the name for env ("": its default).
func (e *Engine) loginProvider(name, env string) (provider.TokenProvider, string, error) {
	lp, ok := e.cfg.Providers.Logins[name]
	if !ok {
		return nil, "", commands.Refuse(commands.CodeProviderNotSupported, "this engine links no login at a provider of that name",
			map[string]any{"provider": name, "providers": e.ProviderNames()})
	}
	if env == "" {
		env = lp.Default
	}
	tp, ok := lp.Environments[env]
	if !ok {
		envs := make([]string, 0, len(lp.Environments))
		for n := range lp.Environments {
			envs = append(envs, n)
		}
		slices.Sort(envs)
		return nil, "", commands.InvalidField("environment", map[string]any{"environments": envs},
			"environment is one of %s at this engine", strings.Join(envs, ", "))
	}
	return tp, env, nil
}

// IsLoginProvider reports whether the provider of the name is signed in to
// with a login name and password (linked with LinkLogin).
func (e *Engine) IsLoginProvider(name string) bool {
	if e.cfg.Providers == nil {
		return false
	}
	_, ok := e.cfg.Providers.Logins[name]
	return ok
}

// LinkLogin signs in to the login once (the password is wiped after the
// provider answered), lists its accounts and links each it may trade (or
// the one named), each with its complete snapshot as its first
// observations and the login's tokens sealed under its own data key. The
// same login linked again by the same scope reaches the same accounts and
// replaces their tokens (a lost login resumes). A login the provider does
// not take is provider_credentials_refused; one with no account it may
// trade is provider_key_refused (cannot_trade).
func (e *Engine) LinkLogin(ctx context.Context, req LoginLinkRequest) (LoginLinked, error) {
	defer req.Password.Wipe()
	if e.prov == nil {
		return LoginLinked{}, commands.Refuse(commands.CodeProviderNotSupported, "this engine links no provider accounts",
			map[string]any{"provider": req.Provider, "providers": []string{}})
	}
	tp, env, err := e.loginProvider(req.Provider, req.Environment)
	if err != nil {
		return LoginLinked{}, err
	}
	tok, err := tp.Login(ctx, req.Login, req.Password.Reveal())
	req.Password.Wipe()
	if err != nil {
		return LoginLinked{}, loginRefusal(err, req.Provider)
	}
	accts, err := tp.Accounts(ctx, tok)
	if err != nil {
		return LoginLinked{}, loginRefusal(err, req.Provider)
	}
	var chosen []provider.LoginAccount
	for _, a := range accts {
		named := req.AccountNumber != "" && (strings.EqualFold(a.Name, req.AccountNumber) || a.ID == req.AccountNumber)
		switch {
		case named && !a.Active:
			return LoginLinked{}, ProviderRefusal(&provider.KeyRefused{Reason: provider.KeyCannotTrade}, req.Provider, "")
		case named || (req.AccountNumber == "" && a.Active):
			chosen = append(chosen, a)
		}
	}
	switch {
	case len(chosen) == 0 && req.AccountNumber != "":
		return LoginLinked{}, commands.InvalidField("accountNumber", nil, "the login holds no account of that number")
	case len(chosen) == 0:
		return LoginLinked{}, ProviderRefusal(&provider.KeyRefused{Reason: provider.KeyCannotTrade}, req.Provider, "")
	}
	out := LoginLinked{Confirmed: ConfirmedLogin{Provider: req.Provider, Login: tok.Login, Environment: env}}
	for _, a := range chosen {
		id, res, err := e.linkLoginAccount(ctx, req, tp, tok, a)
		if err != nil {
			return out, err
		}
		out.AccountIDs = append(out.AccountIDs, id)
		out.Results = append(out.Results, res)
		out.Confirmed.Accounts = append(out.Confirmed.Accounts, a.Name)
	}
	return out, nil
}

// loginRefusal is ProviderRefusal in a login's words.
func loginRefusal(err error, providerName string) error {
	if errors.Is(err, provider.ErrUnauthorized) {
		return commands.Refuse(commands.CodeProviderCredentialsRefused, "the provider did not take the login name and password",
			map[string]any{"provider": providerName})
	}
	return ProviderRefusal(err, providerName, "")
}

// maxLoginRelinks bounds the generations of a login's account: unlinked,
// its id names a closed account, and a later link takes the next one.
const maxLoginRelinks = 32

// loginAccountID names the engine's account of the login's account a for
// the request's scope in generation gen: the same scope, login and account
// give the same id until it is unlinked; then the next generation's.
func loginAccountID(req LoginLinkRequest, tok provider.Token, a provider.LoginAccount, gen int) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{"provider-login", req.Scope, req.Provider, tok.Environment, tok.UserID, a.ID,
		fmt.Sprint(gen)}, "\x00")))
	return "acct_" + ulid.ULID(sum[:16]).String()
}

// linkLoginAccount reads the account whole on a session of its own (the
// reactor that owns the account opens its session after the commit, with
// the renewals recorded), seals the tokens for it and commits the link on
// the account's owner: the first generation of its id that is not an
// account unlinked before (which refuses the link as linked already).
func (e *Engine) linkLoginAccount(ctx context.Context, req LoginLinkRequest, tp provider.TokenProvider, tok provider.Token,
	a provider.LoginAccount) (string, Result, error) {
	sess, err := tp.Resume(ctx, tok, a.ID, nil)
	if err != nil {
		return "", Result{}, loginRefusal(err, req.Provider)
	}
	snap, err := sess.Snapshot(ctx)
	_ = sess.Close()
	if err != nil {
		if errors.Is(err, provider.ErrUnavailable) || errors.Is(err, provider.ErrRateLimited) || errors.Is(err, provider.ErrBanned) {
			return "", Result{}, ProviderRefusal(err, req.Provider, "")
		}
		return "", Result{}, commands.Refuse(commands.CodeProviderReadFailed, "reading the provider account failed partway; nothing was linked: try again",
			map[string]any{"provider": req.Provider})
	}
	broker := e.cfg.Providers.Brokers[req.Provider]
	if broker == "" {
		broker = req.Provider
	}
	label := req.Label
	if label == "" {
		label = strings.ToUpper(broker[:1]) + broker[1:] + " " + a.Name
		if len(label) > providercmd.MaxLabel {
			label = label[:providercmd.MaxLabel]
		}
	}
	currency := "USD"
	if len(snap.Balances) > 0 && snap.Balances[0].Asset != "" {
		currency = snap.Balances[0].Asset
	}
	obs := providers.SnapshotObservation(snap, account.CauseLink)
	observedValuePerPoint(&obs) // providerfutures.go
	for gen := 0; gen < maxLoginRelinks; gen++ {
		id := loginAccountID(req, tok, a, gen)
		sealed, err := e.sealToken(ctx, id, tok)
		if err != nil {
			return "", Result{}, err
		}
		link := &providercmd.Link{Provider: req.Provider, Broker: broker, TenantID: req.TenantID, Email: req.Email, AppID: req.AppID, Trader: req.Trader,
			AccountNumber: strings.ToUpper(broker[:1]) + "F" + id[len(id)-12:], Label: label, Currency: currency,
			CredentialID: tok.ID(), Sealed: sealed, Snapshot: obs,
			Login: tok.Login, Account: a.ID, AccountName: a.Name, Environment: tok.Environment, ExpiresAt: tok.ExpiresAt,
			TimeInForce: tp.Capabilities().TimeInForce, LiveConsent: req.LiveConsent}
		env := e.Envelope(req.Principal, "", link)
		var res Result
		if e.owns(id) {
			res, err = e.accounts.Execute(ctx, id, env)
		} else {
			res, err = e.forward(ctx, id, env) // its owner commits it; its reactor opens the session
		}
		var r *commands.Refusal
		if errors.As(err, &r) && r.Code == commands.CodeIdempotencyConflict {
			continue // an account of this login unlinked before: the next generation
		}
		return id, res, err
	}
	return "", Result{}, commands.Refuse(commands.CodeIdempotencyConflict, "this login's account was linked and unlinked too often here", nil)
}

// sealedToken is what an account's sealed tokens hold: provider.Token's
// fields (a Token marshals to "[redacted]").
type sealedToken struct {
	Access      string    `json:"a"`
	MarketData  string    `json:"m,omitempty"`
	ExpiresAt   time.Time `json:"x"`
	UserID      string    `json:"u"`
	Login       string    `json:"l"`
	Environment string    `json:"e"`
}

func (e *Engine) sealToken(ctx context.Context, accountID string, t provider.Token) ([]byte, error) {
	if e.cfg.Providers == nil || e.cfg.Providers.Vault == nil {
		return nil, errors.New("engine: no vault for a login's tokens")
	}
	plain, err := json.Marshal(sealedToken{Access: t.Access, MarketData: t.MarketData, ExpiresAt: t.ExpiresAt.UTC(), UserID: t.UserID,
		Login: t.Login, Environment: t.Environment})
	if err != nil {
		return nil, err
	}
	sealed, err := e.cfg.Providers.Vault.Seal(ctx, accountID, plain)
	clear(plain)
	if err != nil {
		return nil, fmt.Errorf("seal the tokens: %w", err)
	}
	return sealed.MarshalBinary()
}

func (e *Engine) openToken(ctx context.Context, accountID string, sealed []byte) (provider.Token, error) {
	if e.cfg.Providers == nil || e.cfg.Providers.Vault == nil {
		return provider.Token{}, errors.New("engine: no vault for a login's tokens")
	}
	sl, err := seal.Parse(sealed)
	if err != nil {
		return provider.Token{}, err
	}
	sec, err := e.cfg.Providers.Vault.OpenSecret(ctx, accountID, sl)
	e.noteOpen(accountID, sealed, err) // providercred.go
	if err != nil {
		return provider.Token{}, err
	}
	defer sec.Wipe()
	var t sealedToken
	if err := json.Unmarshal(sec.Reveal(), &t); err != nil {
		return provider.Token{}, errors.New("engine: the sealed tokens do not read")
	}
	return provider.Token{Access: t.Access, MarketData: t.MarketData, ExpiresAt: t.ExpiresAt, UserID: t.UserID, Login: t.Login,
		Environment: t.Environment}, nil
}

// loginsConfig is the provider reactor's access to the logins' tokens.
func (e *Engine) loginsConfig() providers.LoginConfig {
	return providers.LoginConfig{Open: e.openToken, Seal: e.sealToken,
		Environment: func(name, env string) (provider.TokenProvider, bool) {
			tp, ok := e.cfg.Providers.Logins[name].Environments[env]
			return tp, ok
		}}
}

// loginIndex is every account linked through a login that this engine
// holds, as of its last commit: what FuturesLogin and ConfirmedLogins read.
type loginIndex struct {
	mu sync.Mutex
	m  map[string]loginRef // by account id
}

// loginRef is one account's login as of its last commit.
type loginRef struct {
	tenant   string
	provider string
	login    account.Login
	sealed   []byte
	linked   bool
}

// track keeps the account's login (trackProvider calls it after each commit).
func (x *loginIndex) track(accountID string, s *account.State) {
	p := s.Provider
	if p == nil || !p.ByLogin() {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]loginRef{}
	}
	x.m[accountID] = loginRef{tenant: s.TenantID, provider: p.Name, login: p.Login, sealed: p.Sealed, linked: p.Linked}
}

// get is the account's login, if it was linked through one.
func (x *loginIndex) get(accountID string) (loginRef, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := x.m[accountID]
	return r, ok
}

// of lists the user's linked logins' accounts of the provider ("": any), by account id.
func (x *loginIndex) of(tenant, providerName string) map[string]loginRef {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[string]loginRef{}
	for id, r := range x.m {
		if r.tenant == tenant && r.linked && (providerName == "" || r.provider == providerName) {
			out[id] = r
		}
	}
	return out
}

// ConfirmedLogins lists the logins at the provider that the user linked
// and the provider still takes, with the accounts linked from each.
func (e *Engine) ConfirmedLogins(tenant, providerName string) []ConfirmedLogin {
	byLogin := map[string]*ConfirmedLogin{}
	for _, r := range e.provAccts.logins.of(tenant, providerName) {
		if r.login.LoginLost {
			continue
		}
		k := r.login.Environment + "\x00" + r.login.LoginName
		c, ok := byLogin[k]
		if !ok {
			c = &ConfirmedLogin{Provider: r.provider, Login: r.login.LoginName, Environment: r.login.Environment}
			byLogin[k] = c
		}
		c.Accounts = append(c.Accounts, r.login.AccountName)
	}
	out := make([]ConfirmedLogin, 0, len(byLogin))
	for _, c := range byLogin {
		slices.Sort(c.Accounts)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ConfirmedLogin) int { return strings.Compare(a.Environment+a.Login, b.Environment+b.Login) })
	return out
}

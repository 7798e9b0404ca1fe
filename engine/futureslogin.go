package engine

import (
	"context"
	"slices"

	"github.com/svc/engine/engine/provider"
)

// This file is the seam between linked futures logins and the futures
// market data served from them: a trader's prices come from their own login.

// FuturesLogin is the freshest token of a futures login the user (their
// tenant id: the owner of the accounts they linked) has linked at the
// provider FuturesData answers and the provider still takes: a live
// login's when the user has one, else a demo login's (the adapter refuses
// market data to a demo login with NotEntitled{demo_login}). false: the
// user has linked none. The freshest is the one whose access token expires
// last, as last recorded (a session renews it before it expires).
func (e *Engine) FuturesLogin(ctx context.Context, userID string) (provider.Token, bool, error) {
	name, ok := e.futuresProvider()
	if !ok || userID == "" {
		return provider.Token{}, false, nil
	}
	var best provider.Token
	found := false
	ids := []string{}
	refs := e.provAccts.logins.of(userID, name)
	for id := range refs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var firstErr error
	for _, id := range ids {
		r := refs[id]
		if r.login.LoginLost {
			continue
		}
		t, err := e.openToken(ctx, id, r.sealed)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		better := !found ||
			(t.Environment == provider.EnvLive && best.Environment != provider.EnvLive) ||
			(t.Environment == best.Environment && t.ExpiresAt.After(best.ExpiresAt))
		if better {
			best, found = t, true
		}
	}
	if !found && firstErr != nil {
		return provider.Token{}, false, firstErr
	}
	return best, found, nil
}

// FuturesData is the provider whose logins serve futures market data (the
// first, by name, of the providers this engine links that signs in with a
// login and password): a token of any of its environments resumes on that
// environment's system, so a demo login's session refuses market data as
// the provider does (NotEntitled{demo_login}). false: the engine links none.
func (e *Engine) FuturesData() (provider.TokenProvider, bool) {
	name, ok := e.futuresProvider()
	if !ok {
		return nil, false
	}
	lp := e.cfg.Providers.Logins[name]
	def, ok := lp.Environments[provider.EnvLive]
	if !ok {
		def, ok = lp.Environments[lp.Default]
	}
	if !ok {
		return nil, false
	}
	return envProvider{TokenProvider: def, envs: lp.Environments}, true
}

// envProvider is a login provider whose tokens are read and resumed on the
// system of their own environment; the rest is its default environment's.
type envProvider struct {
	provider.TokenProvider
	envs map[string]provider.TokenProvider
}

func (p envProvider) of(t provider.Token) provider.TokenProvider {
	if tp, ok := p.envs[t.Environment]; ok {
		return tp
	}
	return p.TokenProvider
}

// Accounts lists the login's accounts on its environment's system.
func (p envProvider) Accounts(ctx context.Context, t provider.Token) ([]provider.LoginAccount, error) {
	return p.of(t).Accounts(ctx, t)
}

// Resume opens a session on its environment's system.
func (p envProvider) Resume(ctx context.Context, t provider.Token, accountID string, renewed func(provider.Token)) (provider.Session, error) {
	return p.of(t).Resume(ctx, t, accountID, renewed)
}

// futuresProvider names the provider FuturesData serves.
func (e *Engine) futuresProvider() (string, bool) {
	if e.cfg.Providers == nil || len(e.cfg.Providers.Logins) == 0 {
		return "", false
	}
	names := make([]string, 0, len(e.cfg.Providers.Logins))
	for n := range e.cfg.Providers.Logins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names[0], true
}

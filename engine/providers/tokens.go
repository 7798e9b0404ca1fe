package providers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider"
)

// An account linked through a login (a provider.TokenProvider: the trader
// signed in with a login name and password, and the engine keeps only the
// login's tokens, sealed) is opened with Resume on its tokens instead of
// Connect. The session renews the tokens; each renewal is sealed and
// recorded on the account (RenewToken), so a start resumes from the
// freshest. Once the provider no longer takes them (a Resume, a read or a
// send answers *provider.Unauthorized) the account is marked (LoseLogin):
// its session ends and none is opened until the trader signs in again,
// whose newer tokens start a session that settles every open intent by
// lookup, never by sending it.

// LoginConfig serves the accounts linked through a login.
type LoginConfig struct {
	// Open opens an account's sealed tokens.
	Open func(ctx context.Context, accountID string, sealed []byte) (provider.Token, error)
	// Seal seals tokens for the account (under its own data key).
	Seal func(ctx context.Context, accountID string, t provider.Token) ([]byte, error)
	// Environment is the provider of the name for a token of the
	// environment (a login signs in to one of the provider's environments);
	// nil or false: the provider of Config.Providers.
	Environment func(name, env string) (provider.TokenProvider, bool)
}

// loginState is what the reactor remembers of the logins: the accounts
// whose login was lost, so the session opened once the trader signs in
// again resumes (looks its intents up) rather than sending them.
type loginState struct {
	mu   sync.Mutex
	lost map[string]bool
}

func (s *loginState) markLost(accountID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = map[string]bool{}
	}
	s.lost[accountID] = true
}

// takeLost reports (and forgets) whether the account's login was lost.
func (s *loginState) takeLost(accountID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.lost[accountID]
	delete(s.lost, accountID)
	return was
}

// loginLink is a link's login: the provider's account and the sealed
// tokens its session holds, guarded by the reactor's mu.
type loginLink struct {
	account string
	// own are the sealed tokens this link's session started from or
	// renewed to: sealed tokens of the account's not among them are a
	// newer sign-in, which replaces the session.
	own  map[string]bool
	last []byte // the latest of own
	lost bool   // LoseLogin was sent
}

// newLoginLink is the login of a link opened on p, nil for a key's link.
func newLoginLink(p *account.Provider) *loginLink {
	if !p.ByLogin() {
		return nil
	}
	return &loginLink{account: p.Account, own: map[string]bool{string(p.Sealed): true}, last: p.Sealed}
}

// trackLogin is track's part for a login's account, under r.mu: a lost
// login stops the account's session; a newer sign-in replaces it. It
// reports whether track goes on, and whether a link it opens resumes.
func (r *Reactor) trackLogin(accountID string, p *account.Provider, resumed bool) (goOn, resume bool) {
	l := r.links[accountID]
	if !p.ByLogin() {
		return true, resumed
	}
	if p.LoginLost && p.Linked {
		if l != nil {
			l.stop()
			delete(r.links, accountID)
		}
		r.logins.markLost(accountID)
		return false, resumed
	}
	if l != nil && l.login != nil && !l.login.own[string(p.Sealed)] {
		l.stop() // signed in again: a session on the newer tokens, which looks every open intent up
		delete(r.links, accountID)
		resumed = true
	}
	if r.links[accountID] == nil && r.logins.takeLost(accountID) {
		resumed = true
	}
	return true, resumed
}

// resumeLogin opens the link's session on its sealed tokens, trying again
// after a passing failure (after 4 Retry, doubling to 30 s: each try reads
// the login's accounts at the provider); nil when ctx ends or the provider
// no longer takes the tokens (the account is marked).
func (r *Reactor) resumeLogin(ctx context.Context, l *link, prov provider.Provider) provider.Session {
	wait := 4 * r.cfg.Retry
	for {
		sess, err := r.resumeOnce(ctx, l, prov)
		if err == nil {
			return sess
		}
		if r.loginRefused(l, err) || ctx.Err() != nil {
			return nil
		}
		slog.Warn("providers: resuming a linked login's account failed; trying again", "account", l.accountID, "err", err, "in", wait)
		if !sleep(ctx, wait) {
			return nil
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (r *Reactor) resumeOnce(ctx context.Context, l *link, prov provider.Provider) (provider.Session, error) {
	lc := r.cfg.Logins
	if lc.Open == nil || lc.Seal == nil {
		return nil, errors.New("providers: no vault for a login's tokens")
	}
	r.mu.Lock()
	sealed := l.login.last
	r.mu.Unlock()
	tok, err := lc.Open(ctx, l.accountID, sealed)
	if err != nil {
		return nil, err
	}
	tp, ok := prov.(provider.TokenProvider)
	if lc.Environment != nil {
		if e, found := lc.Environment(l.name, tok.Environment); found {
			tp, ok = e, true
		}
	}
	if !ok {
		return nil, errors.New("providers: the provider takes no login's tokens")
	}
	return tp.Resume(ctx, tok, l.login.account, r.renewer(ctx, l))
}

// renewer is the session's renewal callback: it never blocks; the latest
// renewed token is sealed and recorded on the account by a goroutine of
// the link.
func (r *Reactor) renewer(ctx context.Context, l *link) func(provider.Token) {
	next := make(chan provider.Token, 1)
	go func() {
		for {
			var t provider.Token
			select {
			case <-ctx.Done():
				return
			case t = <-next:
			}
			for !r.recordRenewal(ctx, l, t) {
				if !sleep(ctx, 4*r.cfg.Retry) {
					return
				}
			}
		}
	}()
	return func(t provider.Token) {
		for {
			select {
			case next <- t:
				return
			default:
			}
			select { // replace a renewal not recorded yet: the newest is enough
			case <-next:
			default:
			}
		}
	}
}

// recordRenewal seals t and records it; false when it could not (tried
// again).
func (r *Reactor) recordRenewal(ctx context.Context, l *link, t provider.Token) bool {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	sealed, err := r.cfg.Logins.Seal(sctx, l.accountID, t)
	cancel()
	if err != nil {
		slog.Warn("providers: sealing a login's renewed tokens failed; trying again", "account", l.accountID, "err", err)
		return false
	}
	r.mu.Lock()
	l.login.own[string(sealed)] = true
	l.login.last = sealed
	r.mu.Unlock()
	err = r.exec(l.accountID, &providercmd.RenewToken{Sealed: sealed, ExpiresAt: t.ExpiresAt, Cause: providercmd.TokenRenewal})
	var refused *commands.Refusal
	return err == nil || ctx.Err() != nil || errors.As(err, &refused)
}

// loginRefused records, for a login's account, that the provider no
// longer takes its tokens when err says so (once per link); it reports
// whether err said so.
func (r *Reactor) loginRefused(l *link, err error) bool {
	if l.login == nil || !errors.Is(err, provider.ErrUnauthorized) {
		return false
	}
	r.mu.Lock()
	first, sealed := !l.login.lost, l.login.last
	l.login.lost = true
	r.mu.Unlock()
	if first {
		slog.Warn("providers: the provider no longer takes a linked login's tokens; the trader signs in again", "account", l.accountID)
		_ = r.exec(l.accountID, &providercmd.LoseLogin{Sealed: sealed})
	}
	return true
}

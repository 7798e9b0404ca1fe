package tradovate

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// tokenLife is the life the documentation gives an access token (80
// minutes), assumed when an answer omits its expirationTime.
const tokenLife = 80 * time.Minute

// Login implements provider.TokenProvider: POST /auth/accesstokenrequest
// with the login name, the password and the engine's application. The
// password is written into the request body alone, which is wiped when
// the request is done; a penalty ticket on the request is waited out
// within Limits.MaxPenaltyWait and the identical body sent again with it,
// else *provider.RateLimited (a captcha: *provider.Banned).
func (p *Provider) Login(ctx context.Context, name string, password []byte) (provider.Token, error) {
	if name == "" || len(password) == 0 {
		return provider.Token{}, &provider.Unauthorized{}
	}
	body := tokenBody(name, password, p.opts.App)
	defer clear(body)
	var r accessTokenResponse
	err := p.send(ctx, p.signInBudget(name), "", request{op: opLogin, method: http.MethodPost, path: "/auth/accesstokenrequest", raw: body}, &r)
	if err != nil {
		return provider.Token{}, mapError(opLogin, err)
	}
	if r.ErrorText != "" {
		return provider.Token{}, &provider.Unauthorized{}
	}
	if r.AccessToken == "" || r.UserID <= 0 {
		return provider.Token{}, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
	}
	if r.UserStatus != "" && r.UserStatus != "Active" {
		return provider.Token{}, &provider.KeyRefused{Reason: provider.KeyCannotTrade}
	}
	login := r.Name
	if login == "" {
		login = name
	}
	return provider.Token{Access: r.AccessToken, MarketData: r.MDAccessToken, ExpiresAt: p.expiry(r.ExpirationTime),
		UserID: r.UserID.String(), Login: login, Environment: p.Environment()}, nil
}

// expiry is an answer's expirationTime, or tokenLife from now when absent.
func (p *Provider) expiry(t time.Time) time.Time {
	if t.IsZero() {
		return p.opts.Now().Add(tokenLife).UTC()
	}
	return t.UTC()
}

// Accounts implements provider.TokenProvider: GET /account/list.
func (p *Provider) Accounts(ctx context.Context, t provider.Token) ([]provider.LoginAccount, error) {
	if err := p.check(t); err != nil {
		return nil, err
	}
	l := p.attach(t)
	defer p.detach(l)
	accts, err := l.accounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]provider.LoginAccount, 0, len(accts))
	for _, a := range accts {
		out = append(out, provider.LoginAccount{ID: a.ID.String(), Name: a.Name, Active: refusal(a) == nil})
	}
	return out, nil
}

// refusal is why the engine will not trade an account, or nil.
func refusal(a account) error {
	switch {
	case a.Closed || a.Readonly || (a.Active != nil && !*a.Active):
		return &provider.KeyRefused{Reason: provider.KeyCannotTrade}
	case a.FuturesDisabled:
		return &provider.KeyRefused{Reason: provider.KeyNoFutures}
	}
	return nil
}

// check refuses a token this provider cannot use.
func (p *Provider) check(t provider.Token) error {
	if !t.Valid() || t.Environment != p.Environment() {
		return &provider.Unauthorized{}
	}
	if _, ok := parseID(t.UserID); !ok {
		return &provider.Unauthorized{}
	}
	return nil
}

// Resume implements provider.TokenProvider: it reads the login's accounts
// and opens a session on accountID, refusing (*provider.KeyRefused) an
// account that is closed, read-only or not enabled for futures.
func (p *Provider) Resume(ctx context.Context, t provider.Token, accountID string, renewed func(provider.Token)) (provider.Session, error) {
	if err := p.check(t); err != nil {
		return nil, err
	}
	want, ok := parseID(accountID)
	if !ok {
		return nil, &provider.NotFound{}
	}
	l := p.attach(t)
	accts, err := l.accounts(ctx)
	if err != nil {
		p.detach(l)
		return nil, err
	}
	for _, a := range accts {
		if a.ID != want {
			continue
		}
		if err := refusal(a); err != nil {
			p.detach(l)
			return nil, err
		}
		return newSession(p, l, a, renewed), nil
	}
	p.detach(l)
	return nil, &provider.NotFound{}
}

// login is one login's tokens, shared by its sessions: it renews them
// before they expire, and again at once when the API does not take them (a
// 401), telling each session's caller. Safe for concurrent use.
type login struct {
	p   *Provider
	key string
	b   *budget
	uid eid

	mu       sync.Mutex
	tok      provider.Token
	obtained time.Time // when tok was issued or renewed, by the clock
	refs     int
	subs     map[int]func(provider.Token)
	nextSub  int
	stop     chan struct{} // closed when the last reference goes
	looping  bool          // the renewal loop runs

	renewing sync.Mutex // one renewal at a time
}

// attach returns the login's holder, taking a reference; a token newer
// than the holder's replaces it.
func (p *Provider) attach(t provider.Token) *login {
	key := t.ID()
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.logins[key]
	if !ok {
		uid, _ := parseID(t.UserID)
		l = &login{p: p, key: key, b: newBudget(p.opts.Limits, p.opts.Now), uid: uid, tok: t, obtained: p.opts.Now(),
			subs: map[int]func(provider.Token){}, stop: make(chan struct{})}
		p.logins[key] = l
	}
	l.mu.Lock()
	if t.ExpiresAt.After(l.tok.ExpiresAt) {
		l.tok, l.obtained = t, p.opts.Now()
	}
	l.refs++
	l.mu.Unlock()
	return l
}

// detach drops a reference; the last one stops the renewals.
func (p *Provider) detach(l *login) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.mu.Lock()
	l.refs--
	last := l.refs == 0
	l.mu.Unlock()
	if last {
		close(l.stop)
		delete(p.logins, l.key)
	}
}

// token is the current token.
func (l *login) token() provider.Token {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tok
}

// subscribe starts the renewals (a session needs them; a passing read
// such as Accounts does not) and registers a renewal callback (nil: none);
// the returned func removes it.
func (l *login) subscribe(f func(provider.Token)) func() {
	l.mu.Lock()
	if !l.looping {
		l.looping = true
		go l.renewLoop(l.stop)
	}
	if f == nil {
		l.mu.Unlock()
		return func() {}
	}
	n := l.nextSub
	l.nextSub++
	l.subs[n] = f
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.subs, n)
		l.mu.Unlock()
	}
}

// renewAt is when the current token is due for renewal: RenewBefore ahead
// of its expiry, but never earlier than half its life.
func (l *login) renewAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	life := l.tok.ExpiresAt.Sub(l.obtained)
	return l.tok.ExpiresAt.Add(-min(l.p.opts.RenewBefore, life/2))
}

// renewLoop renews the token when due until stop closes. A renewal that
// fails for a passing reason is tried again (after a second, doubling to
// 30 s); one the API refuses ends the loop: the login is over.
func (l *login) renewLoop(stop <-chan struct{}) {
	retry := time.Second
	for {
		wait := l.renewAt().Sub(l.p.opts.Now())
		if !adapterkit.Sleep(context.Background(), stop, max(wait, 500*time.Millisecond)) { // a token of no life left is not renewed in a loop
			return
		}
		tok := l.token()
		ctx, cancel := context.WithTimeout(context.Background(), l.p.opts.RequestTimeout)
		err := l.renew(ctx, tok.Access)
		cancel()
		switch {
		case err == nil:
			retry = time.Second
		case errors.Is(err, provider.ErrUnauthorized):
			return
		default:
			if !adapterkit.Sleep(context.Background(), stop, retry) {
				return
			}
			retry = adapterkit.Backoff(retry)
		}
	}
}

// renew renews the token that was used (a renewal done meanwhile by
// another caller counts): GET /auth/renewaccesstoken. The API refusing the
// token is *provider.Unauthorized.
func (l *login) renew(ctx context.Context, used string) error {
	l.renewing.Lock()
	defer l.renewing.Unlock()
	if l.token().Access != used {
		return nil
	}
	var r accessTokenResponse
	err := l.p.send(ctx, l.b, used, request{op: opRead, method: http.MethodGet, path: "/auth/renewaccesstoken"}, &r)
	if err != nil {
		return mapError(opRead, err)
	}
	if r.ErrorText != "" || r.AccessToken == "" {
		return &provider.Unauthorized{}
	}
	l.mu.Lock()
	t := l.tok
	t.Access = r.AccessToken
	if r.MDAccessToken != "" {
		t.MarketData = r.MDAccessToken
	}
	t.ExpiresAt = l.p.expiry(r.ExpirationTime)
	l.tok, l.obtained = t, l.p.opts.Now()
	subs := make([]func(provider.Token), 0, len(l.subs))
	for _, f := range l.subs {
		subs = append(subs, f)
	}
	l.mu.Unlock()
	for _, f := range subs {
		f(t)
	}
	return nil
}

// call sends one REST request with the login's token and decodes its
// answer into out. A 401 renews the token: a read is then sent again
// once; a write is not (nothing was done): *provider.Unavailable when the
// renewal worked, else *provider.Unauthorized.
func (l *login) call(ctx context.Context, r request, out any) error {
	used := l.token().Access
	err := l.p.send(ctx, l.b, used, r, out)
	if !errors.Is(err, errExpired) {
		return mapError(r.op, err)
	}
	if rerr := l.renew(ctx, used); rerr != nil {
		if errors.Is(rerr, provider.ErrUnauthorized) {
			return &provider.Unauthorized{Code: http.StatusUnauthorized}
		}
		return rerr
	}
	if r.op.Write() {
		return provider.NewUnavailable(http.StatusUnauthorized, 0, errExpired)
	}
	return mapError(r.op, l.p.send(ctx, l.b, l.token().Access, r, out))
}

// get is a read: GET path?q into out.
func (l *login) get(ctx context.Context, path string, q map[string][]string, out any) error {
	return l.call(ctx, request{op: opRead, method: http.MethodGet, path: path, query: q}, out)
}

// accounts reads GET /account/list.
func (l *login) accounts(ctx context.Context) ([]account, error) {
	var accts []account
	if err := l.get(ctx, "/account/list", nil, &accts); err != nil {
		return nil, err
	}
	return accts, nil
}

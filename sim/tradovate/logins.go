package tradovate

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// Login is one provider login (a user) as a test creates it. A demo login carries no market data; a
// live login carries market data for the products named in MarketData (none: a live login without a
// subscription).
type Login struct {
	Name     string `json:"name"`
	Password string `json:"password"`
	Email    string `json:"email,omitempty"`
	// Kind is "demo" or "live".
	Kind       string        `json:"kind"`
	MarketData []string      `json:"marketData,omitempty"` // product names ("ES", "NQ", "ZN"); live only
	Accounts   []AccountSpec `json:"accounts,omitempty"`   // one account with 50000 when empty
}

// AccountSpec is one account of a login: its name (DEMO… or LIVE… and digits when empty), its
// starting cash balance and an optional position limit.
type AccountSpec struct {
	Name    string `json:"name,omitempty"`
	Balance string `json:"balance,omitempty"` // "50000" when empty
	// MaxPosition, when positive, refuses an order that could take the account's absolute net
	// position in one contract beyond it: failureReason MaxPosLimitReached.
	MaxPosition int64 `json:"maxPosition,omitempty"`
}

// String never shows the password.
func (l Login) String() string { return fmt.Sprintf("Login{%s %s}", l.Kind, l.Name) }

var accountName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

func (l Login) validate(products map[string]*product) error {
	var errs []error
	if l.Name == "" || len(l.Name) > 64 {
		errs = append(errs, errors.New("login: name must have 1 to 64 characters"))
	}
	if l.Password == "" || len(l.Password) > 64 {
		errs = append(errs, errors.New("login: password must have 1 to 64 characters"))
	}
	switch l.Kind {
	case "demo":
		if len(l.MarketData) > 0 {
			errs = append(errs, errors.New("login: a demo login carries no market data"))
		}
	case "live":
	default:
		errs = append(errs, errors.New(`login: kind must be "demo" or "live"`))
	}
	for _, p := range l.MarketData {
		if products[strings.ToUpper(p)] == nil {
			errs = append(errs, fmt.Errorf("login: market data for unknown product %q", p))
		}
	}
	for _, a := range l.Accounts {
		if a.Name != "" && !accountName.MatchString(a.Name) {
			errs = append(errs, fmt.Errorf("login: account name %q must be upper case letters, digits and underscores", a.Name))
		}
		if a.Balance != "" {
			if d, ok := dec.Parse(a.Balance); !ok || d.Negative {
				errs = append(errs, fmt.Errorf("login: account balance %q is not a non-negative decimal", a.Balance))
			}
		}
		if a.MaxPosition < 0 {
			errs = append(errs, errors.New("login: maxPosition must not be negative"))
		}
	}
	return errors.Join(errs...)
}

// user is a login's state: its accounts and everything its orders made, in creation order.
type user struct {
	id       int64
	name     string
	password string
	email    string
	live     bool
	md       map[string]bool // product names with market data
	created  time.Time
	accounts []*account

	orders         []*order
	versions       []*orderVersionEnt
	commands       []*commandEnt
	commandReports []*commandReportEnt
	execReports    []*executionReportEnt
	fills          []*fillEnt
	fillPairs      []*fillPairEnt

	sessions     []*session // oldest first
	failures     int        // wrong passwords in a row
	captchaUntil time.Time
	captchaTik   string
}

// account is one account of a user with its cash and positions.
type account struct {
	id          int64
	name        string
	user        *user
	ent         *accountEnt
	cashID      int64
	cashTime    time.Time
	amount      *apd.Decimal // cash: starting balance plus realized P&L
	realized    *apd.Decimal // this session's realized P&L
	weekReal    *apd.Decimal
	positions   map[int64]*position // by contract id
	maxPosition int64
	rejectNext  []Rejection
}

// session is one access token request's session: renewals extend it, the session limit revokes it.
type session struct {
	id      int64
	user    *user
	expires time.Time // the latest expiry of its tokens
	revoked bool
}

func (se *session) valid(now time.Time) bool { return !se.revoked && now.Before(se.expires) }

// token is one access token (or md access token) of a session.
type token struct {
	value   string
	sess    *session
	expires time.Time
	md      bool
}

func (t *token) valid(now time.Time) bool { return !t.sess.revoked && now.Before(t.expires) }

// AddLogin creates a login with its accounts and returns its user id and its accounts' ids by name.
func (s *Sim) AddLogin(l Login) (userID int64, accounts map[string]int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := l.validate(s.products); err != nil {
		return 0, nil, err
	}
	if _, dup := s.users[l.Name]; dup {
		return 0, nil, fmt.Errorf("login: %q exists", l.Name)
	}
	now := s.now()
	u := &user{id: s.nextID(kindUser), name: l.Name, password: l.Password, email: l.Email, live: l.Kind == "live",
		md: map[string]bool{}, created: now}
	if u.email == "" {
		u.email = strings.ToLower(l.Name) + "@example.com"
	}
	for _, p := range l.MarketData {
		u.md[strings.ToUpper(p)] = true
	}
	specs := l.Accounts
	if len(specs) == 0 {
		specs = []AccountSpec{{}}
	}
	named := map[string]bool{}
	for _, spec := range specs {
		if spec.Name == "" {
			continue
		}
		if named[spec.Name] || s.accountNamed(spec.Name) != nil {
			return 0, nil, fmt.Errorf("login: account name %q exists", spec.Name)
		}
		named[spec.Name] = true
	}
	accounts = map[string]int64{}
	for _, spec := range specs {
		id := s.nextID(kindAccount)
		name := spec.Name
		if name == "" {
			prefix := "DEMO"
			if u.live {
				prefix = "LIVE"
			}
			name = fmt.Sprintf("%s%d", prefix, id)
		}
		bal := spec.Balance
		if bal == "" {
			bal = "50000"
		}
		a := &account{id: id, name: name, user: u, cashID: s.nextID(kindCashBalance), cashTime: now, amount: dec.Must(bal),
			realized: dec.Zero(), weekReal: dec.Zero(), positions: map[int64]*position{}, maxPosition: spec.MaxPosition}
		a.ent = &accountEnt{ID: id, Name: name, UserID: u.id, AccountType: "Customer", Active: true, ClearingHouseID: 2,
			RiskCategoryID: 2, AutoLiqProfileID: id, MarginAccountType: "Speculator", LegalStatus: "Individual", Timestamp: ts(now)}
		u.accounts = append(u.accounts, a)
		s.accounts[id] = a
		accounts[name] = id
	}
	s.users[u.name] = u
	s.usersByID[u.id] = u
	return u.id, accounts, nil
}

// SetMarketData replaces the products a live login's market data subscription covers; subscriptions
// already running for products it no longer covers stop at once.
func (s *Sim) SetMarketData(login string, products []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[login]
	if !ok {
		return fmt.Errorf("marketdata: no login %q", login)
	}
	if !u.live && len(products) > 0 {
		return errors.New("marketdata: a demo login carries no market data")
	}
	md := map[string]bool{}
	for _, p := range products {
		if s.products[strings.ToUpper(p)] == nil {
			return fmt.Errorf("marketdata: unknown product %q", p)
		}
		md[strings.ToUpper(p)] = true
	}
	u.md = md
	for c := range s.conns {
		if c.md && c.sess != nil && c.sess.user == u {
			for cid := range c.quotes {
				if ct := s.contractsByID[cid]; ct != nil && !md[ct.prod.spec.Name] {
					delete(c.quotes, cid)
				}
			}
			for id, ch := range c.charts {
				if !md[ch.contract.prod.spec.Name] {
					delete(c.charts, id)
				}
			}
		}
	}
	return nil
}

// SetTokenLifetime changes how long tokens issued from now on live; tokens already issued keep
// their expiry.
func (s *Sim) SetTokenLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.TokenLifetime = d
}

// ExpireTokens expires every access token and md access token now, mid-session: REST calls answer
// 401, renewal is refused, socket requests answer 401 and user data events stop until a socket is
// authorized again with a new token.
func (s *Sim) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, t := range s.tokens {
		if t.expires.After(now) {
			t.expires = now
		}
	}
	for _, u := range s.users {
		for _, se := range u.sessions {
			if se.expires.After(now) {
				se.expires = now
			}
		}
	}
}

// accessTokenRequest is the body of auth/accesstokenrequest.
type accessTokenRequest struct {
	Name       string          `json:"name"`
	Password   string          `json:"password"`
	AppID      string          `json:"appId"`
	AppVersion string          `json:"appVersion"`
	DeviceID   string          `json:"deviceId"`
	CID        json.RawMessage `json:"cid"` // documented as a string; the provider's own samples send a number
	Sec        string          `json:"sec"`
	Ticket     string          `json:"p-ticket"`
}

// errWrongPassword is the text the provider is reported to answer for a wrong name or password; its
// documentation gives only the errorText field.
const errWrongPassword = "Incorrect username or password. Please try again noting that passwords are case-sensitive."

// accessToken answers auth/accesstokenrequest with s.mu held: a token response, an errorText, or a
// penalty. Every answer is HTTP 200, as the provider documents for errorText and p-tickets.
func (s *Sim) accessToken(body []byte, remote string, now time.Time) answer {
	var req accessTokenRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("Invalid JSON: " + err.Error())
	}
	if req.Name == "" {
		return badRequest("No usable value for name")
	}
	if req.Password == "" {
		return badRequest("No usable value for password")
	}
	for _, f := range []string{req.Name, req.Password, req.AppID, req.AppVersion, req.DeviceID} {
		if len(f) > 64 {
			return badRequest("A field is longer than 64 characters")
		}
	}
	u := s.users[req.Name]
	if u != nil && now.Before(u.captchaUntil) {
		return penalty(u.captchaTik, u.captchaUntil.Sub(now), true)
	}
	failKey := "authfail:" + remote
	if s.opts.AuthFailuresPerHour > 0 {
		w := s.window(failKey, time.Hour, now)
		if !s.redeem(req.Ticket, failKey, now) && len(w.times) >= s.opts.AuthFailuresPerHour {
			return s.issueTicket(failKey, s.opts.AuthBackoff, now)
		}
	}
	failed := func() {
		if s.opts.AuthFailuresPerHour > 0 {
			w := s.window(failKey, time.Hour, now)
			w.times = append(w.times, now)
		}
	}
	if s.opts.AuthPerMinute > 0 {
		key := "auth:" + strings.ToLower(req.Name)
		w := s.rate(key, now)
		if !s.redeem(req.Ticket, key, now) && len(w.times) >= s.opts.AuthPerMinute {
			return s.issueTicket(key, w.times[0].Add(time.Minute).Sub(now), now)
		}
		w.times = append(w.times, now)
	}
	if s.opts.CID != "" || s.opts.Sec != "" {
		if cidText(req.CID) != s.opts.CID || req.Sec != s.opts.Sec {
			// The provider documents no text for an unknown API key.
			failed()
			return ok(map[string]any{"errorText": "Invalid cid or sec"})
		}
	}
	if u == nil || u.password != req.Password {
		if u != nil {
			u.failures++
			if s.opts.LoginFailures > 0 && u.failures >= s.opts.LoginFailures {
				u.captchaUntil = now.Add(s.opts.CaptchaFor)
				u.captchaTik = randomToken(24)
			}
		}
		failed()
		return ok(map[string]any{"errorText": errWrongPassword})
	}
	u.failures = 0
	se := &session{id: s.nextID(kindSession), user: u}
	u.sessions = append(u.sessions, se)
	if s.opts.MaxSessions > 0 {
		var live []*session
		for _, o := range u.sessions {
			if o.valid(now) || o == se {
				live = append(live, o)
			}
		}
		for len(live) > s.opts.MaxSessions {
			s.revoke(live[0])
			live = live[1:]
		}
		u.sessions = live
	}
	return ok(s.tokenResponse(se, now))
}

func cidText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// revoke closes a session pushed out by the session limit: its tokens stop working and its sockets
// are closed, as the provider documents ("the oldest sessions are closed").
func (s *Sim) revoke(se *session) {
	se.revoked = true
	for c := range s.conns {
		if c.sess == se {
			c.closeWith(`c[3000,"Session closed"]`)
		}
	}
}

// tokenResponse issues a fresh access token and md access token for a session, with s.mu held.
func (s *Sim) tokenResponse(se *session, now time.Time) map[string]any {
	exp := now.Add(s.opts.TokenLifetime)
	if se.expires.Before(exp) {
		se.expires = exp
	}
	at := &token{value: randomToken(48), sess: se, expires: exp}
	md := &token{value: randomToken(48), sess: se, expires: exp, md: true}
	s.tokens[at.value] = at
	s.tokens[md.value] = md
	u := se.user
	return map[string]any{
		"accessToken":               at.value,
		"mdAccessToken":             md.value,
		"expirationTime":            ts(exp),
		"passwordExpirationTime":    ts(u.created.AddDate(1, 0, 0)),
		"userStatus":                "Active",
		"userId":                    u.id,
		"name":                      u.name,
		"hasLive":                   u.live,
		"hasSimPlus":                false,
		"hasFunded":                 u.live,
		"hasMarketData":             u.live && len(u.md) > 0,
		"outdatedTaC":               false,
		"outdatedLiquidationPolicy": false,
	}
}

// renew answers auth/renewaccesstoken for a valid token: a new token pair in the same session, the
// session extended. The old token stays valid until its own expiry (the docs do not say otherwise).
func (s *Sim) renew(t *token, now time.Time) answer {
	return ok(s.tokenResponse(t.sess, now))
}

// me answers auth/me.
func (s *Sim) me(u *user) answer {
	return ok(map[string]any{"userId": u.id, "name": u.name, "fullName": u.name, "email": u.email,
		"emailVerified": true, "isTrial": false})
}

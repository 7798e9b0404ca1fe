// Package tradovate is a simulator of the Tradovate futures API for integration tests: it speaks the
// subset of the provider's REST API under /v1 and its two WebSockets (user data and market data) that a
// trading adapter uses — access tokens and their renewal and expiry, demo logins without market data,
// live logins with or without a market data subscription, accounts, cash balance snapshots,
// positions, orders with their versions, commands and execution reports, fills, contract months and
// their roll, 32nds-quoted products, place/modify/cancel, OSO brackets and OCO pairs filled against
// prices the simulator drives, user/syncrequest with its props events, md/subscribequote and
// md/getchart — and it misbehaves on command (latency, answers dropped after the request was
// carried out, 5xx, 429 lockouts, p-ticket penalties with p-time and p-captcha, socket cuts,
// duplicated and reordered events, restarts, tokens expired mid-session).
//
// A Sim is an http.Handler: serve it with httptest.NewServer (then SetBaseURL) or Sim.Start. All of
// its state sits behind one mutex; every request, socket message, price change and control call
// takes it, so what a client sees is always one consistent state. The control API under /_sim/
// (control.go) drives the same operations as the Go methods, for a standalone simulator.
//
// Where the provider's documentation is silent, the simulator says so in a comment and in
// docs/tradovate-simulator.md and chooses the least surprising shape.
package tradovate

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/sim/internal/simkit"
)

// Options configure a simulator; the zero value is usable and gets the provider's documented
// defaults where it documents one.
type Options struct {
	Products []Product // DefaultProducts() when empty
	// Now is the simulator's clock (time.Now when nil): token expiry, contract months, roll dates,
	// trade dates and bars read it.
	Now func() time.Time
	// TokenLifetime is how long an access token (and its md token) lives: 90 minutes, as the
	// provider documents.
	TokenLifetime time.Duration
	// MaxSessions is how many sessions (access token requests) of one login live at once; the
	// provider documents 2, closing the oldest when a third starts. Negative: no limit.
	MaxSessions int
	// AuthFailuresPerHour is the access token request's endpoint limit as the provider documents it:
	// per caller address, over a rolling hour, counting only the requests that failed (a wrong name or
	// password, an unknown API key), 5; once reached, every access token request from that address,
	// of any login, answers a p-ticket penalty of AuthBackoff (15 s, the documented back-off) until
	// the hour's oldest failure leaves the window. Successful sign-ins are not limited by it, nor per
	// login. Negative: no limit.
	AuthFailuresPerHour int
	AuthBackoff         time.Duration
	// AuthPerMinute, when above zero, also limits each login name to that many access token requests a
	// minute (a p-ticket until the minute's oldest request leaves the window). The provider documents
	// no such per-login limit (an older overview page gave "Authentication: 10 requests/minute"
	// without a scope), so it is off unless asked for.
	AuthPerMinute int
	// LoginFailures is how many wrong passwords in a row make every further access token request of
	// that name answer a p-captcha penalty for CaptchaFor (one hour, as the provider documents for
	// a third-party application). 3 when zero; negative: never.
	LoginFailures int
	CaptchaFor    time.Duration
	// RequestsPerMinute, RequestsPerHour and RequestsPerSecond are how many requests one user may
	// make in any minute, hour and second (rolling) before every further request answers 429 for
	// LockoutFor; the provider documents 5000 a minute, 5000 an hour and 1000 a second for an
	// authenticated user, and an hour's wait. Zero takes those; negative: no limit.
	RequestsPerMinute int
	RequestsPerHour   int
	RequestsPerSecond int
	LockoutFor        time.Duration
	// HeartbeatInterval is how often the sockets send the 'h' frame: 2.5s, as the provider documents.
	HeartbeatInterval time.Duration
	// ClientSilence is how long a socket may go without hearing from its client (the client's "[]"
	// heartbeat or any request) before the simulator closes it. The provider documents that a client
	// must heartbeat every 2.5 seconds but not how soon it is closed; 10s when zero, negative: never.
	ClientSilence time.Duration
	// HistoryBars is how many flat one-minute bars of history each contract month starts with, for
	// md/getchart: 60 when zero, negative: none.
	HistoryBars int
	// CID and Sec, when set, are the only API key the access token request accepts (its cid and
	// sec fields); unset, any key is accepted.
	CID string
	Sec string
	// DelayedWithoutSubscription answers md/subscribequote for a login without an entitlement with
	// mode "Delayed" and no data, as a provider engineer once described the test environment
	// (tradovate/api issue 37), instead of the simulator's default refusal (403).
	DelayedWithoutSubscription bool
	// PositionBeforeFill makes the user-data stream tell of a fill's position (and its fill pairs)
	// before the fill itself and its order; the cash balance still follows them. The provider
	// documents no order among a fill's entities, so a client must take them in either.
	PositionBeforeFill bool
	Logger             *slog.Logger // discards when nil
}

func (o *Options) defaults() {
	if len(o.Products) == 0 {
		o.Products = DefaultProducts()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = 90 * time.Minute
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = 2
	}
	if o.AuthFailuresPerHour == 0 {
		o.AuthFailuresPerHour = 5
	}
	if o.AuthBackoff <= 0 {
		o.AuthBackoff = 15 * time.Second
	}
	if o.LoginFailures == 0 {
		o.LoginFailures = 3
	}
	if o.CaptchaFor <= 0 {
		o.CaptchaFor = time.Hour
	}
	if o.RequestsPerMinute == 0 {
		o.RequestsPerMinute = 5000
	}
	if o.RequestsPerHour == 0 {
		o.RequestsPerHour = 5000
	}
	if o.RequestsPerSecond == 0 {
		o.RequestsPerSecond = 1000
	}
	if o.LockoutFor <= 0 {
		o.LockoutFor = time.Hour
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 2500 * time.Millisecond
	}
	if o.ClientSilence == 0 {
		o.ClientSilence = 10 * time.Second
	}
	if o.HistoryBars == 0 {
		o.HistoryBars = 60
	}
	if o.HistoryBars < 0 {
		o.HistoryBars = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Sim is one simulated provider. Its state is guarded by mu; never touch it without.
type Sim struct {
	opts Options

	mu            sync.Mutex
	ids           map[idKind]int64
	products      map[string]*product
	productOrder  []string
	contracts     map[string]*contract
	contractsByID map[int64]*contract
	exchanges     map[string]int64
	users         map[string]*user // by login name
	usersByID     map[int64]*user
	accounts      map[int64]*account
	tokens        map[string]*token
	tickets       map[string]*ticket
	lockouts      map[string]time.Time // user (or remote address) → 429 until
	rates         map[string]*window
	faults        simkit.Faults[Fault]
	stream        StreamFaults
	sessionOpen   bool
	conns         map[*wsConn]struct{}
	requests      map[string]int
	byClOrdID     simkit.Counts // account name → clOrdId → orders accepted
	byText        simkit.Counts // account name → text → orders accepted
	byTag50       simkit.Counts // account name → customTag50 → orders accepted

	server simkit.Server
}

type idKind int

const (
	kindUser idKind = iota
	kindAccount
	kindExchange
	kindProduct
	kindMaturity
	kindContract
	kindOrder
	kindVersion
	kindCommand
	kindCommandReport
	kindExecReport
	kindFill
	kindFillPair
	kindPosition
	kindCashBalance
	kindSession
	kindSubscription
)

// idBase starts each kind's ids in its own range, so an id in a log names its kind.
var idBase = map[idKind]int64{
	kindUser: 50000, kindAccount: 700000, kindExchange: 10, kindProduct: 1000, kindMaturity: 40000,
	kindContract: 2500000, kindOrder: 100000000, kindVersion: 200000000, kindCommand: 300000000,
	kindCommandReport: 400000000, kindExecReport: 500000000, kindFill: 600000000, kindFillPair: 650000000,
	kindPosition: 800000000, kindCashBalance: 900000000, kindSession: 1, kindSubscription: 1,
}

// nextID hands out the next id of a kind, with s.mu held.
func (s *Sim) nextID(k idKind) int64 {
	if _, ok := s.ids[k]; !ok {
		s.ids[k] = idBase[k]
	}
	s.ids[k]++
	return s.ids[k]
}

func (s *Sim) now() time.Time { return s.opts.Now() }

// New makes a simulator listing the options' products (their next contract months from the
// simulator's clock) at their starting prices, with no logins.
func New(opts Options) (*Sim, error) {
	opts.defaults()
	var errs []error
	seen := map[string]bool{}
	for _, p := range opts.Products {
		if err := p.validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("product %s listed twice", p.Name))
		}
		seen[p.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("tradovate sim: %w", err)
	}
	s := &Sim{opts: opts, ids: map[idKind]int64{}, products: map[string]*product{}, contracts: map[string]*contract{},
		contractsByID: map[int64]*contract{}, exchanges: map[string]int64{}, users: map[string]*user{},
		usersByID: map[int64]*user{}, accounts: map[int64]*account{}, tokens: map[string]*token{},
		tickets: map[string]*ticket{}, lockouts: map[string]time.Time{}, rates: map[string]*window{},
		sessionOpen: true, conns: map[*wsConn]struct{}{}, requests: map[string]int{},
		byClOrdID: simkit.Counts{}, byText: simkit.Counts{}, byTag50: simkit.Counts{},
		server: simkit.Server{Name: "tradovate sim", Logger: opts.Logger}}
	now := s.now()
	s.mu.Lock()
	for _, p := range opts.Products {
		s.addProduct(p, now)
	}
	s.mu.Unlock()
	return s, nil
}

// Start serves the simulator on addr ("127.0.0.1:0" for any free port) until Close.
func (s *Sim) Start(addr string) error { return s.server.Start(addr, s) }

// SetBaseURL tells a simulator served by someone else (httptest.NewServer) its own address.
func (s *Sim) SetBaseURL(u string) { s.server.SetBaseURL(u) }

// URL is the REST base, the counterpart of https://demo.tradovateapi.com/v1 and
// https://live.tradovateapi.com/v1 (one simulator serves both; a login is demo or live).
func (s *Sim) URL() string { return s.root() + "/v1" }

// WSURL is the user data socket, the counterpart of wss://demo.tradovateapi.com/v1/websocket.
func (s *Sim) WSURL() string {
	return "ws" + strings.TrimPrefix(s.root(), "http") + "/v1/websocket"
}

// MDURL is the market data socket, the counterpart of wss://md.tradovateapi.com/v1/websocket (a
// host of its own at the provider; a path prefix here).
func (s *Sim) MDURL() string {
	return "ws" + strings.TrimPrefix(s.root(), "http") + "/md/v1/websocket"
}

// ControlURL is the base of the control API.
func (s *Sim) ControlURL() string { return s.root() + "/_sim" }

func (s *Sim) root() string { return s.server.BaseURL() }

// Close drops every socket and stops the server started by Start.
func (s *Sim) Close() error {
	s.mu.Lock()
	s.server.Stop()
	for c := range s.conns {
		c.Drop()
	}
	s.mu.Unlock()
	return s.server.Shutdown()
}

// ServeHTTP routes the REST API under /v1, the two sockets and the control API.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/_sim/"):
		s.serveControl(w, r)
	case p == "/v1/websocket":
		s.serveSocket(w, r, false)
	case p == "/md/v1/websocket":
		s.serveSocket(w, r, true)
	case strings.HasPrefix(p, "/v1/"):
		s.serveREST(w, r)
	default:
		http.NotFound(w, r)
	}
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Restart is the provider restarting: every socket drops (and with it every market data
// subscription and user/syncrequest), rate windows and lockouts reset; logins, sessions, tokens,
// accounts, orders, positions and prices are kept.
func (s *Sim) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Drop()
	}
	s.rates = map[string]*window{}
	s.lockouts = map[string]time.Time{}
}

// RequestCount is how many requests reached endpoint ("order/placeorder", lower case, without
// /v1), over REST and the sockets together, refused ones included.
func (s *Sim) RequestCount(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[strings.ToLower(endpoint)]
}

// Requests is a copy of every endpoint's request count.
func (s *Sim) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.requests)
}

// OrdersByClOrdID is how many orders (entry orders and their brackets alike) the account named
// accountName had accepted carrying clOrdId: an exactly-once client expects 1. The provider does not
// refuse a clOrdId it has seen; this counter is how a test sees a duplicate.
func (s *Sim) OrdersByClOrdID(accountName, clOrdID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byClOrdID[accountName][clOrdID]
}

// OrdersByText is how many orders the account had accepted whose order version carries text.
func (s *Sim) OrdersByText(accountName, text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byText[accountName][text]
}

// OrdersByCustomTag50 is how many orders the account had accepted whose command carries tag.
func (s *Sim) OrdersByCustomTag50(accountName, tag string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byTag50[accountName][tag]
}

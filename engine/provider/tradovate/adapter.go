// Package tradovate is the built-in futures provider: a trader's own
// Tradovate login. No well-kept Go client of the Tradovate API exists (the
// few public ones cover the socket or the token request alone, with float
// prices), so the package holds a small typed client of its own, kept to
// the API's documented shapes: the REST endpoints under /v1 (wire.go), the
// WebSocket framing of the user-data and market-data sockets (socket.go:
// frames o, h, a[...] and c[...]; requests "endpoint\nid\nquery\nbody";
// authorize; heartbeats "[]"), penalty tickets and rate limits (budget.go).
// Where the documentation is silent the choice is said where it is made.
//
// Signing in. The trader's login name and password go in once (Login,
// POST /auth/accesstokenrequest with the engine's application credentials
// of Options.App) and are exchanged for the access and market-data tokens;
// the password is written into the request body alone, which is wiped after
// the request, and never logged, kept or put in an error. From then on the
// adapter holds only the provider.Token: Resume opens a session on one
// account of the login, and the login's sessions share one holder that
// renews the token (GET /auth/renewaccesstoken) before it expires and hands
// each renewed token to the caller. A 401 renews at once: a read is sent
// again, a write is not (it answers *provider.Unavailable: nothing was done,
// send it again).
//
// Exactly once. Writes (placeorder, cancelorder, modifyorder) are never
// sent twice by the adapter. Tradovate has a client order id of its own:
// every order is placed with clOrdId set to the engine's
// provider.ClientOrderID, which the API keeps on the order's New command
// (Command.clOrdId). The API does not refuse a second order with the same
// clOrdId, so the engine's rule carries it: a lost answer is
// *provider.Unknown, and Lookup settles it by reading the commands
// (command/list) for the New command with that clOrdId and then its order,
// never by sending again.
//
// Futures accounts have no hedge, multi-assets or portfolio-margin modes:
// Settings is always the zero value (one net position per contract), read
// after checking the account is readable. Tradovate has no reduce-only
// flag: a reduce-only order is sent only after the account's position in
// the contract shows it reduces it (else *provider.Rejected), so the check
// is as fresh as that read.
//
// Market data is licensed per trader: the provider's public Quotes and
// Instruments answer *provider.NotEntitled and *provider.Unsupported; a
// session of a live login streams quotes of the products its market-data
// subscription covers (QuoteSession) and reads their charts
// (ChartSession), and a demo login carries none.
//
// Outbound calls go through Options.HTTP, by default the egress guard's
// transport: public addresses only unless Options.AllowPrivate.
package tradovate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/engine/egress"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
)

// Name is the provider's name.
const Name = "tradovate"

// The API's addresses.
const (
	LiveRestURL = "https://live.tradovateapi.com/v1"
	LiveWSURL   = "wss://live.tradovateapi.com/v1/websocket"
	LiveMDURL   = "wss://md.tradovateapi.com/v1/websocket"
	DemoRestURL = "https://demo.tradovateapi.com/v1"
	DemoWSURL   = "wss://demo.tradovateapi.com/v1/websocket"
	DemoMDURL   = "wss://md-demo.tradovateapi.com/v1/websocket"
)

// App is the engine's application at Tradovate, sent with every token
// request: appId, appVersion, cid, sec and deviceId. Secret never prints.
type App struct {
	ID       string // appId
	Version  string // appVersion
	CID      string // cid: the API key's id (the schema's type is string)
	Secret   string // sec: the API key's secret
	DeviceID string // deviceId: a stable id of this engine
}

func (a App) String() string {
	return fmt.Sprintf("{ID:%s Version:%s CID:%s Secret:[redacted] DeviceID:%s}", a.ID, a.Version, a.CID, a.DeviceID)
}
func (a App) GoString() string { return a.String() }

// Options configure the adapter. The zero value speaks to the live
// environment's addresses.
type Options struct {
	// Demo takes the demo environment's addresses for those left empty, and
	// marks its logins demo: they carry no market data.
	Demo bool
	// RestURL is the REST base (https://live.tradovateapi.com/v1).
	RestURL string
	// WSURL is the user-data socket (wss://live.tradovateapi.com/v1/websocket).
	WSURL string
	// MDURL is the market-data socket (wss://md.tradovateapi.com/v1/websocket).
	MDURL string
	// App is the engine's application credentials.
	App App
	// Limits are the per-login budgets; zero takes the published limits.
	Limits Limits
	// HTTP is the transport of every call and socket; nil: the egress
	// guard's transport (public addresses only unless AllowPrivate), which
	// resets the connection of a request given up. A transport given here
	// must do the same for ReceiveWindow to hold (tests, benchmarks).
	HTTP http.RoundTripper
	// AllowPrivate lets the default transport reach private and loopback
	// addresses (local development, tests against the simulator).
	AllowPrivate bool
	// RequestTimeout bounds one REST call that the caller's context does
	// not; 10 s when zero.
	RequestTimeout time.Duration
	// RenewBefore is how long before its expiry a token is renewed (at most
	// half its life); 15 min when zero.
	RenewBefore time.Duration
	// Heartbeat is how often a socket sends its heartbeat "[]"; 2.5 s when
	// zero. A socket silent for four heartbeats is taken as cut.
	Heartbeat time.Duration
	// Reconnect is the first wait before a socket is dialed again (it
	// doubles to 30 s); 200 ms when zero.
	Reconnect time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(s *string, live, demo string) {
		if *s == "" {
			*s = live
			if o.Demo {
				*s = demo
			}
		}
		*s = strings.TrimSuffix(*s, "/")
	}
	def(&o.RestURL, LiveRestURL, DemoRestURL)
	def(&o.WSURL, LiveWSURL, DemoWSURL)
	def(&o.MDURL, LiveMDURL, DemoMDURL)
	if o.HTTP == nil {
		// A request given up resets its connection: with no receive window
		// at the provider, that bounds when it can still arrive (ReceiveWindow).
		o.HTTP = egress.NewTransport(egress.Options{AllowPrivate: o.AllowPrivate, MaxIdleConnsPerHost: 64, ResetOnClose: true})
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.RenewBefore <= 0 {
		o.RenewBefore = 15 * time.Minute
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 2500 * time.Millisecond
	}
	if o.Reconnect <= 0 {
		o.Reconnect = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate reports every problem of the options at once.
func (o Options) Validate() error {
	return errors.Join(
		adapterkit.CheckHTTP("tradovate", "RestURL", o.RestURL),
		adapterkit.CheckWS("tradovate", "WSURL", o.WSURL),
		adapterkit.CheckWS("tradovate", "MDURL", o.MDURL))
}

// Provider is the Tradovate provider. Safe for concurrent use.
type Provider struct {
	opts  Options
	addrB *budget // the token requests of the engine's address, before any login
	cat   *catalog

	mu      sync.Mutex
	logins  map[string]*login  // by provider.Token.ID
	signIns map[string]*budget // each login name's token requests, within addrB
}

var (
	_ provider.Provider      = (*Provider)(nil)
	_ provider.TokenProvider = (*Provider)(nil)
)

// New makes the provider.
func New(opts Options) (*Provider, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	return &Provider{opts: opts, addrB: newAddressBudget(opts.Limits, opts.Now), cat: newCatalog(), logins: map[string]*login{},
		signIns: map[string]*budget{}}, nil
}

// maxSignIns is how many login names' token budgets are kept before the
// idle ones (as new) are dropped.
const maxSignIns = 1024

// signInBudget is the token request budget of login name, within the
// address's.
func (p *Provider) signInBudget(name string) *budget {
	key := strings.ToLower(name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.signIns[key]; ok {
		return b
	}
	if len(p.signIns) >= maxSignIns {
		for k, b := range p.signIns {
			if b.idle() {
				delete(p.signIns, k)
			}
		}
	}
	b := newLoginBudget(p.opts.Limits, p.opts.Now, p.addrB)
	p.signIns[key] = b
	return b
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Environment is provider.EnvDemo or provider.EnvLive.
func (p *Provider) Environment() string {
	if p.opts.Demo {
		return provider.EnvDemo
	}
	return provider.EnvLive
}

// Capabilities implements provider.Provider.
// ReceiveWindow implements provider.Windowed. Tradovate has no receive
// window of its own: a request given up at its timeout resets its
// connection (egress.Options.ResetOnClose, HTTP/1.1), so nothing of it is
// delivered afterwards; 1 s more for what the network already carries.
// Valid for the default transport only (Options.HTTP nil).
func (p *Provider) ReceiveWindow() time.Duration { return p.opts.RequestTimeout + time.Second }

func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{
		Accounts:             true,
		Execution:            true,
		MarketData:           true,  // the login's own, per trader (QuoteSession)
		GenerationFencing:    false, // no fencing token; one owner sends
		CompleteOrderBook:    true,  // order/deps lists every order of the account
		ExecutionHistory:     true,  // fill/list
		ExecutionCorrections: false, // a busted fill (active false) is left out
		ReduceOnly:           false, // no native flag: checked against the position before sending
		NativeReplace:        true,  // order/modifyorder
		NativeOco:            false, // placeoco exists; the adapter does not send it yet
		OrderTypes:           []string{"market", "limit", "stop", "stop_limit"},
		TimeInForce:          []string{"day", "gtc", "ioc", "fok"},
		PositionModels:       []string{"net"},
		// The documentation states no retention of fills; the engine's minimum.
		ReplayRetentionSeconds: 7 * 24 * 3600,
	}
}

// Instruments implements provider.Provider: Tradovate's contract library
// is not public (every read needs a login's token), so the provider alone
// lists nothing: *provider.Unsupported. A session reads contracts
// (provider.ContractSession).
func (p *Provider) Instruments(context.Context) ([]provider.Instrument, error) {
	return nil, &provider.Unsupported{Field: "instruments", Value: "without a login"}
}

// Quotes implements provider.Provider: futures prices are licensed per
// trader and stream only from a trader's own live login
// (provider.QuoteSession), so the provider alone answers
// *provider.NotEntitled.
func (p *Provider) Quotes(context.Context, []string) (<-chan provider.Quote, error) {
	return nil, &provider.NotEntitled{Reason: provider.EntitlementLoginRequired}
}

// Connect implements provider.Provider for a caller holding the login name
// (APIKey) and password (Secret): it signs in and opens the login's only
// active account. A login with several accounts is *provider.Unsupported:
// use Login, Accounts and Resume, which also keep only the tokens.
func (p *Provider) Connect(ctx context.Context, c provider.Credentials) (provider.Session, error) {
	if !c.Valid() {
		return nil, &provider.Unauthorized{}
	}
	tok, err := p.Login(ctx, c.APIKey, c.Secret)
	if err != nil {
		return nil, err
	}
	accts, err := p.Accounts(ctx, tok)
	if err != nil {
		return nil, err
	}
	var active []provider.LoginAccount
	for _, a := range accts {
		if a.Active {
			active = append(active, a)
		}
	}
	switch len(active) {
	case 0:
		return nil, &provider.KeyRefused{Reason: provider.KeyCannotTrade}
	case 1:
		return p.Resume(ctx, tok, active[0].ID, nil)
	}
	return nil, &provider.Unsupported{Field: "accounts", Value: "several"}
}

// call bounds one REST call by the request timeout.
func (p *Provider) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.opts.RequestTimeout)
}

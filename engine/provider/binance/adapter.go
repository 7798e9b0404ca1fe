// Package binance is the built-in provider for Binance USDⓈ-M Futures. It
// speaks the exchange through github.com/adshao/go-binance/v2/futures (its
// REST services, its order and event types); it dials the streams itself
// with the addresses of its Options, because the library keeps its stream
// base addresses in package variables (futures.BaseWsMainUrl, UseTestnet),
// which one process cannot set per provider nor change safely while
// streams run. The frames are decoded with the library's own event types.
//
// Two reads are signed by the adapter itself, where the library falls
// short: the key-permission read (GET /sapi/v1/account/apiRestrictions on
// the spot API), which the library has only in its spot client and whose
// answer type lacks enablePortfolioMarginTrading; and the trade history
// (GET /fapi/v1/userTrades), whose fromId the library's
// ListAccountTradeService sends misspelt as "fromID".
//
// Conditional orders (stop, stop_limit, take_profit) go through the
// exchange's algo service, the only place it takes them since 2025-12-09
// (algo.go, algoservice.go): a triggered one's placed order is reported as
// the conditional order itself.
//
// Every request goes through its credential's budget (budget.go): a queue
// per credential, the exchange's weight and order counts from the answer
// headers, a back-off on 429 and a stop on 418 until the ban ends.
package binance

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
	"github.com/svc/engine/events"
)

// Name is the provider's name.
const Name = "binance-futures"

// Broker is the broker the engine lists this provider's accounts under
// (/api/account/list), and the one the account frame's capabilities are
// kept for (projections/frames).
const Broker = "binance"

// The exchange's addresses.
const (
	ProdRestURL    = "https://fapi.binance.com"
	ProdWSURL      = "wss://fstream.binance.com"
	ProdSpotURL    = "https://api.binance.com"
	TestnetRestURL = "https://testnet.binancefuture.com"
	TestnetWSURL   = "wss://stream.binancefuture.com"
)

// Options configure the adapter. The zero value speaks to the exchange's
// production addresses.
type Options struct {
	// RestURL is the REST base (https://fapi.binance.com).
	RestURL string
	// WSURL is the stream base (wss://fstream.binance.com): user streams
	// at WSURL/ws/<listenKey>, combined streams at WSURL/stream?streams=.
	WSURL string
	// SpotURL is the spot API base for the key-permission read
	// (https://api.binance.com). Under Testnet with no SpotURL the read is
	// skipped: the futures testnet has no spot API and its keys move no
	// real funds.
	SpotURL string
	// Testnet takes the testnet's addresses for those left empty.
	Testnet bool
	// Limits are the per-credential budgets; zero takes the exchange's.
	Limits Limits
	// HTTP is the transport under the budgets; a clone of
	// http.DefaultTransport (its own connection pool) when nil.
	HTTP http.RoundTripper
	// RequestTimeout bounds one REST call that the caller's context does
	// not; 10 s when zero.
	RequestTimeout time.Duration
	// KeepAlive is how often a listen key is kept alive; 30 min when zero.
	KeepAlive time.Duration
	// Reconnect is the first wait before a stream is dialed again (it
	// doubles to 30 s); 200 ms when zero.
	Reconnect time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.RestURL == "" {
		o.RestURL = ProdRestURL
		if o.Testnet {
			o.RestURL = TestnetRestURL
		}
	}
	if o.WSURL == "" {
		o.WSURL = ProdWSURL
		if o.Testnet {
			o.WSURL = TestnetWSURL
		}
	}
	if o.SpotURL == "" && !o.Testnet {
		o.SpotURL = ProdSpotURL
	}
	o.RestURL = strings.TrimSuffix(o.RestURL, "/")
	o.WSURL = strings.TrimSuffix(o.WSURL, "/")
	o.SpotURL = strings.TrimSuffix(o.SpotURL, "/")
	if o.HTTP == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		o.HTTP = t
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 30 * time.Minute
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
		adapterkit.CheckHTTP("binance", "RestURL", o.RestURL),
		adapterkit.CheckHTTP("binance", "SpotURL", o.SpotURL),
		adapterkit.CheckWS("binance", "WSURL", o.WSURL))
}

// Provider is the Binance USDⓈ-M Futures provider. Safe for concurrent use.
type Provider struct {
	opts   Options
	public *futures.Client // unsigned reads, on their own budget

	mu      sync.Mutex
	budgets map[string]*budget // by Credentials.ID
}

var _ provider.Provider = (*Provider)(nil)

// New makes the provider.
func New(opts Options) (*Provider, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	p := &Provider{opts: opts, budgets: map[string]*budget{}}
	p.public = p.client("", "", newBudget(opts.Limits, opts.Now))
	return p, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements provider.Provider.
func (p *Provider) Capabilities() provider.Capabilities { return capabilities() }

// ReceiveWindow implements provider.Windowed: the exchange refuses a
// signed request whose timestamp is more than recvWindow (5 s, the
// exchange's default, which the library sends) behind its clock, or more
// than 1 s ahead of it.
func (p *Provider) ReceiveWindow() time.Duration { return 6 * time.Second }

// budget returns the credential's budget, shared by all its sessions.
func (p *Provider) budget(c provider.Credentials) *budget {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.budgets[c.ID()]
	if !ok {
		b = newBudget(p.opts.Limits, p.opts.Now)
		p.budgets[c.ID()] = b
	}
	return b
}

// client makes a library client on the budget's transport.
func (p *Provider) client(key, secret string, b *budget) *futures.Client {
	c := futures.NewClient(key, secret)
	c.BaseURL = p.opts.RestURL
	c.HTTPClient = &http.Client{Transport: &transport{b: b, next: p.opts.HTTP}}
	c.Logger = log.New(io.Discard, "", 0) // its debug lines hold signed URLs
	return c
}

// call bounds one REST call by the request timeout.
func (p *Provider) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.opts.RequestTimeout)
}

// Instruments implements provider.Provider: the exchange's perpetuals and
// their filters (tick, lot step, minimum quantity and notional).
func (p *Provider) Instruments(ctx context.Context) ([]provider.Instrument, error) {
	ctx, cancel := p.call(ctx)
	defer cancel()
	info, err := p.public.NewExchangeInfoService().Do(ctx)
	if err != nil {
		return nil, mapError(opRead, err)
	}
	out := make([]provider.Instrument, 0, len(info.Symbols))
	for i := range info.Symbols {
		in, err := fromSymbol(&info.Symbols[i])
		if err != nil {
			return nil, provider.NewUnavailable(0, 0, err)
		}
		out = append(out, in)
	}
	return out, nil
}

func fromSymbol(s *futures.Symbol) (provider.Instrument, error) {
	in := provider.Instrument{Symbol: s.Symbol, Base: s.BaseAsset, Quote: s.QuoteAsset, Margin: s.MarginAsset,
		Perpetual: s.ContractType == futures.ContractTypePerpetual, Trading: s.Status == string(futures.SymbolStatusTypeTrading)}
	var err error
	read := func(field, v string) events.Decimal {
		d, e := dec(field, v)
		if e != nil && err == nil {
			err = e
		}
		return d
	}
	if f := s.PriceFilter(); f != nil {
		in.TickSize = read("tickSize", f.TickSize)
	}
	if f := s.LotSizeFilter(); f != nil {
		in.LotStep = read("stepSize", f.StepSize)
		in.MinQuantity = read("minQty", f.MinQuantity)
		in.MaxQuantity = read("maxQty", f.MaxQuantity)
	}
	if f := s.MinNotionalFilter(); f != nil {
		in.MinNotional = read("notional", f.Notional)
	}
	return in, err
}

// Package binance is a simulator of the Binance USDⓈ-M Futures exchange for integration tests: it
// speaks the subset of the exchange's REST and WebSocket protocol that a trading adapter built on
// github.com/adshao/go-binance/v2/futures uses (signed requests, the exchange's error codes and
// weight headers, exchange info, account, balances and positions at mark price, orders filled
// against prices the simulator drives, the listen-key user data stream, public market streams),
// and it injects faults on command (latency, answers dropped after the order is placed, 5xx, 429
// and 418 with Retry-After, stream disconnects, duplicated and reordered user events, restarts).
//
// A Sim is an http.Handler: serve it with httptest.NewServer or Sim.Start. All of its state sits
// behind one mutex; every request, price change and control call takes it, so what a client sees
// is always one consistent state. The control API under /_sim/ (see control.go) drives the same
// operations as the Go methods, for a standalone simulator.
package binance

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
	"github.com/svc/engine/sim/internal/simkit"
)

// Options configure a simulator; the zero value is usable and gets the exchange's defaults.
type Options struct {
	Symbols       []Symbol      // listed perpetuals; DefaultSymbols() when empty
	ListenKeyTTL  time.Duration // a listen key expires this long after its last keepalive; 60m
	WeightLimit   int           // request weight per minute per API key (per IP when unsigned); 2400
	OrderLimit1m  int           // orders per minute per API key; 1200
	OrderLimit10s int           // orders per 10 s per API key; 300
	BanAfter      int           // requests refused with 429 in one window before a 418 ban; 5
	BanFor        time.Duration // how long an earned ban lasts; 2m
	PingInterval  time.Duration // server pings on every stream; 3m
	TakerFee      string        // "0.0004"
	MakerFee      string        // "0.0002"
	Leverage      int           // initial leverage of every symbol; 20
	Logger        *slog.Logger  // discards when nil
}

func (o *Options) defaults() {
	if len(o.Symbols) == 0 {
		o.Symbols = DefaultSymbols()
	}
	if o.ListenKeyTTL <= 0 {
		o.ListenKeyTTL = 60 * time.Minute
	}
	if o.WeightLimit <= 0 {
		o.WeightLimit = 2400
	}
	if o.OrderLimit1m <= 0 {
		o.OrderLimit1m = 1200
	}
	if o.OrderLimit10s <= 0 {
		o.OrderLimit10s = 300
	}
	if o.BanAfter <= 0 {
		o.BanAfter = 5
	}
	if o.BanFor <= 0 {
		o.BanFor = 2 * time.Minute
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 3 * time.Minute
	}
	if o.TakerFee == "" {
		o.TakerFee = "0.0004"
	}
	if o.MakerFee == "" {
		o.MakerFee = "0.0002"
	}
	if o.Leverage <= 0 {
		o.Leverage = 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Sim is one simulated exchange. Its state is guarded by mu; never touch it without.
type Sim struct {
	opts               Options
	takerFee, makerFee *apd.Decimal

	mu       sync.Mutex
	markets  map[string]*market
	order    []string // symbol names in listing order
	accounts map[string]*account
	orderSeq int64
	algoSeq  int64
	tradeSeq int64
	keys     map[string]*listenKey
	conns    map[*wsConn]struct{}
	limits   map[string]*limiter
	faults   simkit.Faults[Fault]
	stream   StreamFaults
	requests map[string]int
	accepted simkit.Counts // API key → client order id → orders accepted

	server simkit.Server
}

// New makes a simulator with the options' symbols at their starting prices and no accounts.
func New(opts Options) *Sim {
	opts.defaults()
	s := &Sim{opts: opts, takerFee: dec.Must(opts.TakerFee), makerFee: dec.Must(opts.MakerFee),
		markets: map[string]*market{}, accounts: map[string]*account{}, keys: map[string]*listenKey{},
		conns: map[*wsConn]struct{}{}, limits: map[string]*limiter{}, requests: map[string]int{},
		accepted: simkit.Counts{}, server: simkit.Server{Name: "binance sim", Logger: opts.Logger}, orderSeq: 8380000000, algoSeq: 1000000021000000, tradeSeq: 590000000}
	now := time.Now()
	for _, sym := range opts.Symbols {
		s.markets[sym.Name] = newMarket(sym, now)
		s.order = append(s.order, sym.Name)
	}
	s.server.Go(s.janitor)
	return s
}

// Start serves the simulator on addr ("127.0.0.1:0" for any free port) until Close.
func (s *Sim) Start(addr string) error { return s.server.Start(addr, s) }

// SetBaseURL tells a simulator served by someone else (httptest.NewServer) its own address, for
// URL and WSURL.
func (s *Sim) SetBaseURL(u string) { s.server.SetBaseURL(u) }

// URL is the REST base, the counterpart of https://fapi.binance.com (and of https://api.binance.com
// for the spot key-permission read, served on the same address).
func (s *Sim) URL() string { return s.server.BaseURL() }

// WSURL is the stream base, the counterpart of wss://fstream.binance.com: user streams are at
// WSURL()+"/ws/"+listenKey, combined streams at WSURL()+"/stream?streams=a/b".
func (s *Sim) WSURL() string {
	return "ws" + strings.TrimPrefix(s.URL(), "http")
}

// Close drops every stream and stops the server started by Start.
func (s *Sim) Close() error {
	s.mu.Lock()
	s.server.Stop()
	for c := range s.conns {
		c.Drop()
	}
	s.mu.Unlock()
	return s.server.Shutdown()
}

// ServeHTTP routes the exchange's REST paths, its stream paths and the control API.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/_sim/"):
		s.serveControl(w, r)
	case strings.HasPrefix(r.URL.Path, "/ws/") || r.URL.Path == "/stream" || r.URL.Path == "/ws":
		s.serveStream(w, r)
	default:
		s.serveREST(w, r)
	}
}

// janitor expires listen keys and pings streams.
func (s *Sim) janitor() {
	t := time.NewTicker(s.janitorEvery())
	defer t.Stop()
	for {
		select {
		case <-s.server.Stopped():
			return
		case now := <-t.C:
			s.mu.Lock()
			s.expireKeys(now)
			s.mu.Unlock()
		}
	}
}

func (s *Sim) janitorEvery() time.Duration {
	d := s.opts.ListenKeyTTL / 20
	if d > time.Second {
		d = time.Second
	}
	if d < 10*time.Millisecond {
		d = 10 * time.Millisecond
	}
	return d
}

// SetListenKeyTTL changes how long a listen key lives without keepalive; keys already issued
// expire by the new rule counted from their last keepalive.
func (s *Sim) SetListenKeyTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		k.expires = k.expires.Add(d - s.opts.ListenKeyTTL)
	}
	s.opts.ListenKeyTTL = d
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Restart is the exchange restarting: every stream drops, every listen key becomes invalid, limits
// reset; accounts, orders, positions and prices are kept.
func (s *Sim) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Drop()
	}
	for k, lk := range s.keys {
		lk.acct.listenKey = ""
		delete(s.keys, k)
	}
	s.limits = map[string]*limiter{}
}

// RequestCount is how many requests reached route ("POST /fapi/v1/order"), refused ones included.
func (s *Sim) RequestCount(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[route]
}

// Requests is a copy of every route's request count.
func (s *Sim) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.requests)
}

// OrdersByClientID is how many orders the account of apiKey had accepted with newClientOrderId
// clientID, conditional (algo) orders counted by their clientAlgoId: an exactly-once client
// expects 1.
func (s *Sim) OrdersByClientID(apiKey, clientID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted[apiKey][clientID]
}

// OpenOrder is one working order of an account as the exchange holds it: an order resting on the
// book, or an untriggered conditional order of the algo service.
type OpenOrder struct {
	ClientOrderID string // a conditional order's clientAlgoId
	Symbol        string
	Side          string // BUY, SELL
	Type          string // the type it was placed with: LIMIT, STOP_MARKET, TAKE_PROFIT_MARKET ...
	Quantity      string
	Price         string // "0" when it has none
	StopPrice     string // a conditional order's trigger price; "0" when it has none
	ReduceOnly    bool
	WorkingType   string // CONTRACT_PRICE or MARK_PRICE
	Algo          bool   // a conditional order of the algo service
}

// OpenOrders lists the working orders of the account with apiKey, of symbol ("" for every symbol),
// resting orders and untriggered conditional orders together, oldest first: what a test reads to
// know what rests at the exchange.
func (s *Sim) OpenOrders(apiKey, symbol string) []OpenOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[apiKey]
	if !ok {
		return nil
	}
	type placed struct {
		seq int64
		o   OpenOrder
	}
	var all []placed
	for _, o := range a.openOrders(symbol) {
		m := s.markets[o.symbol]
		all = append(all, placed{o.seq, OpenOrder{ClientOrderID: o.cid, Symbol: o.symbol, Side: o.side, Type: o.origType,
			Quantity: m.qty(o.qty), Price: m.px(o.price), StopPrice: m.px(dec.Zero()), ReduceOnly: o.reduceOnly || o.closePos,
			WorkingType: o.workingType}})
	}
	for _, g := range a.openAlgos(symbol) {
		m := s.markets[g.symbol]
		all = append(all, placed{g.seq, OpenOrder{ClientOrderID: g.cid, Symbol: g.symbol, Side: g.side, Type: g.typ,
			Quantity: m.qty(g.qty), Price: m.px(g.price), StopPrice: m.px(g.trigger), ReduceOnly: g.reduceOnly || g.closePos,
			WorkingType: g.workingType, Algo: true}})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	out := make([]OpenOrder, 0, len(all))
	for _, p := range all {
		out = append(out, p.o)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

package binance

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/adshao/go-binance/v2/futures"
	"github.com/coder/websocket"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/internal/adapterkit"
	"github.com/svc/engine/events"
)

// maxFrame bounds one stream frame the adapter reads.
const maxFrame = 1 << 20

// eventBuffer is how many events wait for a slow reader before the stream
// stops reading (and the exchange, in time, drops it: a Gap follows).
const eventBuffer = 256

// dial opens one stream at u through the provider's transport.
func (p *Provider) dial(ctx context.Context, u string) (*websocket.Conn, error) {
	ctx, cancel := p.call(ctx)
	defer cancel()
	return adapterkit.Dial(ctx, u, p.opts.HTTP, maxFrame)
}

// Events implements provider.Session: the listen-key user data stream. It
// returns once the first connection is live (so a Snapshot taken after it
// misses nothing), keeps the listen key alive, and after a cut (a dropped
// connection, an expired listen key) dials again with backoff and delivers
// a *provider.Gap once live again. Events arrive as the exchange sends
// them: duplicates and reordering included; OrderState.FilledQuantity and
// UpdatedAt order an order's updates, Execution.ID names a trade once.
// A conditional order speaks through ALGO_UPDATE, and once triggered
// through the ORDER_TRADE_UPDATEs of the order it placed; both are
// delivered as *provider.OrderUpdate of the conditional order (algo.go),
// the placed order's trades as its executions.
func (s *session) Events(ctx context.Context) (<-chan provider.Event, error) {
	if err := s.portfolio(); err != nil {
		return nil, err
	}
	conn, key, err := s.openUser(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan provider.Event, eventBuffer)
	adapterkit.Go(&s.wg, ctx, s.closed, func(ctx context.Context) {
		defer close(out)
		for {
			live := s.p.opts.Now().UTC()
			cause := s.readUser(ctx, conn, key, out)
			_ = conn.CloseNow()
			if !adapterkit.Redial(ctx, s.closed, s.p.opts.Reconnect, func() (err error) {
				conn, key, err = s.openUser(ctx)
				return err
			}, nil) {
				return
			}
			if !adapterkit.Send[provider.Event](ctx, out, &provider.Gap{Since: live, At: s.p.opts.Now().UTC(), Cause: cause}) {
				return
			}
		}
	})
	return out, nil
}

// openUser takes a listen key (the exchange answers the live one again if
// there is one) and dials its stream.
func (s *session) openUser(ctx context.Context) (*websocket.Conn, string, error) {
	cctx, cancel := s.p.call(ctx)
	key, err := s.c.NewStartUserStreamService().Do(cctx)
	cancel()
	if err != nil {
		return nil, "", mapError(opRead, err)
	}
	if key == "" || strings.ContainsAny(key, "/?#") {
		return nil, "", provider.NewUnavailable(http.StatusOK, 0, errMalformed)
	}
	conn, err := s.p.dial(ctx, s.p.opts.WSURL+"/ws/"+key)
	if err != nil {
		return nil, "", err
	}
	return conn, key, nil
}

// readUser reads one connection until it ends, keeping its listen key
// alive, and says why it ended: "disconnected" or "expired".
func (s *session) readUser(ctx context.Context, conn *websocket.Conn, key string, out chan<- provider.Event) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(s.p.opts.KeepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				kctx, kcancel := s.p.call(ctx)
				err := s.c.NewKeepaliveUserStreamService().ListenKey(key).Do(kctx)
				kcancel()
				if err != nil && !errors.Is(mapError(opRead, err), provider.ErrUnavailable) {
					// The key is gone (-1125): end this connection, take a new key.
					_ = conn.CloseNow()
					return
				}
			}
		}
	}()
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			return "disconnected"
		}
		f := decodeUser(msg)
		for _, e := range s.resolve(ctx, f) {
			if !adapterkit.Send(ctx, out, e) {
				return "disconnected"
			}
		}
		if f.expired {
			return "expired"
		}
	}
}

// configFrame is what the library's WsAccountConfigUpdate leaves out: the
// multi-assets switch of ACCOUNT_CONFIG_UPDATE ("ai": {"j": true}).
type configFrame struct {
	AI *struct {
		J bool `json:"j"`
	} `json:"ai"`
}

// userFrame is one user-stream frame, read: events that stand alone, or an
// order's or an algo order's update for the session to resolve.
type userFrame struct {
	events  []provider.Event
	order   *provider.OrderUpdate // ORDER_TRADE_UPDATE, as the order says of itself
	orderID int64
	algo    *algoReport // ALGO_UPDATE
	at      time.Time
	expired bool // listenKeyExpired
}

// decodeUser reads one user-stream frame with the library's types. A frame
// it cannot read, or of an event the engine does not use, gives nothing.
func decodeUser(msg []byte) userFrame {
	var e futures.WsUserDataEvent
	if err := json.Unmarshal(msg, &e); err != nil {
		return userFrame{}
	}
	switch e.Event {
	case futures.UserDataEventTypeListenKeyExpired:
		return userFrame{expired: true}
	case futures.UserDataEventTypeOrderTradeUpdate:
		u, err := fromUpdate(&e.OrderTradeUpdate, e.Time)
		if err != nil {
			return userFrame{}
		}
		return userFrame{order: u, orderID: e.OrderTradeUpdate.ID}
	case futures.UserDataEventTypeAlgoUpdate:
		rep, err := fromAlgoUpdate(&e.AlgoUpdate, e.Time)
		if err != nil {
			return userFrame{}
		}
		return userFrame{algo: &rep, at: millis(e.Time)}
	case futures.UserDataEventTypeAccountUpdate:
		u, err := fromAccountUpdate(&e.AccountUpdate, e.Time, e.TransactionTime)
		if err != nil {
			return userFrame{}
		}
		return userFrame{events: []provider.Event{u}}
	case futures.UserDataEventTypeAccountConfigUpdate:
		var c configFrame
		if json.Unmarshal(msg, &c) == nil && c.AI != nil {
			on := c.AI.J
			return userFrame{events: []provider.Event{&provider.ConfigUpdate{MultiAssets: &on, At: millis(e.Time)}}}
		}
	}
	return userFrame{}
}

// resolve turns a frame into the session's events: an algo order's update
// is its order's, and an order a conditional order placed speaks as that
// conditional order (its trade as the conditional order's execution).
func (s *session) resolve(ctx context.Context, f userFrame) []provider.Event {
	switch {
	case f.algo != nil:
		st, _ := s.algos.observe(*f.algo)
		return []provider.Event{&provider.OrderUpdate{Order: st, At: f.at}}
	case f.order != nil:
		u := f.order
		st, placed := s.placedOrder(ctx, f.orderID, u.Order)
		if !placed {
			if provider.Derived(u.Order.ClientOrderID) {
				s.algos.markRegular(f.orderID)
			}
			return []provider.Event{u}
		}
		out := &provider.OrderUpdate{Order: st, At: u.At}
		if u.Execution != nil {
			x := *u.Execution
			x.ClientOrderID, x.ProviderOrderID = st.ClientOrderID, st.ProviderOrderID
			out.Execution = &x
		}
		return []provider.Event{out}
	}
	return f.events
}

// fromAccountUpdate reads an ACCOUNT_UPDATE of event time at; its balances
// are as of the transaction time tx (the matching engine's, which an
// ORDER_TRADE_UPDATE's trade time shares).
func fromAccountUpdate(a *futures.WsAccountUpdate, at, tx int64) (*provider.AccountUpdate, error) {
	u := &provider.AccountUpdate{Reason: string(a.Reason), At: millis(at)}
	var asOf time.Time
	if tx > 0 {
		asOf = millis(tx)
	}
	for _, b := range a.Balances {
		w, err := dec("wb", b.Balance)
		if err != nil {
			return nil, err
		}
		// The stream gives the wallet balance and the cross wallet; the
		// available balance is not in it.
		u.Balances = append(u.Balances, provider.Balance{Asset: b.Asset, Wallet: w, AsOf: asOf})
	}
	for _, p := range a.Positions {
		if p.Side != "" && p.Side != futures.PositionSideTypeBoth {
			continue // hedge-mode legs: the account is refused in that mode
		}
		x := provider.Position{Instrument: p.Symbol}
		var err error
		if x.Quantity, err = dec("pa", p.Amount); err != nil {
			return nil, err
		}
		if x.EntryPrice, err = dec("ep", p.EntryPrice); err != nil {
			return nil, err
		}
		if x.Unrealized, err = dec("up", p.UnrealizedPnL); err != nil {
			return nil, err
		}
		if x.MarkPrice, err = dec("mp", p.MarkPrice); err != nil {
			return nil, err
		}
		u.Positions = append(u.Positions, x)
	}
	return u, nil
}

// Quotes implements provider.Provider: the combined public streams
// <symbol>@bookTicker and <symbol>@markPrice@1s. Each quote carries the
// symbol's latest bid, ask and mark; the first quote of a symbol after a
// reconnect has Stale set. It returns once the first connection is live.
func (p *Provider) Quotes(ctx context.Context, symbols []string) (<-chan provider.Quote, error) {
	if len(symbols) == 0 {
		return nil, &provider.Unsupported{Field: "symbols", Value: ""}
	}
	names := make([]string, 0, 2*len(symbols))
	for _, sym := range symbols {
		l := strings.ToLower(sym)
		if l == "" || strings.ContainsAny(l, "/?#&@ ") {
			return nil, &provider.Unsupported{Field: "symbols", Value: sym}
		}
		names = append(names, l+"@bookTicker", l+"@markPrice@1s")
	}
	u := p.opts.WSURL + "/stream?streams=" + strings.Join(names, "/")
	conn, err := p.dial(ctx, u)
	if err != nil {
		return nil, err
	}
	out := make(chan provider.Quote, eventBuffer)
	go func() {
		defer close(out)
		last := map[string]*provider.Quote{}
		stale := map[string]bool{}
		for {
			for {
				_, msg, err := conn.Read(ctx)
				if err != nil {
					break
				}
				q, ok := decodeQuote(msg, last)
				if !ok {
					continue
				}
				q.Stale = stale[q.Symbol]
				delete(stale, q.Symbol)
				if !adapterkit.Send(ctx, out, q) {
					_ = conn.CloseNow()
					return
				}
			}
			_ = conn.CloseNow()
			for _, sym := range symbols {
				stale[sym] = true
			}
			if !adapterkit.Redial(ctx, nil, p.opts.Reconnect, func() (err error) {
				conn, err = p.dial(ctx, u)
				return err
			}, nil) {
				return
			}
		}
	}()
	return out, nil
}

// combined is a combined-stream frame.
type combined struct {
	Stream string          `json:"stream"`
	Data   json.RawMessage `json:"data"`
}

// decodeQuote folds one combined frame into the symbol's latest quote.
func decodeQuote(msg []byte, last map[string]*provider.Quote) (provider.Quote, bool) {
	var c combined
	if json.Unmarshal(msg, &c) != nil {
		return provider.Quote{}, false
	}
	at := func(ms int64) time.Time {
		if ms <= 0 {
			return time.Now().UTC()
		}
		return millis(ms)
	}
	get := func(sym string) *provider.Quote {
		q, ok := last[sym]
		if !ok {
			q = &provider.Quote{Symbol: sym}
			last[sym] = q
		}
		return q
	}
	price := func(field, s string) (*events.Decimal, bool) {
		d, err := dec(field, s)
		return &d, err == nil && d.Sign() > 0
	}
	stream := strings.ToLower(c.Stream)
	switch {
	case strings.HasSuffix(stream, "@bookticker"):
		var e futures.WsBookTickerEvent
		if json.Unmarshal(c.Data, &e) != nil || e.Symbol == "" {
			return provider.Quote{}, false
		}
		bid, ok1 := price("b", e.BestBidPrice)
		ask, ok2 := price("a", e.BestAskPrice)
		if !ok1 || !ok2 {
			return provider.Quote{}, false
		}
		q := get(e.Symbol)
		q.Bid, q.Ask, q.At = bid, ask, at(e.Time)
		return *q, true
	case strings.Contains(stream, "@markprice"):
		var e futures.WsMarkPriceEvent
		if json.Unmarshal(c.Data, &e) != nil || e.Symbol == "" {
			return provider.Quote{}, false
		}
		mark, ok := price("p", e.MarkPrice)
		if !ok {
			return provider.Quote{}, false
		}
		q := get(e.Symbol)
		q.Mark, q.At = mark, at(e.Time)
		return *q, true
	}
	return provider.Quote{}, false
}

// Package market serves /api/market/* and /api/instruments: the futures
// product catalog, market configuration, symbol search and info, quotes, the
// server clock, bar history (instruments and spread expressions) and live bars
// over SSE, one instrument per stream or up to 24 multiplexed.
package market

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/bars"
	"github.com/svc/engine/engine/market/spread"
	"github.com/svc/engine/engine/market/userfeed"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
)

// Limits of the market routes, served by /api/market/config.
const (
	MaxBars          = 10000 // bars per history request
	DefaultCountBack = 500   // bars when countBack is omitted
	MaxSymbols       = 50    // symbols per search answer
	MaxQuotes        = 50    // symbols per quotes request
	MaxSubs          = 24    // bar subscriptions per multiplexed stream
	maxTokens        = 100   // tokens read from subs; more is 400
	maxQuery         = 64    // characters of a search query
)

// Market is what the routes read.
type Market struct {
	Catalog  *market.Catalog  // the engine's instruments: served crypto and futures contracts
	Products []market.Product // the futures product catalog
	Feed     market.Feed      // the crypto feed
	Bars     *bars.Service
	// Futures serves each trader's futures prices from their own futures
	// login; nil: no futures (every futures request is refused).
	Futures *userfeed.Source
	Now     func() time.Time
	// Done ends every stream when closed (the server drains).
	Done <-chan struct{}
}

// New makes the market-data handlers; the route table is gateway/routes.go,
// and each route admits its callers itself (Admit).
func New(d *api.Deps, m *Market) *Handlers {
	if m.Now == nil {
		m.Now = time.Now
	}
	return &Handlers{d: d, m: m}
}

type Handlers struct {
	d *api.Deps
	m *Market
}

func (h *Handlers) Instruments(w http.ResponseWriter, r *http.Request) error {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"instruments": h.m.Products})
	return nil
}

type unitOut struct {
	Unit    string `json:"unit"`
	Name    string `json:"name"`
	Seconds int64  `json:"seconds"`
	Max     int    `json:"max"`
}

func (h *Handlers) Config(w http.ResponseWriter, r *http.Request) error {
	served, reason := h.futuresServed(r)
	classes := []string{"crypto"}
	fut := map[string]any{"served": served, "code": commands.CodeFeedRequiresConnection}
	if served {
		classes = append(classes, "futures")
	} else {
		fut["reason"] = reason
	}
	units := make([]unitOut, 0, len(market.Units))
	for _, u := range market.Units {
		units = append(units, unitOut{Unit: u.Code, Name: u.Name, Seconds: u.Seconds, Max: u.Max})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeframes": map[string]any{
			"grammar":  "a whole count from 1 followed by a unit: s, m, h, d (or D), w (or W); e.g. 15s, 1m, 4h, 1d, 1W",
			"pattern":  market.TimeframePattern,
			"units":    units,
			"examples": []string{"1s", "15s", "1m", "5m", "15m", "1h", "4h", "1d", "1w"},
		},
		"limits": map[string]any{
			"bars": MaxBars, "defaultCountBack": DefaultCountBack, "symbols": MaxSymbols, "quotes": MaxQuotes,
			"subscriptions": MaxSubs, "spreadLegs": spread.MaxLegs, "expressionLength": spread.MaxLength,
		},
		"assetClasses": classes,
		"futures":      fut,
		"source":       h.m.Feed.Name(),
	})
	return nil
}

// futuresServed says whether the caller's own futures feed serves: its
// login is linked and not refused outright (a product may still be outside
// its subscription), else the reason.
func (h *Handlers) futuresServed(r *http.Request) (bool, string) {
	f, err := h.futures(r)
	if err != nil {
		reason, _ := market.RefusalReason(err)
		return false, cmp.Or(reason, market.ReasonLoginRequired)
	}
	if !f.Live() {
		return false, market.ReasonDemoLogin
	}
	return true, ""
}

// trader is the user whose own futures feed serves the request: the user
// of a session or of a user's Trading API key, acting for no one else.
// Futures prices are licensed per trader: no other caller has one.
func trader(r *http.Request) string {
	p, _ := httpx.PrincipalOf(r)
	if (p.Kind != "trading" && p.Kind != "session") || p.OnBehalfOf != "" {
		return ""
	}
	return p.TenantID
}

// futures opens the caller's own futures feed, or the refusal.
func (h *Handlers) futures(r *http.Request) (*userfeed.Feed, error) {
	if h.m.Futures == nil {
		return nil, &market.FeedRefused{Reason: market.ReasonLoginRequired}
	}
	return h.m.Futures.Open(r.Context(), trader(r))
}

// futuresError answers a failure of the caller's futures feed for
// instrument: a refusal is 503 feed_requires_connection with its reason,
// an unknown contract 404, a timeframe the provider's charts do not serve
// 400, anything else (the provider down, no quote in time) 503
// feed_unavailable.
func futuresError(instrument string, err error) error {
	if reason, ok := market.RefusalReason(err); ok {
		return feedRequiresConnection(instrument, reason)
	}
	switch {
	case errors.Is(err, userfeed.ErrUnknownSymbol):
		return unknownSymbol(instrument)
	case errors.Is(err, userfeed.ErrTimeframe):
		return badRequest(commands.CodeInvalidTimeframe, "futures bars start at one minute: use m, h, d or w", map[string]any{"instrument": instrument})
	case errors.Is(err, context.Canceled):
		return err
	}
	return feedUnavailable(instrument)
}

func feedRequiresConnection(instrument, reason string) error {
	msg := trading.FuturesNotServed
	switch reason {
	case market.ReasonDemoLogin:
		msg = "your futures login is a demo login, which carries no market data: link your login on the production futures system"
	case market.ReasonNoSubscription:
		msg = "your futures login's market data subscription does not cover this product"
	}
	return &httpx.Error{Status: http.StatusServiceUnavailable, Code: commands.CodeFeedRequiresConnection,
		Msg:    msg + " (" + instrument + ")",
		Params: map[string]any{"instrument": instrument, "reason": reason}}
}

func feedUnavailable(instrument string) error {
	return &httpx.Error{Status: http.StatusServiceUnavailable, Code: commands.CodeFeedUnavailable, RetryAfter: 5,
		Msg: "the price feed for " + instrument + " is down or stale; retry shortly", Params: map[string]any{"instrument": instrument}}
}

func unknownSymbol(symbol string) error {
	return &httpx.Error{Status: http.StatusNotFound, Code: commands.CodeUnknownSymbol, Msg: "no such symbol: " + symbol, Params: map[string]any{"symbol": symbol}}
}

func badRequest(code commands.Code, msg string, params map[string]any) error {
	return &httpx.Error{Status: http.StatusBadRequest, Code: code, Msg: msg, Params: params}
}

// crypto finds a served (non-futures) catalog symbol, case-insensitively.
func (h *Handlers) crypto(name string) (market.Instrument, bool) {
	if in, ok := h.m.Catalog.Get(name); ok && in.AssetClass != "futures" {
		return in, true
	}
	if in, ok := h.m.Catalog.Get(strings.ToUpper(name)); ok && in.AssetClass != "futures" {
		return in, true
	}
	return market.Instrument{}, false
}

// isFutures reports whether name is a futures symbol: a futures catalog entry,
// a product root, a contract or a continuous symbol.
func (h *Handlers) isFutures(name string) (string, bool) {
	if in, ok := h.m.Catalog.Get(strings.ToUpper(name)); ok && in.AssetClass == "futures" {
		return in.Symbol, true
	}
	if _, ok := market.FuturesRoot(name, h.m.Products); ok {
		return strings.ToUpper(name), true
	}
	return "", false
}

func (h *Handlers) resolver(name string) (string, bool) {
	if in, ok := h.crypto(name); ok {
		return in.Symbol, true
	}
	return h.isFutures(name)
}

// expression resolves an instrument or spread expression. A lone unknown
// word is 404 unknown_symbol; a faulty expression is 400 naming the position;
// a futures leg is served only from the caller's own futures feed, entitled
// to its product (else 503 feed_requires_connection with the reason): the
// feed is answered with the expression, nil when no leg is futures.
func (h *Handlers) expression(r *http.Request, s string) (*spread.Expr, *userfeed.Feed, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil, badRequest(commands.CodeInvalidRequest, "instrument is required", nil)
	}
	e, err := spread.Parse(s, h.resolver)
	if err != nil {
		var pe *spread.Error
		if errors.As(err, &pe) {
			word := strings.TrimSpace(s)
			if pe.Pos == strings.Index(s, word)+1 && strings.HasPrefix(pe.Msg, "unknown instrument") && !strings.ContainsAny(word, " +*^()") {
				return nil, nil, unknownSymbol(word)
			}
			return nil, nil, badRequest(commands.CodeInvalidExpression, err.Error(), map[string]any{"position": pe.Pos, "instrument": s})
		}
		return nil, nil, err
	}
	var feed *userfeed.Feed
	for _, leg := range e.Legs {
		if _, ok := h.isFutures(leg); !ok {
			continue
		}
		if feed == nil {
			if feed, err = h.futures(r); err != nil {
				return nil, nil, futuresError(leg, err)
			}
		}
		if err := feed.Entitled(r.Context(), leg); err != nil {
			return nil, nil, futuresError(leg, err)
		}
	}
	return e, feed, nil
}

// futuresLeg reports whether a leg of an expression is a futures symbol.
func (h *Handlers) futuresLeg(leg string) bool {
	_, ok := h.isFutures(leg)
	return ok
}

func timeframe(r *http.Request) (market.Timeframe, error) {
	raw := r.URL.Query().Get("tf")
	if raw == "" {
		return market.Timeframe{}, badRequest(commands.CodeInvalidTimeframe, "tf is required, e.g. 1m, 15m, 4h, 1d", map[string]any{"tf": raw})
	}
	tf, err := market.ParseTimeframe(raw)
	if err != nil {
		return market.Timeframe{}, badRequest(commands.CodeInvalidTimeframe, err.Error(), map[string]any{"tf": raw})
	}
	return tf, nil
}

func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" && !r.URL.Query().Has(name) {
		return def, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(commands.CodeInvalidRequest, fmt.Sprintf("%s must be a whole number from %d to %d", name, lo, hi), map[string]any{name: raw})
	}
	return n, nil
}

type symbolOut struct {
	Symbol     string `json:"symbol"`
	Name       string `json:"name"`
	Exchange   string `json:"exchange"`
	Type       string `json:"type"`
	AssetClass string `json:"assetClass"`
	Simulated  bool   `json:"simulated"`
}

func outOf(in market.Instrument) symbolOut {
	return symbolOut{Symbol: in.Symbol, Name: in.Name, Exchange: in.Exchange, Type: in.Type, AssetClass: in.AssetClass, Simulated: in.Simulated}
}

func (h *Handlers) Search(w http.ResponseWriter, r *http.Request) error {
	q := strings.TrimSpace(r.URL.Query().Get("query"))
	if len(q) > maxQuery {
		return badRequest(commands.CodeInvalidRequest, fmt.Sprintf("query is longer than %d characters", maxQuery), nil)
	}
	limit, err := intParam(r, "limit", MaxSymbols, 1, MaxSymbols)
	if err != nil {
		return err
	}
	needle := strings.ToLower(q)
	match := func(in market.Instrument) bool {
		return needle == "" || strings.Contains(strings.ToLower(in.Symbol), needle) || strings.Contains(strings.ToLower(in.Name), needle)
	}
	out := []symbolOut{}
	for _, in := range h.m.Catalog.All() {
		if in.AssetClass != "futures" && match(in) && len(out) < int(limit) {
			out = append(out, outOf(in))
		}
	}
	if len(out) < int(limit) {
		if f, err := h.futures(r); err == nil { // futures only from the caller's own feed, the products it is entitled to
			for _, c := range f.Search(r.Context(), q, int(limit)-len(out)) {
				out = append(out, outOf(c.Instrument()))
			}
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"symbols": out})
	return nil
}

func (h *Handlers) SymbolInfo(w http.ResponseWriter, r *http.Request) error {
	s, err := query(r, "instrument", "symbol")
	if err != nil {
		return err
	}
	e, feed, err := h.expression(r, s)
	if err != nil {
		return err
	}
	cal := map[string]any{"timezone": "Etc/UTC", "session": "24x7", "holidays": []any{}}
	if e.Single() {
		in, ok := h.crypto(e.Legs[0])
		if !ok { // a futures symbol from the caller's own feed
			return h.futuresInfo(w, r, feed, e.Legs[0])
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{
			"symbol": in.Symbol, "name": in.Name, "exchange": in.Exchange, "type": in.Type, "assetClass": in.AssetClass,
			"simulated": in.Simulated, "source": h.m.Feed.Name(), "currency": "USD",
			"timezone": "Etc/UTC", "session": "24x7", "sessionCalendar": cal,
			"priceFormat": priceFormat(in.TickSize.String()), "legs": []string{in.Symbol},
			"lotStep": in.LotStep.String(), "minQuantity": in.MinQuantity.String(),
		})
		return nil
	}
	decimals := 0
	for _, leg := range e.Legs {
		tick := events.Int(1)
		if in, ok := h.crypto(leg); ok {
			tick = in.TickSize
		} else if c, err := feed.Contract(r.Context(), leg); err == nil {
			tick = c.TickSize
		} else {
			return futuresError(leg, err)
		}
		decimals = max(decimals, tick.Decimals())
	}
	if strings.ContainsAny(e.Canonical, "/^") {
		decimals = max(decimals, 6)
	}
	tick := "1"
	if decimals > 0 {
		tick = "0." + strings.Repeat("0", decimals-1) + "1"
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"symbol": e.Canonical, "name": "Spread " + e.Canonical, "exchange": "SPREAD", "type": "spread", "assetClass": "spread",
		"simulated": false, "source": h.m.Feed.Name(), "currency": "USD",
		"timezone": "Etc/UTC", "session": "24x7", "sessionCalendar": cal,
		"priceFormat": priceFormat(tick), "legs": e.Legs,
	})
	return nil
}

// futuresInfo answers symbol-info for a futures symbol from the caller's
// own feed: the contract month it stands for now (contract, its root and
// expiration), the product's tick, value per point and, for a product
// quoted in thirty-seconds, the catalog's priceFraction. Futures trade on
// CME Globex hours (America/Chicago, 17:00 to 16:00).
func (h *Handlers) futuresInfo(w http.ResponseWriter, r *http.Request, feed *userfeed.Feed, symbol string) error {
	c, err := feed.Contract(r.Context(), symbol)
	if err != nil {
		return futuresError(symbol, err)
	}
	const zone, session = "America/Chicago", "1700-1600"
	out := map[string]any{
		"symbol": symbol, "name": c.Name(), "exchange": c.Product.Exchange, "type": "future", "assetClass": "futures",
		"simulated": false, "source": feed.Name(), "currency": cmp.Or(c.Currency, c.Product.Currency),
		"timezone": zone, "session": session, "sessionCalendar": map[string]any{"timezone": zone, "session": session, "holidays": []any{}},
		"priceFormat": priceFormat(c.TickSize.String()), "legs": []string{symbol},
		"lotStep": "1", "minQuantity": "1", "contract": c.Symbol, "root": c.Root, "multiplier": c.ValuePerPoint.String(),
	}
	if !c.Expiration.IsZero() {
		out["expiration"] = c.Expiration.UTC().Format(time.RFC3339)
	}
	if f := c.Fraction(); f != nil {
		out["priceFraction"] = f
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// priceFormat describes how prices are written: tick size, decimals, and the
// charting convention of pricescale (10^decimals) and minmov (ticks per step).
func priceFormat(tick string) map[string]any {
	decimals := 0
	if i := strings.IndexByte(tick, '.'); i >= 0 {
		decimals = len(tick) - i - 1
	}
	digits := strings.TrimLeft(strings.ReplaceAll(tick, ".", ""), "0")
	minmov, _ := strconv.Atoi(digits)
	scale := int64(1)
	for i := 0; i < decimals; i++ {
		scale *= 10
	}
	return map[string]any{"tickSize": tick, "decimals": decimals, "pricescale": scale, "minmov": max(minmov, 1)}
}

type quoteOut struct {
	Symbol string `json:"symbol"`
	Bid    string `json:"bid"`
	Ask    string `json:"ask"`
	Last   string `json:"last"`
	Mid    string `json:"mid"`
	Time   string `json:"time"`
	// Contract is the month a futures root or continuous symbol stands for now.
	Contract string `json:"contract,omitempty"`
}

func quoteOf(q market.Quote) quoteOut {
	return quoteOut{Symbol: q.Instrument, Bid: q.Bid.String(), Ask: q.Ask.String(), Last: q.Last.String(), Mid: q.Mid().String(),
		Time: q.At.UTC().Format(time.RFC3339Nano)}
}

// query reads a query parameter by its name or by the older name it
// replaces (the routes that take one instrument call it instrument, as the
// order routes do; the older name stays accepted); both at once is 400.
func query(r *http.Request, name, older string) (string, error) {
	q := r.URL.Query()
	switch {
	case q.Has(name) && q.Has(older):
		return "", badRequest(commands.CodeInvalidRequest, fmt.Sprintf("send %s or its older name %s, not both", name, older), map[string]any{"field": name})
	case q.Has(name):
		return q.Get(name), nil
	}
	return q.Get(older), nil
}

// commaList splits a comma-separated query value into its trimmed, non-empty items.
func commaList(raw string) []string {
	var out []string
	for _, s := range strings.Split(raw, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (h *Handlers) Quotes(w http.ResponseWriter, r *http.Request) error {
	raw, err := query(r, "instruments", "symbols")
	if err != nil {
		return err
	}
	names := commaList(raw)
	if len(names) == 0 {
		return badRequest(commands.CodeInvalidRequest, "instruments is required: a comma-separated list", nil)
	}
	if len(names) > MaxQuotes {
		return badRequest(commands.CodeTooManySymbols, fmt.Sprintf("at most %d symbols per request", MaxQuotes), map[string]any{"limit": MaxQuotes})
	}
	out := make([]quoteOut, 0, len(names))
	var feed *userfeed.Feed
	for _, n := range names {
		in, ok := h.crypto(n)
		if !ok {
			f, isF := h.isFutures(n)
			if !isF {
				return unknownSymbol(n)
			}
			if feed == nil {
				if feed, err = h.futures(r); err != nil {
					return futuresError(f, err)
				}
			}
			q, c, err := feed.QuoteOf(r.Context(), f)
			if err != nil {
				return futuresError(f, err)
			}
			qo := quoteOf(q)
			if c.Symbol != q.Instrument {
				qo.Contract = c.Symbol
			}
			out = append(out, qo)
			continue
		}
		if !market.Served(h.m.Feed, in.Symbol) {
			return feedUnavailable(in.Symbol)
		}
		q, ok := h.m.Feed.Quote(in.Symbol)
		if !ok {
			return feedUnavailable(in.Symbol)
		}
		out = append(out, quoteOf(q))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"quotes": out})
	return nil
}

func (h *Handlers) Clock(w http.ResponseWriter, r *http.Request) error {
	now := h.m.Now().UTC()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"time": now.Format(time.RFC3339Nano), "unix": now.Unix(), "unixMs": now.UnixMilli()})
	return nil
}

func (h *Handlers) History(w http.ResponseWriter, r *http.Request) error {
	instrument := r.URL.Query().Get("instrument")
	tf, err := timeframe(r)
	if err != nil {
		return err
	}
	e, feed, err := h.expression(r, instrument)
	if err != nil {
		return err
	}
	count, err := intParam(r, "countBack", DefaultCountBack, 1, MaxBars)
	if err != nil {
		return err
	}
	to, err := intParam(r, "to", 0, 0, 1<<40)
	if err != nil {
		return err
	}
	var list []market.Bar
	if feed != nil && e.Single() {
		if list, err = feed.History(r.Context(), e.Legs[0], tf, int(count), to); err != nil {
			return futuresError(e.Legs[0], err)
		}
	} else if feed != nil {
		legs := userfeed.Legs{IsFutures: h.futuresLeg, Bars: h.m.Bars.Store}
		if list, err = feed.SpreadHistory(r.Context(), e, tf, int(count), to, legs); err != nil {
			return futuresError(instrument, err)
		}
	} else if e.Single() {
		list = h.m.Bars.Store.History(e.Legs[0], tf, int(count), to)
	} else {
		list = h.m.Bars.Store.SpreadHistory(e, tf, int(count), to)
	}
	buf := make([]byte, 0, 64+len(list)*110)
	buf = append(buf, `{"instrument":`...)
	buf = appendString(buf, instrument)
	buf = append(buf, `,"tf":`...)
	buf = appendString(buf, tf.String())
	buf = append(buf, `,"bars":[`...)
	for i := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = list[i].AppendJSON(buf)
	}
	buf = append(buf, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(buf)
	return err
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// subscribe resolves one instrument and timeframe to a live subscription.
func (h *Handlers) subscribe(r *http.Request, instrument, tfRaw string, sink bars.Sink, subNo int) (func(), error) {
	tf, err := market.ParseTimeframe(tfRaw)
	if err != nil {
		return nil, badRequest(commands.CodeInvalidTimeframe, err.Error(), map[string]any{"tf": tfRaw})
	}
	e, feed, err := h.expression(r, instrument)
	if err != nil {
		return nil, err
	}
	if feed != nil { // the caller's own bars, from their own quotes
		legs := userfeed.Legs{IsFutures: h.futuresLeg, Feed: h.m.Feed, Bars: h.m.Bars.Store}
		cancel, err := feed.SubscribeBars(r.Context(), e, tf, sink, subNo, legs)
		if err != nil {
			return nil, futuresError(instrument, err)
		}
		return cancel, nil
	}
	return h.m.Bars.Live.SubscribeSink(e, tf, sink, subNo), nil
}

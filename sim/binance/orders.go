package binance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// order is one order of the matching engine: a MARKET or LIMIT order an account placed, or the
// one a triggered conditional order (algo, algo.go) placed for it. origType is the type it was
// placed with (the same as typ: conditional types never reach this route).
type order struct {
	id                    int64
	seq                   int64 // the account's placement sequence, shared with its algo orders
	cid                   string
	symbol, side, posSide string
	typ, origType, tif    string
	qty, price            *apd.Decimal // price is zero when not given
	executed, cumQuote    *apd.Decimal
	reduceOnly, closePos  bool
	priceProtect          bool
	workingType           string
	status                string
	algo                  *algoOrder // the conditional order that placed it, if any
	time, update          int64
}

func (o *order) open() bool { return o.status == "NEW" || o.status == "PARTIALLY_FILLED" }

func (o *order) avg() *apd.Decimal { return dec.Quo(o.cumQuote, o.executed) }

func (o *order) remaining() *apd.Decimal { return dec.Sub(o.qty, o.executed) }

// fill is one trade of an account.
type fill struct {
	id                    int64
	orderID               int64
	symbol, side, posSide string
	price, qty, quote     *apd.Decimal
	fee, realized         *apd.Decimal
	maker                 bool
	time                  int64
}

var clientOrderIDPattern = regexp.MustCompile(`^[\.A-Z\:/a-z0-9_-]{1,36}$`)

var orderTypes = map[string]bool{"LIMIT": true, "MARKET": true}

// conditionalTypes are the order types the exchange takes only through its algo service since
// 2025-12-09: POST /fapi/v1/order and /fapi/v1/batchOrders answer them -4120.
var conditionalTypes = map[string]bool{"STOP": true, "STOP_MARKET": true, "TAKE_PROFIT": true,
	"TAKE_PROFIT_MARKET": true, "TRAILING_STOP_MARKET": true}

func (s *Sim) placeOrder(c *call) (any, error) {
	o, ack, err := s.place(c.acct, c.params, c.now)
	if err != nil {
		return nil, err
	}
	if c.params.Get("newOrderRespType") == "RESULT" {
		return s.orderJSON(o, false), nil
	}
	return ack, nil
}

// place validates and accepts one order with the exchange's checks in its order, then matches it.
// It returns the order and its answer as of acceptance (the ACK answer).
func (s *Sim) place(a *account, p url.Values, now time.Time) (*order, map[string]any, error) {
	name := p.Get("symbol")
	if name == "" {
		return nil, nil, errMandatory("symbol")
	}
	m, ok := s.markets[name]
	if !ok {
		return nil, nil, errBadSymbol
	}
	side := p.Get("side")
	switch side {
	case "BUY", "SELL":
	case "":
		return nil, nil, errMandatory("side")
	default:
		return nil, nil, refuse(http.StatusBadRequest, codeInvalidSide, "Invalid side.")
	}
	typ := p.Get("type")
	if typ == "" {
		return nil, nil, errMandatory("type")
	}
	if conditionalTypes[typ] {
		return nil, nil, errAlgoOnly
	}
	if !orderTypes[typ] {
		return nil, nil, refuse(http.StatusBadRequest, codeInvalidOrderType, "Invalid orderType.")
	}
	switch p.Get("newOrderRespType") {
	case "", "ACK", "RESULT":
	default:
		return nil, nil, errInvalidValue("newOrderRespType")
	}
	posSide := p.Get("positionSide")
	if posSide == "" {
		posSide = "BOTH"
	}
	if a.dual && posSide != "LONG" && posSide != "SHORT" || !a.dual && posSide != "BOTH" {
		return nil, nil, errPosSide
	}
	reduceOnly := false
	if v := p.Get("reduceOnly"); v != "" {
		if a.dual {
			return nil, nil, errNotRequired("reduceonly")
		}
		var err error
		if reduceOnly, err = parseBool(v, "reduceOnly"); err != nil {
			return nil, nil, err
		}
	}
	if v := p.Get("closePosition"); v != "" {
		closePos, err := parseBool(v, "closePosition")
		if err != nil {
			return nil, nil, err
		}
		if closePos {
			// Close-all is a conditional order's (STOP_MARKET, TAKE_PROFIT_MARKET).
			return nil, nil, errNotRequired("closePosition")
		}
	}
	cid := p.Get("newClientOrderId")
	if cid == "" {
		cid = "sim" + randomHex(10)
	}
	if !clientOrderIDPattern.MatchString(cid) {
		return nil, nil, errClOrdID
	}
	for _, o := range a.openOrders("") {
		if o.cid == cid {
			return nil, nil, errDupClOrdID
		}
	}

	qty, err := checkQty(m, p.Get("quantity"))
	if err != nil {
		return nil, nil, err
	}
	limitLike := typ == "LIMIT"
	tif := p.Get("timeInForce")
	if limitLike {
		switch tif {
		case "GTC", "IOC", "FOK", "GTX":
		case "":
			return nil, nil, errMandatory("timeInForce")
		default:
			return nil, nil, refuse(http.StatusBadRequest, codeInvalidTIF, "Invalid timeInForce.")
		}
	} else {
		tif = "GTC"
	}
	price := dec.Zero()
	if limitLike {
		if price, err = checkPrice(m, p.Get("price"), "price"); err != nil {
			return nil, nil, err
		}
	} else if p.Get("price") != "" {
		return nil, nil, errNotRequired("price")
	}
	workingType, err := parseWorkingType(p)
	if err != nil {
		return nil, nil, err
	}
	o := &order{cid: cid, symbol: name, side: side, posSide: posSide, typ: typ, origType: typ, tif: tif,
		qty: qty, price: price, executed: dec.Zero(), cumQuote: dec.Zero(), reduceOnly: reduceOnly,
		priceProtect: p.Get("priceProtect") == "true", workingType: workingType,
		status: "NEW", time: now.UnixMilli(), update: now.UnixMilli()}
	shut := s.closable(a, name, posSide, side)
	if shut.IsZero() && (reduceOnly || closing(posSide, side)) {
		return nil, nil, errReduceOnly
	}
	if closing(posSide, side) && qty.Cmp(shut) > 0 {
		return nil, nil, errReduceOnly
	}
	if !reduceOnly && !closing(posSide, side) {
		ref := price
		if ref.IsZero() {
			ref = m.price
		}
		if dec.Mul(qty, ref).Cmp(m.minNotional) < 0 {
			return nil, nil, refuse(http.StatusBadRequest, codeMinNotional,
				"Order's notional must be no smaller than %s (unless you choose reduce only).", m.spec.MinNotional)
		}
		if s.orderMargin(a, o).Cmp(s.margin(a).available()) > 0 {
			return nil, nil, errMargin
		}
	}
	if typ == "LIMIT" && s.crosses(o, m.price) && tif == "GTX" {
		return nil, nil, errGTX
	}
	if typ == "LIMIT" && !s.crosses(o, m.price) && tif == "FOK" {
		return nil, nil, errFOK
	}

	s.accept(a, cid)
	s.register(a, o)
	ack := s.orderJSON(o, false)
	s.start(a, o, m, now)
	return o, ack, nil
}

// parseWorkingType reads workingType: the price a conditional order triggers on, the last trade
// (CONTRACT_PRICE, the default) or the mark (MARK_PRICE). The order route takes and echoes it.
func parseWorkingType(p url.Values) (string, error) {
	switch wt := p.Get("workingType"); wt {
	case "":
		return "CONTRACT_PRICE", nil
	case "CONTRACT_PRICE", "MARK_PRICE":
		return wt, nil
	}
	return "", errInvalidValue("workingType")
}

// accept counts an order or algo order the account placed under a client id (OrdersByClientID).
func (s *Sim) accept(a *account, cid string) { s.accepted.Add(a.key, cid) }

// register gives an accepted order its id and its place among the account's orders.
func (s *Sim) register(a *account, o *order) {
	s.orderSeq++
	o.id = s.orderSeq
	a.placed++
	o.seq = a.placed
	a.orders = append(a.orders, o)
}

// start puts a registered order into the matching engine: NEW on the user stream, then a market
// order fills, a crossing limit fills as taker, a non-crossing IOC or FOK limit expires, the rest
// rests.
func (s *Sim) start(a *account, o *order, m *market, now time.Time) {
	s.emitOrder(a, o, "NEW", nil, now)
	switch {
	case o.typ == "MARKET":
		s.fill(a, o, m.price, false, now)
	case s.crosses(o, m.price) && o.tif == "GTX":
		s.finish(a, o, "EXPIRED", now) // post-only would take: only a triggered one gets here
	case s.crosses(o, m.price):
		s.fill(a, o, m.price, false, now)
	case o.tif == "IOC" || o.tif == "FOK":
		s.finish(a, o, "EXPIRED", now)
	}
}

func checkQty(m *market, v string) (*apd.Decimal, error) {
	if v == "" {
		return nil, errMandatory("quantity")
	}
	q, ok := dec.Parse(v)
	if !ok {
		return nil, errIllegal("quantity")
	}
	if q.Sign() <= 0 {
		return nil, refuse(http.StatusBadRequest, codeQtyLessThanZero, "Quantity less than or equal to zero.")
	}
	if dec.Places(q) > m.spec.QuantityPrecision {
		return nil, errPrecision
	}
	if !dec.IsMultiple(q, m.step) {
		return nil, refuse(http.StatusBadRequest, codeQtyNotStep, "Quantity not increased by step size.")
	}
	if q.Cmp(m.minQty) < 0 {
		return nil, refuse(http.StatusBadRequest, codeQtyLessThanMin, "Quantity less than min quantity.")
	}
	if q.Cmp(m.maxQty) > 0 {
		return nil, refuse(http.StatusBadRequest, codeQtyGreaterThanMax, "Quantity greater than max quantity.")
	}
	return q, nil
}

func checkPrice(m *market, v, name string) (*apd.Decimal, error) {
	if v == "" {
		return nil, errMandatory(name)
	}
	d, ok := dec.Parse(v)
	if !ok {
		return nil, errIllegal(name)
	}
	if d.Sign() <= 0 {
		return nil, refuse(http.StatusBadRequest, codePriceLessThanZero, "Price less than 0.")
	}
	if dec.Places(d) > m.spec.PricePrecision {
		return nil, errPrecision
	}
	if !dec.IsMultiple(d, m.tick) {
		return nil, refuse(http.StatusBadRequest, codePriceNotTick, "Price not increased by tick size.")
	}
	return d, nil
}

// closing says whether an order in hedge mode closes its position side (SELL LONG, BUY SHORT).
func closing(posSide, side string) bool {
	return posSide == "LONG" && side == "SELL" || posSide == "SHORT" && side == "BUY"
}

// closable is how much of the position an order of side may close: for reduce-only,
// close-position and hedge-closing orders, the opposing position size; zero when none.
func (s *Sim) closable(a *account, symbol, posSide, side string) *apd.Decimal {
	p, ok := a.pos[posKey{symbol, posSide}]
	if !ok || p.amt.IsZero() {
		return dec.Zero()
	}
	if (side == "BUY") == p.amt.Negative {
		return dec.Abs(p.amt)
	}
	return dec.Zero()
}

// orderMargin is the initial margin an open order holds: the part of it that would open a position,
// at its limit price (the mark for market orders) over the symbol's leverage.
func (s *Sim) orderMargin(a *account, o *order) *apd.Decimal {
	if o.reduceOnly || o.closePos || closing(o.posSide, o.side) {
		return dec.Zero()
	}
	m := s.markets[o.symbol]
	ref := o.price
	if ref.IsZero() {
		ref = m.price
	}
	q := o.remaining()
	if !a.dual {
		q = dec.Sub(q, s.closable(a, o.symbol, o.posSide, o.side))
		if q.Negative {
			return dec.Zero()
		}
	}
	return dec.Quo(dec.Mul(q, ref), dec.Int(int64(a.leverage[o.symbol])))
}

// crosses says whether a limit order is marketable at price.
func (s *Sim) crosses(o *order, price *apd.Decimal) bool {
	if o.side == "BUY" {
		return o.price.Cmp(price) >= 0
	}
	return o.price.Cmp(price) <= 0
}

// fill executes what remains of an order at px: the position, wallet (realized PnL less fee),
// the trade list and both user stream events change together.
func (s *Sim) fill(a *account, o *order, px *apd.Decimal, maker bool, now time.Time) {
	m := s.markets[o.symbol]
	q := o.remaining()
	shut := s.closable(a, o.symbol, o.posSide, o.side)
	if o.closePos {
		// A close-position order has no quantity: it takes the whole position when it fills.
		q = shut
		o.qty = dec.Add(o.executed, q)
	} else if o.reduceOnly || closing(o.posSide, o.side) {
		q = dec.Min(q, shut)
	}
	if q.IsZero() {
		s.finish(a, o, "EXPIRED", now)
		return
	}
	signed := q
	if o.side == "SELL" {
		signed = dec.Neg(q)
	}
	p := a.position(o.symbol, o.posSide)
	realized := applyFill(p, signed, px)
	p.update = now.UnixMilli()
	rate := s.takerFee
	if maker {
		rate = s.makerFee
	}
	quote := dec.Mul(q, px)
	fee := dec.Mul(quote, rate)
	a.wallet["USDT"] = dec.Sub(dec.Add(a.wallet["USDT"], realized), fee)
	a.update = now.UnixMilli()
	o.executed = dec.Add(o.executed, q)
	o.cumQuote = dec.Add(o.cumQuote, quote)
	o.status = "FILLED"
	if o.executed.Cmp(o.qty) < 0 {
		o.status = "PARTIALLY_FILLED"
	}
	o.update = now.UnixMilli()
	s.tradeSeq++
	f := &fill{id: s.tradeSeq, orderID: o.id, symbol: o.symbol, side: o.side, posSide: o.posSide, price: px,
		qty: q, quote: quote, fee: fee, realized: realized, maker: maker, time: now.UnixMilli()}
	a.trades = append(a.trades, f)
	m.trade(q, quote, now)
	if s.stream.BalanceFirst {
		s.emitAccount(a, o.symbol, realized, fee, now)
		s.emitOrder(a, o, "TRADE", f, now)
	} else {
		s.emitOrder(a, o, "TRADE", f, now)
		s.emitAccount(a, o.symbol, realized, fee, now)
	}
	if p.amt.IsZero() {
		s.expireAlgos(a, o.symbol, o.posSide, now)
	}
	if o.status == "PARTIALLY_FILLED" {
		s.finish(a, o, "EXPIRED", now)
		return
	}
	s.algoDone(a, o, now)
}

// applyFill moves a position by a signed quantity at px and returns the PnL it realizes.
func applyFill(p *position, signed, px *apd.Decimal) *apd.Decimal {
	if p.amt.IsZero() || p.amt.Negative == signed.Negative {
		total := dec.Add(dec.Abs(p.amt), dec.Abs(signed))
		p.entry = dec.Quo(dec.Add(dec.Mul(dec.Abs(p.amt), p.entry), dec.Mul(dec.Abs(signed), px)), total)
		p.amt = dec.Add(p.amt, signed)
		return dec.Zero()
	}
	closed := dec.Min(dec.Abs(signed), dec.Abs(p.amt))
	realized := dec.Mul(closed, dec.Sub(px, p.entry))
	if p.amt.Negative {
		realized = dec.Neg(realized)
	}
	was := p.amt
	p.amt = dec.Add(p.amt, signed)
	switch {
	case p.amt.IsZero():
		p.entry = dec.Zero()
	case p.amt.Negative != was.Negative:
		p.entry = px
	}
	p.realized = dec.Add(p.realized, realized)
	return realized
}

// finish ends an open order with a status (CANCELED, EXPIRED) and tells the user stream.
func (s *Sim) finish(a *account, o *order, status string, now time.Time) {
	o.status = status
	o.update = now.UnixMilli()
	s.emitOrder(a, o, status, nil, now)
	s.algoDone(a, o, now)
}

// SetPrice drives a symbol's mark and last price: resting orders that the price reaches fill,
// conditional (algo) orders trigger, and the market streams publish the price.
func (s *Sim) SetPrice(symbol, price string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, px, err := s.priceOf(symbol, price)
	if err != nil {
		return err
	}
	now := time.Now()
	m.price, m.mark = px, px
	m.updateID++
	m.observe(px, now)
	s.react(symbol, m, now)
	return nil
}

// SetMarkPrice drives a symbol's mark price alone, the last trade's price staying where it is (a
// wick of the index, a funding move): conditional (algo) orders with workingType MARK_PRICE that
// it reaches trigger and fill at the last price; the mark price stream publishes it.
func (s *Sim) SetMarkPrice(symbol, price string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, px, err := s.priceOf(symbol, price)
	if err != nil {
		return err
	}
	m.mark = px
	s.react(symbol, m, time.Now())
	return nil
}

// priceOf is the market of a listed symbol and a positive price for it, with s.mu held.
func (s *Sim) priceOf(symbol, price string) (*market, *apd.Decimal, error) {
	m, ok := s.markets[symbol]
	if !ok {
		return nil, nil, fmt.Errorf("binance sim: unknown symbol %q", symbol)
	}
	px, ok := dec.Parse(price)
	if !ok || px.Sign() <= 0 {
		return nil, nil, fmt.Errorf("binance sim: price %q is not a positive decimal", price)
	}
	return m, px, nil
}

// react lets every account's resting orders of the symbol meet its prices, then its conditional
// orders, then publishes the prices, with s.mu held.
func (s *Sim) react(symbol string, m *market, now time.Time) {
	keys := make([]string, 0, len(s.accounts))
	for k := range s.accounts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := s.accounts[k]
		for _, o := range a.openOrders(symbol) {
			if o.open() && o.typ == "LIMIT" && s.crosses(o, m.price) {
				s.fill(a, o, o.price, true, now)
			}
		}
		for _, g := range a.openAlgos(symbol) {
			if g.status == algoNew && g.reached(m) {
				s.trigger(a, g, m, now)
			}
		}
	}
	s.publishMarket(m, now)
}

// findOrder finds an account's order by orderId or, failing that, by the latest use of a client
// order id.
func findOrder(a *account, p url.Values) (*order, error) {
	idStr, cid := p.Get("orderId"), p.Get("origClientOrderId")
	if idStr == "" && cid == "" {
		return nil, refuse(http.StatusBadRequest, codeMandatoryParam, "Param orderId or origClientOrderId must be sent, but both were empty/null!")
	}
	var id int64
	if idStr != "" {
		var err error
		if id, err = strconv.ParseInt(idStr, 10, 64); err != nil {
			return nil, errIllegal("orderId")
		}
	}
	for i := len(a.orders) - 1; i >= 0; i-- {
		o := a.orders[i]
		if o.symbol != p.Get("symbol") {
			continue
		}
		if idStr != "" && o.id == id || idStr == "" && o.cid == cid {
			return o, nil
		}
	}
	return nil, nil
}

func (s *Sim) queryOrder(c *call) (any, error) {
	if _, err := s.symbolParam(c, true); err != nil {
		return nil, err
	}
	o, err := findOrder(c.acct, c.params)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, errNoSuchOrder
	}
	return s.orderJSON(o, true), nil
}

func (s *Sim) queryOpenOrder(c *call) (any, error) {
	if _, err := s.symbolParam(c, true); err != nil {
		return nil, err
	}
	o, err := findOrder(c.acct, c.params)
	if err != nil {
		return nil, err
	}
	if o == nil || !o.open() {
		return nil, refuse(http.StatusBadRequest, codeNoSuchOrder, "Order does not exist.")
	}
	return s.orderJSON(o, true), nil
}

func (s *Sim) cancelOrder(c *call) (any, error) {
	if _, err := s.symbolParam(c, true); err != nil {
		return nil, err
	}
	o, err := findOrder(c.acct, c.params)
	if err != nil {
		return nil, err
	}
	if o == nil || !o.open() {
		return nil, errUnknownCancel
	}
	s.finish(c.acct, o, "CANCELED", c.now)
	return s.orderJSON(o, false), nil
}

func (s *Sim) cancelAll(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	for _, o := range c.acct.openOrders(ms[0].spec.Name) {
		s.finish(c.acct, o, "CANCELED", c.now)
	}
	return map[string]any{"code": 200, "msg": "The operation of cancel all open order is done."}, nil
}

func (s *Sim) openOrders(c *call) (any, error) {
	symbol := c.params.Get("symbol")
	if symbol != "" {
		if _, err := s.symbolParam(c, true); err != nil {
			return nil, err
		}
	}
	out := []map[string]any{}
	for _, o := range c.acct.openOrders(symbol) {
		out = append(out, s.orderJSON(o, true))
	}
	return out, nil
}

func (s *Sim) allOrders(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	limit := intParam(c.params, "limit", 500, 1000)
	out := []map[string]any{}
	for _, o := range c.acct.orders {
		if o.symbol == ms[0].spec.Name {
			out = append(out, s.orderJSON(o, true))
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

func intParam(p url.Values, name string, def, max int) int {
	n, err := strconv.Atoi(p.Get(name))
	if err != nil || n <= 0 {
		return def
	}
	if n > max {
		return max
	}
	return n
}

func (s *Sim) modifyOrder(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	m := ms[0]
	o, err := findOrder(c.acct, c.params)
	if err != nil {
		return nil, err
	}
	if o == nil || !o.open() {
		return nil, errNoSuchOrder
	}
	if o.typ != "LIMIT" || o.origType != "LIMIT" {
		return nil, refuse(http.StatusBadRequest, codeInvalidOrderType, "Invalid orderType.")
	}
	if side := c.params.Get("side"); side != o.side {
		return nil, refuse(http.StatusBadRequest, codeInvalidSide, "Invalid side.")
	}
	qty, err := checkQty(m, c.params.Get("quantity"))
	if err != nil {
		return nil, err
	}
	price, err := checkPrice(m, c.params.Get("price"), "price")
	if err != nil {
		return nil, err
	}
	if qty.Cmp(o.qty) == 0 && price.Cmp(o.price) == 0 {
		return nil, refuse(http.StatusBadRequest, -5027, "No need to modify the order.")
	}
	if qty.Cmp(o.executed) <= 0 {
		return nil, refuse(http.StatusBadRequest, -4003, "Quantity less than or equal to zero.")
	}
	o.qty, o.price, o.update = qty, price, c.now.UnixMilli()
	s.emitOrder(c.acct, o, "AMENDMENT", nil, c.now)
	if s.crosses(o, m.price) {
		s.fill(c.acct, o, m.price, false, c.now)
	}
	out := s.orderJSON(o, false)
	out["pair"] = o.symbol
	out["cumBase"] = m.qty(o.executed)
	return out, nil
}

func (s *Sim) userTrades(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	m := ms[0]
	var orderID, fromID int64
	if v := c.params.Get("orderId"); v != "" {
		orderID, _ = strconv.ParseInt(v, 10, 64)
	}
	if v := c.params.Get("fromId"); v != "" {
		fromID, _ = strconv.ParseInt(v, 10, 64)
	}
	limit := intParam(c.params, "limit", 500, 1000)
	out := []map[string]any{}
	for _, f := range c.acct.trades {
		if f.symbol != m.spec.Name || orderID != 0 && f.orderID != orderID || f.id < fromID {
			continue
		}
		out = append(out, map[string]any{
			"buyer": f.side == "BUY", "commission": dec.Fixed(f.fee, 8), "commissionAsset": "USDT", "id": f.id,
			"maker": f.maker, "orderId": f.orderID, "price": m.px(f.price), "qty": m.qty(f.qty),
			"quoteQty": dec.Fixed(f.quote, 8), "realizedPnl": dec.Fixed(f.realized, 8), "side": f.side,
			"positionSide": f.posSide, "symbol": f.symbol, "time": f.time,
		})
	}
	if fromID == 0 && len(out) > limit {
		out = out[len(out)-limit:]
	} else if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// orderJSON is an order as the REST API answers it; withTime adds the placement time that query
// answers carry.
func (s *Sim) orderJSON(o *order, withTime bool) map[string]any {
	m := s.markets[o.symbol]
	out := map[string]any{
		"orderId": o.id, "symbol": o.symbol, "status": o.status, "clientOrderId": o.cid,
		"price": m.px(o.price), "avgPrice": m.px(o.avg()), "origQty": m.qty(o.qty),
		"executedQty": m.qty(o.executed), "cumQty": m.qty(o.executed), "cumQuote": dec.Fixed(o.cumQuote, 8),
		"timeInForce": o.tif, "type": o.typ, "reduceOnly": o.reduceOnly || o.closePos, "closePosition": o.closePos,
		"side": o.side, "positionSide": o.posSide, "stopPrice": m.px(dec.Zero()), "workingType": o.workingType,
		"priceProtect": o.priceProtect, "origType": o.origType, "priceMatch": "NONE",
		"selfTradePreventionMode": "EXPIRE_MAKER", "goodTillDate": 0, "updateTime": o.update,
	}
	if withTime {
		out["time"] = o.time
	}
	return out
}

// PlaceOutside places an order on an account as if the trader did it elsewhere (the web page, a
// phone): params are the exchange's order parameters ("symbol", "side", "type", "quantity", ...);
// without newClientOrderId it gets one of the exchange's own ("web_..."). A conditional type
// (STOP_MARKET, ...) goes to the algo service as the exchange's own pages send it: with
// "triggerPrice", under "clientAlgoId" or one of the exchange's own ("web_..."). The user stream
// tells of it as of any order. It returns the order id, or a conditional order's algoId.
func (s *Sim) PlaceOutside(apiKey string, params map[string]string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.accountOf(apiKey)
	if err != nil {
		return 0, err
	}
	p := url.Values{}
	for k, v := range params {
		p.Set(k, v)
	}
	p.Set("symbol", strings.ToUpper(p.Get("symbol")))
	if conditionalTypes[p.Get("type")] {
		if p.Get("clientAlgoId") == "" {
			p.Set("clientAlgoId", "web_"+randomHex(8))
		}
		if p.Get("algoType") == "" {
			p.Set("algoType", "CONDITIONAL")
		}
		g, err := s.placeAlgo(a, p, time.Now())
		if err != nil {
			return 0, err
		}
		return g.id, nil
	}
	if p.Get("newClientOrderId") == "" {
		p.Set("newClientOrderId", "web_"+randomHex(8))
	}
	o, _, err := s.place(a, p, time.Now())
	if err != nil {
		return 0, err
	}
	return o.id, nil
}

// batchOrders places up to five orders of the batchOrders parameter (a JSON list of order
// parameter objects) one after another; each answers as the order route would, a refusal as its
// {"code","msg"} in its place. Conditional types are refused -4120 like on the order route.
func (s *Sim) batchOrders(c *call) (any, error) {
	raw := c.params.Get("batchOrders")
	if raw == "" {
		return nil, errMandatory("batchOrders")
	}
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	var list []map[string]any
	if err := d.Decode(&list); err != nil {
		return nil, errIllegal("batchOrders")
	}
	if len(list) == 0 || len(list) > 5 {
		return nil, errInvalidValue("batchOrders")
	}
	out := make([]any, 0, len(list))
	for _, item := range list {
		p := url.Values{}
		for k, v := range item {
			p.Set(k, fmt.Sprint(v))
		}
		o, ack, err := s.place(c.acct, p, c.now)
		var ae *APIError
		switch {
		case errors.As(err, &ae):
			out = append(out, map[string]any{"code": ae.Code, "msg": ae.Msg})
		case err != nil:
			return nil, err
		case p.Get("newOrderRespType") == "RESULT":
			out = append(out, s.orderJSON(o, false))
		default:
			out = append(out, ack)
		}
	}
	return out, nil
}

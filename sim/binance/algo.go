package binance

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/sim/internal/dec"
)

// The algo service. Since 2025-12-09 the exchange takes conditional orders (STOP, STOP_MARKET,
// TAKE_PROFIT, TAKE_PROFIT_MARKET, TRAILING_STOP_MARKET) only on its algo order routes
// (/fapi/v1/algoOrder and kin); POST /fapi/v1/order and /fapi/v1/batchOrders answer them -4120.
// An algo order rests off the order book under its algoId and clientAlgoId. When its working price
// (the last trade, or the mark with workingType MARK_PRICE) reaches its trigger price it places a
// regular order in the matching engine under a new orderId and a client order id of the
// exchange's own: MARKET for STOP_MARKET and TAKE_PROFIT_MARKET, LIMIT at its price for STOP and
// TAKE_PROFIT. ALGO_UPDATE tells each step (NEW, TRIGGERING, TRIGGERED naming the order in "ai",
// FINISHED once that order filled or ended; CANCELED, EXPIRED, REJECTED), and the placed order
// speaks ORDER_TRADE_UPDATE as any order does.

// Algo statuses, as the exchange spells them.
const (
	algoNew        = "NEW"
	algoCanceled   = "CANCELED"
	algoTriggering = "TRIGGERING"
	algoTriggered  = "TRIGGERED"
	algoFinished   = "FINISHED"
	algoRejected   = "REJECTED"
	algoExpired    = "EXPIRED"
)

// algoTypes are the conditional types the simulator's algo service takes (TRAILING_STOP_MARKET
// is not simulated).
var algoTypes = map[string]bool{"STOP": true, "STOP_MARKET": true, "TAKE_PROFIT": true, "TAKE_PROFIT_MARKET": true}

// algoOrder is one conditional order of an account. qty is zero for a close-position order;
// price is zero for the _MARKET types.
type algoOrder struct {
	id                           int64
	seq                          int64 // the account's placement sequence, shared with its orders
	cid                          string
	symbol, side, posSide        string
	typ, tif                     string
	qty, price, trigger          *apd.Decimal
	reduceOnly, closePos         bool
	priceProtect                 bool
	workingType                  string
	status                       string
	reason                       string // why it was rejected ("rm")
	actual                       *order // the order it placed when triggered
	created, update, triggerTime int64
}

// live reports whether the algo order has not ended: a clientAlgoId is unique among these.
func (g *algoOrder) live() bool {
	return g.status == algoNew || g.status == algoTriggering || g.status == algoTriggered
}

// reached says whether the order's working price has reached its trigger price: a stop buys at or
// above it and sells at or below it, a take profit the reverse.
func (g *algoOrder) reached(m *market) bool {
	price := m.price
	if g.workingType == "MARK_PRICE" {
		price = m.mark
	}
	c := price.Cmp(g.trigger)
	stop := g.typ == "STOP" || g.typ == "STOP_MARKET"
	if stop == (g.side == "BUY") {
		return c >= 0
	}
	return c <= 0
}

// openAlgos is the account's untriggered algo orders of symbol ("" for every symbol), oldest
// first: what GET /fapi/v1/openAlgoOrders lists.
func (a *account) openAlgos(symbol string) []*algoOrder {
	var out []*algoOrder
	for _, g := range a.algos {
		if g.status == algoNew && (symbol == "" || g.symbol == symbol) {
			out = append(out, g)
		}
	}
	return out
}

func (s *Sim) placeAlgoOrder(c *call) (any, error) {
	g, err := s.placeAlgo(c.acct, c.params, c.now)
	if err != nil {
		return nil, err
	}
	return s.algoJSON(g), nil
}

// placeAlgo validates and accepts one conditional order with the exchange's checks in its order.
// Margin is not checked until it triggers, as the algo service does.
func (s *Sim) placeAlgo(a *account, p url.Values, now time.Time) (*algoOrder, error) {
	switch p.Get("algoType") {
	case "CONDITIONAL":
	case "":
		return nil, errMandatory("algoType")
	default:
		return nil, errInvalidValue("algoType")
	}
	name := p.Get("symbol")
	if name == "" {
		return nil, errMandatory("symbol")
	}
	m, ok := s.markets[name]
	if !ok {
		return nil, errBadSymbol
	}
	side := p.Get("side")
	switch side {
	case "BUY", "SELL":
	case "":
		return nil, errMandatory("side")
	default:
		return nil, refuse(http.StatusBadRequest, codeInvalidSide, "Invalid side.")
	}
	typ := p.Get("type")
	if typ == "" {
		return nil, errMandatory("type")
	}
	if !algoTypes[typ] {
		return nil, refuse(http.StatusBadRequest, codeInvalidOrderType, "Invalid orderType.")
	}
	posSide := p.Get("positionSide")
	if posSide == "" {
		posSide = "BOTH"
	}
	if a.dual && posSide != "LONG" && posSide != "SHORT" || !a.dual && posSide != "BOTH" {
		return nil, errPosSide
	}
	reduceOnly := false
	if v := p.Get("reduceOnly"); v != "" {
		if a.dual {
			return nil, errNotRequired("reduceonly")
		}
		var err error
		if reduceOnly, err = parseBool(v, "reduceOnly"); err != nil {
			return nil, err
		}
	}
	marketType := typ == "STOP_MARKET" || typ == "TAKE_PROFIT_MARKET"
	closePos := false
	if v := p.Get("closePosition"); v != "" {
		var err error
		if closePos, err = parseBool(v, "closePosition"); err != nil {
			return nil, err
		}
		if closePos && !marketType {
			return nil, errNotRequired("closePosition")
		}
		if closePos && reduceOnly {
			return nil, errNotRequired("reduceOnly")
		}
	}
	cid := p.Get("clientAlgoId")
	if cid == "" {
		cid = randomHex(11)
	}
	if !clientOrderIDPattern.MatchString(cid) {
		return nil, errClOrdID
	}
	for _, g := range a.algos {
		if g.live() && g.cid == cid {
			return nil, errDupClOrdID
		}
	}
	qty := dec.Zero()
	if closePos {
		if p.Get("quantity") != "" {
			return nil, errNotRequired("quantity")
		}
	} else {
		var err error
		if qty, err = checkQty(m, p.Get("quantity")); err != nil {
			return nil, err
		}
	}
	tif := p.Get("timeInForce")
	switch tif {
	case "":
		tif = "GTC"
	case "GTC", "IOC", "FOK", "GTX":
	default:
		return nil, refuse(http.StatusBadRequest, codeInvalidTIF, "Invalid timeInForce.")
	}
	price := dec.Zero()
	if !marketType {
		var err error
		if price, err = checkPrice(m, p.Get("price"), "price"); err != nil {
			return nil, err
		}
	} else if p.Get("price") != "" {
		return nil, errNotRequired("price")
	}
	trigger, err := checkPrice(m, p.Get("triggerPrice"), "triggerPrice")
	if err != nil {
		return nil, err
	}
	workingType, err := parseWorkingType(p)
	if err != nil {
		return nil, err
	}
	protect := false
	if v := p.Get("priceProtect"); v != "" {
		if protect, err = parseBool(v, "priceProtect"); err != nil {
			return nil, err
		}
	}
	ms := now.UnixMilli()
	g := &algoOrder{cid: cid, symbol: name, side: side, posSide: posSide, typ: typ, tif: tif, qty: qty, price: price,
		trigger: trigger, reduceOnly: reduceOnly, closePos: closePos, priceProtect: protect, workingType: workingType,
		status: algoNew, created: ms, update: ms}
	if g.reached(m) {
		return nil, errWouldTrigger
	}
	shut := s.closable(a, name, posSide, side)
	if !closePos && shut.IsZero() && (reduceOnly || closing(posSide, side)) {
		return nil, errReduceOnly
	}
	if !closePos && closing(posSide, side) && qty.Cmp(shut) > 0 {
		return nil, errReduceOnly
	}
	if !closePos && !reduceOnly && !closing(posSide, side) {
		ref := price
		if ref.IsZero() {
			ref = trigger
		}
		if dec.Mul(qty, ref).Cmp(m.minNotional) < 0 {
			return nil, refuse(http.StatusBadRequest, codeMinNotional,
				"Order's notional must be no smaller than %s (unless you choose reduce only).", m.spec.MinNotional)
		}
	}
	s.algoSeq++
	g.id = s.algoSeq
	a.placed++
	g.seq = a.placed
	a.algos = append(a.algos, g)
	s.accept(a, cid)
	s.emitAlgo(a, g, now)
	return g, nil
}

// trigger fires a conditional order whose trigger price was reached: TRIGGERING, then the order it
// places (TRIGGERED naming it), whose matching follows; REJECTED instead when the matching engine
// would refuse that order (a reduce-only order with nothing to reduce, margin short).
func (s *Sim) trigger(a *account, g *algoOrder, m *market, now time.Time) {
	ms := now.UnixMilli()
	g.status, g.triggerTime, g.update = algoTriggering, ms, ms
	s.emitAlgo(a, g, now)
	o := &order{cid: "sim" + randomHex(10), symbol: g.symbol, side: g.side, posSide: g.posSide, typ: "LIMIT",
		tif: g.tif, qty: g.qty, price: g.price, executed: dec.Zero(), cumQuote: dec.Zero(), reduceOnly: g.reduceOnly,
		closePos: g.closePos, priceProtect: g.priceProtect, workingType: "CONTRACT_PRICE", status: "NEW", algo: g,
		time: ms, update: ms}
	if g.typ == "STOP_MARKET" || g.typ == "TAKE_PROFIT_MARKET" {
		o.typ, o.tif = "MARKET", "GTC"
	}
	o.origType = o.typ
	reducing := g.reduceOnly || g.closePos || closing(g.posSide, g.side)
	switch {
	case reducing && s.closable(a, g.symbol, g.posSide, g.side).IsZero():
		s.rejectAlgo(a, g, "Reduce Only reject", now)
		return
	case !reducing && s.orderMargin(a, o).Cmp(s.margin(a).available()) > 0:
		s.rejectAlgo(a, g, "Margin is insufficient", now)
		return
	}
	s.register(a, o)
	g.actual, g.status = o, algoTriggered
	s.emitAlgo(a, g, now)
	s.start(a, o, m, now)
}

func (s *Sim) rejectAlgo(a *account, g *algoOrder, reason string, now time.Time) {
	g.status, g.reason, g.update = algoRejected, reason, now.UnixMilli()
	s.emitAlgo(a, g, now)
}

// algoDone finishes the conditional order that placed o once o has ended, with s.mu held.
func (s *Sim) algoDone(a *account, o *order, now time.Time) {
	g := o.algo
	if g == nil || o.open() || g.status != algoTriggered {
		return
	}
	g.status, g.update = algoFinished, now.UnixMilli()
	s.emitAlgo(a, g, now)
}

// expireAlgos ends the untriggered reduce-only and close-position orders of a position that is
// gone, as the exchange's algo service cancels them itself (EXPIRED), with s.mu held.
func (s *Sim) expireAlgos(a *account, symbol, posSide string, now time.Time) {
	for _, g := range a.algos {
		if g.status != algoNew || g.symbol != symbol || g.posSide != posSide {
			continue
		}
		if g.reduceOnly || g.closePos || closing(g.posSide, g.side) {
			g.status, g.update = algoExpired, now.UnixMilli()
			s.emitAlgo(a, g, now)
		}
	}
}

// findAlgo finds an account's algo order by algoId or, failing that, by the latest use of a
// clientAlgoId.
func findAlgo(a *account, p url.Values) (*algoOrder, error) {
	idStr, cid := p.Get("algoId"), p.Get("clientAlgoId")
	if idStr == "" && cid == "" {
		return nil, refuse(http.StatusBadRequest, codeMandatoryParam, "Param algoId or clientAlgoId must be sent, but both were empty/null!")
	}
	var id int64
	if idStr != "" {
		var err error
		if id, err = strconv.ParseInt(idStr, 10, 64); err != nil {
			return nil, errIllegal("algoId")
		}
	}
	for i := len(a.algos) - 1; i >= 0; i-- {
		g := a.algos[i]
		if idStr != "" && g.id == id || idStr == "" && g.cid == cid {
			return g, nil
		}
	}
	return nil, nil
}

func (s *Sim) queryAlgoOrder(c *call) (any, error) {
	g, err := findAlgo(c.acct, c.params)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, errNoSuchOrder
	}
	return s.algoJSON(g), nil
}

func (s *Sim) cancelAlgoOrder(c *call) (any, error) {
	g, err := findAlgo(c.acct, c.params)
	if err != nil {
		return nil, err
	}
	if g == nil || g.status != algoNew {
		return nil, errUnknownCancel
	}
	s.cancelAlgo(c.acct, g, c.now)
	return algoCanceledAnswer{AlgoID: g.id, ClientAlgoID: g.cid, Code: "200", Msg: "success"}, nil
}

// algoCanceledAnswer is the exchange's answer to a canceled algo order; its
// code is the exchange's own (a string, as its samples show), not the
// engine's.
type algoCanceledAnswer struct {
	AlgoID       int64  `json:"algoId"`
	ClientAlgoID string `json:"clientAlgoId"`
	Code         string `json:"code"`
	Msg          string `json:"msg"`
}

func (s *Sim) cancelAlgo(a *account, g *algoOrder, now time.Time) {
	g.status, g.update = algoCanceled, now.UnixMilli()
	s.emitAlgo(a, g, now)
}

func (s *Sim) cancelAllAlgos(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	for _, g := range c.acct.openAlgos(ms[0].spec.Name) {
		s.cancelAlgo(c.acct, g, c.now)
	}
	return map[string]any{"code": 200, "msg": "success"}, nil
}

func (s *Sim) openAlgoOrders(c *call) (any, error) {
	symbol := c.params.Get("symbol")
	if symbol != "" {
		if _, err := s.symbolParam(c, true); err != nil {
			return nil, err
		}
	}
	if t := c.params.Get("algoType"); t != "" && t != "CONDITIONAL" {
		return nil, errInvalidValue("algoType")
	}
	var id int64
	if v := c.params.Get("algoId"); v != "" {
		var err error
		if id, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, errIllegal("algoId")
		}
	}
	out := []map[string]any{}
	for _, g := range c.acct.openAlgos(symbol) {
		if id == 0 || g.id == id {
			out = append(out, s.algoJSON(g))
		}
	}
	return out, nil
}

// allAlgoOrders lists a symbol's algo orders oldest first: from algoId when given, else those
// created within startTime and endTime; limit (500, at most 1000) per page.
func (s *Sim) allAlgoOrders(c *call) (any, error) {
	ms, err := s.symbolParam(c, true)
	if err != nil {
		return nil, err
	}
	var from, start, end int64
	for name, v := range map[string]*int64{"algoId": &from, "startTime": &start, "endTime": &end} {
		if x := c.params.Get(name); x != "" {
			if *v, err = strconv.ParseInt(x, 10, 64); err != nil {
				return nil, errIllegal(name)
			}
		}
	}
	limit := intParam(c.params, "limit", 500, 1000)
	page := intParam(c.params, "page", 1, 1<<20)
	var all []*algoOrder
	for _, g := range c.acct.algos {
		if g.symbol != ms[0].spec.Name || g.id < from || start > 0 && g.created < start || end > 0 && g.created > end {
			continue
		}
		all = append(all, g)
	}
	out := []map[string]any{}
	for i := (page - 1) * limit; i < len(all) && i < page*limit; i++ {
		out = append(out, s.algoJSON(all[i]))
	}
	return out, nil
}

// algoJSON is an algo order as the REST API answers it.
func (s *Sim) algoJSON(g *algoOrder) map[string]any {
	m := s.markets[g.symbol]
	out := map[string]any{
		"algoId": g.id, "clientAlgoId": g.cid, "algoType": "CONDITIONAL", "orderType": g.typ, "symbol": g.symbol,
		"side": g.side, "positionSide": g.posSide, "timeInForce": g.tif, "quantity": m.qty(g.qty), "algoStatus": g.status,
		"actualOrderId": "", "actualPrice": m.px(dec.Zero()), "triggerPrice": m.px(g.trigger), "price": m.px(g.price),
		"icebergQuantity": nil, "tpTriggerPrice": m.px(dec.Zero()), "tpPrice": m.px(dec.Zero()), "slTriggerPrice": m.px(dec.Zero()),
		"slPrice": m.px(dec.Zero()), "tpOrderType": "", "selfTradePreventionMode": "EXPIRE_MAKER", "workingType": g.workingType,
		"priceMatch": "NONE", "closePosition": g.closePos, "priceProtect": g.priceProtect, "reduceOnly": g.reduceOnly,
		"activatePrice": "", "callbackRate": "", "createTime": g.created, "updateTime": g.update,
		"triggerTime": g.triggerTime, "goodTillDate": 0,
	}
	if g.actual != nil {
		out["actualOrderId"] = strconv.FormatInt(g.actual.id, 10)
		out["actualPrice"] = m.px(g.actual.avg())
	}
	return out
}

// emitAlgo sends ALGO_UPDATE for an algo order's present state, with s.mu held. "ai", "ap", "aq"
// and "act" speak of the order it placed once triggered.
func (s *Sim) emitAlgo(a *account, g *algoOrder, now time.Time) {
	m := s.markets[g.symbol]
	ms := now.UnixMilli()
	body := map[string]any{
		"caid": g.cid, "aid": g.id, "at": "CONDITIONAL", "o": g.typ, "s": g.symbol, "S": g.side, "ps": g.posSide,
		"f": g.tif, "q": m.qty(g.qty), "X": g.status, "ai": "", "ap": m.px(dec.Zero()), "aq": m.qty(dec.Zero()), "act": "0",
		"tp": m.px(g.trigger), "p": m.px(g.price), "V": "EXPIRE_MAKER", "wt": g.workingType, "pm": "NONE",
		"cp": g.closePos, "pP": g.priceProtect, "R": g.reduceOnly, "tt": g.triggerTime, "gtd": 0, "rm": g.reason,
	}
	if o := g.actual; o != nil {
		body["ai"] = strconv.FormatInt(o.id, 10)
		body["ap"] = m.px(o.avg())
		body["aq"] = m.qty(o.executed)
		body["act"] = o.typ
	}
	s.emit(a, map[string]any{"e": "ALGO_UPDATE", "T": ms, "E": ms, "o": body})
}

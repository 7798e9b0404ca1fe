package binance

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// Conditional orders (stop, stop_limit, take_profit) live in the exchange's
// algo service, under a clientAlgoId (the engine's derived client order id:
// ClientOrderIDLen characters of [a-z2-7] after its prefix, within the
// service's ^[\.A-Z\:/a-z0-9_-]{1,36}$) and an algoId. When one triggers the
// service places a regular order in the matching engine under an orderId
// and a client order id of the exchange's own; the algo order names it
// (actualOrderId, "ai" of ALGO_UPDATE). The adapter reports the two as one
// order: the conditional order's client id, type, trigger (StopPrice),
// limit price and quantity with the placed order's status, fills and
// average, so the engine sees one order from placement to its last fill.
// Its ProviderOrderID is "algo-<algoId>", which never meets an orderId of
// the matching engine.

// algoIDPrefix starts the ProviderOrderID of a conditional order.
const algoIDPrefix = "algo-"

func algoOrderID(id int64) string { return algoIDPrefix + strconv.FormatInt(id, 10) }

// The algo service's statuses and their order: a report never moves an
// order back.
var algoRank = map[string]int{"NEW": 0, "TRIGGERING": 1, "TRIGGERED": 2,
	"FINISHED": 3, "CANCELED": 3, "EXPIRED": 3, "REJECTED": 3}

// algoFields are the fields every report of an algo order shares (the
// create and query answers, ALGO_UPDATE); executed and avg are the placed
// order's, "" when the report has none.
type algoFields struct {
	cid             string
	algoID          int64
	symbol          string
	side            futures.SideType
	typ             string
	tif             futures.TimeInForceType
	qty, trigger    string
	price, actualID string
	executed, avg   string
	status          string
	reduceOnly      bool
	closePos        bool
	updated         int64
}

// algoReport is one report of an algo order, read.
type algoReport struct {
	cid        string
	algoID     int64
	symbol     string
	side       provider.Side
	typ        provider.OrderType
	tif        provider.TIF
	qty        events.Decimal
	trigger    *events.Decimal
	price      *events.Decimal
	reduceOnly bool
	closePos   bool
	status     string
	actualID   int64
	executed   events.Decimal
	avg        *events.Decimal
	updated    time.Time
}

func (f algoFields) report() (algoReport, error) {
	r := algoReport{cid: f.cid, algoID: f.algoID, symbol: f.symbol, typ: fromType(f.typ), tif: fromTIF(f.tif),
		reduceOnly: f.reduceOnly, closePos: f.closePos, status: f.status, updated: millis(f.updated)}
	var err error
	if r.cid == "" || r.symbol == "" {
		return r, fmt.Errorf("%w: clientAlgoId", errMalformed)
	}
	if _, ok := algoRank[r.status]; !ok {
		return r, fmt.Errorf("%w: algoStatus", errMalformed)
	}
	if r.side, err = fromSide(f.side); err != nil {
		return r, err
	}
	if r.qty, err = dec("quantity", f.qty); err != nil {
		return r, err
	}
	if r.trigger, err = optDec("triggerPrice", f.trigger); err != nil {
		return r, err
	}
	if r.price, err = optDec("price", f.price); err != nil {
		return r, err
	}
	if r.executed, err = dec("executedQty", f.executed); err != nil {
		return r, err
	}
	if r.avg, err = optDec("avgPrice", f.avg); err != nil {
		return r, err
	}
	if id := strings.TrimSpace(f.actualID); id != "" && id != "0" {
		if r.actualID, err = strconv.ParseInt(id, 10, 64); err != nil || r.actualID <= 0 {
			return r, fmt.Errorf("%w: actualOrderId", errMalformed)
		}
	}
	return r, nil
}

func fromAlgoCreate(o *futures.CreateAlgoOrderResp) (algoReport, error) {
	return algoFields{cid: o.ClientAlgoId, algoID: o.AlgoId, symbol: o.Symbol, side: o.Side, typ: string(o.OrderType),
		tif: o.TimeInForce, qty: o.Quantity, trigger: o.TriggerPrice, price: o.Price, status: o.AlgoStatus,
		reduceOnly: o.ReduceOnly, closePos: o.ClosePosition, updated: max(o.UpdateTime, o.CreateTime)}.report()
}

func fromAlgoQuery(o *futures.GetAlgoOrderResp) (algoReport, error) {
	return algoFields{cid: o.ClientAlgoId, algoID: o.AlgoId, symbol: o.Symbol, side: o.Side, typ: string(o.OrderType),
		tif: o.TimeInForce, qty: o.Quantity, trigger: o.TriggerPrice, price: o.Price, actualID: o.ActualOrderId,
		status: o.AlgoStatus, reduceOnly: o.ReduceOnly, closePos: o.ClosePosition,
		updated: max(o.UpdateTime, o.TriggerTime, o.CreateTime)}.report()
}

func fromAlgoUpdate(u *futures.WsAlgoUpdate, eventTime int64) (algoReport, error) {
	return algoFields{cid: u.ClientAlgoID, algoID: u.AlgoID, symbol: u.Symbol, side: u.Side, typ: string(u.OrderType),
		tif: u.TimeInForce, qty: u.Quantity, trigger: u.TriggerPrice, price: u.OrderPrice, actualID: u.OrderID,
		executed: u.ExecutedQuantity, avg: u.AvgPrice, status: u.AlgoStatus, reduceOnly: u.ReduceOnly,
		closePos: u.CloseAll, updated: max(eventTime, u.TriggerTime)}.report()
}

// algoRec is what the session knows of one algo order: its terms, its
// status at the algo service, and the order it placed.
type algoRec struct {
	cid        string
	algoID     int64
	symbol     string
	side       provider.Side
	typ        provider.OrderType
	tif        provider.TIF
	qty        events.Decimal
	trigger    *events.Decimal
	price      *events.Decimal
	reduceOnly bool
	closePos   bool
	status     string // "" until the exchange reported it
	updated    time.Time

	actualID      int64
	actualKnown   bool            // the placed order was reported
	actualStatus  provider.Status // as last reported
	actualQty     events.Decimal
	actualUpdated time.Time
	filled        events.Decimal
	avg           *events.Decimal
}

// state is the order as the engine sees it.
func (r *algoRec) state() provider.OrderState {
	s := provider.OrderState{ClientOrderID: r.cid, ProviderOrderID: algoOrderID(r.algoID), Instrument: r.symbol, Side: r.side,
		Type: r.typ, TIF: r.tif, Quantity: r.qty, FilledQuantity: r.filled, AveragePrice: r.avg, LimitPrice: r.price,
		StopPrice: r.trigger, ReduceOnly: r.reduceOnly, ClosePosition: r.closePos, UpdatedAt: r.updated}
	if r.closePos && s.Quantity.IsZero() && r.actualKnown {
		s.Quantity = r.actualQty // close-all: the size the placed order took
	}
	switch r.status {
	case "CANCELED":
		s.Status = provider.StatusCanceled
	case "EXPIRED":
		s.Status = provider.StatusExpired
	case "REJECTED":
		s.Status = provider.StatusRejected
	case "FINISHED":
		switch {
		case r.actualKnown && r.actualStatus.Final():
			s.Status = r.actualStatus
		case r.filled.Sign() > 0 && r.filled.Cmp(s.Quantity) >= 0:
			s.Status = provider.StatusFilled
		default:
			s.Status = provider.StatusCanceled // the placed order ended short of its size
		}
	case "TRIGGERED":
		s.Status = provider.StatusWorking
		if r.actualKnown {
			s.Status = r.actualStatus
		}
	default: // NEW, TRIGGERING
		s.Status = provider.StatusWorking
	}
	if s.Status == provider.StatusWorking && r.filled.Sign() > 0 {
		s.Status = provider.StatusPartiallyFilled
	}
	return s
}

// algoBook is what a session knows of the account's algo orders: each by
// its clientAlgoId, and each placed order's id to the algo order that
// placed it. It also remembers orderIds known to be no algo order's, so an
// execution history does not ask the algo service of them again. Safe for
// concurrent use.
type algoBook struct {
	mu       sync.Mutex
	byCID    map[string]*algoRec
	seq      []string // clientAlgoIds in the order first seen, for pruning
	byActual map[int64]string
	regular  map[int64]bool
}

// maxAlgos bounds the ended algo orders a session remembers; maxRegular
// the orderIds known to be plain orders.
const (
	maxAlgos   = 4096
	maxRegular = 1 << 16
)

func newAlgoBook() *algoBook {
	return &algoBook{byCID: map[string]*algoRec{}, byActual: map[int64]string{}, regular: map[int64]bool{}}
}

// rec returns the record of cid, made when absent, with b.mu held.
func (b *algoBook) rec(cid string) *algoRec {
	r, ok := b.byCID[cid]
	if !ok {
		r = &algoRec{cid: cid}
		b.byCID[cid] = r
		b.seq = append(b.seq, cid)
		b.prune()
	}
	return r
}

// prune forgets the oldest ended algo orders past maxAlgos, with b.mu held.
func (b *algoBook) prune() {
	if len(b.byCID) <= maxAlgos {
		return
	}
	kept := b.seq[:0]
	for _, cid := range b.seq {
		r := b.byCID[cid]
		if len(b.byCID) > maxAlgos && algoRank[r.status] == 3 {
			delete(b.byCID, cid)
			if r.actualID != 0 {
				delete(b.byActual, r.actualID)
			}
			continue
		}
		kept = append(kept, cid)
	}
	b.seq = kept
}

// expect records the terms of a conditional order about to be sent, so its
// lookups go to the algo service and its placed order is linked even when
// the answer is lost.
func (b *algoBook) expect(r request, o provider.Order) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec := b.rec(r.clientOrderID)
	if rec.status != "" {
		return
	}
	rec.symbol, rec.side, rec.typ, rec.tif = o.Instrument, o.Side, o.Type, fromTIF(r.tif)
	rec.reduceOnly, rec.closePos, rec.trigger, rec.price = r.reduceOnly, r.closePosition, o.StopPrice, o.LimitPrice
	if !o.ClosePosition {
		rec.qty = o.Quantity
	}
}

// known reports whether cid is an algo order's.
func (b *algoBook) known(cid string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.byCID[cid]
	return ok
}

// observe takes a report of an algo order and returns its state and
// record as they are now.
func (b *algoBook) observe(rep algoReport) (provider.OrderState, algoRec) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rec(rep.cid)
	if r.algoID != 0 && rep.algoID != r.algoID {
		if rep.algoID < r.algoID {
			return r.state(), *r // a report of an earlier order under the same id
		}
		*r = algoRec{cid: rep.cid} // the id used again by a newer order
	}
	if r.status == "" {
		// The terms, as the exchange took them; they never change at the
		// algo service (a triggered stop-limit's placed order may: see
		// observeActual).
		r.algoID, r.symbol, r.side, r.typ, r.tif = rep.algoID, rep.symbol, rep.side, rep.typ, rep.tif
		r.qty, r.trigger, r.price, r.reduceOnly, r.closePos = rep.qty, rep.trigger, rep.price, rep.reduceOnly, rep.closePos
	}
	if r.status == "" || algoRank[rep.status] > algoRank[r.status] {
		r.status = rep.status
	}
	if rep.actualID != 0 && r.actualID == 0 {
		r.actualID = rep.actualID
		b.byActual[rep.actualID] = r.cid
		delete(b.regular, rep.actualID)
	}
	if rep.executed.Cmp(r.filled) > 0 {
		r.filled, r.avg = rep.executed, rep.avg
	}
	if rep.updated.After(r.updated) {
		r.updated = rep.updated
	}
	return r.state(), *r
}

// placedBy returns the clientAlgoId of the algo order that placed orderID.
func (b *algoBook) placedBy(orderID int64) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cid, ok := b.byActual[orderID]
	return cid, ok
}

// observeActual takes a report of the order an algo order placed (linked
// already) and returns the algo order's state; false when orderID is no
// linked order's. A report never moves the order back: fewer fills, or the
// same fills at an earlier status, are an old report. The placed limit
// order of a stop-limit may have been changed in place (Replace): its
// latest quantity and price are the order's.
func (b *algoBook) observeActual(orderID int64, st provider.OrderState) (provider.OrderState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cid, ok := b.byActual[orderID]
	if !ok {
		return provider.OrderState{}, false
	}
	r := b.byCID[cid]
	c := st.FilledQuantity.Cmp(r.filled)
	if !r.actualKnown || c > 0 || c == 0 && statusRank(st.Status) >= statusRank(r.actualStatus) {
		r.actualKnown, r.actualStatus = true, st.Status
		if c >= 0 {
			r.filled = st.FilledQuantity
			if st.AveragePrice != nil {
				r.avg = st.AveragePrice
			}
		}
	}
	if !st.UpdatedAt.Before(r.actualUpdated) && st.Quantity.Sign() > 0 {
		r.actualQty, r.actualUpdated = st.Quantity, st.UpdatedAt
		if st.Type == provider.Limit && st.LimitPrice != nil && r.price != nil {
			r.qty, r.price = st.Quantity, st.LimitPrice
		}
	}
	if st.UpdatedAt.After(r.updated) {
		r.updated = st.UpdatedAt
	}
	return r.state(), true
}

func statusRank(s provider.Status) int {
	switch {
	case s.Final():
		return 2
	case s == provider.StatusPartiallyFilled:
		return 1
	}
	return 0
}

// candidates lists the clientAlgoIds of the algo orders of symbol and side
// that may have placed an order not linked yet (untriggered, or triggered
// without a placed order known), newest first, at most n.
func (b *algoBook) candidates(symbol string, side provider.Side, n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for i := len(b.seq) - 1; i >= 0 && len(out) < n; i-- {
		r := b.byCID[b.seq[i]]
		if r != nil && r.symbol == symbol && r.side == side && r.actualID == 0 && algoRank[r.status] < 3 {
			out = append(out, r.cid)
		}
	}
	return out
}

// markRegular remembers orderIDs as plain orders' (no algo order placed
// them).
func (b *algoBook) markRegular(ids ...int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.regular)+len(ids) > maxRegular {
		b.regular = map[int64]bool{}
	}
	for _, id := range ids {
		if _, linked := b.byActual[id]; !linked {
			b.regular[id] = true
		}
	}
}

// isRegular reports whether orderID is known to be a plain order's.
func (b *algoBook) isRegular(orderID int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.regular[orderID]
}

// ids returns the clientAlgoId and ProviderOrderID of the algo order that
// placed orderID.
func (b *algoBook) ids(orderID int64) (cid, providerOrderID string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cid, ok = b.byActual[orderID]
	if !ok {
		return "", "", false
	}
	return cid, algoOrderID(b.byCID[cid].algoID), true
}

package binance

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/provider"
)

// The session's calls to the exchange's algo service (go-binance's algo
// order services): conditional orders are placed, canceled and read there
// by their clientAlgoId, and an order one placed when it triggered is read
// and canceled on the order route by its orderId.

// candidatesChecked bounds the algo orders looked up to learn which placed
// an order the stream told of before its ALGO_UPDATE did.
const candidatesChecked = 4

// placeAlgo sends a conditional order to POST /fapi/v1/algoOrder under
// clientAlgoId r.clientOrderID. A lost answer is Unknown: the caller
// settles it with Lookup (GET /fapi/v1/algoOrder by the clientAlgoId),
// never by sending again.
func (s *session) placeAlgo(ctx context.Context, r request, o provider.Order) (provider.OrderState, error) {
	svc := s.c.NewCreateAlgoOrderService().AlgoType(futures.OrderAlgoTypeConditional).Symbol(r.symbol).Side(r.side).
		Type(r.algo).TriggerPrice(r.stopPrice).ClientAlgoId(r.clientOrderID)
	if r.tif != "" {
		svc.TimeInForce(r.tif)
	}
	if r.quantity != "" {
		svc.Quantity(r.quantity)
	}
	if r.price != "" {
		svc.Price(r.price)
	}
	if r.reduceOnly {
		svc.ReduceOnly(true)
	}
	if r.closePosition {
		svc.ClosePosition(true)
	}
	if r.workingType != "" {
		svc.WorkingType(r.workingType)
	}
	s.algos.expect(r, o)
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := svc.Do(cctx)
	if err != nil {
		return provider.OrderState{}, mapError(opPlace, err)
	}
	rep, err := fromAlgoCreate(res)
	if err != nil || rep.cid != r.clientOrderID {
		return provider.OrderState{}, provider.NewUnknown(string(opPlace), http.StatusOK, 0, errMalformed)
	}
	st, _ := s.algos.observe(rep)
	return st, nil
}

// lookupAlgo reads a conditional order by its clientAlgoId and, once it
// triggered, the order it placed.
func (s *session) lookupAlgo(ctx context.Context, cid string) (provider.OrderState, algoRec, error) {
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewGetAlgoOrderService().ClientAlgoID(cid).Do(cctx)
	if err != nil {
		return provider.OrderState{}, algoRec{}, mapError(opRead, err)
	}
	rep, err := fromAlgoQuery(res)
	if err != nil || rep.cid != cid {
		return provider.OrderState{}, algoRec{}, provider.NewUnavailable(http.StatusOK, 0, errMalformed)
	}
	st, rec := s.algos.observe(rep)
	if rec.actualID == 0 || rec.actualKnown && rec.actualStatus.Final() {
		return st, rec, nil
	}
	o, err := s.c.NewGetOrderService().Symbol(rec.symbol).OrderID(rec.actualID).Do(cctx)
	if err != nil {
		return provider.OrderState{}, algoRec{}, mapError(opRead, err)
	}
	placed, err := fromOrder(o)
	if err != nil {
		return provider.OrderState{}, algoRec{}, provider.NewUnavailable(http.StatusOK, 0, err)
	}
	st, _ = s.algos.observeActual(rec.actualID, placed)
	return st, rec, nil
}

// cancelAlgo cancels a conditional order at the algo service. One that
// triggered is no longer the algo service's to cancel: the order it placed
// is canceled on the order route while it rests. One that ended is
// NotFound, as the exchange answers.
func (s *session) cancelAlgo(ctx context.Context, instrument, cid string) (provider.OrderState, error) {
	cctx, cancel := s.p.call(ctx)
	_, err := s.c.NewCancelAlgoOrderService().ClientAlgoID(cid).Do(cctx)
	cancel()
	if err == nil {
		// The answer names the order only: read it whole.
		st, _, err := s.lookupAlgo(ctx, cid)
		if err != nil {
			return provider.OrderState{}, provider.NewUnknown(string(opCancel), 0, 0, err)
		}
		return st, nil
	}
	refused := mapError(opCancel, err)
	if !errors.Is(refused, provider.ErrNotFound) {
		return provider.OrderState{}, refused
	}
	st, rec, err := s.lookupAlgo(ctx, cid)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		return provider.OrderState{}, refused
	case err != nil:
		return provider.OrderState{}, err
	case rec.actualID == 0 || st.Status.Final():
		return provider.OrderState{}, refused
	}
	cctx, cancel = s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewCancelOrderService().Symbol(rec.symbol).OrderID(rec.actualID).Do(cctx)
	if err != nil {
		return provider.OrderState{}, mapError(opCancel, err)
	}
	placed, err := fromCancel(res)
	if err != nil {
		return provider.OrderState{}, provider.NewUnknown(string(opCancel), http.StatusOK, 0, err)
	}
	st, _ = s.algos.observeActual(rec.actualID, placed)
	return st, nil
}

// replaceAlgo changes the limit order a triggered stop-limit placed, on the
// order route by its orderId. An untriggered conditional order cannot be
// changed in place at the exchange.
func (s *session) replaceAlgo(ctx context.Context, r provider.Replace, side futures.SideType) (provider.OrderState, error) {
	st, rec, err := s.lookupAlgo(ctx, r.ClientOrderID)
	if err != nil {
		return provider.OrderState{}, err
	}
	if rec.actualID == 0 || st.Status.Final() || rec.price == nil {
		return provider.OrderState{}, &provider.Unsupported{Field: "orderType", Value: string(rec.typ)}
	}
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewModifyOrderService().Symbol(rec.symbol).OrderID(rec.actualID).Side(side).
		Quantity(r.Quantity.String()).Price(r.LimitPrice.String()).Do(cctx)
	if err != nil {
		return provider.OrderState{}, mapError(opReplace, err)
	}
	placed, err := fromModify(res)
	if err != nil {
		return provider.OrderState{}, provider.NewUnknown(string(opReplace), http.StatusOK, 0, err)
	}
	st, _ = s.algos.observeActual(rec.actualID, placed)
	return st, nil
}

// openAlgos reads every untriggered conditional order of the account.
func (s *session) openAlgos(ctx context.Context) ([]provider.OrderState, error) {
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewListOpenAlgoOrdersService().Do(cctx)
	if err != nil {
		return nil, mapError(opRead, err)
	}
	out := make([]provider.OrderState, 0, len(res))
	for i := range res {
		rep, err := fromAlgoQuery(&res[i])
		if err != nil {
			return nil, provider.NewUnavailable(http.StatusOK, 0, err)
		}
		st, _ := s.algos.observe(rep)
		out = append(out, st)
	}
	return out, nil
}

// learnAlgos reads the symbol's algo orders (GET /fapi/v1/allAlgoOrders),
// linking each triggered one to the order it placed.
func (s *session) learnAlgos(ctx context.Context, symbol string) error {
	cctx, cancel := s.p.call(ctx)
	defer cancel()
	res, err := s.c.NewListAllAlgoOrdersService().Symbol(symbol).Limit(1000).Do(cctx)
	if err != nil {
		return mapError(opRead, err)
	}
	for i := range res {
		rep, err := fromAlgoQuery(&res[i])
		if err != nil {
			return provider.NewUnavailable(http.StatusOK, 0, err)
		}
		s.algos.observe(rep)
	}
	return nil
}

// placedOrder reports an order of the matching engine (an ORDER_TRADE_UPDATE
// or a read) as the conditional order that placed it, when one did; ok
// false for a plain order. An order with an id the engine did not derive
// and no link yet may be one a conditional order placed whose ALGO_UPDATE
// has not arrived: the algo orders that may have placed it are read.
func (s *session) placedOrder(ctx context.Context, orderID int64, st provider.OrderState) (provider.OrderState, bool) {
	if algo, ok := s.algos.observeActual(orderID, st); ok {
		return algo, true
	}
	if provider.Derived(st.ClientOrderID) || s.algos.isRegular(orderID) {
		return st, false
	}
	for _, cid := range s.algos.candidates(st.Instrument, st.Side, candidatesChecked) {
		if _, rec, err := s.lookupAlgo(ctx, cid); err == nil && rec.actualID == orderID {
			break
		}
	}
	if algo, ok := s.algos.observeActual(orderID, st); ok {
		return algo, true
	}
	return st, false
}

// providerOrderID reads the orderId of an order state of the order route.
func providerOrderID(st provider.OrderState) int64 {
	id, _ := strconv.ParseInt(st.ProviderOrderID, 10, 64)
	return id
}

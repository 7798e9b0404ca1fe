package binance

import (
	"errors"
	"fmt"
	"time"

	"github.com/adshao/go-binance/v2/futures"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// The engine's order types and times in force as the exchange spells them.
// Binance USDⓈ-M has no session day: `day` is not offered (its GTD needs a
// time). Post-only is GTX. Market and limit orders go to the order route
// (orderTypes); the conditional ones to the algo service (algoTypes), the
// only place the exchange takes them since 2025-12-09 (its order route
// answers -4120 for them).
var (
	tifs = map[provider.TIF]futures.TimeInForceType{
		provider.GTC:      futures.TimeInForceTypeGTC,
		provider.IOC:      futures.TimeInForceTypeIOC,
		provider.FOK:      futures.TimeInForceTypeFOK,
		provider.PostOnly: futures.TimeInForceTypeGTX,
	}
	orderTypes = map[provider.OrderType]futures.OrderType{
		provider.Market: futures.OrderTypeMarket,
		provider.Limit:  futures.OrderTypeLimit,
	}
	algoTypes = map[provider.OrderType]futures.AlgoOrderType{
		provider.Stop:       futures.AlgoOrderTypeStopMarket,
		provider.StopLimit:  futures.AlgoOrderTypeStop,
		provider.TakeProfit: futures.AlgoOrderTypeTakeProfitMarket,
	}
)

// errMalformed is an answer of the exchange the adapter cannot read.
var errMalformed = errors.New("binance: malformed answer")

// request is an order in the exchange's terms, ready for CreateOrderService
// or, a conditional one (algo set), for CreateAlgoOrderService, whose
// triggerPrice is stopPrice and whose clientAlgoId is clientOrderID.
type request struct {
	symbol        string
	side          futures.SideType
	typ           futures.OrderType       // a market or limit order's
	algo          futures.AlgoOrderType   // a conditional order's
	tif           futures.TimeInForceType // "" when not sent
	quantity      string                  // "" when not sent (closePosition)
	price         string
	stopPrice     string
	reduceOnly    bool
	closePosition bool
	workingType   futures.WorkingType // "" when not sent (the exchange's default, the last price)
	clientOrderID string
}

// toRequest maps an engine order to the exchange's parameters, refusing
// with *provider.Unsupported what the exchange cannot take.
func toRequest(o provider.Order) (request, error) {
	r := request{symbol: o.Instrument, clientOrderID: o.ClientOrderID, reduceOnly: o.ReduceOnly, closePosition: o.ClosePosition}
	switch o.Side {
	case provider.Buy:
		r.side = futures.SideTypeBuy
	case provider.Sell:
		r.side = futures.SideTypeSell
	default:
		return r, &provider.Unsupported{Field: "side", Value: string(o.Side)}
	}
	if t, ok := orderTypes[o.Type]; ok {
		r.typ = t
	} else if t, ok := algoTypes[o.Type]; ok {
		r.algo = t
	} else {
		return r, &provider.Unsupported{Field: "orderType", Value: string(o.Type)}
	}
	switch o.Type {
	case provider.Limit, provider.StopLimit:
		tif, ok := tifs[o.TIF]
		if !ok {
			return r, &provider.Unsupported{Field: "timeInForce", Value: string(o.TIF)}
		}
		r.tif = tif
	default:
		// Market and trigger-market orders take no time in force at the
		// exchange; the engine's default (day) or ioc means the same thing.
		if o.TIF != "" && o.TIF != provider.Day && o.TIF != provider.IOC && o.TIF != provider.GTC {
			return r, &provider.Unsupported{Field: "timeInForce", Value: string(o.TIF)}
		}
	}
	if err := o.CheckPrices(); err != nil {
		return r, err
	}
	if o.LimitPrice != nil {
		r.price = o.LimitPrice.String()
	}
	if o.StopPrice != nil {
		r.stopPrice = o.StopPrice.String()
	}
	if o.MarkTrigger {
		// The exchange's workingType: a trigger order (one with a stop
		// price, as CheckPrices left it) fires on the mark price instead
		// of the contract's last price.
		if o.StopPrice == nil {
			return r, &provider.Unsupported{Field: "markTrigger", Value: string(o.Type)}
		}
		r.workingType = futures.WorkingTypeMarkPrice
	}
	if o.ClosePosition {
		// The exchange closes the whole position; it takes neither a
		// quantity nor reduceOnly with closePosition.
		if o.Type != provider.Stop && o.Type != provider.TakeProfit {
			return r, &provider.Unsupported{Field: "closePosition", Value: string(o.Type)}
		}
		r.reduceOnly = false
		return r, nil
	}
	if o.Quantity.Sign() <= 0 {
		return r, &provider.Unsupported{Field: "quantity", Value: o.Quantity.String()}
	}
	r.quantity = o.Quantity.String()
	return r, nil
}

// Capabilities of the adapter: what the exchange does natively.
func capabilities() provider.Capabilities {
	return provider.Capabilities{
		Accounts:             true,
		Execution:            true,
		MarketData:           true,
		GenerationFencing:    false, // the exchange has no fencing token; one owner sends
		CompleteOrderBook:    true,  // openOrders lists every working order
		ExecutionHistory:     true,  // userTrades
		ExecutionCorrections: false, // the exchange never corrects a trade
		ReduceOnly:           true,
		NativeReplace:        true, // PUT /fapi/v1/order (limit orders)
		NativeOco:            false,
		OrderTypes:           []string{"market", "limit", "stop", "stop_limit"},
		TimeInForce:          []string{"gtc", "ioc", "fok"},
		PositionModels:       []string{"net"},
		// userTrades reaches back six months; the engine's rule asks seven days.
		ReplayRetentionSeconds: 180 * 24 * 3600,
	}
}

// dec reads one of the exchange's decimals within the engine's bounds.
func dec(field, s string) (events.Decimal, error) {
	if s == "" {
		return events.Decimal{}, nil
	}
	d, err := events.ParseDecimal(s)
	if err != nil {
		return events.Decimal{}, fmt.Errorf("%w: %s", errMalformed, field)
	}
	return d, nil
}

// optDec reads a decimal the exchange sends as "0" (or empty) when unset.
func optDec(field, s string) (*events.Decimal, error) {
	d, err := dec(field, s)
	if err != nil || d.IsZero() {
		return nil, err
	}
	return &d, nil
}

func millis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func fromSide(s futures.SideType) (provider.Side, error) {
	switch s {
	case futures.SideTypeBuy:
		return provider.Buy, nil
	case futures.SideTypeSell:
		return provider.Sell, nil
	}
	return "", fmt.Errorf("%w: side", errMalformed)
}

// fromType reads an order type of the exchange, of its order route or of
// its algo service (the names are the same).
func fromType[T ~string](t T) provider.OrderType {
	switch string(t) {
	case string(futures.OrderTypeMarket):
		return provider.Market
	case string(futures.OrderTypeLimit):
		return provider.Limit
	case string(futures.AlgoOrderTypeStopMarket):
		return provider.Stop
	case string(futures.AlgoOrderTypeStop):
		return provider.StopLimit
	case string(futures.AlgoOrderTypeTakeProfitMarket):
		return provider.TakeProfit
	case string(futures.AlgoOrderTypeTakeProfit):
		return provider.TakeProfitLimit
	}
	return provider.Other
}

func fromTIF(t futures.TimeInForceType) provider.TIF {
	for k, v := range tifs {
		if v == t {
			return k
		}
	}
	return ""
}

func fromStatus(s futures.OrderStatusType) (provider.Status, error) {
	switch s {
	case futures.OrderStatusTypeNew:
		return provider.StatusWorking, nil
	case futures.OrderStatusTypePartiallyFilled:
		return provider.StatusPartiallyFilled, nil
	case futures.OrderStatusTypeFilled, futures.OrderStatusTypeNewInsurance, futures.OrderStatusTypeNewADL:
		return provider.StatusFilled, nil
	case futures.OrderStatusTypeCanceled:
		return provider.StatusCanceled, nil
	case futures.OrderStatusTypeRejected:
		return provider.StatusRejected, nil
	case futures.OrderStatusTypeExpired, "EXPIRED_IN_MATCH":
		return provider.StatusExpired, nil
	}
	return "", fmt.Errorf("%w: status", errMalformed)
}

// orderFields are the fields every order answer of the exchange shares.
type orderFields struct {
	symbol, clientOrderID string
	orderID               int64
	side                  futures.SideType
	typ                   futures.OrderType
	tif                   futures.TimeInForceType
	status                futures.OrderStatusType
	origQty, executedQty  string
	price, stopPrice, avg string
	reduceOnly, closePos  bool
	updated               int64
}

func (f orderFields) state() (provider.OrderState, error) {
	var (
		s   provider.OrderState
		err error
	)
	s.Instrument, s.ClientOrderID = f.symbol, f.clientOrderID
	s.ProviderOrderID = fmt.Sprint(f.orderID)
	if s.Side, err = fromSide(f.side); err != nil {
		return s, err
	}
	s.Type = fromType(f.typ)
	s.TIF = fromTIF(f.tif)
	if s.Status, err = fromStatus(f.status); err != nil {
		return s, err
	}
	if s.Quantity, err = dec("origQty", f.origQty); err != nil {
		return s, err
	}
	if s.FilledQuantity, err = dec("executedQty", f.executedQty); err != nil {
		return s, err
	}
	if s.AveragePrice, err = optDec("avgPrice", f.avg); err != nil {
		return s, err
	}
	if s.LimitPrice, err = optDec("price", f.price); err != nil {
		return s, err
	}
	if s.StopPrice, err = optDec("stopPrice", f.stopPrice); err != nil {
		return s, err
	}
	s.ReduceOnly, s.ClosePosition = f.reduceOnly, f.closePos
	s.UpdatedAt = millis(f.updated)
	return s, nil
}

func fromOrder(o *futures.Order) (provider.OrderState, error) {
	return orderFields{symbol: o.Symbol, clientOrderID: o.ClientOrderID, orderID: o.OrderID, side: o.Side,
		typ: o.Type, tif: o.TimeInForce, status: o.Status, origQty: o.OrigQuantity, executedQty: o.ExecutedQuantity,
		price: o.Price, stopPrice: o.StopPrice, avg: o.AvgPrice, reduceOnly: o.ReduceOnly, closePos: o.ClosePosition,
		updated: max(o.UpdateTime, o.Time)}.state()
}

func fromCreate(o *futures.CreateOrderResponse) (provider.OrderState, error) {
	return orderFields{symbol: o.Symbol, clientOrderID: o.ClientOrderID, orderID: o.OrderID, side: o.Side,
		typ: o.Type, tif: o.TimeInForce, status: o.Status, origQty: o.OrigQuantity, executedQty: o.ExecutedQuantity,
		price: o.Price, stopPrice: o.StopPrice, avg: o.AvgPrice, reduceOnly: o.ReduceOnly, closePos: o.ClosePosition,
		updated: o.UpdateTime}.state()
}

func fromCancel(o *futures.CancelOrderResponse) (provider.OrderState, error) {
	return orderFields{symbol: o.Symbol, clientOrderID: o.ClientOrderID, orderID: o.OrderID, side: o.Side,
		typ: o.Type, tif: o.TimeInForce, status: o.Status, origQty: o.OrigQuantity, executedQty: o.ExecutedQuantity,
		price: o.Price, stopPrice: o.StopPrice, reduceOnly: o.ReduceOnly, updated: o.UpdateTime}.state()
}

func fromModify(o *futures.ModifyOrderResponse) (provider.OrderState, error) {
	return orderFields{symbol: o.Symbol, clientOrderID: o.ClientOrderID, orderID: o.OrderID, side: o.Side,
		typ: o.Type, tif: o.TimeInForce, status: o.Status, origQty: o.OriginalQuantity, executedQty: o.ExecutedQuantity,
		price: o.Price, stopPrice: o.StopPrice, avg: o.AveragePrice, reduceOnly: o.ReduceOnly, closePos: o.ClosePosition,
		updated: o.UpdateTime}.state()
}

// fromUpdate reads an ORDER_TRADE_UPDATE: the order and, on a trade, its
// execution.
func fromUpdate(u *futures.WsOrderTradeUpdate, eventTime int64) (*provider.OrderUpdate, error) {
	s, err := orderFields{symbol: u.Symbol, clientOrderID: u.ClientOrderID, orderID: u.ID, side: u.Side,
		typ: u.Type, tif: u.TimeInForce, status: u.Status, origQty: u.OriginalQty, executedQty: u.AccumulatedFilledQty,
		price: u.OriginalPrice, stopPrice: u.StopPrice, avg: u.AveragePrice, reduceOnly: u.IsReduceOnly,
		closePos: u.IsClosingPosition, updated: max(u.TradeTime, eventTime)}.state()
	if err != nil {
		return nil, err
	}
	out := &provider.OrderUpdate{Order: s, At: millis(eventTime)}
	if u.ExecutionType != futures.OrderExecutionTypeTrade {
		return out, nil
	}
	e := provider.Execution{ID: fmt.Sprint(u.TradeID), ClientOrderID: u.ClientOrderID, ProviderOrderID: s.ProviderOrderID,
		Instrument: u.Symbol, Side: s.Side, FeeAsset: u.CommissionAsset, Maker: u.IsMaker, At: millis(u.TradeTime)}
	if e.Quantity, err = dec("l", u.LastFilledQty); err != nil {
		return nil, err
	}
	if e.Price, err = dec("L", u.LastFilledPrice); err != nil {
		return nil, err
	}
	if e.Fee, err = dec("n", u.Commission); err != nil {
		return nil, err
	}
	if e.RealizedPnL, err = dec("rp", u.RealizedPnL); err != nil {
		return nil, err
	}
	out.Execution = &e
	return out, nil
}

func fromTrade(t *futures.AccountTrade) (provider.Execution, error) {
	var err error
	e := provider.Execution{ID: fmt.Sprint(t.ID), ProviderOrderID: fmt.Sprint(t.OrderID), Instrument: t.Symbol,
		FeeAsset: t.CommissionAsset, Maker: t.Maker, At: millis(t.Time)}
	if e.Side, err = fromSide(t.Side); err != nil {
		return e, err
	}
	if e.Quantity, err = dec("qty", t.Quantity); err != nil {
		return e, err
	}
	if e.Price, err = dec("price", t.Price); err != nil {
		return e, err
	}
	if e.Fee, err = dec("commission", t.Commission); err != nil {
		return e, err
	}
	if e.RealizedPnL, err = dec("realizedPnl", t.RealizedPnl); err != nil {
		return e, err
	}
	return e, nil
}

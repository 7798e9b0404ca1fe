package projections

import (
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// The order read model's rules, shared by the fold and by OrderIn, so an
// order answered from its commit is the order the read model shows.

// placedOrder is the order an OrderPlaced records, working and unfilled.
func placedOrder(accountID string, seq uint64, e evacct.OrderPlaced) Order {
	o := e.Order
	return Order{AccountID: accountID, BrokerOrderID: o.BrokerOrderID, ClientOrderID: o.ClientOrderID,
		Instrument: o.Instrument, Side: o.Side, OrderType: o.OrderType, Quantity: o.Quantity,
		LimitPrice: o.LimitPrice, StopPrice: o.StopPrice, TimeInForce: o.TimeInForce, ReduceOnly: o.ReduceOnly,
		State: "working", FilledQuantity: events.Int(0), CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt, Seq: seq,
		BracketID: o.BracketID}
}

// orderChange is what an event does to the order it names: its id and the
// change; false for an event that changes no order.
func orderChange(e events.Event) (orderID string, change func(*Order), ok bool) {
	switch e := e.(type) {
	case evacct.OrderFilled:
		return e.BrokerOrderID, func(o *Order) {
			avg := e.OrderAvgPrice
			o.FilledQuantity, o.AvgFillPrice, o.UpdatedAt = e.OrderFilled, &avg, e.At
			o.State = "partially_filled"
			if e.Done {
				o.State = "filled"
			}
		}, true
	case evacct.OrderCanceled:
		return e.BrokerOrderID, func(o *Order) { o.State, o.UpdatedAt = "canceled", e.At }, true
	case evacct.OrderReplaced:
		return e.BrokerOrderID, func(o *Order) {
			o.Quantity, o.UpdatedAt = e.Quantity, e.At
			if e.LimitPrice != nil {
				o.LimitPrice = e.LimitPrice
			}
			if e.StopPrice != nil {
				o.StopPrice = e.StopPrice
			}
		}, true
	case evacct.StopTriggered:
		return e.BrokerOrderID, func(o *Order) { o.UpdatedAt = e.At }, true
	}
	return "", nil, false
}

// OrderIn is the order orderID as the commit of evs (at seq) leaves it, when
// that commit placed it: the order the read model shows once it folds the
// commit. False when the commit does not place it (an older order's state
// is the read model's to tell).
func OrderIn(accountID string, seq uint64, evs []events.Event, orderID string) (Order, bool) {
	var o Order
	placed := false
	for _, e := range evs {
		if p, ok := e.(evacct.OrderPlaced); ok && p.Order.BrokerOrderID == orderID {
			o, placed = placedOrder(accountID, seq, p), true
			continue
		}
		if id, change, ok := orderChange(e); ok && placed && id == orderID {
			change(&o)
		}
	}
	return o, placed
}

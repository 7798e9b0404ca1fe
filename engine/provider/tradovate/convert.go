package tradovate

import (
	"sort"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// The engine's order types and times in force as the API spells them.
// Tradovate has a session day (Day); post-only does not exist. A
// take-profit trigger would be MIT, whose trigger field the documentation
// does not name: not sent.
var (
	tifs = map[provider.TIF]string{
		provider.Day: "Day",
		provider.GTC: "GTC",
		provider.IOC: "IOC",
		provider.FOK: "FOK",
	}
	orderTypes = map[provider.OrderType]string{
		provider.Market:    "Market",
		provider.Limit:     "Limit",
		provider.Stop:      "Stop",
		provider.StopLimit: "StopLimit",
	}
)

// sides are the engine's sides as the API's actions.
var sides = map[provider.Side]string{provider.Buy: "Buy", provider.Sell: "Sell"}

// toPlace maps an engine order to PlaceOrder, refusing with
// *provider.Unsupported what the API cannot take. Quantities are whole
// contracts.
func toPlace(o provider.Order, acct account) (placeOrder, error) {
	r := placeOrder{AccountSpec: acct.Name, AccountID: acct.ID, ClOrdID: o.ClientOrderID, Symbol: o.Instrument, IsAutomated: true}
	var ok bool
	if r.Action, ok = sides[o.Side]; !ok {
		return r, &provider.Unsupported{Field: "side", Value: string(o.Side)}
	}
	if r.OrderType, ok = orderTypes[o.Type]; !ok {
		return r, &provider.Unsupported{Field: "orderType", Value: string(o.Type)}
	}
	if o.ClosePosition {
		return r, &provider.Unsupported{Field: "closePosition", Value: string(o.Type)}
	}
	if o.MarkTrigger { // a stop triggers on the last trade: futures have no mark price to trigger on
		return r, &provider.Unsupported{Field: "markTrigger", Value: string(o.Type)}
	}
	if o.TIF != "" {
		if r.TimeInForce, ok = tifs[o.TIF]; !ok {
			return r, &provider.Unsupported{Field: "timeInForce", Value: string(o.TIF)}
		}
	}
	if err := o.CheckPrices(); err != nil { // take_profit was refused above: no orderType for it
		return r, err
	}
	if o.LimitPrice != nil {
		n := numOf(*o.LimitPrice)
		r.Price = &n
	}
	if o.StopPrice != nil {
		n := numOf(*o.StopPrice)
		r.StopPrice = &n
	}
	if !wholePositive(o.Quantity) {
		return r, &provider.Unsupported{Field: "quantity", Value: o.Quantity.String()}
	}
	r.OrderQty = numOf(o.Quantity)
	if o.ClientOrderID == "" {
		return r, &provider.Unsupported{Field: "clientOrderId", Value: ""}
	}
	return r, nil
}

// wholePositive reports whether q is a whole number of contracts above zero.
func wholePositive(q events.Decimal) bool {
	return q.Sign() > 0 && q.Cmp(q.Steps(events.Int(1), apd.RoundFloor)) == 0
}

func fromAction(a string) (provider.Side, bool) {
	switch a {
	case "Buy":
		return provider.Buy, true
	case "Sell":
		return provider.Sell, true
	}
	return "", false
}

func fromType(t string) provider.OrderType {
	for k, v := range orderTypes {
		if v == t {
			return k
		}
	}
	return provider.Other
}

func fromTIF(t string) provider.TIF {
	for k, v := range tifs {
		if v == t {
			return k
		}
	}
	return ""
}

// fromStatus maps ordStatus. Working, the pending states and Suspended
// rest (partially filled once something filled, filled once everything
// did: the stream sends the last fill before the status); Unknown is taken as
// resting, so the engine reads it again rather than ending it; Completed
// is filled when everything filled, else canceled.
func fromStatus(s string, filled, qty events.Decimal) (provider.Status, bool) {
	switch s {
	case "Working", "PendingNew", "PendingReplace", "PendingCancel", "Suspended", "Unknown", "":
		if qty.Sign() > 0 && filled.Cmp(qty) >= 0 { // its last fill came before its status
			return provider.StatusFilled, true
		}
		if filled.Sign() > 0 {
			return provider.StatusPartiallyFilled, true
		}
		return provider.StatusWorking, true
	case "Filled":
		return provider.StatusFilled, true
	case "Completed":
		if qty.Sign() > 0 && filled.Cmp(qty) >= 0 {
			return provider.StatusFilled, true
		}
		return provider.StatusCanceled, true
	case "Canceled":
		return provider.StatusCanceled, true
	case "Rejected":
		return provider.StatusRejected, true
	case "Expired":
		return provider.StatusExpired, true
	}
	return "", false
}

// orderParts are what the API says of one order across its entities: the
// order, its latest version, the clOrdId of its New command and its fills.
type orderParts struct {
	o       order
	v       *orderVersion
	clOrdID string
	fills   map[eid]fill   // active fills by id
	name    string         // the contract's name
	vpp     events.Decimal // the contract's value per point; zero when not read
}

// latest keeps the version with the highest id.
func (p *orderParts) version(v orderVersion) {
	if p.v == nil || v.ID >= p.v.ID {
		p.v = &v
	}
}

func (p *orderParts) fill(f fill) {
	if p.fills == nil {
		p.fills = map[eid]fill{}
	}
	if f.active() {
		p.fills[f.ID] = f
	} else {
		delete(p.fills, f.ID)
	}
}

// filled is the filled quantity and its average price (nil when nothing
// filled), exact to the decimal context's precision.
func (p *orderParts) filled() (events.Decimal, *events.Decimal, time.Time) {
	var qty, notional events.Decimal
	var last time.Time
	for _, f := range p.fills {
		qty = qty.Add(f.Qty.dec())
		notional = notional.Add(f.Qty.dec().Mul(f.Price.dec()))
		if f.Timestamp.After(last) {
			last = f.Timestamp
		}
	}
	if qty.Sign() <= 0 {
		return events.Decimal{}, nil, last
	}
	avg := notional.Quo(qty)
	return qty, &avg, last
}

// state composes the order's provider.OrderState.
func (p *orderParts) state() (provider.OrderState, error) {
	s := provider.OrderState{ClientOrderID: p.clOrdID, ProviderOrderID: p.o.ID.String(), Instrument: p.name, ValuePerPoint: p.vpp}
	var ok bool
	if s.Side, ok = fromAction(p.o.Action); !ok {
		return s, errMalformed
	}
	if p.v != nil {
		s.Type, s.TIF = fromType(p.v.OrderType), fromTIF(p.v.TimeInForce)
		s.Quantity = p.v.OrderQty.dec()
		s.LimitPrice, s.StopPrice = p.v.Price.ptr(), p.v.StopPrice.ptr()
		if s.Type == provider.Market || s.Type == provider.Stop {
			s.LimitPrice = nil
		}
		if s.Type == provider.Market || s.Type == provider.Limit {
			s.StopPrice = nil
		}
	} else {
		s.Type = provider.Other
	}
	filled, avg, last := p.filled()
	s.FilledQuantity, s.AveragePrice = filled, avg
	if s.Status, ok = fromStatus(p.o.OrdStatus, filled, s.Quantity); !ok {
		return s, errMalformed
	}
	s.UpdatedAt = p.o.Timestamp.UTC()
	if last.After(s.UpdatedAt) {
		s.UpdatedAt = last.UTC()
	}
	return s, nil
}

// execution is a fill as the engine's execution.
func execution(f fill, p *orderParts) (provider.Execution, error) {
	e := provider.Execution{ID: f.ID.String(), ClientOrderID: p.clOrdID, ProviderOrderID: f.OrderID.String(), Instrument: p.name,
		Quantity: f.Qty.dec(), Price: f.Price.dec(), FeeAsset: "USD", At: f.Timestamp.UTC()}
	var ok bool
	if e.Side, ok = fromAction(f.Action); !ok {
		return e, errMalformed
	}
	if !f.Qty.ok || !f.Price.ok || e.Quantity.Sign() <= 0 {
		return e, errMalformed
	}
	return e, nil
}

// newCommandClOrdID is the clOrdId of an order's New command among cmds.
func newCommandClOrdID(cmds []command) string {
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].ID < cmds[j].ID })
	for _, c := range cmds {
		if c.CommandType == "New" && c.ClOrdID != "" {
			return c.ClOrdID
		}
	}
	return ""
}

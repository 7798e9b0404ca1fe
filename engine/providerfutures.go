package engine

import (
	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// providerInstrument checks an order on a provider account before it is
// decided: the provider serves the instrument's prices itself, so no
// futures source of the engine's is needed. On an account linked through a
// futures login a contract of a product in the futures catalog
// (market.Products) is traded in whole contracts at prices on its tick,
// which for a product quoted in fractions of a point (priceFraction) is
// its fraction's grid: ZN's 110.515625 (110'16.5) is taken as written,
// exactly, and 110.51 is 422 invalid_request (params.field, tickSize)
// before anything is sent.
func (e *Engine) providerInstrument(accountID string, cmd commands.Command) error {
	if _, ok := e.provAccts.logins.get(accountID); !ok {
		return nil
	}
	var instrument string
	var qty, limit, stop *events.Decimal
	switch c := cmd.(type) {
	case *trading.PlaceOrder:
		instrument, qty, limit, stop = c.Instrument, &c.Quantity, c.LimitPrice, c.StopPrice
	case *trading.ClosePosition:
		instrument, qty = c.Instrument, c.Quantity
	default:
		return nil
	}
	sp, ok := futuresSpec(instrument)
	if !ok {
		return nil
	}
	return sp.CheckOrder(qty, limit, stop)
}

// futuresProduct is the futures catalog's product of a contract.
func futuresProduct(instrument string) (market.Product, bool) {
	ps := market.Products()
	root, ok := market.FuturesRoot(instrument, ps)
	if !ok {
		return market.Product{}, false
	}
	for _, p := range ps {
		if p.Root == root {
			return p, true
		}
	}
	return market.Product{}, false
}

// futuresSpec is the increments of a futures contract's product.
func futuresSpec(instrument string) (trading.Spec, bool) {
	p, ok := futuresProduct(instrument)
	if !ok {
		return trading.Spec{}, false
	}
	tick, err := events.ParseDecimal(p.TickSize)
	if err != nil {
		return trading.Spec{}, false
	}
	lot, _ := events.ParseDecimal(p.LotStep)
	min, _ := events.ParseDecimal(p.MinQuantity)
	return trading.Spec{Symbol: instrument, TickSize: tick, LotStep: lot, MinQuantity: min}, true
}

// valuePerPoint is a futures contract's currency per point of price, the
// catalog's multiplier (ES 50, ZN 1000); false for a product the catalog
// does not hold.
func valuePerPoint(instrument string) (events.Decimal, bool) {
	p, ok := futuresProduct(instrument)
	if !ok {
		return events.Decimal{}, false
	}
	m, err := events.ParseDecimal(p.Multiplier)
	return m, err == nil && m.Sign() > 0
}

// withValuePerPoint gives what the provider reported of a futures login's
// account each contract's value per point, so a fill's realized PnL, the
// position and its unrealized PnL are in money, not points, as the
// provider's own cash balance is (a contract of a product the catalog
// lacks keeps the value per point the provider's own contract spec gave
// it, provider.Position and OrderState's ValuePerPoint), and leaves a
// fill's realized PnL to the account to reckon.
func (e *Engine) withValuePerPoint(accountID string, cmd commands.Command) {
	if _, ok := e.provAccts.logins.get(accountID); !ok {
		return
	}
	switch c := cmd.(type) {
	case *providercmd.Observe:
		observedValuePerPoint(c)
		for i := range c.Orders {
			// A login's provider (Tradovate) reports no realized PnL with a
			// fill: the account reckons it on the position the fills imply,
			// rather than taking the zero the stream's fill carries.
			c.Orders[i].LastPnL = nil
		}
	case *providercmd.Settle:
		if c.Order != nil {
			if m, ok := valuePerPoint(c.Order.Instrument); ok {
				c.Order.Multiplier = m
			}
		}
	}
}

func observedValuePerPoint(c *providercmd.Observe) {
	for i := range c.Orders {
		if m, ok := valuePerPoint(c.Orders[i].Instrument); ok {
			c.Orders[i].Multiplier = m
		}
	}
	for i := range c.Positions {
		if m, ok := valuePerPoint(c.Positions[i].Instrument); ok {
			c.Positions[i].Multiplier = m
		}
	}
}

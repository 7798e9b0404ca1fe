package engine

import (
	"github.com/svc/engine/commands"
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

// futuresSpec is the increments of a futures contract's product.
func futuresSpec(instrument string) (trading.Spec, bool) {
	ps := market.Products()
	root, ok := market.FuturesRoot(instrument, ps)
	if !ok {
		return trading.Spec{}, false
	}
	for _, p := range ps {
		if p.Root != root {
			continue
		}
		tick, err := events.ParseDecimal(p.TickSize)
		if err != nil {
			return trading.Spec{}, false
		}
		lot, _ := events.ParseDecimal(p.LotStep)
		min, _ := events.ParseDecimal(p.MinQuantity)
		return trading.Spec{Symbol: instrument, TickSize: tick, LotStep: lot, MinQuantity: min}, true
	}
	return trading.Spec{}, false
}

package engine

import (
	"context"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
)

// contractsWait bounds how long ProviderContracts waits for the account's
// session and the provider's contract reads.
const contractsWait = 5 * time.Second

// ProviderContracts lists the futures contracts a provider account trades
// now, from its provider's own contract library through the account's
// session (a futures login's, whose library is not public): for each
// product of the futures catalog the provider lists, the month it trades
// now (provider.RollSession) with the provider's terms (tick, value per
// point). Nil for an account whose provider has no contract library (its
// instruments are the catalog's, by broker), or whose session this node
// does not hold.
func (e *Engine) ProviderContracts(ctx context.Context, accountID, broker string) []market.Instrument {
	if e.prov == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, contractsWait)
	defer cancel()
	sess, ok := e.prov.Session(ctx, accountID)
	if !ok {
		return nil
	}
	roll, isRoll := sess.(provider.RollSession)
	cs, isContracts := sess.(provider.ContractSession)
	if !isRoll || !isContracts {
		return nil
	}
	byRoot := map[string]market.Product{}
	var fronts []string
	for _, p := range market.Products() {
		front, err := roll.Front(ctx, p.Root)
		if err != nil {
			continue // not listed at this provider, or not readable now
		}
		byRoot[p.Root] = p
		fronts = append(fronts, front)
	}
	if len(fronts) == 0 {
		return nil
	}
	contracts, err := cs.Contracts(ctx, fronts)
	if err != nil {
		return nil
	}
	out := make([]market.Instrument, 0, len(contracts))
	for _, c := range contracts {
		p, ok := byRoot[c.Product]
		if !ok {
			continue
		}
		mult := c.ValuePerPoint
		if mult.Sign() <= 0 {
			mult = events.MustDecimal(p.Multiplier)
		}
		tick := c.TickSize
		if tick.Sign() <= 0 {
			tick = events.MustDecimal(p.TickSize)
		}
		out = append(out, market.Instrument{Symbol: c.Symbol, Name: p.Name + " " + c.Symbol, Exchange: p.Exchange, Type: "future",
			AssetClass: "futures", TickSize: tick, LotStep: events.MustDecimal(p.LotStep), MinQuantity: events.MustDecimal(p.MinQuantity),
			Multiplier: mult, MaxQuantity: c.MaxQuantity, Broker: broker})
	}
	return out
}

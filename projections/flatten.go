package projections

import (
	"context"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Flattened is the answer to a flatten: the orders it canceled, the
// closing orders it placed, and the instruments the account still holds a
// position in. Each list is empty, never null, when there is none.
type Flattened struct {
	Canceled []string `json:"canceled"`
	Orders   []Order  `json:"orders"`
	Unclosed []string `json:"unclosed"`
}

// FlattenOf is the answer to the flatten whose commit recorded evs on
// accountID, read from s once s has folded the commit. On a provider
// account the commit records intents: a placement is answered with its
// order, a cancel only when the read model shows the order canceled (one
// the read model never showed is left out).
func FlattenOf(ctx context.Context, s Store, accountID string, evs []events.Event) (Flattened, error) {
	f := Flattened{Canceled: []string{}, Orders: []Order{}, Unclosed: []string{}}
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.OrderCanceled:
			f.Canceled = append(f.Canceled, e.BrokerOrderID)
		case evacct.OrderPlaced:
			o, err := GetOrder(ctx, s, accountID, e.Order.BrokerOrderID)
			if err != nil {
				return Flattened{}, err
			}
			f.Orders = append(f.Orders, o)
		case evacct.OrderIntended:
			o, err := GetOrder(ctx, s, accountID, e.Order.BrokerOrderID)
			switch {
			case err != nil && e.Op == evacct.IntentCancel:
				continue // not in the read model: nothing it shows was canceled
			case err != nil:
				return Flattened{}, err
			case e.Op == evacct.IntentPlace:
				f.Orders = append(f.Orders, o)
			case e.Op == evacct.IntentCancel && o.State == "canceled":
				f.Canceled = append(f.Canceled, e.Order.BrokerOrderID)
			}
		}
	}
	ps, err := ListInto[Position](ctx, s, CollPosition, Query{Prefix: accountID + "/"})
	if err != nil {
		return Flattened{}, err
	}
	for _, p := range ps {
		f.Unclosed = append(f.Unclosed, p.Instrument)
	}
	return f, nil
}

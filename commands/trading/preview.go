package trading

import (
	"time"

	"github.com/svc/engine/commands"
	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

// PreviewBracket asks for a saved exit plan's ladder priced for one order
// before it is placed (POST /api/account/exit-plans/preview).
type PreviewBracket struct {
	PlanID        string          `json:"planId"`
	PlanRevision  string          `json:"planRevision"`
	Instrument    string          `json:"instrument"`
	Side          string          `json:"side"`
	Quantity      events.Decimal  `json:"quantity"`
	OrderType     string          `json:"orderType"`
	LimitPrice    *events.Decimal `json:"limitPrice"`
	ClientOrderID string          `json:"clientOrderId"`
}

// Validate checks the shape: a clientOrderId, a side, a quantity above zero.
func (c *PreviewBracket) Validate() error {
	if err := commands.ClientOrderID("clientOrderId", c.ClientOrderID); err != nil {
		return err
	}
	if _, ok := order.ParseSide(c.Side); !ok {
		return commands.BadField("side", nil, "side is %s", order.OneOf(order.Names(order.Sides())))
	}
	if c.Quantity.Sign() <= 0 {
		return commands.BadField("quantity", nil, "quantity must be above zero")
	}
	return nil
}

// PreviewMarket is what a preview is priced against, as the gateway read it.
type PreviewMarket struct {
	Plan     evplan.Spec // the saved plan
	Revision string      // its current revision
	Spec     *Spec       // the instrument's increments; nil: no such instrument
	Futures  bool        // the instrument is a futures product
	Quote    *Touch      // the instrument's quote; nil: none yet
}

// Price decides a preview: the entry the ladder is priced from (EntryBasis)
// and the ladder. It refuses a plan whose current revision is not the one c
// names (409 exit_plan_conflict), an unknown instrument, a quantity or limit
// price off the instrument's increments, a market entry on a futures product
// or with no quote yet, a limit entry without a limit price above zero, and a
// type that is no entry of an exit plan.
func (c *PreviewBracket) Price(m PreviewMarket) (events.Decimal, plancmd.Ladder, error) {
	if c.PlanRevision != m.Revision {
		return events.Decimal{}, plancmd.Ladder{}, commands.Refuse(commands.CodeExitPlanConflict,
			"the plan changed since you read it: preview its current revision", map[string]any{"revision": m.Revision})
	}
	if m.Spec == nil {
		return events.Decimal{}, plancmd.Ladder{}, commands.Refuse(commands.CodeInstrumentNotPermitted,
			"unknown instrument "+c.Instrument, map[string]any{"instrument": c.Instrument})
	}
	// The preview refuses what the order would: quantity and price off the instrument's increments.
	if err := m.Spec.CheckOrder(&c.Quantity, c.LimitPrice, nil); err != nil {
		return events.Decimal{}, plancmd.Ladder{}, err
	}
	var entry events.Decimal
	typ, _ := order.ParseType(c.OrderType)
	switch sp := typ.Spec(); {
	case !sp.Entry:
		return events.Decimal{}, plancmd.Ladder{}, commands.BadField("orderType", nil, "the entry of a bracket is %s order", entryTypes())
	case !sp.Rests(): // a market entry: the touch
		if m.Futures {
			return events.Decimal{}, plancmd.Ladder{}, FeedRequiresConnection(c.Instrument)
		}
		if m.Quote == nil {
			return events.Decimal{}, plancmd.Ladder{}, commands.Refuse(commands.CodeMarketDataUnavailable, "no price for "+c.Instrument+" yet",
				map[string]any{"cause": "mark_missing"})
		}
		entry = EntryBasis(typ, order.Side(c.Side), nil, *m.Quote)
	default: // a limit entry: its limit price
		if c.LimitPrice == nil || c.LimitPrice.Sign() <= 0 {
			return events.Decimal{}, plancmd.Ladder{}, commands.BadField("limitPrice", nil, "a limit entry needs a limitPrice above zero")
		}
		entry = EntryBasis(typ, order.Side(c.Side), c.LimitPrice, Touch{})
	}
	bp := BracketPlan{Spec: m.Plan}
	return entry, bp.Ladder(*m.Spec, c.Side, entry, c.Quantity), nil
}

// EntryBasis is the price an exit plan's ladder is priced from at an entry
// of type typ on side: a market entry's touch on quote q (the ask for a buy,
// the bid for a sell), a limit entry's limit price.
func EntryBasis(typ order.Type, side order.Side, limit *events.Decimal, q Touch) events.Decimal {
	if typ.Spec().LimitPrice && limit != nil {
		return *limit
	}
	return order.Touch(side, q.Bid, q.Ask)
}

// Ladder is the plan priced for an entry of qty on side at basis, at the
// instrument's tick and lot step: its legs, warnings and managed rules.
func (p *BracketPlan) Ladder(sp Spec, side string, basis, qty events.Decimal) plancmd.Ladder {
	return plancmd.Price(p.Spec, sp.TickSize, sp.LotStep, side, basis, qty)
}

// PreviewBinding is what a preview's token binds: one submission of one order.
type PreviewBinding struct {
	AccountID     string         `json:"a"`
	PlanID        string         `json:"p"`
	PlanRevision  string         `json:"r"`
	Instrument    string         `json:"i"`
	Side          string         `json:"s"`
	OrderType     string         `json:"t"`
	Quantity      events.Decimal `json:"q"`
	Entry         events.Decimal `json:"e"`
	ClientOrderID string         `json:"c"`
	Expires       int64          `json:"x"`
}

// Binding is the binding of a preview priced at entry for c on accountID, good until expires.
func (c *PreviewBracket) Binding(accountID, planRevision string, entry events.Decimal, expires time.Time) PreviewBinding {
	return PreviewBinding{AccountID: accountID, PlanID: c.PlanID, PlanRevision: planRevision, Instrument: c.Instrument, Side: c.Side,
		OrderType: c.OrderType, Quantity: c.Quantity, Entry: entry, ClientOrderID: c.ClientOrderID, Expires: expires.Unix()}
}

// BindingConflict is 409 exit_plan_conflict naming why in params.reason.
func BindingConflict(reason, msg string, params map[string]any) error {
	if params == nil {
		params = map[string]any{}
	}
	params["reason"] = reason
	return commands.Refuse(commands.CodeExitPlanConflict, msg, params)
}

// Check refuses order c on accountID at now unless it is the submission b
// binds (409 exit_plan_conflict): the token expired (reason token_expired),
// another account (account_changed), or an order field other than the
// preview priced (binding, params.field).
func (b PreviewBinding) Check(accountID string, now time.Time, c *PlaceOrder) error {
	ref := c.ExitPlan
	var field string
	switch {
	case now.Unix() > b.Expires:
		return BindingConflict("token_expired", "the preview token expired: preview again", nil)
	case b.AccountID != accountID:
		return BindingConflict("account_changed", "the preview was made for another account: preview on this one", nil)
	case b.PlanID != ref.PlanID:
		field = "exitPlan.planId"
	case b.PlanRevision != ref.PlanRevision:
		field = "exitPlan.planRevision"
	case b.Instrument != c.Instrument:
		field = "instrument"
	case b.Side != c.Side:
		field = "side"
	case b.Quantity.Cmp(c.Quantity) != 0:
		field = "quantity"
	case b.ClientOrderID != c.ClientOrderID:
		field = "clientOrderId"
	case b.OrderType != c.OrderType:
		field = "orderType"
	case order.Type(c.OrderType).Spec().LimitPrice && c.LimitPrice != nil && b.Entry.Cmp(*c.LimitPrice) != 0:
		field = "limitPrice"
	}
	if field != "" {
		return BindingConflict("binding", "the order's "+field+" is not what the preview priced: preview this order",
			map[string]any{"field": field})
	}
	return nil
}

// PlanAt is the saved plan planID for a bracket at revision rev, given
// what its aggregate holds (spec at revision current; found false: none):
// refused (409 exit_plan_conflict) when it was deleted (reason
// plan_deleted) or edited since (plan_changed, params.revision).
func PlanAt(planID, rev string, spec evplan.Spec, current string, found bool) (*BracketPlan, error) {
	switch {
	case !found:
		return nil, BindingConflict("plan_deleted", "the exit plan was deleted", map[string]any{"planId": planID})
	case current != rev:
		return nil, BindingConflict("plan_changed", "the exit plan was edited since you read it: preview its current revision",
			map[string]any{"revision": current})
	}
	return &BracketPlan{PlanID: planID, PlanRevision: current, Spec: spec}, nil
}

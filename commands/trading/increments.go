package trading

import (
	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
)

// multipleOf reports whether x is a whole multiple of step; a step of zero or
// less admits everything. A quotient too large to compute is no multiple.
func multipleOf(x, step events.Decimal) bool { return x.MultipleOf(step) }

// checkPrice refuses a limit or stop price off the instrument's tick: 422
// invalid_request with params.field and params.tickSize.
func checkPrice(sp Spec, field string, px *events.Decimal) error {
	if px == nil || multipleOf(*px, sp.TickSize) {
		return nil
	}
	return commands.InvalidField(field, map[string]any{"instrument": sp.Symbol, "tickSize": sp.TickSize.String()},
		"%s %s is not a multiple of the instrument's tick size %s", field, px, sp.TickSize)
}

// checkQuantity refuses a quantity below the instrument's minimum or off its
// lot step: 422 invalid_request with params.field quantity, params.lotStep and
// params.minQuantity (those the instrument states).
func checkQuantity(sp Spec, qty events.Decimal) error {
	switch {
	case sp.MinQuantity.Sign() > 0 && qty.Cmp(sp.MinQuantity) < 0:
		return commands.InvalidField("quantity", quantityParams(sp),
			"quantity %s is below the instrument's minimum %s", qty, sp.MinQuantity)
	case !multipleOf(qty, sp.LotStep):
		return commands.InvalidField("quantity", quantityParams(sp),
			"quantity %s is not a multiple of the instrument's lot step %s", qty, sp.LotStep)
	}
	return nil
}

// quantityParams are the params of checkQuantity's refusals, made only
// for a refusal.
func quantityParams(sp Spec) map[string]any {
	params := map[string]any{"instrument": sp.Symbol}
	if sp.LotStep.Sign() > 0 {
		params["lotStep"] = sp.LotStep.String()
	}
	if sp.MinQuantity.Sign() > 0 {
		params["minQuantity"] = sp.MinQuantity.String()
	}
	return params
}

// CheckOrder refuses an order whose quantity (when set) or prices do not fit
// the instrument's increments (the order routes and the exit-plan preview alike).
func (sp Spec) CheckOrder(qty, limit, stop *events.Decimal) error {
	if qty != nil {
		if err := checkQuantity(sp, *qty); err != nil {
			return err
		}
	}
	if err := checkPrice(sp, "limitPrice", limit); err != nil {
		return err
	}
	return checkPrice(sp, "stopPrice", stop)
}

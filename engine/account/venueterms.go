package account

import (
	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// venueTerms checks an order of an account a venue issued against the terms
// of its group (nil, nil for any other account): a route to the paper book
// (422 venue_route_missing), the stage version recorded at issue (else
// close-only: 423 stage_version_unrecorded for an order that may add
// exposure), the instruments the group permits (422 instrument_not_permitted),
// an entry halt (422 entry_halted with params.groupId and params.instrument,
// additions only) and the per-order limit
// (422 order_quantity_above_limit with params.limit). Reductions pass the
// halt and the stage, never the route or the instrument.
func venueTerms(s *State, m trading.Market, instrument, side, orderType string, qty events.Decimal, reduceOnly bool) (*trading.Terms, error) {
	if s.GroupID == "" {
		return nil, nil
	}
	t := m.Terms[s.VenueID+"/"+s.GroupID]
	switch {
	case t == nil || t.Route == "":
		return nil, commands.Refuse(commands.CodeVenueRouteMissing,
			"the account's group has no route to a venue that executes its orders", map[string]any{"groupId": s.GroupID})
	case t.Route != "paper":
		return nil, commands.Refuse(commands.CodeVenueRouteMissing,
			"the account's group routes to a provider version that is not enabled: only the paper book executes here", map[string]any{"groupId": s.GroupID})
	}
	limit, permitted := t.Permitted[instrument]
	if !permitted {
		return nil, commands.Refuse(commands.CodeInstrumentNotPermitted,
			"the account's group does not permit this instrument", map[string]any{"instrument": instrument})
	}
	adds := !reduceOnly && !(orderType == string(order.Market) && reduces(s.Positions[instrument], side, qty))
	if adds && t.StageID != "" && t.StageVersion != s.StageVersion {
		return nil, commands.Refuse(commands.CodeStageVersionUnrecorded,
			"the account's stage changed version since it was issued: it is close-only until the venue issues it into the current version",
			map[string]any{"reason": "stage_version_changed", "stageId": t.StageID})
	}
	if adds && t.EntryHalted {
		return nil, commands.Refuse(commands.CodeEntryHalted,
			"the venue has halted entries for the account's group: only reductions and closes are accepted",
			map[string]any{"groupId": s.GroupID, "instrument": instrument})
	}
	if limit.Sign() > 0 && qty.Cmp(limit) > 0 {
		return nil, commands.Refuse(commands.CodeOrderQuantityAboveLimit,
			"quantity is above the venue's per-order limit", map[string]any{"instrument": instrument, "limit": limit.String()})
	}
	return t, nil
}

var half = events.MustDecimal("0.5")

// commission is what a fill of qty pays under the terms'
// commissions, in the account currency's decimals: per unit of the opening
// or closing part the commission's direction names (half of it for a round
// turn), or per order on the order's first fill.
func commission(t *trading.Terms, p evacct.Position, side string, qty events.Decimal, firstFill bool, currency string) events.Decimal {
	total := events.Int(0)
	if t == nil {
		return total
	}
	closing := events.Int(0)
	if sq := signed(side, qty); !p.Quantity.IsZero() && p.Quantity.Sign() != sq.Sign() {
		closing = qty.Min(p.Quantity.Abs())
	}
	opening := qty.Sub(closing)
	for _, c := range t.Commissions {
		var units events.Decimal
		switch c.Direction {
		case "open":
			units = opening
		case "close":
			units = closing
		default:
			units = qty
		}
		if units.Sign() <= 0 {
			continue
		}
		charge := c.Amount
		if c.PerUnit {
			charge = charge.Mul(units)
		} else if !firstFill {
			continue
		}
		if c.RoundTurn {
			charge = charge.Mul(half)
		}
		total = total.Add(charge)
	}
	return total.Round(CurrencyDecimals(currency))
}

// marketOf is the market context a command carries, with the venue terms in it.
func marketOf(cmd commands.Command) map[string]*trading.Terms {
	switch c := cmd.(type) {
	case *trading.PlaceOrder:
		return c.Market.Terms
	case *trading.ReplaceOrder:
		return c.Market.Terms
	case *trading.ClosePosition:
		return c.Market.Terms
	case *trading.Flatten:
		return c.Market.Terms
	case *trading.Reverse:
		return c.Market.Terms
	case *trading.Protect:
		return c.Market.Terms
	case *trading.ChangeBracket:
		return c.Market.Terms
	case *trading.FillWorking:
		return c.Terms
	case *riskcmd.Evaluate:
		return c.Market.Terms
	}
	return nil
}

// bindPolicy records the risk policy the account's group has in force when it
// differs from the one the account lives under: a publication takes effect at
// each account's next command that carries the venue's terms, in log order,
// so a replay binds alike. A refused command records nothing, its bind neither.
func bindPolicy(s *State, env commands.Envelope) []events.Event {
	if s.GroupID == "" {
		return nil
	}
	t := marketOf(env.Cmd)[s.VenueID+"/"+s.GroupID]
	if t == nil || (t.PolicyID == s.Risk.Policy.PolicyID && t.PolicyVersion == s.Risk.Policy.Version) {
		return nil
	}
	return []events.Event{evacct.RiskPolicyBound{PolicyID: t.PolicyID, Version: t.PolicyVersion,
		DailyLossLimit: t.DailyLossLimit, WeeklyLossLimit: t.WeeklyLossLimit, At: env.At}}
}

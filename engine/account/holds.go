package account

import (
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
)

// Holds names every hold on the account at time at that refuses orders adding
// exposure (a lock whose unlock time has passed no longer holds, even before
// the commit that records its release).
// Each capability that can hold an account (risk controls, firm halt,
// reconciliation) adds its hold names here; an empty list means no hold.
func Holds(s *State, at time.Time) []string {
	var hs []string
	hs = append(hs, riskHolds(s, at)...)
	hs = append(hs, firmHolds(s, at)...)
	hs = append(hs, evalHolds(s, at)...)
	return hs
}

// gate refuses an order that may add exposure while any hold is on the account:
// 423 with params.holds (see lockedRefusal). An order proves it only reduces
// when it is reduce-only, or a market order no larger than an opposite position.
func gate(s *State, at time.Time, instrument, side, orderType string, qty events.Decimal, reduceOnly bool) error {
	hs := Holds(s, at)
	if len(hs) == 0 {
		return nil
	}
	if reduceOnly || (orderType == string(order.Market) && reduces(s.Positions[instrument], side, qty)) {
		return nil
	}
	return lockedRefusal(hs)
}

// lockedRefusal is the 423 answer naming the holds: reconciliation_hold when
// the holds include an operator's reconciliation hold (only an operator lifts
// it), else risk_locked.
func lockedRefusal(hs []string) error {
	for _, h := range hs {
		if h == HoldReconciliation {
			return commands.Refuse(commands.CodeReconciliationHold,
				"the account is held for reconciliation: orders that may add exposure are refused until an operator releases the hold",
				map[string]any{"holds": hs})
		}
	}
	return commands.Refuse(commands.CodeRiskLocked,
		"the account is held: orders that may add exposure are refused until the hold lifts",
		map[string]any{"holds": hs})
}

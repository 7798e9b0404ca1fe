package provider

import (
	"slices"

	evplan "github.com/svc/engine/events/plan"
)

// ExitPlanSupport is what of an exit plan the engine serves on an account
// at a provider with capabilities c (the account frame's
// capabilities.exitPlanSupport), in the spec's order. The engine places a
// bracket's legs as the provider's own reduce-only orders and keeps their
// one-cancels-other itself (a native OCO, c.NativeOco, is not needed): a
// stop loss needs reduce-only stop orders, a take profit reduce-only
// orders that rest at a price (a take-profit trigger, or a limit); several
// targets and a runner follow from those. Without reduce-only orders a
// leg left over after its sibling closed the position could open a new
// one, so nothing is served. Breakeven and trailing stops are never
// served at a provider: the engine moves stops only on its own book.
func ExitPlanSupport(c Capabilities) []string {
	out := []string{}
	if !c.ReduceOnly || !c.Execution {
		return out
	}
	stop := slices.Contains(c.OrderTypes, string(Stop))
	target := slices.Contains(c.OrderTypes, string(TakeProfit)) || slices.Contains(c.OrderTypes, string(Limit))
	if stop {
		out = append(out, evplan.StopLoss)
	}
	if target {
		out = append(out, evplan.TakeProfit, evplan.MultipleTargets)
	}
	if stop {
		out = append(out, evplan.RunnerLeg) // the share no target takes: the stop protects it
	}
	return out
}

// Package plan holds the events of a principal's saved exit plans: the
// ladder (stop, targets, runner, breakeven, trailing) a bracket is built from.
package plan

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file plan.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the saved plans of the principal (tenant) ownerID.
func Subject(ownerID string) string { return events.Subject(events.KindPlans, ownerID) }

// Distance is how far from the entry a level sits: a whole number of the
// instrument's ticks, or a price offset; exactly one is set.
type Distance struct {
	Ticks  int64           `json:"ticks,omitempty"`
	Offset *events.Decimal `json:"offset,omitempty"`
}

// Target is a take-profit leg: a distance and the share of the quantity it closes.
type Target struct {
	Distance Distance       `json:"distance"`
	Share    events.Decimal `json:"share"`
}

// Breakeven moves the stop to the entry plus PlusTicks once price has moved Trigger.
type Breakeven struct {
	Trigger   Distance `json:"trigger"`
	PlusTicks int64    `json:"plusTicks"`
}

// Trailing trails the stop Distance behind the best price once price has moved Activation.
type Trailing struct {
	Activation Distance `json:"activation"`
	Distance   Distance `json:"distance"`
}

// Spec is an exit plan's content.
type Spec struct {
	Name      string     `json:"name"`
	Stop      *Distance  `json:"stop,omitempty"`
	Targets   []Target   `json:"targets,omitempty"`
	Runner    bool       `json:"runner,omitempty"`
	Breakeven *Breakeven `json:"breakeven,omitempty"`
	Trailing  *Trailing  `json:"trailing,omitempty"`
}

// Capabilities a plan may require (the spec's exitPlanSupport values).
const (
	StopLoss        = "stop_loss"
	TakeProfit      = "take_profit"
	MultipleTargets = "multiple_targets"
	RunnerLeg       = "runner_leg"
	CapBreakeven    = "breakeven"
	TrailingStop    = "trailing_stop"
)

// Requires lists the capabilities spec needs, in the spec's order.
func Requires(s Spec) []string {
	out := []string{}
	if s.Stop != nil {
		out = append(out, StopLoss)
	}
	if len(s.Targets) > 0 {
		out = append(out, TakeProfit)
	}
	if len(s.Targets) > 1 {
		out = append(out, MultipleTargets)
	}
	if s.Runner {
		out = append(out, RunnerLeg)
	}
	if s.Breakeven != nil {
		out = append(out, CapBreakeven)
	}
	if s.Trailing != nil {
		out = append(out, TrailingStop)
	}
	return out
}

// Saved records a plan created or replaced, at its new revision.
type Saved struct {
	PlanID   string    `json:"planId"`
	Revision string    `json:"revision"`
	Spec     Spec      `json:"spec"`
	Digest   string    `json:"digest,omitempty"` // of the creating request, for its Idempotency-Key
	At       time.Time `json:"at"`
}

// Deleted records a plan removed.
type Deleted struct {
	PlanID string    `json:"planId"`
	At     time.Time `json:"at"`
}

func (Saved) Type() string   { return "plan.saved.v1" }
func (Deleted) Type() string { return "plan.deleted.v1" }

// Registry lists the plan event types.
func Registry() events.Registry {
	return events.Registry{
		Saved{}.Type():   events.Of[Saved](),
		Deleted{}.Type(): events.Of[Deleted](),
	}
}

// Package plan holds the commands of saved exit plans and their rules: the
// shape of a plan, the capabilities it requires, and how its ladder is
// priced at an instrument's tick and lot step.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

// Bounds of a plan.
const (
	MaxTargets  = 4
	MaxTicks    = 100000
	MaxPlans    = 50 // saved plans per principal
	MaxPlanName = 64
)

// Requires lists the capabilities spec needs (evplan.Requires).
func Requires(s evplan.Spec) []string { return evplan.Requires(s) }

var one = events.Int(1)

func distance(field string, d *evplan.Distance) error {
	switch {
	case d == nil:
		return commands.BadField(field, nil, "%s is required", field)
	case d.Offset != nil && d.Ticks != 0:
		return commands.BadField(field, nil, "%s takes ticks or offset, not both", field)
	case d.Offset != nil:
		if d.Offset.Sign() <= 0 {
			return commands.BadField(field+".offset", nil, "%s.offset must be above zero", field)
		}
		return commands.Amount(field+".offset", *d.Offset, events.Int(1000000))
	case d.Ticks < 1 || d.Ticks > MaxTicks:
		return commands.BadField(field+".ticks", map[string]any{"min": 1, "max": MaxTicks}, "%s takes ticks (1 to %d) or a positive offset", field, MaxTicks)
	}
	return nil
}

// Check validates a plan's content: a name; at least a stop, a target or a
// trailing rule; at most MaxTargets targets, each with a share above zero,
// whose shares sum to 1, or to less than 1 with a runner taking the rest; a
// breakeven rule only with a stop; every distance as ticks (1 to MaxTicks) or
// a positive price offset.
func Check(s evplan.Spec) error {
	if err := commands.Identifier("name", s.Name, MaxPlanName); err != nil {
		return err
	}
	if s.Stop == nil && len(s.Targets) == 0 && s.Trailing == nil {
		return commands.BadField("stop", nil, "a plan needs a stop, a target or a trailing rule")
	}
	if s.Stop != nil {
		if err := distance("stop", s.Stop); err != nil {
			return err
		}
	}
	if len(s.Targets) > MaxTargets {
		return commands.BadField("targets", map[string]any{"max": MaxTargets}, "at most %d targets", MaxTargets)
	}
	sum := events.Int(0)
	for i, t := range s.Targets {
		f := fmt.Sprintf("targets[%d]", i)
		if err := distance(f+".distance", &t.Distance); err != nil {
			return err
		}
		if t.Share.Sign() <= 0 || t.Share.Cmp(one) > 0 || t.Share.Decimals() > 4 {
			return commands.BadField(f+".share", nil, "%s.share is above 0 and at most 1, with at most 4 decimals", f)
		}
		sum = sum.Add(t.Share)
	}
	switch {
	case sum.Cmp(one) > 0:
		return commands.BadField("targets", nil, "the targets' shares sum to %s, above 1", sum)
	case len(s.Targets) > 0 && sum.Cmp(one) < 0 && !s.Runner:
		return commands.BadField("runner", nil, "the targets' shares sum to %s: set runner to leave the rest without a target, or make them sum to 1", sum)
	case s.Runner && (len(s.Targets) == 0 || sum.Cmp(one) == 0):
		return commands.BadField("runner", nil, "a runner is the share the targets leave: give targets whose shares sum to less than 1")
	}
	if s.Breakeven != nil {
		if s.Stop == nil {
			return commands.BadField("breakeven", nil, "a breakeven rule moves the stop: the plan needs a stop")
		}
		if err := distance("breakeven.trigger", &s.Breakeven.Trigger); err != nil {
			return err
		}
		if s.Breakeven.PlusTicks < 0 || s.Breakeven.PlusTicks > MaxTicks {
			return commands.BadField("breakeven.plusTicks", nil, "breakeven.plusTicks is 0 to %d", MaxTicks)
		}
	}
	if s.Trailing != nil {
		if s.Trailing.Activation.Ticks != 0 || s.Trailing.Activation.Offset != nil {
			if err := distance("trailing.activation", &s.Trailing.Activation); err != nil {
				return err
			}
		}
		if err := distance("trailing.distance", &s.Trailing.Distance); err != nil {
			return err
		}
	}
	return nil
}

// Revision is the opaque revision of a plan's content at a version: a digest
// no client can build, changing with every save.
func Revision(planID string, version int, s evplan.Spec) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s", planID, version, b))
	return "rev_" + hex.EncodeToString(sum[:12])
}

// Save creates a plan (IfRevision empty) or replaces it when IfRevision is
// its current revision.
type Save struct {
	PlanID     string
	Spec       evplan.Spec
	IfRevision string
	Create     bool
	Digest     string // of the creating request, for its Idempotency-Key
}

// Validate checks the shape.
func (c *Save) Validate() error {
	if c.PlanID == "" {
		return commands.Invalid("planId is required")
	}
	if !c.Create && c.IfRevision == "" {
		return commands.BadField("revision", nil, "send back the revision you read")
	}
	return Check(c.Spec)
}

// Delete removes a plan when IfRevision is its current revision.
type Delete struct {
	PlanID     string
	IfRevision string
}

// Validate checks the shape.
func (c *Delete) Validate() error {
	if c.PlanID == "" {
		return commands.Invalid("planId is required")
	}
	if c.IfRevision == "" {
		return commands.BadField("revision", nil, "send back the revision you read")
	}
	return nil
}

// Steps is d in whole steps of step, rounded half away from zero (prices at a tick).
func Steps(d, step events.Decimal) events.Decimal { return d.Steps(step, apd.RoundHalfUp) }

// Floor is d rounded down to a multiple of step (quantities at a lot step).
func Floor(d, step events.Decimal) events.Decimal {
	if step.Sign() <= 0 {
		return d
	}
	return d.Steps(step, apd.RoundFloor)
}

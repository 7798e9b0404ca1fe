package trading

import (
	"fmt"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

// DriftTicks bounds how far a market entry's touch may move from the entry a
// preview priced before the placement is refused (409 exit_plan_conflict,
// params.reason drift): the ladder would sit that much off what the trader saw.
const DriftTicks = 20

// MaxBracketLegs bounds the legs a change names.
const MaxBracketLegs = 8

// BracketPlan is a saved exit plan at one revision, verified by the gateway
// against the preview token; the account prices it at the entry.
type BracketPlan struct {
	PlanID       string
	PlanRevision string
	Spec         evplan.Spec
	Entry        events.Decimal // the entry the preview priced (market: the touch it saw)
}

// ExitPlanRef is the exitPlan an order carries: a saved plan by reference and
// the token of its preview; never levels.
type ExitPlanRef struct {
	PlanID       string `json:"planId"`
	PlanRevision string `json:"planRevision"`
	PreviewToken string `json:"previewToken"`
}

// Validate checks the shape.
func (r *ExitPlanRef) Validate() error {
	if err := commands.Key("exitPlan.planId", r.PlanID, 64); err != nil {
		return err
	}
	if err := commands.Key("exitPlan.planRevision", r.PlanRevision, 64); err != nil {
		return err
	}
	if r.PreviewToken == "" || len(r.PreviewToken) > 2048 {
		return commands.InvalidField("exitPlan.previewToken", nil, "exitPlan.previewToken is the token of a preview (POST /api/account/exit-plans/preview)")
	}
	return nil
}

// Protect puts a bracket from a saved plan on an open position (Instrument)
// or on a resting entry (EntryOrderID), which then rests again as a new order
// carrying it. ClientOrderID is its key, used once on the account.
type Protect struct {
	ClientOrderID string       `json:"clientOrderId"`
	Instrument    string       `json:"instrument"`
	EntryOrderID  string       `json:"entryOrderId"`
	PlanID        string       `json:"planId"`
	PlanRevision  string       `json:"planRevision"`
	Plan          *BracketPlan `json:"-"`
	Market        Market       `json:"-"`
}

// Validate checks the shape.
func (c *Protect) Validate() error {
	if err := commands.ClientOrderID("clientOrderId", c.ClientOrderID); err != nil {
		return err
	}
	switch {
	case (c.Instrument == "") == (c.EntryOrderID == ""):
		return commands.InvalidField("instrument", nil, "name the position's instrument or the resting entry's entryOrderId, not both")
	case c.Instrument != "":
		if err := commands.Identifier("instrument", c.Instrument, MaxInstrument); err != nil {
			return err
		}
	default:
		if err := commands.Key("entryOrderId", c.EntryOrderID, MaxOrderID); err != nil {
			return err
		}
	}
	if err := commands.Key("planId", c.PlanID, 64); err != nil {
		return err
	}
	return commands.Key("planRevision", c.PlanRevision, 64)
}

// WithdrawBracket cancels every order a bracket rests and ends it; a resting
// entry it waits on rests again, as a new order without it.
type WithdrawBracket struct {
	BracketID string `json:"-"`
}

// Validate checks the shape.
func (c *WithdrawBracket) Validate() error { return commands.Key("id", c.BracketID, MaxOrderID) }

// LegPrice is a new price for one leg of a bracket.
type LegPrice struct {
	ID    string         `json:"id"`
	Price events.Decimal `json:"price"`
}

// ChangeBracket moves the levels of a bracket's legs. A bracket waiting on a
// resting entry has the entry rest again as a new order carrying it.
type ChangeBracket struct {
	BracketID string     `json:"-"`
	Legs      []LegPrice `json:"legs"`
	Market    Market     `json:"-"`
}

// Validate checks the shape.
func (c *ChangeBracket) Validate() error {
	if err := commands.Key("id", c.BracketID, MaxOrderID); err != nil {
		return err
	}
	if len(c.Legs) == 0 || len(c.Legs) > MaxBracketLegs {
		return commands.InvalidField("legs", map[string]any{"max": MaxBracketLegs}, "legs names 1 to %d legs with their new price", MaxBracketLegs)
	}
	seen := map[string]bool{}
	for i, l := range c.Legs {
		f := fmt.Sprintf("legs[%d]", i)
		if err := commands.Key(f+".id", l.ID, MaxOrderID); err != nil {
			return err
		}
		if seen[l.ID] {
			return commands.InvalidField(f+".id", nil, "leg %s is named twice", l.ID)
		}
		seen[l.ID] = true
		if l.Price.Sign() <= 0 {
			return commands.InvalidField(f+".price", nil, "%s.price must be greater than zero", f)
		}
	}
	return nil
}

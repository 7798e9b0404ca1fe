// Package plan is the aggregate of one principal's saved exit plans.
// Writes are conditional: a replace or delete names the revision it read.
package plan

import (
	"fmt"

	"github.com/svc/engine/commands"
	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

// Plan is one saved plan.
type Plan struct {
	Spec     evplan.Spec
	Revision string
	Version  int
	Digest   string
}

// State is a principal's saved plans as its commits leave them.
// Plans state is owned by its mailbox goroutine; never touch it from another.
type State struct {
	Owner   string
	Plans   map[string]Plan // live plans by id
	Deleted map[string]bool // ids removed: never reused
}

// New is the state of a principal with no plan.
func New(owner string) *State {
	return &State{Owner: owner, Plans: map[string]Plan{}, Deleted: map[string]bool{}}
}

// Apply folds one event into the state.
func Apply(s *State, e events.Event) *State {
	switch e := e.(type) {
	case evplan.Saved:
		p := s.Plans[e.PlanID]
		p.Spec, p.Revision, p.Version = e.Spec, e.Revision, p.Version+1
		if p.Digest == "" {
			p.Digest = e.Digest
		}
		s.Plans[e.PlanID] = p
	case evplan.Deleted:
		delete(s.Plans, e.PlanID)
		s.Deleted[e.PlanID] = true
	}
	return s
}

func notFound() error {
	return commands.Refuse(commands.CodeNotFound, "no exit plan of yours has that id", nil)
}

// conflict is the stale-revision answer: 409 exit_plan_conflict with the current revision.
func conflict(current string) error {
	return commands.Refuse(commands.CodeExitPlanConflict,
		"the plan changed since you read it: read it again and send its current revision", map[string]any{"revision": current})
}

// Decide runs one plan command.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	switch c := env.Cmd.(type) {
	case *plancmd.Save:
		p, exists := s.Plans[c.PlanID]
		if c.Create {
			if exists || s.Deleted[c.PlanID] {
				if exists && p.Digest == c.Digest && c.Digest != "" && p.Version == 1 {
					return nil, nil // the same Idempotency-Key and request: the plan stands
				}
				return nil, commands.Refuse(commands.CodeIdempotencyConflict, "this Idempotency-Key was used with another request", nil)
			}
			if len(s.Plans) >= plancmd.MaxPlans {
				return nil, commands.Refuse(commands.CodePlanLimitReached,
					fmt.Sprintf("at most %d saved exit plans; delete one first", plancmd.MaxPlans), map[string]any{"limit": plancmd.MaxPlans})
			}
			return []events.Event{evplan.Saved{PlanID: c.PlanID, Revision: plancmd.Revision(c.PlanID, 1, c.Spec), Spec: c.Spec, Digest: c.Digest, At: env.At}}, nil
		}
		if !exists {
			return nil, notFound()
		}
		if c.IfRevision != p.Revision {
			return nil, conflict(p.Revision)
		}
		return []events.Event{evplan.Saved{PlanID: c.PlanID, Revision: plancmd.Revision(c.PlanID, p.Version+1, c.Spec), Spec: c.Spec, At: env.At}}, nil
	case *plancmd.Delete:
		p, exists := s.Plans[c.PlanID]
		if !exists {
			return nil, notFound()
		}
		if c.IfRevision != p.Revision {
			return nil, conflict(p.Revision)
		}
		return []events.Event{evplan.Deleted{PlanID: c.PlanID, At: env.At}}, nil
	}
	return nil, fmt.Errorf("plan: no decision for %T", env.Cmd)
}

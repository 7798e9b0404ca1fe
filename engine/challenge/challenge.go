// Package challenge holds the aggregates of challenges: a program (one per
// program id) and a user's enrollments (one per user). The evaluation itself
// runs in the account aggregate (engine/account/eval.go); its verdicts reach
// the enrollment through RecordStatus.
package challenge

import (
	"fmt"
	"slices"
	"time"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
)

// Program is a program aggregate's state.
// Program state is owned by its mailbox goroutine; never touch it from another.
type Program struct {
	ID        string
	Published bool
	Program   evch.Program
	VenueID   string
	Idem      idem.Record
}

// NewProgram is the state of a program with no commits.
func NewProgram(id string) *Program { return &Program{ID: id, Idem: idem.Record{}} }

// ApplyProgram folds one event into a program.
func ApplyProgram(s *Program, e events.Event) *Program {
	switch e := e.(type) {
	case evch.ProgramPublished:
		s.Published, s.Program, s.VenueID = true, e.Program, e.VenueID
	default:
		s.Idem.Apply(e)
	}
	return s
}

// DecideProgram runs one program command.
func DecideProgram(s *Program, env commands.Envelope) ([]events.Event, error) {
	c, ok := env.Cmd.(*challengecmd.PublishProgram)
	if !ok {
		return nil, fmt.Errorf("challenge: no decision for %T", env.Cmd)
	}
	return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
		if s.Published && s.VenueID != c.VenueID {
			return nil, 0, nil, commands.Refuse(commands.CodePermissionDenied,
				"this program was authored for another venue", nil)
		}
		if c.NextVenueID != "" && c.NextVenueID != c.VenueID {
			return nil, 0, nil, commands.BadField("nextChallengeId", nil, "nextChallengeId must name a program of the same venue")
		}
		status := commands.Created
		if s.Published {
			status = commands.Done
		}
		return []events.Event{evch.ProgramPublished{Program: c.Program, VenueID: c.VenueID, By: c.By, At: env.At}},
			status, map[string]any{"challenge": challengecmd.View(c.Program)}, nil
	})
}

// Enrollment is one enrollment as its user's aggregate keeps it.
type Enrollment struct {
	ID          string
	ChallengeID string
	Stage       int64
	AccountID   string
	Size        events.Decimal
	Type        string
	Currency    string
	Firm        string
	Status      string
	CreatedAt   time.Time
	Refs        map[string]bool // verdicts recorded
}

// InFlight reports whether the enrollment has no final status yet.
func (e *Enrollment) InFlight() bool {
	return e.Status != evch.StatusFailed && e.Status != evch.StatusCompleted
}

// Enrollments is a user's enrollments aggregate.
// Enrollments state is owned by its mailbox goroutine; never touch it from another.
type Enrollments struct {
	UserID string
	ByID   map[string]*Enrollment
	Order  []string // enrollment ids, oldest first
	Idem   idem.Record
}

// NewEnrollments is the state of a user with no enrollment commits.
func NewEnrollments(id string) *Enrollments {
	return &Enrollments{UserID: id, ByID: map[string]*Enrollment{}, Idem: idem.Record{}}
}

// ApplyEnrollments folds one event into a user's enrollments.
func ApplyEnrollments(s *Enrollments, e events.Event) *Enrollments {
	switch e := e.(type) {
	case evch.Enrolled:
		s.ByID[e.EnrollmentID] = &Enrollment{ID: e.EnrollmentID, ChallengeID: e.ChallengeID, Stage: e.Stage, AccountID: e.AccountID,
			Size: e.AccountSize, Type: e.AccountType, Currency: e.Currency, Firm: e.Firm, Status: evch.StatusRegistered, CreatedAt: e.At, Refs: map[string]bool{}}
		s.Order = append(s.Order, e.EnrollmentID)
	case evch.StatusRecorded:
		if en := s.ByID[e.EnrollmentID]; en != nil {
			en.Status = e.Status
			if e.Ref != "" {
				en.Refs[e.Ref] = true
			}
		}
	case evch.StageIssued:
		if en := s.ByID[e.EnrollmentID]; en != nil {
			en.ChallengeID, en.Stage, en.AccountID = e.ChallengeID, e.Stage, e.AccountID
		}
	default:
		s.Idem.Apply(e)
	}
	return s
}

// InFlight is the user's enrollment without a final status, if any.
func (s *Enrollments) InFlight() *Enrollment {
	for _, id := range s.Order {
		if e := s.ByID[id]; e.InFlight() {
			return e
		}
	}
	return nil
}

// DecideEnrollments runs one enrollment command of the user.
func DecideEnrollments(s *Enrollments, env commands.Envelope) ([]events.Event, error) {
	switch c := env.Cmd.(type) {
	case *challengecmd.Enroll:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			evs, err := enroll(s, env, c)
			if err != nil {
				return nil, 0, nil, err
			}
			en := evs[0].(evch.Enrolled)
			return evs, commands.Created, map[string]any{"enrollment": challengecmd.EnrollmentView(en.EnrollmentID, en.ChallengeID,
				en.Stage, en.AccountID, en.AccountSize, en.AccountType, en.Currency, evch.StatusRegistered, en.At)}, nil
		})
	case *challengecmd.ResetEnrollment:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			en := s.ByID[c.EnrollmentID]
			switch {
			case en == nil:
				return nil, 0, nil, commands.Refuse(commands.CodeNotFound, "no enrollment of yours has that id", nil)
			case en.Status != evch.StatusFailed:
				return nil, 0, nil, commands.Refuse(commands.CodeEnrollmentNotFailed,
					"only a failed enrollment can be reset", map[string]any{"status": en.Status})
			case c.Program != nil && c.Program.PriceCents > 0 && !c.FeesCollected:
				return nil, 0, nil, commands.Refuse(commands.CodePaymentRequired,
					"a reset is bought at the stage's price and this deployment collects no fee",
					map[string]any{"priceCents": c.Program.PriceCents, "currency": c.Program.Currency})
			}
			if f := s.InFlight(); f != nil {
				return nil, 0, nil, commands.Refuse(commands.CodeEnrollmentInFlight,
					"an enrollment of yours is still in flight: it must pass or fail before another starts", map[string]any{"enrollmentId": f.ID})
			}
			row := evch.StatusRecorded{EnrollmentID: en.ID, Status: evch.StatusRegistered, Actor: "trader", Reason: evch.ReasonReset,
				Ref: "reset:" + env.ID.String(), AccountID: en.AccountID, Firm: en.Firm, At: env.At}
			return []events.Event{row}, commands.Done, map[string]any{"enrollment": challengecmd.EnrollmentView(en.ID, en.ChallengeID,
				en.Stage, en.AccountID, en.Size, en.Type, en.Currency, evch.StatusRegistered, en.CreatedAt), "resetRef": row.Ref}, nil
		})
	case *challengecmd.RecordStatus:
		en := s.ByID[c.EnrollmentID]
		if en == nil {
			return nil, commands.Refuse(commands.CodeNotFound, "no enrollment has that id", nil)
		}
		if en.Refs[c.Ref] || !en.InFlight() || en.AccountID != c.AccountID {
			return nil, nil // recorded already, or a verdict of a stage left behind
		}
		row := evch.StatusRecorded{EnrollmentID: en.ID, Status: c.Status, Actor: "system", Reason: c.Reason, Ref: c.Ref, AccountID: c.AccountID, Firm: en.Firm, At: env.At}
		if c.Status != evch.StatusPassed {
			return []events.Event{row}, nil
		}
		if c.Next == nil {
			done := row
			done.Status, done.Ref, done.Reason = evch.StatusCompleted, c.Ref+":completed", "final_stage_passed"
			return []events.Event{row, done}, nil
		}
		return []events.Event{row,
			evch.StageIssued{EnrollmentID: en.ID, ChallengeID: c.Next.ID, Stage: c.Next.Stage, AccountID: c.NextAccount, At: env.At},
			evch.StatusRecorded{EnrollmentID: en.ID, Status: evch.StatusRegistered, Actor: "system", Reason: evch.ReasonNextStage,
				Ref: c.Ref + ":next", AccountID: c.NextAccount, Firm: en.Firm, At: env.At},
		}, nil
	}
	return nil, fmt.Errorf("challenge: no decision for %T", env.Cmd)
}

// enroll decides an enrollment of a verified user: an active first-stage
// program offering the size and type, paid for when it has a price, and no other enrollment of
// the user in flight.
func enroll(s *Enrollments, env commands.Envelope, c *challengecmd.Enroll) ([]events.Event, error) {
	if !c.Verified {
		return nil, commands.Refuse(commands.CodeEmailUnverified, "verify your email address before you enroll in a challenge", nil)
	}
	p := c.Program
	if p == nil || !p.IsActive {
		return nil, commands.Refuse(commands.CodeNotFound, "no active challenge program has that id", nil)
	}
	if p.Stage != 1 {
		return nil, commands.InvalidField("challengeId", nil, "enroll in a program's first stage; later stages follow a passed one")
	}
	if !slices.Contains(p.AllowedTypes, c.Type) {
		return nil, commands.InvalidField("accountType", map[string]any{"allowed": p.AllowedTypes}, "the program does not offer this account type")
	}
	if !slices.ContainsFunc(p.AccountSizes, func(d events.Decimal) bool { return d.Cmp(c.Size) == 0 }) {
		return nil, commands.InvalidField("accountSize", nil, "the program does not offer this account size")
	}
	if p.PriceCents > 0 && !c.FeesCollected {
		return nil, commands.Refuse(commands.CodePaymentRequired,
			"this program has a price and this deployment collects no fee: only free programs can be enrolled in here",
			map[string]any{"priceCents": p.PriceCents, "currency": p.Currency})
	}
	if f := s.InFlight(); f != nil {
		return nil, commands.Refuse(commands.CodeEnrollmentInFlight,
			"an enrollment of yours is still in flight: it must pass or fail before another starts", map[string]any{"enrollmentId": f.ID})
	}
	return []events.Event{
		evch.Enrolled{EnrollmentID: c.EnrollmentID, ChallengeID: p.ID, Stage: p.Stage, AccountID: c.AccountID,
			AccountSize: c.Size, AccountType: c.Type, Currency: p.Currency, Firm: c.Firm, At: env.At},
		evch.StatusRecorded{EnrollmentID: c.EnrollmentID, Status: evch.StatusRegistered, Actor: "trader", Reason: evch.ReasonEnrolled,
			Ref: "enrolled", AccountID: c.AccountID, Firm: c.Firm, At: env.At},
	}, nil
}

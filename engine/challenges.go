package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	challengecmd "github.com/svc/engine/commands/challenge"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/challenge"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/tenant"
	"github.com/svc/engine/engine/venue"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evch "github.com/svc/engine/events/challenge"
)

// challenges is the challenge area of the engine (issue 18): programs, the
// users' enrollments, the evaluation reactor and the lifecycle that carries an
// account's verdicts to its enrollment.
type challenges struct {
	programs    *mailbox.Group[*challenge.Program]
	enrollments *mailbox.Group[*challenge.Enrollments]
	reactor     *challenge.Reactor
	resent      sync.WaitGroup // the start's resend of the replayed verdicts
}

// EvalTick is how often the evaluation reactor looks for due moments.
const EvalTick = 500 * time.Millisecond

var challengeActor = events.Principal{System: "challenge"}

func newChallenges(cfg Config, e *Engine) *challenges {
	c := &challenges{
		programs: mailbox.NewGroup(mailbox.Kind[*challenge.Program]{
			Name: "challenge", Subject: evch.ProgramSubject, New: challenge.NewProgram,
			Decide: challenge.DecideProgram, Apply: challenge.ApplyProgram,
		}, cfg.Log, e.reg, cfg.Metrics),
		enrollments: mailbox.NewGroup(mailbox.Kind[*challenge.Enrollments]{
			Name: "enrollment", Subject: evch.EnrollmentSubject, New: challenge.NewEnrollments,
			Decide: challenge.DecideEnrollments, Apply: challenge.ApplyEnrollments,
		}, cfg.Log, e.reg, cfg.Metrics),
	}
	c.reactor = challenge.NewReactor(cfg.Now, func(ctx context.Context, id string) error {
		if !e.owns(id) {
			return nil // its owner evaluates it
		}
		_, err := e.Account(ctx, id, e.Envelope(challengeActor, "", &challengecmd.EvaluateStage{Market: e.market()}))
		return err
	})
	return c
}

// EvaluationReactor is the evaluation reactor (benchmarks and tests drive it).
func (e *Engine) EvaluationReactor() *challenge.Reactor { return e.ch.reactor }

// afterAccount runs after each commit of an account: the evaluation reactor
// indexes the account, and the commit's verdicts go to the enrollment.
func (e *Engine) afterAccount(id string, s *account.State, c events.Committed) {
	if !s.Eval.Bound || !e.owns(id) {
		return
	}
	e.ch.reactor.Track(id, s)
	for _, ev := range c.Events {
		switch ev.(type) {
		case evch.EvaluationStarted, evch.EvaluationPassed, evch.EvaluationWeekendClosed, evacct.EvaluationBreached:
			rows := append([]account.EvalRow(nil), s.Eval.Rows...)
			go e.forwardVerdicts(id, s.TenantID, s.Eval.Rules, s.Eval.Run, rows)
			return
		}
	}
}

// startChallenges indexes the replayed evaluated accounts, sends their
// verdicts on (a verdict recorded already records nothing) and starts the timer.
func (e *Engine) startChallenges(states map[string]*account.State) {
	for id, s := range states {
		if !s.Eval.Bound {
			continue
		}
		e.ch.reactor.Track(id, s)
		if len(s.Eval.Rows) > 0 {
			e.ch.resent.Add(1)
			go func(id, user string, r evch.Rules, run int, rows []account.EvalRow) {
				defer e.ch.resent.Done()
				e.forwardVerdicts(id, user, r, run, rows)
			}(id, s.TenantID, s.Eval.Rules, s.Eval.Run, append([]account.EvalRow(nil), s.Eval.Rows...))
		}
	}
	e.ch.reactor.Start(EvalTick)
}

// WaitResent waits until the verdicts replayed at start have been sent on to
// their enrollments (tests: a restart records no row twice).
func (e *Engine) WaitResent() { e.ch.resent.Wait() }

// forwardVerdicts records an account's verdicts on its enrollment, in order, and
// issues the next stage's account after a pass.
func (e *Engine) forwardVerdicts(accountID, userID string, r evch.Rules, run int, rows []account.EvalRow) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, row := range rows {
		cmd := &challengecmd.RecordStatus{EnrollmentID: r.EnrollmentID, AccountID: accountID, Status: row.Status, Reason: row.Reason,
			Ref: fmt.Sprintf("%s:%d:%s", accountID, run, row.Ref)}
		if row.Status == evch.StatusPassed && r.NextChallengeID != "" {
			cmd.Next, cmd.NextAccount = e.nextStage(ctx, r)
		}
		env := e.Envelope(challengeActor, "", cmd)
		env.At = row.At
		if _, err := e.ch.enrollments.Execute(ctx, userID, env); err != nil {
			slog.Warn("challenge: recording a verdict failed", "enrollment", r.EnrollmentID, "err", err)
			return
		}
		if cmd.Next != nil {
			if _, err := e.IssueEvaluation(ctx, userID, r.EnrollmentID); err != nil {
				slog.Warn("challenge: issuing the next stage failed", "enrollment", r.EnrollmentID, "err", err)
			}
		}
	}
}

// nextStage is the program an enrollment passing the stage of r goes on to,
// and the account it runs on: nil when there is none, or when the next
// program was published for another venue than the stage's own (a chain
// never leaves its venue).
func (e *Engine) nextStage(ctx context.Context, r evch.Rules) (*evch.Program, string) {
	_, venueID, ok, err := e.programOf(ctx, r.ChallengeID)
	if err != nil || !ok {
		return nil, ""
	}
	p, nextVenue, ok, err := e.programOf(ctx, r.NextChallengeID)
	if err != nil || !ok || nextVenue != venueID {
		return nil, ""
	}
	return &p, StageAccountID(r.EnrollmentID, p.Stage)
}

// StageAccountID is the id of the account an enrollment's stage runs on,
// derived so a retry meets the same account.
func StageAccountID(enrollmentID string, stage int64) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", enrollmentID, stage)))
	return "acct_ch_" + hex.EncodeToString(sum[:12])
}

// PublishProgram runs a program's authoring write (keyed) on its aggregate.
func (e *Engine) PublishProgram(ctx context.Context, programID string, env commands.Envelope) (Result, error) {
	c, ok := env.Cmd.(*challengecmd.PublishProgram)
	if !ok {
		return Result{}, fmt.Errorf("engine: PublishProgram takes a PublishProgram command, not %T", env.Cmd)
	}
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	c.NextVenueID = ""
	if next := c.Program.NextChallengeID; next != "" {
		if _, venueID, ok, err := e.programOf(ctx, next); err != nil {
			return Result{}, err
		} else if ok {
			c.NextVenueID = venueID
		}
	}
	return e.ch.programs.Execute(ctx, programID, env)
}

// Program reads a program from its aggregate; ok is false when none was published.
func (e *Engine) Program(ctx context.Context, id string) (p evch.Program, ok bool, err error) {
	p, _, ok, err = e.programOf(ctx, id)
	return p, ok, err
}

// programOf reads a program and the venue it was published for; ok is false
// when none was published.
func (e *Engine) programOf(ctx context.Context, id string) (p evch.Program, venueID string, ok bool, err error) {
	err = e.ch.programs.Inspect(ctx, id, func(s *challenge.Program, _ uint64) { p, venueID, ok = s.Program, s.VenueID, s.Published })
	return p, venueID, ok, err
}

// FeesCollected reports whether this deployment collects a program's price:
// never in this build (no payment provider is wired), so a priced program
// answers 402 payment_required.
func (e *Engine) FeesCollected() bool { return false }

// Enroll runs an enrollment (keyed) on the user's enrollments, with the
// program as its aggregate holds it.
func (e *Engine) Enroll(ctx context.Context, userID string, env commands.Envelope) (Result, error) {
	c, ok := env.Cmd.(*challengecmd.Enroll)
	if !ok {
		return Result{}, fmt.Errorf("engine: Enroll takes an Enroll command, not %T", env.Cmd)
	}
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	c.Program, c.Firm, c.FeesCollected, c.Verified = nil, "", e.FeesCollected(), false
	if err := e.tenants.Inspect(ctx, userID, func(s *tenant.State, _ uint64) { c.Verified = s.Verified }); err != nil {
		return Result{}, err
	}
	var venueID string
	err := e.ch.programs.Inspect(ctx, c.ChallengeID, func(s *challenge.Program, _ uint64) {
		if s.Published {
			p := s.Program
			c.Program, venueID = &p, s.VenueID
		}
	})
	if err != nil {
		return Result{}, err
	}
	if venueID != "" {
		if err := e.venues.Inspect(ctx, venueID, func(s *venue.State, _ uint64) { c.Firm = s.FirmTenantID }); err != nil {
			return Result{}, err
		}
	}
	return e.ch.enrollments.Execute(ctx, userID, env)
}

// EnrollmentView is one enrollment as its user's aggregate holds it.
type EnrollmentView = challenge.Enrollment

// Enrollment reads the user's enrollment; ok is false when the user has none of that id.
func (e *Engine) Enrollment(ctx context.Context, userID, enrollmentID string) (v EnrollmentView, ok bool, err error) {
	err = e.ch.enrollments.Inspect(ctx, userID, func(s *challenge.Enrollments, _ uint64) {
		if en := s.ByID[enrollmentID]; en != nil {
			v, ok = *en, true
			v.Refs = nil
		}
	})
	return v, ok, err
}

// IssueEvaluation makes sure the account of the enrollment's current stage
// is open and bound to its program's rules (opening it again changes nothing).
func (e *Engine) IssueEvaluation(ctx context.Context, userID, enrollmentID string) (Result, error) {
	en, ok, err := e.Enrollment(ctx, userID, enrollmentID)
	if err != nil || !ok {
		return Result{}, err
	}
	p, ok, err := e.Program(ctx, en.ChallengeID)
	if err != nil || !ok {
		return Result{}, err
	}
	rules := challengecmd.Rules(enrollmentID, p, en.Size, e.Calendar())
	number := "CH" + strings.ToUpper(en.AccountID[len(en.AccountID)-10:])
	open := tenantcmd.OpenAccount{TenantID: userID, Broker: "paper", AccountNumber: number,
		Label: fmt.Sprintf("%.100s stage %d", p.Name, p.Stage), Currency: en.Currency, StartingBalance: en.Size, Kind: "challenge"}
	return e.Account(ctx, en.AccountID, e.Envelope(challengeActor, "", &challengecmd.OpenEvaluation{Open: open, Rules: rules}))
}

// ResetEnrollment runs a failed enrollment's reset (keyed) on the user's
// enrollments, with the stage's program as its aggregate holds it.
func (e *Engine) ResetEnrollment(ctx context.Context, userID string, env commands.Envelope) (Result, error) {
	c, ok := env.Cmd.(*challengecmd.ResetEnrollment)
	if !ok {
		return Result{}, fmt.Errorf("engine: ResetEnrollment takes a ResetEnrollment command, not %T", env.Cmd)
	}
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	c.Program, c.FeesCollected = nil, e.FeesCollected()
	en, found, err := e.Enrollment(ctx, userID, c.EnrollmentID)
	if err != nil {
		return Result{}, err
	}
	if found {
		if p, ok, err := e.Program(ctx, en.ChallengeID); err != nil {
			return Result{}, err
		} else if ok {
			c.Program = &p
		}
	}
	return e.ch.enrollments.Execute(ctx, userID, env)
}

// RestartEvaluation restarts the evaluation of the enrollment's current
// stage on its account after the reset ref: the account reset, the
// eval_breach lock released, the rules bound anew. A second call for the
// same reset changes nothing.
func (e *Engine) RestartEvaluation(ctx context.Context, userID, enrollmentID, ref string) (Result, error) {
	en, ok, err := e.Enrollment(ctx, userID, enrollmentID)
	if err != nil || !ok {
		return Result{}, err
	}
	p, ok, err := e.Program(ctx, en.ChallengeID)
	if err != nil || !ok {
		return Result{}, err
	}
	rules := challengecmd.Rules(enrollmentID, p, en.Size, e.Calendar())
	return e.Account(ctx, en.AccountID, e.Envelope(challengeActor, "", &challengecmd.RestartEvaluation{Rules: rules, Ref: ref}))
}

// Package challenge holds the events of challenges: evaluation programs
// (aggregate kind challenge, one per program), a trader's enrollments
// (aggregate kind enrollment, one per user) and the evaluation an enrolled
// account runs (events on the account's own subject).
package challenge

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file challenge.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Aggregate kinds of the challenge area.
const (
	KindProgram    = "challenge"
	KindEnrollment = "enrollment"
)

// ProgramSubject is the log subject of the program id.
func ProgramSubject(id string) string { return events.Subject(KindProgram, id) }

// EnrollmentSubject is the log subject of the enrollments of the user userID.
func EnrollmentSubject(userID string) string { return events.Subject(KindEnrollment, userID) }

// Drawdown modes a program may name.
const (
	// DDTrailingEOD: the total drawdown floor trails the highest end-of-day equity.
	DDTrailingEOD = "trailing_max_equity_eod"
	// DDStatic: the total drawdown floor is fixed below the starting balance.
	DDStatic = "static"
)

// Enrollment statuses.
const (
	StatusRegistered = "registered"
	StatusInProgress = "in_progress"
	StatusPassed     = "passed"
	StatusFailed     = "failed"
	StatusCompleted  = "completed"
)

// Verdict reasons the engine records.
const (
	ReasonProfitTarget  = "profit_target"
	ReasonDailyDrawdown = "max_daily_drawdown"
	ReasonTotalDrawdown = "max_total_drawdown"
	ReasonMaxDuration   = "max_duration"
	ReasonWeekendHold   = "weekend_hold_refused"
	ReasonFirstFill     = "first_fill"
	ReasonNextStage     = "next_stage"
	ReasonEnrolled      = "enrolled"
	ReasonReset         = "reset"
)

// Program is an evaluation program as its author wrote it: the spec's
// challenge program fields. Percentages are percent (10 is 10%).
type Program struct {
	ID               string           `json:"id"`
	Name             string           `json:"name"`
	Description      string           `json:"description"`
	IsActive         bool             `json:"isActive"`
	Stage            int64            `json:"stage"`
	NextChallengeID  string           `json:"nextChallengeId,omitempty"`
	AllowedTypes     []string         `json:"allowedTypes"`
	AccountSizes     []events.Decimal `json:"accountSizes"`
	Currency         string           `json:"currency"`
	PriceCents       int64            `json:"priceCents"`
	ProfitTargetPct  events.Decimal   `json:"profitTargetPct"`
	MaxDailyDdPct    events.Decimal   `json:"maxDailyDdPct"`
	MaxTotalDdPct    events.Decimal   `json:"maxTotalDdPct"`
	DDMode           string           `json:"ddMode"`
	MinTradingDays   int64            `json:"minTradingDays"`
	MaxDurationDays  int64            `json:"maxDurationDays,omitempty"` // 0: no limit
	AllowWeekendHold bool             `json:"allowWeekendHold"`
	ProfitSharePct   *events.Decimal  `json:"profitSharePct,omitempty"`
}

// ProgramPublished records a program's content as it stands from this commit
// (a draft while IsActive is false). VenueID is the venue it was authored
// for, By the user who wrote it.
type ProgramPublished struct {
	Program Program   `json:"program"`
	VenueID string    `json:"venueId"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Rules are the evaluation rules an enrolled account runs, fixed at issue.
type Rules struct {
	EnrollmentID     string         `json:"enrollmentId"`
	ChallengeID      string         `json:"challengeId"`
	Stage            int64          `json:"stage"`
	NextChallengeID  string         `json:"nextChallengeId,omitempty"`
	Size             events.Decimal `json:"size"`
	ProfitTargetPct  events.Decimal `json:"profitTargetPct"`
	MaxDailyDdPct    events.Decimal `json:"maxDailyDdPct"`
	MaxTotalDdPct    events.Decimal `json:"maxTotalDdPct"`
	DDMode           string         `json:"ddMode"`
	MinTradingDays   int64          `json:"minTradingDays"`
	MaxDurationDays  int64          `json:"maxDurationDays,omitempty"`
	AllowWeekendHold bool           `json:"allowWeekendHold"`
	Calendar         string         `json:"calendar"`
}

// Enrolled records an enrollment of the user in a program's stage, with the
// paper account issued for it.
type Enrolled struct {
	EnrollmentID string         `json:"enrollmentId"`
	ChallengeID  string         `json:"challengeId"`
	Stage        int64          `json:"stage"`
	AccountID    string         `json:"accountId"`
	AccountSize  events.Decimal `json:"accountSize"`
	AccountType  string         `json:"accountType"`
	Currency     string         `json:"currency"`
	Firm         string         `json:"firm,omitempty"` // the firm tenant of the program's venue: its webhooks carry the lifecycle
	At           time.Time      `json:"at"`
}

// StatusRecorded is one row of an enrollment's history: a status with the
// actor (system for the engine's verdicts) and reason. Ref names the verdict
// it records, so a verdict forwarded twice is recorded once.
type StatusRecorded struct {
	EnrollmentID string    `json:"enrollmentId"`
	Status       string    `json:"status"`
	Actor        string    `json:"actor"`
	Reason       string    `json:"reason,omitempty"`
	Ref          string    `json:"ref,omitempty"`
	AccountID    string    `json:"accountId,omitempty"`
	Firm         string    `json:"firm,omitempty"`
	At           time.Time `json:"at"`
}

// StageIssued records the next stage of a passed enrollment: its program and
// the account issued for it.
type StageIssued struct {
	EnrollmentID string    `json:"enrollmentId"`
	ChallengeID  string    `json:"challengeId"`
	Stage        int64     `json:"stage"`
	AccountID    string    `json:"accountId"`
	At           time.Time `json:"at"`
}

// EvaluationBound records the rules an account is evaluated under, in the
// commit that opens it.
type EvaluationBound struct {
	Rules Rules `json:"rules"`
	// ResetRef names the reset that restarted the evaluation on the same
	// account (empty at issue); a reset restarts it once.
	ResetRef string    `json:"resetRef,omitempty"`
	At       time.Time `json:"at"`
}

// EvaluationStarted records an evaluated account's first fill.
type EvaluationStarted struct {
	At time.Time `json:"at"`
}

// EvaluationDayClosed records the end of an evaluation's trading day: the
// equity it ended with, which opens the next day (DayStart) and may raise the
// trailing drawdown floor.
type EvaluationDayClosed struct {
	DayStart time.Time      `json:"dayStart"`
	Equity   events.Decimal `json:"equity"`
	At       time.Time      `json:"at"`
}

// EvaluationPassed records a reached profit target with the minimum trading
// days met.
type EvaluationPassed struct {
	Equity events.Decimal `json:"equity"`
	At     time.Time      `json:"at"`
}

// EvaluationWeekendClosed records the session close before a weekend on an
// account whose program refuses weekend holds: its positions are closed and
// its working orders canceled in the same commit.
type EvaluationWeekendClosed struct {
	Until time.Time `json:"until"`
	At    time.Time `json:"at"`
}

func (ProgramPublished) Type() string        { return "challenge.program_published.v1" }
func (Enrolled) Type() string                { return "enrollment.enrolled.v1" }
func (StatusRecorded) Type() string          { return "enrollment.status_recorded.v1" }
func (StageIssued) Type() string             { return "enrollment.stage_issued.v1" }
func (EvaluationBound) Type() string         { return "account.evaluation_bound.v1" }
func (EvaluationStarted) Type() string       { return "account.evaluation_started.v1" }
func (EvaluationDayClosed) Type() string     { return "account.evaluation_day_closed.v1" }
func (EvaluationPassed) Type() string        { return "account.evaluation_passed.v1" }
func (EvaluationWeekendClosed) Type() string { return "account.evaluation_weekend_closed.v1" }

// Registry is every challenge event type.
func Registry() events.Registry {
	return events.Registry{
		ProgramPublished{}.Type():        events.Of[ProgramPublished](),
		Enrolled{}.Type():                events.Of[Enrolled](),
		StatusRecorded{}.Type():          events.Of[StatusRecorded](),
		StageIssued{}.Type():             events.Of[StageIssued](),
		EvaluationBound{}.Type():         events.Of[EvaluationBound](),
		EvaluationStarted{}.Type():       events.Of[EvaluationStarted](),
		EvaluationDayClosed{}.Type():     events.Of[EvaluationDayClosed](),
		EvaluationPassed{}.Type():        events.Of[EvaluationPassed](),
		EvaluationWeekendClosed{}.Type(): events.Of[EvaluationWeekendClosed](),
	}
}

// Package challenge holds the commands of challenges: authoring a program,
// enrolling in one, recording the lifecycle of an enrollment, and the
// evaluation commands an enrolled account runs.
package challenge

import (
	"strings"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evch "github.com/svc/engine/events/challenge"
)

// Bounds of a program's values.
const (
	MaxName        = 128
	MaxDescription = 2000
	MaxTypes       = 8
	MaxSizes       = 16
	MaxStage       = 16
	MaxDays        = 3650
	MaxPriceCents  = 100_000_000 // 1,000,000.00
	MaxTypeName    = 32
)

var (
	// MaxSize bounds an account size.
	MaxSize = events.MustDecimal("100000000")
	hundred = events.Int(100)
)

// Number is a JSON number literal or null (never a string, never through a float).
type Number = commands.Number

// ProgramBody is the body of a program's authoring write, as the client sends it.
type ProgramBody struct {
	Name             string   `json:"name"`
	Description      string   `json:"description"`
	IsActive         bool     `json:"isActive"`
	Stage            int64    `json:"stage"`
	NextChallengeID  *string  `json:"nextChallengeId"`
	AllowedTypes     []string `json:"allowedTypes"`
	AccountSizes     []Number `json:"accountSizes"`
	Currency         string   `json:"currency"`
	PriceCents       int64    `json:"priceCents"`
	ProfitTargetPct  Number   `json:"profitTargetPct"`
	MaxDailyDdPct    Number   `json:"maxDailyDdPct"`
	MaxTotalDdPct    Number   `json:"maxTotalDdPct"`
	DDMode           string   `json:"ddMode"`
	MinTradingDays   int64    `json:"minTradingDays"`
	MaxDurationDays  *int64   `json:"maxDurationDays"`
	AllowWeekendHold bool     `json:"allowWeekendHold"`
	ProfitSharePct   Number   `json:"profitSharePct"`
}

// Currencies a program may be priced and sized in: those the paper book issues.
var Currencies = []string{"USD", "USDC", "USDT"}

// pct checks a percentage: above 0 and at most 100, 4 decimals at most.
func pct(field string, n Number, zeroOK bool) error {
	if !n.Set {
		return commands.BadField(field, nil, "%s is required: a JSON number of percent", field)
	}
	if n.Sign() < 0 || (!zeroOK && n.Sign() == 0) || n.Cmp(hundred) > 0 || n.Decimals() > 4 {
		return commands.BadField(field, map[string]any{"max": 100}, "%s must be a percentage above 0 and at most 100, with at most 4 decimals", field)
	}
	return nil
}

// UUID checks a program id: a UUID in its canonical lower-case form.
func UUID(field, v string) error {
	ok := len(v) == 36
	for i := 0; ok && i < len(v); i++ {
		switch c := v[i]; i {
		case 8, 13, 18, 23:
			ok = c == '-'
		default:
			ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
		}
	}
	if !ok {
		return commands.BadField(field, nil, "%s must be a UUID in canonical lower-case form", field)
	}
	return nil
}

// Program checks the body and answers the program it states under id.
func (b ProgramBody) Program(id string) (evch.Program, error) {
	if err := UUID("id", id); err != nil {
		return evch.Program{}, err
	}
	if err := commands.Identifier("name", b.Name, MaxName); err != nil {
		return evch.Program{}, err
	}
	if err := commands.Text("description", b.Description, MaxDescription); err != nil {
		return evch.Program{}, err
	}
	if b.Stage < 1 || b.Stage > MaxStage {
		return evch.Program{}, commands.BadField("stage", map[string]any{"max": MaxStage}, "stage must be 1 to %d", MaxStage)
	}
	p := evch.Program{ID: id, Name: b.Name, Description: b.Description, IsActive: b.IsActive, Stage: b.Stage,
		Currency: b.Currency, PriceCents: b.PriceCents, DDMode: b.DDMode, MinTradingDays: b.MinTradingDays,
		AllowWeekendHold: b.AllowWeekendHold}
	if b.NextChallengeID != nil {
		if err := UUID("nextChallengeId", *b.NextChallengeID); err != nil {
			return evch.Program{}, err
		}
		if *b.NextChallengeID == id {
			return evch.Program{}, commands.BadField("nextChallengeId", nil, "nextChallengeId must name another program")
		}
		p.NextChallengeID = *b.NextChallengeID
	}
	if len(b.AllowedTypes) == 0 || len(b.AllowedTypes) > MaxTypes {
		return evch.Program{}, commands.BadField("allowedTypes", map[string]any{"max": MaxTypes}, "allowedTypes lists 1 to %d account types", MaxTypes)
	}
	for _, t := range b.AllowedTypes {
		if err := commands.Key("allowedTypes", t, MaxTypeName); err != nil {
			return evch.Program{}, err
		}
		p.AllowedTypes = append(p.AllowedTypes, t)
	}
	if len(b.AccountSizes) == 0 || len(b.AccountSizes) > MaxSizes {
		return evch.Program{}, commands.BadField("accountSizes", map[string]any{"max": MaxSizes}, "accountSizes lists 1 to %d sizes", MaxSizes)
	}
	for _, s := range b.AccountSizes {
		if !s.Set || s.Sign() <= 0 || s.Cmp(MaxSize) > 0 || s.Decimals() > 2 {
			return evch.Program{}, commands.BadField("accountSizes", map[string]any{"max": MaxSize.String()},
				"every account size is a number above 0 and at most %s, in whole cents", MaxSize)
		}
		p.AccountSizes = append(p.AccountSizes, s.Decimal)
	}
	ok := false
	for _, c := range Currencies {
		ok = ok || c == b.Currency
	}
	if !ok {
		return evch.Program{}, commands.BadField("currency", nil, "currency must be one of %s", strings.Join(Currencies, ", "))
	}
	if b.PriceCents < 0 || b.PriceCents > MaxPriceCents {
		return evch.Program{}, commands.BadField("priceCents", map[string]any{"max": MaxPriceCents}, "priceCents must be 0 to %d", MaxPriceCents)
	}
	for _, c := range []struct {
		f string
		n Number
		d *events.Decimal
	}{{"profitTargetPct", b.ProfitTargetPct, &p.ProfitTargetPct}, {"maxDailyDdPct", b.MaxDailyDdPct, &p.MaxDailyDdPct}, {"maxTotalDdPct", b.MaxTotalDdPct, &p.MaxTotalDdPct}} {
		if err := pct(c.f, c.n, false); err != nil {
			return evch.Program{}, err
		}
		*c.d = c.n.Decimal
	}
	if b.DDMode != evch.DDTrailingEOD && b.DDMode != evch.DDStatic {
		return evch.Program{}, commands.BadField("ddMode", nil, "ddMode must be %s or %s", evch.DDTrailingEOD, evch.DDStatic)
	}
	if b.MinTradingDays < 0 || b.MinTradingDays > MaxDays {
		return evch.Program{}, commands.BadField("minTradingDays", map[string]any{"max": MaxDays}, "minTradingDays must be 0 to %d", MaxDays)
	}
	if b.MaxDurationDays != nil {
		if *b.MaxDurationDays < 1 || *b.MaxDurationDays > MaxDays {
			return evch.Program{}, commands.BadField("maxDurationDays", map[string]any{"max": MaxDays}, "maxDurationDays must be null or 1 to %d", MaxDays)
		}
		if *b.MaxDurationDays < b.MinTradingDays {
			return evch.Program{}, commands.BadField("maxDurationDays", nil, "maxDurationDays must leave room for minTradingDays")
		}
		p.MaxDurationDays = *b.MaxDurationDays
	}
	if b.ProfitSharePct.Set {
		if err := pct("profitSharePct", b.ProfitSharePct, true); err != nil {
			return evch.Program{}, err
		}
		v := b.ProfitSharePct.Decimal
		p.ProfitSharePct = &v
	}
	return p, nil
}

// PublishProgram writes a program's content (a draft while inactive), keyed
// by its Idempotency-Key. VenueID is the venue it is authored for.
// NextVenueID is the venue the program's nextChallengeId was published for,
// empty while none was (the engine reads it).
type PublishProgram struct {
	Program     evch.Program
	VenueID     string
	By          string
	NextVenueID string
}

// Validate checks the command's shape.
func (c *PublishProgram) Validate() error {
	if c.VenueID == "" || c.By == "" {
		return commands.BadRequest("a program is authored for a venue by a user")
	}
	return nil
}

// Enroll enrolls the user in a program's first stage with an account size
// and type; Program is the program as it stands (the engine reads it).
// FeesCollected says whether the deployment collects a program's price;
// Verified whether the user's email address is verified (the engine reads it).
type Enroll struct {
	EnrollmentID  string
	AccountID     string
	ChallengeID   string
	Size          events.Decimal
	Type          string
	Program       *evch.Program // nil: no such program
	Firm          string        // the firm tenant of the program's venue (the engine reads it)
	FeesCollected bool
	Verified      bool
}

// Validate checks the command's shape.
func (c *Enroll) Validate() error {
	if err := UUID("challengeId", c.ChallengeID); err != nil {
		return err
	}
	if c.Size.Sign() <= 0 || c.Size.Cmp(MaxSize) > 0 {
		return commands.BadField("accountSize", map[string]any{"max": MaxSize.String()}, "accountSize must be one of the program's sizes")
	}
	return commands.Key("accountType", c.Type, MaxTypeName)
}

// RecordStatus records a status row of an enrollment from the evaluation
// (actor system); Ref names the verdict, so a second send records nothing.
// Next is the next stage's program when the row passes a stage that has one.
type RecordStatus struct {
	EnrollmentID string
	AccountID    string
	Status       string
	Reason       string
	Ref          string
	NextAccount  string        // the account the next stage is issued as
	Next         *evch.Program // the next stage's program, when there is one
}

// Validate checks the command's shape.
func (c *RecordStatus) Validate() error {
	if c.EnrollmentID == "" || c.Status == "" || c.Ref == "" {
		return commands.BadRequest("a status row names its enrollment, status and verdict")
	}
	return nil
}

// OpenEvaluation opens an account that runs an evaluation under Rules: the
// account's opening and its rules in one commit. Opening it again changes nothing.
type OpenEvaluation struct {
	Open  tenantcmd.OpenAccount
	Rules evch.Rules
}

// Validate checks the command's shape.
func (c *OpenEvaluation) Validate() error { return c.Open.Validate() }

// ResetEnrollment restarts a failed enrollment's stage on the same account
// (keyed): bought at the stage's program price, which this deployment
// cannot collect (402 for a priced program). Program is the stage's program
// (the engine reads it).
type ResetEnrollment struct {
	EnrollmentID  string
	Program       *evch.Program
	FeesCollected bool
}

// Validate checks the command's shape.
func (c *ResetEnrollment) Validate() error { return commands.Key("enrollmentId", c.EnrollmentID, 64) }

// RestartEvaluation releases a failed evaluation's eval_breach lock and
// starts it again on the same account: the account back to its starting
// balance (a reset), the rules bound anew from now. Ref names the
// enrollment's reset; a second send of it changes nothing.
type RestartEvaluation struct {
	Rules evch.Rules
	Ref   string
}

// Validate checks the command's shape.
func (c *RestartEvaluation) Validate() error { return commands.Key("ref", c.Ref, 128) }

// EvaluateStage runs the evaluation of an account at the marks of Market:
// the evaluation reactor sends it on a mark that crosses a threshold and at
// the times the rules name (the end of a day, the last allowed day, the
// session close before a weekend).
type EvaluateStage struct {
	Market trading.Market
}

// Validate checks the command's shape.
func (c *EvaluateStage) Validate() error { return nil }

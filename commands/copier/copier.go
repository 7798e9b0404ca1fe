// Package copier holds the commands of copier groups: make a group of a
// leader account, add, change or remove its followers, and record the
// outcomes of mirroring the leader's accepted orders on them.
package copier

import (
	"fmt"
	"slices"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evcopier "github.com/svc/engine/events/copier"
)

// Bounds of a group's input.
const (
	// MaxFollowers bounds a group's followers.
	MaxFollowers = 1000
	// MaxName bounds a group's name.
	MaxName = 80
	// MaxMapEntries bounds a follower's instrument map.
	MaxMapEntries = 32
	// MaxAccountID bounds an account id as a body or path names it.
	MaxAccountID = 64
	// MaxActions bounds the leader actions one record holds.
	MaxActions = 256
)

// maxFactor bounds a multiplier or an equity sizing's factor.
var maxFactor = events.Int(1000)

// FollowerSpec is a follower as a request states it. Omitted: sizing
// multiplier 1, direction same, enabled true.
type FollowerSpec struct {
	AccountID     string            `json:"accountId"`
	Sizing        *evcopier.Sizing  `json:"sizing"`
	InstrumentMap map[string]string `json:"instrumentMap"`
	Direction     string            `json:"direction"`
	Enabled       *bool             `json:"enabled"`
}

// Validate checks the shape and fills in the defaults.
func (f *FollowerSpec) Validate(field string) error {
	if err := commands.Key(field+"accountId", f.AccountID, MaxAccountID); err != nil {
		return err
	}
	if f.Sizing == nil {
		f.Sizing = &evcopier.Sizing{Mode: evcopier.SizeMultiplier, Value: events.Int(1)}
	}
	if err := CheckSizing(field+"sizing.", *f.Sizing); err != nil {
		return err
	}
	if len(f.InstrumentMap) > MaxMapEntries {
		return commands.InvalidField(field+"instrumentMap", map[string]any{"max": MaxMapEntries}, "instrumentMap names at most %d instruments", MaxMapEntries)
	}
	for _, from := range sortedKeys(f.InstrumentMap) {
		if err := commands.Identifier(field+"instrumentMap", from, trading.MaxInstrument); err != nil {
			return err
		}
		if err := commands.Identifier(field+"instrumentMap", f.InstrumentMap[from], trading.MaxInstrument); err != nil {
			return err
		}
	}
	switch f.Direction {
	case "":
		f.Direction = evcopier.DirectionSame
	case evcopier.DirectionSame, evcopier.DirectionInverse:
	default:
		return commands.InvalidField(field+"direction", nil, "direction must be same or inverse")
	}
	if f.Enabled == nil {
		on := true
		f.Enabled = &on
	}
	return nil
}

// Follower is the follower the spec states (after Validate).
func (f FollowerSpec) Follower() evcopier.Follower {
	var m map[string]string
	if len(f.InstrumentMap) > 0 {
		m = f.InstrumentMap
	}
	return evcopier.Follower{AccountID: f.AccountID, Sizing: *f.Sizing, InstrumentMap: m, Direction: f.Direction, Enabled: *f.Enabled}
}

// CheckSizing checks a sizing: a known mode, a value above zero (a
// multiplier or an equity factor at most 1000), a max above zero.
func CheckSizing(field string, s evcopier.Sizing) error {
	switch s.Mode {
	case evcopier.SizeMultiplier, evcopier.SizeFixed, evcopier.SizeEquity:
	default:
		return commands.InvalidField(field+"mode", nil, "sizing.mode must be multiplier, fixed or equity")
	}
	if s.Value.Sign() <= 0 {
		return commands.InvalidField(field+"value", nil, "sizing.value must be greater than zero")
	}
	if s.Mode != evcopier.SizeFixed && s.Value.Cmp(maxFactor) > 0 {
		return commands.InvalidField(field+"value", map[string]any{"max": maxFactor.String()}, "a %s sizing's value is at most %s", s.Mode, maxFactor)
	}
	if s.Max != nil && s.Max.Sign() <= 0 {
		return commands.InvalidField(field+"max", nil, "sizing.max must be greater than zero")
	}
	return nil
}

// CreateGroup makes a copier group of the leader account, with its first
// followers. GroupID derives from the caller and the Idempotency-Key.
type CreateGroup struct {
	GroupID   string         `json:"-"`
	Leader    string         `json:"leaderAccountId"`
	Name      string         `json:"name"`
	Followers []FollowerSpec `json:"followers"`
	LeaderRev uint64         `json:"-"` // the leader's revision now: the engine sets it
}

// Validate checks the shape: a leader, at most MaxFollowers distinct
// followers, none of them the leader.
func (c *CreateGroup) Validate() error {
	if err := commands.Key("leaderAccountId", c.Leader, MaxAccountID); err != nil {
		return err
	}
	if err := commands.Text("name", c.Name, MaxName); err != nil {
		return err
	}
	if len(c.Followers) > MaxFollowers {
		return commands.Refuse(commands.CodeCopierLimitReached,
			fmt.Sprintf("a group has at most %d followers", MaxFollowers), map[string]any{"limit": MaxFollowers})
	}
	seen := map[string]bool{}
	for i := range c.Followers {
		f := &c.Followers[i]
		if err := f.Validate(fmt.Sprintf("followers[%d].", i)); err != nil {
			return err
		}
		if f.AccountID == c.Leader {
			return commands.InvalidField(fmt.Sprintf("followers[%d].accountId", i), nil, "the leader cannot follow itself")
		}
		if seen[f.AccountID] {
			return commands.InvalidField(fmt.Sprintf("followers[%d].accountId", i), nil, "the account is named twice")
		}
		seen[f.AccountID] = true
	}
	return nil
}

// SetFollower adds a follower to the group or changes how it follows.
type SetFollower struct {
	Spec      FollowerSpec `json:"-"`
	LeaderRev uint64       `json:"-"`
}

// Validate checks the shape.
func (c *SetFollower) Validate() error { return c.Spec.Validate("") }

// RemoveFollower takes a follower out of the group.
type RemoveFollower struct {
	AccountID string `json:"-"`
	LeaderRev uint64 `json:"-"`
}

// Validate checks the shape.
func (c *RemoveFollower) Validate() error {
	return commands.Key("accountId", c.AccountID, MaxAccountID)
}

// RecordMirrors records the outcomes of mirroring the leader's commit at
// LeaderSeq (the copier's reactor sends it).
type RecordMirrors struct {
	LeaderSeq uint64
	Actions   []evcopier.Action
	// Partial marks a record of some of the commit's followers: another
	// follows, and only the last advances the group's mirroredThrough.
	Partial bool
}

// Validate checks the shape.
func (c *RecordMirrors) Validate() error {
	if c.LeaderSeq == 0 || len(c.Actions) > MaxActions {
		return commands.BadRequest("a record names the leader's commit and at most %d actions", MaxActions)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

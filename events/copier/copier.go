// Package copier holds the events of a copier group: a leader account whose
// accepted orders are mirrored on follower accounts, each follower with its
// sizing, instrument map and direction, and the outcome of every mirror.
package copier

import (
	"time"

	"github.com/svc/engine/events"
)

//go:generate go tool msgp -file copier.go -io=false -tests=false
//msgp:tag json
//msgp:timezone utc
//msgp:newtime

// Subject is the log subject of the copier group groupID.
func Subject(groupID string) string { return events.Subject(events.KindCopier, groupID) }

// Sizing modes.
const (
	// SizeMultiplier: the leader's quantity times Value.
	SizeMultiplier = "multiplier"
	// SizeFixed: Value, whatever the leader's quantity.
	SizeFixed = "fixed"
	// SizeEquity: the leader's quantity times the follower's equity over
	// the leader's, times Value.
	SizeEquity = "equity"
)

// Directions.
const (
	DirectionSame    = "same"
	DirectionInverse = "inverse"
)

// Sizing is how a follower's quantity follows the leader's. The result is
// rounded down to the follower instrument's lot step and capped at Max.
type Sizing struct {
	Mode  string          `json:"mode"`
	Value events.Decimal  `json:"value"`
	Max   *events.Decimal `json:"max,omitempty"`
}

// Follower is one follower account of a group and how it follows.
type Follower struct {
	AccountID string `json:"accountId"`
	Sizing    Sizing `json:"sizing"`
	// InstrumentMap maps a leader instrument to the follower's (a micro
	// contract for a full-size one); an instrument it does not name is
	// mirrored as it is.
	InstrumentMap map[string]string `json:"instrumentMap,omitempty"`
	Direction     string            `json:"direction"`
	Enabled       bool              `json:"enabled"`
}

// GroupCreated records a new group of Leader, made by Owner (the tenant of
// the principal that created it; OnBehalfOf when it acted for a trader).
type GroupCreated struct {
	GroupID    string `json:"groupId"`
	Leader     string `json:"leader"`
	Name       string `json:"name,omitempty"`
	Owner      string `json:"owner"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
	// LeaderRev is the leader account's revision when the group was made:
	// the followers it was made with mirror the leader's commits after it.
	LeaderRev uint64    `json:"leaderRev"`
	At        time.Time `json:"at"`
}

// FollowerSet records a follower added or changed. LeaderRev is the leader
// account's revision when it was set: a follower added mirrors the leader's
// commits after it, and a change of Enabled takes effect after it.
type FollowerSet struct {
	Follower  Follower  `json:"follower"`
	LeaderRev uint64    `json:"leaderRev"`
	At        time.Time `json:"at"`
}

// FollowerRemoved records a follower taken out of the group; it mirrors
// nothing more.
type FollowerRemoved struct {
	AccountID string    `json:"accountId"`
	LeaderRev uint64    `json:"leaderRev"`
	At        time.Time `json:"at"`
}

// Mirror ops: what the leader did that a follower mirrors.
const (
	OpPlace   = "place"   // an order the leader's venue accepted
	OpCancel  = "cancel"  // a cancel of one, accepted
	OpReplace = "replace" // a change of one, accepted
	// OpChangeBracket: a change of the levels of the bracket an entry of
	// the leader's opened (its LeaderOrderID), accepted; each follower's
	// own bracket, from its mirror of the entry, takes the moved levels.
	OpChangeBracket = "change_bracket"
	// OpWithdrawBracket: a withdrawal of that bracket, accepted; each
	// follower's own bracket is withdrawn.
	OpWithdrawBracket = "withdraw_bracket"
)

// Mirror statuses.
const (
	// StatusMirrored: the follower's account took the mirror (its order id
	// in BrokerOrderID); a repeat its clientOrderId answered is one too.
	StatusMirrored = "mirrored"
	// StatusRefused: the follower's account refused it (Code says why:
	// its risk lock, a hold, margin, the provider's rejection ...).
	StatusRefused = "refused"
	// StatusSkipped: nothing was sent (Code says why: the size rounds to
	// nothing, no mirrored order to cancel or change).
	StatusSkipped = "skipped"
)

// Mirror is one follower's outcome of one leader action.
type Mirror struct {
	Follower      string          `json:"follower"`
	Status        string          `json:"status"`
	Code          string          `json:"code,omitempty"`
	ClientOrderID string          `json:"clientOrderId,omitempty"`
	BrokerOrderID string          `json:"brokerOrderId,omitempty"`
	Instrument    string          `json:"instrument,omitempty"`
	Side          string          `json:"side,omitempty"`
	Quantity      *events.Decimal `json:"quantity,omitempty"`
	// LeaderEquity and FollowerEquity are the equities an equity sizing
	// used, recorded so the log alone rebuilds the quantity.
	LeaderEquity   *events.Decimal `json:"leaderEquity,omitempty"`
	FollowerEquity *events.Decimal `json:"followerEquity,omitempty"`
	// ExitPlan is, on the mirror of an exit plan's entry, what the
	// follower's mirror carries of it (ExitPlanFollowed, ExitPlanPartial,
	// ExitPlanNone); ExitPlanCode is the code of the follower's refusal that
	// left it partial or none.
	ExitPlan     string `json:"exitPlan,omitempty"`
	ExitPlanCode string `json:"exitPlanCode,omitempty"`
	// Reason says, on a bracket action skipped, why nothing was sent
	// (ReasonInverse, ReasonBracketEnded, ReasonNotMirrored, ReasonLegsEnded).
	Reason string `json:"reason,omitempty"`
	// BracketID is, on a bracket action, the follower's bracket it changed
	// or withdrew.
	BracketID string `json:"bracketId,omitempty"`
}

// Why a follower's bracket action sent nothing.
const (
	// ReasonInverse: the follower trades the other side, and the leader's
	// levels cannot be translated to its bracket (code unsupported_value).
	ReasonInverse = "direction_inverse"
	// ReasonNotMirrored: the follower has no mirror of the leader's entry
	// (code not_found).
	ReasonNotMirrored = "entry_not_mirrored"
	// ReasonBracketEnded: the follower's mirror of the entry carries no
	// active bracket: it ended (its stop or targets filled, its position
	// closed, withdrawn) or the mirror was placed without one (code
	// not_found).
	ReasonBracketEnded = "bracket_ended"
	// ReasonLegsEnded: none of the follower's legs that match the leader's
	// moved legs (by kind and place in the ladder) is open (code not_found).
	ReasonLegsEnded = "legs_ended"
)

// What a mirrored entry carries of the leader's exit plan.
const (
	// ExitPlanFollowed: a bracket of the follower's own from the whole plan.
	ExitPlanFollowed = "followed"
	// ExitPlanPartial: its stop, targets and runner; its account does not
	// serve the breakeven and trailing rules (a provider account).
	ExitPlanPartial = "partial"
	// ExitPlanNone: no bracket; its account takes no such plan.
	ExitPlanNone = "none"
)

// Action is one leader action and every participating follower's outcome.
type Action struct {
	Op            string   `json:"op"`
	LeaderOrderID string   `json:"leaderOrderId"`
	Mirrors       []Mirror `json:"mirrors"`
}

// MirrorsRecorded records the outcomes of the leader's commit at LeaderSeq
// (its revision): one Action per order it placed, canceled or changed.
// The group's mirrors are recorded in the leader's commit order: once the
// last record of LeaderSeq is in, every commit of the leader up to it has
// been mirrored.
type MirrorsRecorded struct {
	LeaderSeq uint64   `json:"leaderSeq"`
	Actions   []Action `json:"actions"`
	// Partial marks a record of some of the followers: another record of
	// the same commit follows; the last one advances the group.
	Partial bool      `json:"partial,omitempty"`
	At      time.Time `json:"at"`
}

func (GroupCreated) Type() string    { return "copier.group_created.v1" }
func (FollowerSet) Type() string     { return "copier.follower_set.v1" }
func (FollowerRemoved) Type() string { return "copier.follower_removed.v1" }
func (MirrorsRecorded) Type() string { return "copier.mirrors_recorded.v1" }

// Registry lists the copier event types.
func Registry() events.Registry {
	return events.Registry{
		GroupCreated{}.Type():    events.Of[GroupCreated](),
		FollowerSet{}.Type():     events.Of[FollowerSet](),
		FollowerRemoved{}.Type(): events.Of[FollowerRemoved](),
		MirrorsRecorded{}.Type(): events.Of[MirrorsRecorded](),
	}
}

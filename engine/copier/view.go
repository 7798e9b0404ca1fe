package copier

import (
	"time"

	"github.com/svc/engine/events"
	evcopier "github.com/svc/engine/events/copier"
)

// FollowerView is a follower as the copier routes show it.
type FollowerView struct {
	AccountID     string            `json:"accountId"`
	Sizing        evcopier.Sizing   `json:"sizing"`
	InstrumentMap map[string]string `json:"instrumentMap"`
	Direction     string            `json:"direction"`
	Enabled       bool              `json:"enabled"`
	AddedAt       time.Time         `json:"addedAt"`
	UpdatedAt     time.Time         `json:"updatedAt"`
}

// View is a group as the copier routes show it.
type View struct {
	GroupID         string         `json:"groupId"`
	Name            string         `json:"name"`
	LeaderAccountID string         `json:"leaderAccountId"`
	Followers       []FollowerView `json:"followers"`
	// MirroredThrough is the leader's revision up to which every commit is
	// mirrored and its outcomes recorded.
	MirroredThrough uint64    `json:"mirroredThrough"`
	CreatedAt       time.Time `json:"createdAt"`
}

// ViewOf is the group's view.
func ViewOf(s *State) View {
	v := View{GroupID: s.ID, Name: s.Name, LeaderAccountID: s.Leader, Followers: make([]FollowerView, 0, len(s.Followers)),
		MirroredThrough: s.Through, CreatedAt: s.CreatedAt}
	for _, id := range s.FollowerIDs() {
		f := s.Followers[id]
		m := f.InstrumentMap
		if m == nil {
			m = map[string]string{}
		}
		v.Followers = append(v.Followers, FollowerView{AccountID: id, Sizing: f.Sizing, InstrumentMap: m, Direction: f.Direction,
			Enabled: f.Enabled, AddedAt: f.AddedAt, UpdatedAt: f.UpdatedAt})
	}
	return v
}

// OutcomeView is one follower's outcome of a leader action.
type OutcomeView struct {
	AccountID     string          `json:"accountId"`
	Status        string          `json:"status"`
	Code          string          `json:"code,omitempty"`
	ClientOrderID string          `json:"clientOrderId,omitempty"`
	BrokerOrderID string          `json:"brokerOrderId,omitempty"`
	Instrument    string          `json:"instrument,omitempty"`
	Side          string          `json:"side,omitempty"`
	Quantity      *events.Decimal `json:"quantity,omitempty"`
	ExitPlan      string          `json:"exitPlan,omitempty"`
	ExitPlanCode  string          `json:"exitPlanCode,omitempty"`
	Reason        string          `json:"reason,omitempty"`
	BracketID     string          `json:"bracketId,omitempty"`
}

// ActionView is one leader action and its followers' outcomes.
type ActionView struct {
	LeaderOrderID  string        `json:"leaderOrderId"`
	Op             string        `json:"op"`
	LeaderRevision uint64        `json:"leaderRevision"`
	At             time.Time     `json:"at"`
	Followers      []OutcomeView `json:"followers"`
}

// RecentView lists the group's recent actions, newest first, at most limit;
// with leaderOrderID only those of that leader order.
func RecentView(s *State, leaderOrderID string, limit int) []ActionView {
	return ActionsView(s.Recent, leaderOrderID, limit)
}

// ActionsView lists recorded actions (oldest first in rs) newest first, at
// most limit; with leaderOrderID only those of that leader order.
func ActionsView(rs []Recorded, leaderOrderID string, limit int) []ActionView {
	out := []ActionView{}
	for i := len(rs) - 1; i >= 0 && len(out) < limit; i-- {
		r := rs[i]
		if leaderOrderID != "" && r.LeaderOrderID != leaderOrderID {
			continue
		}
		a := ActionView{LeaderOrderID: r.LeaderOrderID, Op: r.Op, LeaderRevision: r.LeaderSeq, At: r.At, Followers: make([]OutcomeView, 0, len(r.Mirrors))}
		for _, m := range r.Mirrors {
			a.Followers = append(a.Followers, OutcomeView{AccountID: m.Follower, Status: m.Status, Code: m.Code, ClientOrderID: m.ClientOrderID,
				BrokerOrderID: m.BrokerOrderID, Instrument: m.Instrument, Side: m.Side, Quantity: m.Quantity,
				ExitPlan: m.ExitPlan, ExitPlanCode: m.ExitPlanCode, Reason: m.Reason, BracketID: m.BracketID})
		}
		out = append(out, a)
	}
	return out
}

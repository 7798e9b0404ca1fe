// Package copier is the copier group's aggregate: a leader account and its
// followers, each with its sizing, instrument map, direction and switch,
// and the outcomes of mirroring the leader's accepted orders on them. Its
// Decide and Apply are pure; the mirror rules a reactor applies (which
// leader actions are mirrored, on whom, at what size) are here too
// (mirror.go), so the log alone rebuilds every mirror decision.
package copier

import (
	"fmt"
	"slices"
	"time"

	"github.com/svc/engine/commands"
	copiercmd "github.com/svc/engine/commands/copier"
	"github.com/svc/engine/engine/idem"
	"github.com/svc/engine/events"
	evcopier "github.com/svc/engine/events/copier"
)

// MaxRecent bounds the leader actions a group keeps for its reads of
// recent mirror outcomes; the log keeps them all.
const MaxRecent = 200

// Follower is one follower as the group's commits leave it.
type Follower struct {
	evcopier.Follower
	// Added is the leader's revision when it was added: it mirrors the
	// leader's commits after it.
	Added uint64
	// Toggled is the leader's revision of the last change of Enabled
	// (0: never changed): a commit at or before it saw the other value.
	Toggled   uint64
	AddedAt   time.Time
	UpdatedAt time.Time
}

// EnabledAt reports whether the follower mirrors the leader's commit at seq.
func (f *Follower) EnabledAt(seq uint64) bool {
	if seq <= f.Added {
		return false
	}
	if f.Toggled != 0 && seq <= f.Toggled {
		return !f.Enabled
	}
	return f.Enabled
}

// Recorded is one leader action's outcomes as recorded.
type Recorded struct {
	LeaderSeq uint64
	At        time.Time
	evcopier.Action
}

// State is a copier group as its commits leave it.
// Copier state is owned by its mailbox goroutine; never touch it from another.
type State struct {
	ID         string
	Created    bool
	Leader     string
	Name       string
	Owner      string
	OnBehalfOf string
	CreatedAt  time.Time
	Followers  map[string]*Follower
	// Through is the leader's revision up to which every commit is mirrored
	// and recorded.
	Through uint64
	Recent  []Recorded // newest last, at most MaxRecent
	// Orders indexes every recorded action by its leader order: the n-th
	// record (from 0) that holds an action of leader order id is the
	// group's log sequence at OrderKey(id)+n (Fold). A read of one leader
	// order's outcomes reads those records back, so it finds them however
	// many actions followed (Recent keeps the latest MaxRecent only). About
	// 40 bytes a leader order.
	Orders map[uint64]uint64
	Idem   idem.Record
}

// New is the state of a group with no commits.
func New(id string) *State {
	return &State{ID: id, Followers: map[string]*Follower{}, Orders: map[uint64]uint64{}, Idem: idem.Record{}}
}

// Fold folds one commit's events, at its sequence in the log, into the
// state: Apply on each, and each recorded action's leader order indexed
// to the commit (Orders).
func Fold(s *State, seq uint64, evs []events.Event) *State {
	for _, e := range evs {
		s = Apply(s, e)
		r, ok := e.(evcopier.MirrorsRecorded)
		if !ok || seq == 0 {
			continue
		}
		if s.Orders == nil {
			s.Orders = map[uint64]uint64{}
		}
		for _, a := range r.Actions {
			for k := OrderKey(a.LeaderOrderID); ; k++ {
				at, taken := s.Orders[k]
				if !taken {
					s.Orders[k] = seq
					break
				}
				if at == seq {
					break // this record is indexed for the order already
				}
			}
		}
	}
	return s
}

// OrderKey is the first key of a leader order's id in State.Orders
// (FNV-1a, 64 bits): two ids' runs of keys may meet, so a record read back
// is matched by the id itself.
func OrderKey(leaderOrderID string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(leaderOrderID); i++ {
		h = (h ^ uint64(leaderOrderID[i])) * 1099511628211
	}
	return h
}

// RecordsOf are the group's log sequences of the records that may hold the
// leader order's actions, oldest first.
func (s *State) RecordsOf(leaderOrderID string) []uint64 {
	var out []uint64
	for k := OrderKey(leaderOrderID); ; k++ {
		seq, ok := s.Orders[k]
		if !ok {
			break
		}
		out = append(out, seq)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// OrderRecords are the leader order's actions in one commit of the group,
// as recorded.
func OrderRecords(evs []events.Event, leaderOrderID string) []Recorded {
	var out []Recorded
	for _, e := range evs {
		if r, ok := e.(evcopier.MirrorsRecorded); ok {
			for _, a := range r.Actions {
				if a.LeaderOrderID == leaderOrderID {
					out = append(out, Recorded{LeaderSeq: r.LeaderSeq, At: r.At, Action: a})
				}
			}
		}
	}
	return out
}

// Apply folds one event into the state.
func Apply(s *State, e events.Event) *State {
	s.Idem.Apply(e)
	switch e := e.(type) {
	case evcopier.GroupCreated:
		s.Created, s.Leader, s.Name, s.Owner, s.OnBehalfOf, s.CreatedAt = true, e.Leader, e.Name, e.Owner, e.OnBehalfOf, e.At
	case evcopier.FollowerSet:
		f, ok := s.Followers[e.Follower.AccountID]
		if !ok {
			f = &Follower{Added: e.LeaderRev, AddedAt: e.At}
			s.Followers[e.Follower.AccountID] = f
		} else if f.Enabled != e.Follower.Enabled {
			f.Toggled = e.LeaderRev
		}
		f.Follower, f.UpdatedAt = e.Follower, e.At
	case evcopier.FollowerRemoved:
		delete(s.Followers, e.AccountID)
	case evcopier.MirrorsRecorded:
		if !e.Partial {
			s.Through = max(s.Through, e.LeaderSeq)
		}
		for _, a := range e.Actions {
			s.Recent = append(s.Recent, Recorded{LeaderSeq: e.LeaderSeq, At: e.At, Action: a})
		}
		if n := len(s.Recent) - MaxRecent; n > 0 {
			s.Recent = slices.Delete(s.Recent, 0, n)
		}
	}
	return s
}

// FollowerIDs are the group's followers in id order.
func (s *State) FollowerIDs() []string {
	ids := make([]string, 0, len(s.Followers))
	for id := range s.Followers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func notFound() error {
	return commands.Refuse(commands.CodeNotFound, "no copier group of yours has that id", nil)
}

// Decide runs one copier command.
func Decide(s *State, env commands.Envelope) ([]events.Event, error) {
	switch c := env.Cmd.(type) {
	case *copiercmd.CreateGroup:
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if s.Created {
				return nil, 0, nil, commands.Refuse(commands.CodeIdempotencyConflict, "the group exists already", nil)
			}
			out := []events.Event{evcopier.GroupCreated{GroupID: s.ID, Leader: c.Leader, Name: c.Name,
				Owner: env.Principal.TenantID, OnBehalfOf: env.Principal.OnBehalfOf, LeaderRev: c.LeaderRev, At: env.At}}
			for i := range c.Followers {
				out = append(out, evcopier.FollowerSet{Follower: c.Followers[i].Follower(), LeaderRev: c.LeaderRev, At: env.At})
			}
			return out, commands.Created, ViewOf(after(s, out)), nil
		})
	case *copiercmd.SetFollower:
		if !s.Created {
			return nil, notFound()
		}
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			f := c.Spec.Follower()
			if f.AccountID == s.Leader {
				return nil, 0, nil, commands.InvalidField("accountId", nil, "the leader cannot follow itself")
			}
			old, exists := s.Followers[f.AccountID]
			if !exists && len(s.Followers) >= copiercmd.MaxFollowers {
				return nil, 0, nil, commands.Refuse(commands.CodeCopierLimitReached,
					fmt.Sprintf("a group has at most %d followers", copiercmd.MaxFollowers), map[string]any{"limit": copiercmd.MaxFollowers})
			}
			outcome := commands.Done
			if !exists {
				outcome = commands.Created
			}
			var out []events.Event
			if !exists || !same(old.Follower, f) {
				out = append(out, evcopier.FollowerSet{Follower: f, LeaderRev: c.LeaderRev, At: env.At})
			}
			return out, outcome, ViewOf(after(s, out)), nil
		})
	case *copiercmd.RemoveFollower:
		if !s.Created {
			return nil, notFound()
		}
		return idem.Write(s.Idem, env, func() ([]events.Event, commands.Outcome, any, error) {
			if _, ok := s.Followers[c.AccountID]; !ok {
				return nil, 0, nil, commands.Refuse(commands.CodeNotFound, "the account does not follow this group", nil)
			}
			out := []events.Event{evcopier.FollowerRemoved{AccountID: c.AccountID, LeaderRev: c.LeaderRev, At: env.At}}
			return out, commands.Done, ViewOf(after(s, out)), nil
		})
	case *copiercmd.RecordMirrors:
		if !s.Created {
			return nil, notFound()
		}
		if c.LeaderSeq <= s.Through {
			return nil, nil // recorded already: a repeat of the reactor's, after a crash or by a second path
		}
		return []events.Event{evcopier.MirrorsRecorded{LeaderSeq: c.LeaderSeq, Actions: c.Actions, Partial: c.Partial, At: env.At}}, nil
	}
	return nil, fmt.Errorf("copier: no decision for %T", env.Cmd)
}

// after is a copy of s with evs applied, for the answer a write records
// (Decide never changes the state it is given).
func after(s *State, evs []events.Event) *State {
	c := &State{ID: s.ID, Created: s.Created, Leader: s.Leader, Name: s.Name, Owner: s.Owner, OnBehalfOf: s.OnBehalfOf,
		CreatedAt: s.CreatedAt, Through: s.Through, Followers: make(map[string]*Follower, len(s.Followers)), Idem: idem.Record{}}
	for id, f := range s.Followers {
		cp := *f
		c.Followers[id] = &cp
	}
	for _, e := range evs {
		Apply(c, e)
	}
	return c
}

// same reports whether two follower settings are equal.
func same(a, b evcopier.Follower) bool {
	if a.AccountID != b.AccountID || a.Direction != b.Direction || a.Enabled != b.Enabled ||
		a.Sizing.Mode != b.Sizing.Mode || a.Sizing.Value.Cmp(b.Sizing.Value) != 0 || (a.Sizing.Max == nil) != (b.Sizing.Max == nil) ||
		(a.Sizing.Max != nil && a.Sizing.Max.Cmp(*b.Sizing.Max) != 0) || len(a.InstrumentMap) != len(b.InstrumentMap) {
		return false
	}
	for k, v := range a.InstrumentMap {
		if b.InstrumentMap[k] != v {
			return false
		}
	}
	return true
}

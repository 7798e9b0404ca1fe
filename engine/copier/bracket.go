package copier

import (
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evcopier "github.com/svc/engine/events/copier"
)

// The bracket rules: a change of the levels of a leader's bracket, or its
// withdrawal, after the leader's account accepted it, on each follower's
// own bracket (the one its mirror of the bracket's entry carries). Pure,
// like the mirror rules: the reactor applies them to each leader commit,
// and a replay of the log applies them again.

// LegLevel is one moved leg of a leader's bracket: its kind, its place
// among the legs of its kind in the ladder (from 0: the first target is
// 0, the second 1), and its new level.
type LegLevel struct {
	Kind  string
	N     int
	Price events.Decimal
}

// BracketActions lists the bracket actions of the leader's commit c, after
// the commit's other actions (Actions). bracket reads the leader's active
// brackets after the commit. ended names the brackets the commit ended, for
// Entries to forget.
//
//   - OpChangeBracket: a commit of the trader's own (no system principal:
//     not a bracket's own breakeven or trailing, not a copier's mirror) that
//     moved the levels of an armed bracket's legs, with no fill in it: each
//     leg replaced (a paper account's OrderReplaced of it) or placed again
//     at its new level (a provider account's exit intent for it) is a moved
//     leg. A bracket still waiting on its resting entry is not one of them:
//     the paper entry rests again as a new order with it (mirrored as the
//     cancel and the new entry with its plan), and a provider follower's
//     entry waits on at the provider.
//   - OpWithdrawBracket: a bracket ended as withdrawn, unless the commit
//     rests its entry again (a paper entry that waited on it: the entry's
//     cancel and placement are the mirror).
//
// OrderID is left empty: the leader's entry of the bracket is named by
// Entries, from the leader's earlier commits.
func BracketActions(c events.Commit, bracket func(id string) *evacct.Bracket) (acts []LeaderAction, ended []string) {
	rerest, fills := false, false
	for _, e := range c.Events {
		switch e := e.(type) {
		case evacct.OrderCanceled:
			rerest = rerest || e.Reason == "replaced"
		case evacct.OrderFilled:
			fills = true
		}
	}
	for _, e := range c.Events {
		if b, ok := e.(evacct.BracketEnd); ok {
			ended = append(ended, b.BracketID)
			if b.Reason == "withdrawn" && !rerest {
				acts = append(acts, LeaderAction{Op: evcopier.OpWithdrawBracket, BracketID: b.BracketID})
			}
		}
	}
	if c.Principal.System != "" || fills || rerest || bracket == nil {
		return acts, ended
	}
	seen := map[string]bool{}
	for _, e := range c.Events {
		set, ok := e.(evacct.BracketSet)
		if !ok || seen[set.Bracket.ID] || opened(c.Events, set.Bracket.ID) {
			continue
		}
		seen[set.Bracket.ID] = true
		b := bracket(set.Bracket.ID)
		if b == nil || b.EntryOrderID != "" {
			continue // ended, or waiting on its entry
		}
		if legs := movedLegs(c.Events, b); len(legs) > 0 {
			acts = append(acts, LeaderAction{Op: evcopier.OpChangeBracket, BracketID: b.ID, Legs: legs})
		}
	}
	return acts, ended
}

// opened reports whether evs place an entry carrying the bracket id (its
// opening, or its entry resting again).
func opened(evs []events.Event, id string) bool {
	for _, e := range evs {
		if p, ok := e.(evacct.OrderPlaced); ok && p.Order.BracketID == id && !p.Order.ReduceOnly {
			return true
		}
	}
	return false
}

// movedLegs are b's legs that evs replace or place again at their level, in
// ladder order.
func movedLegs(evs []events.Event, b *evacct.Bracket) []LegLevel {
	moved := map[string]bool{}
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.OrderReplaced:
			moved[e.BrokerOrderID] = true
		case evacct.OrderIntended:
			if e.Op != evacct.IntentCancel && e.Order.BracketID == b.ID && e.Order.ReduceOnly {
				moved[e.Order.ClientOrderID] = true // a leg's placement names the leg
			}
		}
	}
	var out []LegLevel
	n := map[string]int{}
	for _, lg := range b.Legs {
		i := n[lg.Kind]
		n[lg.Kind]++
		if moved[lg.ID] && lg.Price != nil && lg.Kind != evacct.LegRunner {
			out = append(out, LegLevel{Kind: lg.Kind, N: i, Price: *lg.Price})
		}
	}
	return out
}

// Entries is, for one leader, the entry order each of its brackets came
// from (by bracket id): what names a bracket action's leader order, and so
// the follower's mirror of the entry (ClientOrderID) whose bracket follows.
// It is rebuilt from the leader's commits alone, in order (Resolve).
type Entries map[string]string

// Resolve folds one leader commit's actions, in order: an entry placed with
// a bracket names it (the last placement wins: an entry resting again
// under a new id); a bracket action takes its entry as OrderID, and one of
// a bracket whose entry is unknown (opened before the leader led a group,
// or protecting a position) is dropped; ended brackets are forgotten after.
func (m Entries) Resolve(acts []LeaderAction, ended []string) []LeaderAction {
	out := acts[:0:0]
	for _, a := range acts {
		switch a.Op {
		case evcopier.OpPlace:
			if a.Exit != nil && a.Order.BracketID != "" && !a.Order.ReduceOnly {
				m[a.Order.BracketID] = a.OrderID
			}
		case evcopier.OpChangeBracket, evcopier.OpWithdrawBracket:
			id, ok := m[a.BracketID]
			if !ok {
				continue
			}
			a.OrderID = id
		}
		out = append(out, a)
	}
	for _, id := range ended {
		delete(m, id)
	}
	return out
}

// BracketMove is what a follower's bracket takes of a leader's bracket
// action.
type BracketMove struct {
	// Legs are the follower's legs to move (OpChangeBracket), each to the
	// leader's level of the leg of its kind and place in the ladder.
	Legs []trading.LegPrice
	// Done: its legs sit at those levels already (a repeat after a crash):
	// nothing is sent, and the outcome is mirrored.
	Done bool
	// Code and Reason, when set, say why nothing is sent (skipped).
	Code   commands.Code
	Reason string
}

// FollowerBracket is what the follower f's bracket fb (nil: its mirror of
// the entry carries no active one; mirrored false: it has no mirror of the
// entry) takes of the leader's bracket action a. An inverse follower takes
// nothing: the leader's levels are on the other side of the follower's
// position and cannot be translated. A withdrawal takes the whole bracket
// (Legs empty, no Code). A change moves each follower leg of the moved
// legs' kind and place that is still open (pre_armed or working) to the
// leader's level, the same absolute price; one the follower's ladder does
// not have (its targets rounded to fewer at its lot) or that ended is left.
func FollowerBracket(f evcopier.Follower, a LeaderAction, mirrored bool, fb *evacct.Bracket) BracketMove {
	switch {
	case f.Direction == evcopier.DirectionInverse:
		return BracketMove{Code: commands.CodeUnsupportedValue, Reason: evcopier.ReasonInverse}
	case !mirrored:
		return BracketMove{Code: commands.CodeNotFound, Reason: evcopier.ReasonNotMirrored}
	case fb == nil:
		return BracketMove{Code: commands.CodeNotFound, Reason: evcopier.ReasonBracketEnded}
	case a.Op == evcopier.OpWithdrawBracket:
		return BracketMove{}
	}
	var mv BracketMove
	done := true
	for _, l := range a.Legs {
		lg := nth(fb, l.Kind, l.N)
		if lg == nil || lg.Price == nil || (lg.State != evacct.LegPreArmed && lg.State != evacct.LegWorking) {
			continue
		}
		mv.Legs = append(mv.Legs, trading.LegPrice{ID: lg.ID, Price: l.Price})
		done = done && lg.Price.Cmp(l.Price) == 0
	}
	if len(mv.Legs) == 0 {
		return BracketMove{Code: commands.CodeNotFound, Reason: evcopier.ReasonLegsEnded}
	}
	if done {
		return BracketMove{Done: true}
	}
	return mv
}

// nth is b's n-th leg (from 0) of the kind, nil when it has fewer.
func nth(b *evacct.Bracket, kind string, n int) *evacct.BracketLeg {
	for i := range b.Legs {
		if b.Legs[i].Kind != kind {
			continue
		}
		if n == 0 {
			return &b.Legs[i]
		}
		n--
	}
	return nil
}

// MirrorBracket is the follower's active bracket that its mirror of the
// leader's entry opened; nil when none is active. clientOrderID is the
// mirror's, orderID the follower's order it placed: the bracket keyed by
// the clientOrderId, or waiting on that order, or the one that order's
// placement opened (an entry's bracket is the placing command's first
// derived bracket id, commands.Envelope.DerivedID("b", 0), and the entry's
// id is the command's own), which it stays after the entry filled.
func MirrorBracket(brackets map[string]*evacct.Bracket, clientOrderID, orderID string) *evacct.Bracket {
	opened := ""
	if u, err := ulid.ParseStrict(orderID); err == nil {
		opened = commands.Envelope{ID: u}.DerivedID("b", 0)
	}
	if b, ok := brackets[opened]; ok && opened != "" {
		return b
	}
	for _, b := range brackets {
		if (clientOrderID != "" && b.ClientOrderID == clientOrderID) || (orderID != "" && b.EntryOrderID == orderID) {
			return b
		}
	}
	return nil
}

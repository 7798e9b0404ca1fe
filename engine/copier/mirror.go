package copier

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evcopier "github.com/svc/engine/events/copier"
	evplan "github.com/svc/engine/events/plan"
)

// The mirror rules: which of the leader's commits' events are mirrored,
// on which followers, at what size, side and instrument. Pure: the
// reactor (engine/copiers.go) applies them to each leader commit after
// it is committed, and a replay of the log applies them again.

// LeaderAction is one thing a leader's commit did that followers mirror:
// an order its venue accepted, or a cancel or change of one, accepted.
type LeaderAction struct {
	Op      string // evcopier.OpPlace, OpCancel, OpReplace, OpChangeBracket or OpWithdrawBracket
	OrderID string // the leader's order (a bracket action: the entry its bracket came from)
	// Order is the order placed (OpPlace).
	Order evacct.Order
	// Exit is, on the entry of an exit plan (OpPlace), the plan each
	// follower's mirror carries, from the leader's bracket.
	Exit *Exit
	// CloseAll marks a reduce-only order placed for the leader's whole
	// position (a close, a flatten's closing order): each follower's mirror
	// is for the whole of its own.
	CloseAll bool
	// Quantity, LimitPrice and StopPrice are the order's new terms (OpReplace).
	Quantity              events.Decimal
	LimitPrice, StopPrice *events.Decimal
	// BracketID is the leader's bracket (OpChangeBracket, OpWithdrawBracket).
	BracketID string
	// Legs are the bracket's moved legs at their new levels (OpChangeBracket).
	Legs []LegLevel
}

// ownCancels are the cancel reasons a follower's own book decides for its
// own orders (its time in force, its day's end, its own risk, holds and
// reductions): the leader's cancels for these reasons are not mirrored.
var ownCancels = map[string]bool{
	string(order.IOC): true, string(order.FOK): true, "expired": true, "reduce_only": true, "risk": true,
	"evaluation": true, "reset": true, "unreconciled": true,
}

// Actions lists what the leader's commit evs did that followers mirror, in
// the commit's order. open is the leader's open quantity (unsigned) in an
// instrument after the commit; bracket (nil: none) its active bracket by
// id after the commit. An order that is itself a mirror
// (LeaderOrderID set) is never mirrored again, so groups never loop.
//
// An exit plan's entry is mirrored with the leader's bracket (Bracket), and
// each follower's mirror carries a bracket of its own; the leader's
// bracket's legs (their placements, the bracket's own cancels of them, a
// change of their levels) are therefore not mirrored as orders, so no
// follower's position is closed twice; a change of the leader's bracket, or
// its withdrawal, is mirrored on the follower's bracket (BracketActions).
func Actions(evs []events.Event, open func(instrument string) events.Decimal, bracket func(id string) *evacct.Bracket) []LeaderAction {
	var out []LeaderAction
	var legs map[string]bool
	for _, e := range evs {
		if b, ok := e.(evacct.BracketSet); ok {
			if legs == nil {
				legs = map[string]bool{}
			}
			for _, lg := range b.Bracket.Legs {
				legs[lg.ID] = true
			}
		}
	}
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.OrderPlaced:
			o := e.Order
			if o.LeaderOrderID != "" || leg(o) {
				continue
			}
			a := LeaderAction{Op: evcopier.OpPlace, OrderID: o.BrokerOrderID, Order: o}
			if o.BracketID != "" {
				b := bracketOf(evs, o.BracketID)
				if b == nil && bracket != nil {
					b = bracket(o.BracketID) // a provider's entry: its bracket was set when it was sent
				}
				if b != nil {
					a.Exit = &Exit{PlanID: b.PlanID, PlanRevision: b.PlanRevision, Entry: b.EntryPrice, Spec: FollowerPlan(*b)}
				}
			}
			if o.ReduceOnly {
				before := open(o.Instrument).Add(filled(evs, o.BrokerOrderID))
				a.CloseAll = before.Sign() > 0 && o.Quantity.Cmp(before) >= 0
			}
			out = append(out, a)
		case evacct.OrderCanceled:
			if !ownCancels[e.Reason] && !strings.HasPrefix(e.Reason, bracketCancel) && !legs[e.BrokerOrderID] {
				out = append(out, LeaderAction{Op: evcopier.OpCancel, OrderID: e.BrokerOrderID})
			}
		case evacct.OrderReplaced:
			if !legs[e.BrokerOrderID] {
				out = append(out, LeaderAction{Op: evcopier.OpReplace, OrderID: e.BrokerOrderID, Quantity: e.Quantity,
					LimitPrice: e.LimitPrice, StopPrice: e.StopPrice})
			}
		}
	}
	return out
}

// bracketCancel prefixes the reason of the cancels a bracket makes of its
// own legs (its one-cancels-other, its end).
const bracketCancel = "bracket_"

// leg reports whether o is a bracket's leg: reduce-only and carrying its
// bracket (an entry is never reduce-only).
func leg(o evacct.Order) bool { return o.BracketID != "" && o.ReduceOnly }

// bracketOf is the bracket id as the commit evs first set it; nil when
// they set none.
func bracketOf(evs []events.Event, id string) *evacct.Bracket {
	for _, e := range evs {
		if b, ok := e.(evacct.BracketSet); ok && b.Bracket.ID == id {
			cp := b.Bracket
			return &cp
		}
	}
	return nil
}

// filled is the quantity of orderID the commit evs filled.
func filled(evs []events.Event, orderID string) events.Decimal {
	q := events.Int(0)
	for _, e := range evs {
		if f, ok := e.(evacct.OrderFilled); ok && f.BrokerOrderID == orderID {
			q = q.Add(f.Quantity)
		}
	}
	return q
}

// Participants are the followers that mirror the leader's commit at seq,
// in id order: added before it and enabled at it.
func Participants(s *State, seq uint64) []*Follower {
	var out []*Follower
	for _, id := range s.FollowerIDs() {
		if f := s.Followers[id]; f.EnabledAt(seq) {
			out = append(out, f)
		}
	}
	return out
}

// ClientOrderID is the clientOrderId of the mirror of the order
// leaderOrderID of the account leader on the account follower: "cp-" and
// 32 hex digits of a SHA-256 over the three. Every attempt of a mirror
// (live, after a crash, by the catch-up at start) carries the same id, so
// the follower's account takes it once (a repeat answers 409
// idempotency_conflict naming the order).
func ClientOrderID(leader, leaderOrderID, follower string) string {
	var in [192]byte // on the stack for ids of ordinary length
	b := append(append(append(append(append(in[:0], leader...), 0), leaderOrderID...), 0), follower...)
	h := sha256.Sum256(b)
	var out [3 + 32]byte
	copy(out[:], "cp-")
	hex.Encode(out[3:], h[:16])
	return string(out[:])
}

// Instrument is the follower's instrument for the leader's.
func Instrument(f evcopier.Follower, leader string) string {
	if m, ok := f.InstrumentMap[leader]; ok {
		return m
	}
	return leader
}

// Side is the follower's side for the leader's.
func Side(f evcopier.Follower, leader string) string {
	if f.Direction == evcopier.DirectionInverse {
		return string(order.Side(leader).Opposite())
	}
	return leader
}

// SizeInput is what a follower's quantity is sized from.
type SizeInput struct {
	Sizing evcopier.Sizing
	Leader events.Decimal // the leader's quantity
	// LeaderEquity and FollowerEquity are the accounts' equities (an equity
	// sizing only); nil or not above zero: nothing is sized.
	LeaderEquity, FollowerEquity *events.Decimal
	// LotStep and MinQuantity are the follower instrument's (zero: none).
	LotStep, MinQuantity events.Decimal
}

// Size is the follower's quantity: the leader's times the multiplier, the
// fixed quantity, or the leader's times the follower's equity over the
// leader's (times the value); capped at Max; rounded down to the lot step.
// Zero when that is below the minimum quantity or nothing.
func Size(in SizeInput) events.Decimal {
	var q events.Decimal
	switch in.Sizing.Mode {
	case evcopier.SizeMultiplier:
		q = in.Leader.Mul(in.Sizing.Value)
	case evcopier.SizeFixed:
		q = in.Sizing.Value
	case evcopier.SizeEquity:
		if in.LeaderEquity == nil || in.FollowerEquity == nil || in.LeaderEquity.Sign() <= 0 || in.FollowerEquity.Sign() <= 0 {
			return events.Int(0)
		}
		q = in.Leader.Mul(*in.FollowerEquity).Quo(*in.LeaderEquity).Mul(in.Sizing.Value)
	default:
		return events.Int(0)
	}
	if in.Sizing.Max != nil && q.Cmp(*in.Sizing.Max) > 0 {
		q = *in.Sizing.Max
	}
	return stepDown(q, in.LotStep, in.MinQuantity)
}

// ReduceSize is a follower's quantity of a mirrored reduce-only order: the
// whole of its position when the leader's closes the whole of the
// leader's, else the sized quantity; never more than its position.
func ReduceSize(sized, position events.Decimal, closeAll bool) events.Decimal {
	position = position.Abs()
	if closeAll || sized.Cmp(position) > 0 {
		return position
	}
	return sized
}

// stepDown rounds q down to a multiple of step (when above zero); zero
// when the result is below min or not above zero.
func stepDown(q, step, min events.Decimal) events.Decimal {
	if step.Sign() > 0 {
		q = q.Steps(step, apd.RoundFloor)
	}
	if q.Sign() <= 0 || (min.Sign() > 0 && q.Cmp(min) < 0) {
		return events.Int(0)
	}
	return q
}

// Exit is the exit plan a follower's mirror of an entry carries.
type Exit struct {
	PlanID, PlanRevision string         // the leader's plan, named on the follower's bracket
	Entry                events.Decimal // the leader's entry, which the follower's may not drift far from
	Spec                 evplan.Spec    // FollowerPlan of the leader's bracket
}

// FollowerPlan is the exit plan a follower's mirror of an entry carries:
// the leader's bracket b as priced, each level a price distance from its
// entry (so the follower's bracket sits as far from the follower's own
// entry, on the follower's side: an inverse follower's stop is above its
// short entry where the leader's is below its long one), each target its
// share of the quantity (so sized to the follower's), a runner where the
// leader's has one, the breakeven and trailing rules as distances and
// ticks. The follower's book prices it at its entry like any plan.
func FollowerPlan(b evacct.Bracket) evplan.Spec {
	s := evplan.Spec{Name: "copier"}
	dist := func(px events.Decimal) evplan.Distance {
		d := px.Sub(b.EntryPrice).Abs()
		return evplan.Distance{Offset: &d}
	}
	for _, lg := range b.Legs {
		switch {
		case lg.Kind == evacct.LegStop && lg.Price != nil:
			d := dist(*lg.Price)
			s.Stop = &d
		case lg.Kind == evacct.LegTarget && lg.Price != nil && lg.Share != nil:
			s.Targets = append(s.Targets, evplan.Target{Distance: dist(*lg.Price), Share: *lg.Share})
		case lg.Kind == evacct.LegRunner:
			s.Runner = true
		}
	}
	if be := b.Breakeven; be != nil && s.Stop != nil {
		plus := be.StopPrice.Sub(b.EntryPrice) // in the position's favour: above a long entry
		if b.Side == "short" {
			plus = plus.Neg()
		}
		var ticks int64
		if b.Tick.Sign() > 0 {
			ticks, _ = plus.Quo(b.Tick).Int64()
		}
		s.Breakeven = &evplan.Breakeven{Trigger: dist(be.Trigger), PlusTicks: ticks}
	}
	if tr := b.Trailing; tr != nil {
		d := tr.Distance
		t := &evplan.Trailing{Distance: evplan.Distance{Offset: &d}}
		if tr.Activation != nil {
			t.Activation = dist(*tr.Activation)
		}
		s.Trailing = t
	}
	return s
}

// Unmanaged is the plan without what moves a resting stop (breakeven and
// trailing), which a provider account does not serve; ok false when the
// plan has neither (nothing to take out).
func Unmanaged(s evplan.Spec) (evplan.Spec, bool) {
	if s.Breakeven == nil && s.Trailing == nil {
		return s, false
	}
	s.Breakeven, s.Trailing = nil, nil
	return s, true
}

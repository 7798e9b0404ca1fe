package copier_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evcopier "github.com/svc/engine/events/copier"
)

// armedBracket is leaderBracket after its entry filled: every leg working,
// the runner protected by the stop alone.
func armedBracket() evacct.Bracket {
	b := leaderBracket()
	b.EntryOrderID = ""
	b.Legs = append([]evacct.BracketLeg(nil), b.Legs...)
	for i := range b.Legs {
		b.Legs[i].State = evacct.LegWorking
	}
	return b
}

func moved(b evacct.Bracket, legID, price string) evacct.Bracket {
	b.Legs = append([]evacct.BracketLeg(nil), b.Legs...)
	for i := range b.Legs {
		if b.Legs[i].ID == legID {
			b.Legs[i].Price = decp(price)
		}
	}
	return b
}

func actionsText(acts []copier.LeaderAction) []string {
	var out []string
	for _, a := range acts {
		s := a.Op + ":" + a.BracketID
		for _, l := range a.Legs {
			s += fmt.Sprintf(" %s#%d@%s", l.Kind, l.N, l.Price)
		}
		out = append(out, s)
	}
	return out
}

// A change of the levels of an armed bracket's legs by the trader, or its
// withdrawal, is a bracket action; the bracket's own moves, its opening,
// arming and ends are not.
func TestBracketActions(t *testing.T) {
	trader := events.Principal{TenantID: "t1", UserID: "u1"}
	stopAt96 := moved(armedBracket(), "l0", "96")
	twoMoved := moved(moved(armedBracket(), "l0", "97"), "l2", "112")
	pending := moved(leaderBracket(), "l0", "96")
	active := func(b evacct.Bracket) func(string) *evacct.Bracket {
		return func(id string) *evacct.Bracket {
			if id == b.ID {
				return &b
			}
			return nil
		}
	}
	leg := func(id, legID string) evacct.Order {
		return evacct.Order{BrokerOrderID: id, ClientOrderID: legID, Instrument: "ES", Side: "sell", ReduceOnly: true, BracketID: "b1"}
	}
	for _, tc := range []struct {
		name      string
		principal events.Principal
		evs       []events.Event
		after     evacct.Bracket
		want      []string
		ended     []string
	}{
		{"a paper change of the stop: its leg replaced", trader,
			[]events.Event{evacct.BracketSet{Bracket: stopAt96}, evacct.OrderReplaced{BrokerOrderID: "l0", Quantity: dec("4"), StopPrice: decp("96")}},
			stopAt96, []string{"change_bracket:b1 stop#0@96"}, nil},
		{"a paper change of the stop and the second target, in ladder order", trader,
			[]events.Event{evacct.BracketSet{Bracket: twoMoved}, evacct.OrderReplaced{BrokerOrderID: "l2", Quantity: dec("1"), LimitPrice: decp("112")},
				evacct.OrderReplaced{BrokerOrderID: "l0", Quantity: dec("4"), StopPrice: decp("97")}},
			twoMoved, []string{"change_bracket:b1 stop#0@97 target#1@112"}, nil},
		{"a provider change: the leg placed again at its level", trader,
			[]events.Event{evacct.BracketSet{Bracket: stopAt96}, evacct.OrderIntended{Op: "exit", Order: leg("x0", "l0")}},
			stopAt96, []string{"change_bracket:b1 stop#0@96"}, nil},
		{"the bracket's own trailing move (a system commit) is not", events.Principal{System: "paper"},
			[]events.Event{evacct.BracketSet{Bracket: stopAt96}, evacct.OrderReplaced{BrokerOrderID: "l0", Quantity: dec("4"), StopPrice: decp("96")}},
			stopAt96, nil, nil},
		{"a copier's mirror of a change is not mirrored again", events.Principal{System: "copier"},
			[]events.Event{evacct.BracketSet{Bracket: stopAt96}, evacct.OrderReplaced{BrokerOrderID: "l0", Quantity: dec("4"), StopPrice: decp("96")}},
			stopAt96, nil, nil},
		{"a bracket waiting on its entry is not (the entry's rest again is the mirror)", trader,
			[]events.Event{evacct.BracketSet{Bracket: pending}, evacct.OrderCanceled{BrokerOrderID: "e1", Reason: "replaced"},
				evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: "e2", BracketID: "b1"}}},
			pending, nil, nil},
		{"a provider bracket waiting on its entry is not", trader,
			[]events.Event{evacct.BracketSet{Bracket: pending}}, pending, nil, nil},
		{"arming on a fill is not", trader,
			[]events.Event{evacct.OrderFilled{BrokerOrderID: "e1", Quantity: dec("4")}, evacct.BracketSet{Bracket: armedBracket()},
				evacct.OrderPlaced{Order: leg("l0", "l0")}},
			armedBracket(), nil, nil},
		{"a record naming no moved leg is not", trader,
			[]events.Event{evacct.BracketSet{Bracket: armedBracket()}}, armedBracket(), nil, nil},
		{"a withdrawal", trader,
			[]events.Event{evacct.BracketEnd{BracketID: "b1", Reason: "withdrawn"}, evacct.OrderCanceled{BrokerOrderID: "l0", Reason: "bracket_withdrawn"}},
			evacct.Bracket{}, []string{"withdraw_bracket:b1"}, []string{"b1"}},
		{"a provider's withdrawal, recorded once its legs are gone", events.Principal{System: "provider"},
			[]events.Event{evacct.BracketEnd{BracketID: "b1", Reason: "withdrawn"}},
			evacct.Bracket{}, []string{"withdraw_bracket:b1"}, []string{"b1"}},
		{"a withdrawal resting the entry again is not (its cancel and placement are)", trader,
			[]events.Event{evacct.BracketEnd{BracketID: "b1", Reason: "withdrawn"}, evacct.OrderCanceled{BrokerOrderID: "e1", Reason: "replaced"},
				evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: "e2"}}},
			evacct.Bracket{}, nil, []string{"b1"}},
		{"a stop filled ends the bracket: no action", events.Principal{System: "paper"},
			[]events.Event{evacct.OrderFilled{BrokerOrderID: "l0", Quantity: dec("4")}, evacct.BracketEnd{BracketID: "b1", Reason: "stop_filled"}},
			evacct.Bracket{}, nil, []string{"b1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acts, ended := copier.BracketActions(events.Commit{Principal: tc.principal, Events: tc.evs}, active(tc.after))
			if got := actionsText(acts); !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(ended, tc.ended) {
				t.Fatalf("actions %v ended %v, want %v ended %v", got, ended, tc.want, tc.ended)
			}
		})
	}
}

// Entries names each bracket action's leader order from the leader's
// commits alone, in order: the same on a replay of them.
func TestEntries(t *testing.T) {
	place := func(id, bracket string) copier.LeaderAction {
		return copier.LeaderAction{Op: evcopier.OpPlace, OrderID: id, Order: evacct.Order{BrokerOrderID: id, BracketID: bracket},
			Exit: &copier.Exit{PlanID: "p1"}}
	}
	change := copier.LeaderAction{Op: evcopier.OpChangeBracket, BracketID: "b1"}
	withdraw := copier.LeaderAction{Op: evcopier.OpWithdrawBracket, BracketID: "b1"}
	commits := []struct {
		acts  []copier.LeaderAction
		ended []string
		want  []string
	}{
		{[]copier.LeaderAction{{Op: evcopier.OpChangeBracket, BracketID: "b0"}}, nil, nil}, // opened before: dropped
		{[]copier.LeaderAction{place("e1", "b1")}, nil, []string{"place:e1"}},
		{[]copier.LeaderAction{change}, nil, []string{"change_bracket:e1"}},
		{[]copier.LeaderAction{{Op: evcopier.OpCancel, OrderID: "e1"}, place("e2", "b1")}, nil, []string{"cancel:e1", "place:e2"}}, // rests again
		{[]copier.LeaderAction{change, withdraw}, []string{"b1"}, []string{"change_bracket:e2", "withdraw_bracket:e2"}},
		{[]copier.LeaderAction{change}, nil, nil}, // ended: forgotten
	}
	run := func() [][]string {
		m := copier.Entries{}
		var out [][]string
		for _, c := range commits {
			var got []string
			for _, a := range m.Resolve(append([]copier.LeaderAction(nil), c.acts...), c.ended) {
				got = append(got, a.Op+":"+a.OrderID)
			}
			out = append(out, got)
		}
		return out
	}
	live := run()
	for i, c := range commits {
		if !reflect.DeepEqual(live[i], c.want) {
			t.Fatalf("commit %d: %v, want %v", i, live[i], c.want)
		}
	}
	if replay := run(); !reflect.DeepEqual(replay, live) {
		t.Fatalf("replay %v, live %v", replay, live)
	}
}

// A follower's bracket takes the leader's moved levels on its legs of the
// same kind and place in the ladder, at the same prices; what it cannot
// take is skipped with a reason, never guessed.
func TestFollowerBracket(t *testing.T) {
	same := evcopier.Follower{AccountID: "f1", Direction: evcopier.DirectionSame, Enabled: true}
	inverse := same
	inverse.Direction = evcopier.DirectionInverse
	// The follower's bracket: its own ids, entered at 101, one target only
	// (its lot rounded the second away).
	fb := evacct.Bracket{ID: "fb", Instrument: "ES", Side: "long", EntryPrice: dec("101"), ClientOrderID: "cp-1",
		Legs: []evacct.BracketLeg{
			{ID: "f0", Kind: evacct.LegStop, State: evacct.LegWorking, Price: decp("96")},
			{ID: "f1", Kind: evacct.LegTarget, State: evacct.LegWorking, Price: decp("105")},
			{ID: "f2", Kind: evacct.LegRunner, State: evacct.LegWorking},
		}}
	targetFilled := fb
	targetFilled.Legs = append([]evacct.BracketLeg(nil), fb.Legs...)
	targetFilled.Legs[1].State = evacct.LegFilled
	change := func(legs ...copier.LegLevel) copier.LeaderAction {
		return copier.LeaderAction{Op: evcopier.OpChangeBracket, OrderID: "e1", BracketID: "b1", Legs: legs}
	}
	stop := func(p string) copier.LegLevel { return copier.LegLevel{Kind: evacct.LegStop, N: 0, Price: dec(p)} }
	target := func(n int, p string) copier.LegLevel {
		return copier.LegLevel{Kind: evacct.LegTarget, N: n, Price: dec(p)}
	}
	for _, tc := range []struct {
		name     string
		f        evcopier.Follower
		a        copier.LeaderAction
		mirrored bool
		fb       *evacct.Bracket
		want     copier.BracketMove
	}{
		{"the stop moved: the follower's stop to the same level", same, change(stop("97.5")), true, &fb,
			copier.BracketMove{Legs: []trading.LegPrice{{ID: "f0", Price: dec("97.5")}}}},
		{"stop and first target, matched by kind and place", same, change(stop("97"), target(0, "106")), true, &fb,
			copier.BracketMove{Legs: []trading.LegPrice{{ID: "f0", Price: dec("97")}, {ID: "f1", Price: dec("106")}}}},
		{"a target the follower's ladder lacks is left", same, change(stop("97"), target(1, "112")), true, &fb,
			copier.BracketMove{Legs: []trading.LegPrice{{ID: "f0", Price: dec("97")}}}},
		{"only legs it lacks or that ended: nothing sent", same, change(target(0, "106"), target(1, "112")), true, &targetFilled,
			copier.BracketMove{Code: commands.CodeNotFound, Reason: evcopier.ReasonLegsEnded}},
		{"a repeat finds its legs there: done, nothing sent", same, change(stop("96")), true, &fb, copier.BracketMove{Done: true}},
		{"an inverse follower: the levels are not translated", inverse, change(stop("97")), true, &fb,
			copier.BracketMove{Code: commands.CodeUnsupportedValue, Reason: evcopier.ReasonInverse}},
		{"an inverse follower's withdrawal neither", inverse, copier.LeaderAction{Op: evcopier.OpWithdrawBracket}, true, &fb,
			copier.BracketMove{Code: commands.CodeUnsupportedValue, Reason: evcopier.ReasonInverse}},
		{"a follower without the entry's mirror", same, change(stop("97")), false, nil,
			copier.BracketMove{Code: commands.CodeNotFound, Reason: evcopier.ReasonNotMirrored}},
		{"a follower whose bracket ended", same, change(stop("97")), true, nil,
			copier.BracketMove{Code: commands.CodeNotFound, Reason: evcopier.ReasonBracketEnded}},
		{"a withdrawal takes the whole bracket", same, copier.LeaderAction{Op: evcopier.OpWithdrawBracket}, true, &fb, copier.BracketMove{}},
		{"a withdrawal of one that ended sends nothing", same, copier.LeaderAction{Op: evcopier.OpWithdrawBracket}, true, nil,
			copier.BracketMove{Code: commands.CodeNotFound, Reason: evcopier.ReasonBracketEnded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := copier.FollowerBracket(tc.f, tc.a, tc.mirrored, tc.fb)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%+v, want %+v", got, tc.want)
			}
		})
	}
	t.Run("the mirror's bracket", func(t *testing.T) {
		const entry = "01M8XEYJHZH718SAKFHHKP9SA4" // the mirror's order: the id of the command that placed it
		opened := fb
		opened.ID, opened.ClientOrderID = entry+"-b0", ""
		waiting := fb
		waiting.ID, waiting.ClientOrderID, waiting.EntryOrderID = "w", "", "01M8XEYJHZH718SAKFHHKP9SA5"
		other := fb
		other.ID, other.ClientOrderID = "own", "mine-1"
		bs := map[string]*evacct.Bracket{"own": &other, "fb": &fb, opened.ID: &opened, "w": &waiting}
		for _, tc := range []struct{ coid, order, want string }{
			{"cp-1", "", "fb"},                          // keyed by the mirror's clientOrderId
			{"cp-9", entry, opened.ID},                  // opened by the mirror's placement, armed since
			{"cp-9", "01M8XEYJHZH718SAKFHHKP9SA5", "w"}, // waiting on the mirror's entry
			{"cp-2", "01M8XEYJHZH718SAKFHHKP9SA6", ""},  // none: it ended, or there was none
			{"cp-2", "not-a-ulid", ""},
		} {
			got := copier.MirrorBracket(bs, tc.coid, tc.order)
			if (got == nil) != (tc.want == "") || (got != nil && got.ID != tc.want) {
				t.Fatalf("%s %s: bracket %+v, want %q", tc.coid, tc.order, got, tc.want)
			}
		}
	})
}

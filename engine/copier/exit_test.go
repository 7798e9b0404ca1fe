package copier_test

import (
	"reflect"
	"testing"

	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/engine/copier"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// leaderBracket is a long bracket entered at 100 (tick 0.5): a stop at 95,
// targets at 104 (half) and 110 (a quarter), a runner, breakeven at 102
// moving the stop to 100.5, trailing 3 behind from 105.
func leaderBracket() evacct.Bracket {
	return evacct.Bracket{ID: "b1", State: evacct.BracketActive, Instrument: "ES", Side: "long", EntryOrderID: "e1",
		EntryPrice: dec("100"), Planned: dec("4"), Tick: dec("0.5"), Lot: dec("1"), PlanID: "p1", PlanRevision: "r1",
		Legs: []evacct.BracketLeg{
			{ID: "l0", Kind: evacct.LegStop, State: evacct.LegPreArmed, Price: decp("95"), Quantity: dec("4")},
			{ID: "l1", Kind: evacct.LegTarget, State: evacct.LegPreArmed, Price: decp("104"), Quantity: dec("2"), Share: decp("0.5")},
			{ID: "l2", Kind: evacct.LegTarget, State: evacct.LegPreArmed, Price: decp("110"), Quantity: dec("1"), Share: decp("0.25")},
			{ID: "l3", Kind: evacct.LegRunner, State: evacct.LegPreArmed, Quantity: dec("1")},
		},
		Breakeven: &evacct.Breakeven{Trigger: dec("102"), StopPrice: dec("100.5")},
		Trailing:  &evacct.Trailing{Activation: decp("105"), Distance: dec("3")},
	}
}

type pricedLeg struct{ kind, price, qty string }

func priced(l plancmd.Ladder) []pricedLeg {
	var out []pricedLeg
	for _, lg := range l.Legs {
		p := ""
		if lg.Price != nil {
			p = lg.Price.String()
		}
		out = append(out, pricedLeg{lg.Kind, p, lg.Quantity.String()})
	}
	return out
}

// The follower's plan, priced at the follower's own entry, side and size,
// sits as far from its entry as the leader's bracket from the leader's.
func TestFollowerPlan(t *testing.T) {
	spec := copier.FollowerPlan(leaderBracket())
	for _, tc := range []struct {
		name       string
		side       string
		entry, qty string
		tick       string
		want       []pricedLeg
		be         [2]string // trigger, stop
		trailAt    string
	}{
		{"same side and size: the leader's levels", "buy", "100", "4", "0.5",
			[]pricedLeg{{"stop", "95", "4"}, {"target", "104", "2"}, {"target", "110", "1"}, {"runner", "", "1"}}, [2]string{"102", "100.5"}, "105"},
		{"sized to the follower: each target its share, rounded down to the lot", "buy", "100", "2", "0.5",
			[]pricedLeg{{"stop", "95", "2"}, {"target", "104", "1"}, {"runner", "", "1"}}, [2]string{"102", "100.5"}, "105"},
		{"the follower's entry moves every level with it", "buy", "101.5", "4", "0.5",
			[]pricedLeg{{"stop", "96.5", "4"}, {"target", "105.5", "2"}, {"target", "111.5", "1"}, {"runner", "", "1"}}, [2]string{"103.5", "102"}, "106.5"},
		{"inverse: a short, its stop above and targets below", "sell", "100", "4", "0.5",
			[]pricedLeg{{"stop", "105", "4"}, {"target", "96", "2"}, {"target", "90", "1"}, {"runner", "", "1"}}, [2]string{"98", "99.5"}, "95"},
		{"a finer tick keeps the distances", "buy", "100", "4", "0.25",
			[]pricedLeg{{"stop", "95", "4"}, {"target", "104", "2"}, {"target", "110", "1"}, {"runner", "", "1"}}, [2]string{"102", "100.25"}, "105"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := plancmd.Price(spec, dec(tc.tick), dec("1"), tc.side, dec(tc.entry), dec(tc.qty))
			if got := priced(l); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("legs %v, want %v", got, tc.want)
			}
			if l.Breakeven == nil || l.Breakeven.Trigger.String() != tc.be[0] || l.Breakeven.StopPrice.String() != tc.be[1] {
				t.Fatalf("breakeven %+v, want %v", l.Breakeven, tc.be)
			}
			if l.Trailing == nil || l.Trailing.Activation == nil || l.Trailing.Activation.String() != tc.trailAt || l.Trailing.Distance.String() != "3" {
				t.Fatalf("trailing %+v", l.Trailing)
			}
		})
	}

	t.Run("a short leader's breakeven is in its favour, below the entry", func(t *testing.T) {
		b := evacct.Bracket{Side: "short", EntryPrice: dec("100"), Tick: dec("0.5"),
			Legs:      []evacct.BracketLeg{{Kind: evacct.LegStop, Price: decp("103")}},
			Breakeven: &evacct.Breakeven{Trigger: dec("97"), StopPrice: dec("99")}}
		s := copier.FollowerPlan(b)
		if s.Breakeven == nil || s.Breakeven.PlusTicks != 2 || s.Stop == nil || s.Stop.Offset.String() != "3" {
			t.Fatalf("plan %+v", s)
		}
	})
	t.Run("a bracket without rules has none", func(t *testing.T) {
		s := copier.FollowerPlan(evacct.Bracket{Side: "long", EntryPrice: dec("10"), Tick: dec("1"),
			Legs: []evacct.BracketLeg{{Kind: evacct.LegTarget, Price: decp("12"), Share: decp("1")}}})
		if s.Stop != nil || s.Breakeven != nil || s.Trailing != nil || s.Runner || len(s.Targets) != 1 {
			t.Fatalf("plan %+v", s)
		}
		if _, changed := copier.Unmanaged(s); changed {
			t.Fatal("a plan without breakeven or trailing was changed")
		}
	})
	t.Run("unmanaged: the stop, targets and runner without the rules", func(t *testing.T) {
		u, changed := copier.Unmanaged(spec)
		if !changed || u.Breakeven != nil || u.Trailing != nil || u.Stop == nil || len(u.Targets) != 2 || !u.Runner {
			t.Fatalf("unmanaged %+v", u)
		}
		if spec.Breakeven == nil {
			t.Fatal("Unmanaged changed the plan it was given")
		}
		if !reflect.DeepEqual(evplan.Requires(u), []string{evplan.StopLoss, evplan.TakeProfit, evplan.MultipleTargets, evplan.RunnerLeg}) {
			t.Fatalf("requires %v", evplan.Requires(u))
		}
	})
}

// An exit plan's entry is mirrored with the plan its bracket gives; the
// bracket's legs, their changes and its own cancels of them are not.
func TestActionsOfBrackets(t *testing.T) {
	b := leaderBracket()
	entry := evacct.Order{BrokerOrderID: "e1", Instrument: "ES", Side: "buy", OrderType: "market", Quantity: dec("4"), BracketID: "b1"}
	armed := b
	armed.Legs = append([]evacct.BracketLeg(nil), b.Legs...)
	armed.Legs[0].State = evacct.LegWorking
	stopLeg := evacct.Order{BrokerOrderID: "l0", Instrument: "ES", Side: "sell", OrderType: "stop", Quantity: dec("4"), StopPrice: decp("95"),
		ReduceOnly: true, BracketID: "b1"}
	none := func(string) events.Decimal { return events.Int(0) }
	for _, tc := range []struct {
		name    string
		evs     []events.Event
		bracket func(string) *evacct.Bracket
		want    []string
		exit    bool
	}{
		{"a paper entry with its bracket and its legs armed on the fill", []events.Event{evacct.BracketSet{Bracket: b}, evacct.OrderPlaced{Order: entry},
			evacct.OrderFilled{BrokerOrderID: "e1", Quantity: dec("4")}, evacct.BracketSet{Bracket: armed}, evacct.OrderPlaced{Order: stopLeg}},
			nil, []string{"place:e1"}, true},
		{"a provider's entry accepted: its bracket from the account", []events.Event{evacct.OrderPlaced{Order: entry}},
			func(id string) *evacct.Bracket {
				if id == "b1" {
					return &b
				}
				return nil
			}, []string{"place:e1"}, true},
		{"an entry whose bracket is gone goes plain", []events.Event{evacct.OrderPlaced{Order: entry}}, func(string) *evacct.Bracket { return nil },
			[]string{"place:e1"}, false},
		{"a leg armed later is not mirrored", []events.Event{evacct.OrderPlaced{Order: stopLeg}}, nil, nil, false},
		{"one-cancels-other is not mirrored", []events.Event{evacct.OrderCanceled{BrokerOrderID: "l1", Reason: "bracket_oco"},
			evacct.OrderCanceled{BrokerOrderID: "l0", Reason: "bracket_stop_filled"}}, nil, nil, false},
		{"a change of a leg's level is not mirrored", []events.Event{evacct.BracketSet{Bracket: armed},
			evacct.OrderReplaced{BrokerOrderID: "l0", Quantity: dec("4"), StopPrice: decp("96")}}, nil, nil, false},
		{"a requested cancel of the entry is", []events.Event{evacct.OrderCanceled{BrokerOrderID: "e1", Reason: "requested"}}, nil,
			[]string{"cancel:e1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			exit := false
			for _, a := range copier.Actions(tc.evs, none, tc.bracket) {
				got = append(got, a.Op+":"+a.OrderID)
				if a.Exit != nil {
					exit = true
					if a.Exit.PlanID != "p1" || a.Exit.PlanRevision != "r1" || a.Exit.Entry.Cmp(dec("100")) != 0 ||
						!reflect.DeepEqual(a.Exit.Spec, copier.FollowerPlan(b)) {
						t.Fatalf("exit %+v", a.Exit)
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) || exit != tc.exit {
				t.Fatalf("actions %v (exit plan %v), want %v (%v)", got, exit, tc.want, tc.exit)
			}
		})
	}
}

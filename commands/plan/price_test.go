package plan_test

import (
	"testing"

	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/events"
	evplan "github.com/svc/engine/events/plan"
)

func d(s string) events.Decimal {
	v, err := events.ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return v
}

func TestPriceLadder(t *testing.T) {
	off := d("3.3")
	s := evplan.Spec{Name: "x", Stop: &evplan.Distance{Ticks: 20}, Runner: true, Targets: []evplan.Target{
		{Distance: evplan.Distance{Ticks: 10}, Share: d("0.5")}, {Distance: evplan.Distance{Offset: &off}, Share: d("0.3")}}}
	// A long entry at 100.25 with tick 0.5 and lot 0.1: the stop 10 below, targets 5 and 3.5 above (3.3 rounds to the tick).
	legs, warns := ladder(plancmd.Price(s, d("0.5"), d("0.1"), "buy", d("100.25"), d("1.5")))
	want := []struct{ kind, price, qty string }{{"stop", "90.5", "1.5"}, {"target", "105.5", "0.7"}, {"target", "103.5", "0.4"}, {"runner", "", "0.4"}}
	if len(legs) != len(want) || len(warns) != 0 {
		t.Fatalf("legs %+v warnings %+v", legs, warns)
	}
	for i, w := range want {
		l := legs[i]
		px := ""
		if l.Price != nil {
			px = l.Price.String()
		}
		if l.Kind != w.kind || px != w.price || l.Quantity.String() != w.qty {
			t.Errorf("leg %d = %s %s %s, want %s %s %s", i, l.Kind, px, l.Quantity, w.kind, w.price, w.qty)
		}
	}
	// A short mirrors it: the stop above, the targets below.
	legs, _ = ladder(plancmd.Price(s, d("0.5"), d("0.1"), "sell", d("100"), d("1")))
	if legs[0].Price.Cmp(d("110")) != 0 || legs[1].Price.Cmp(d("95")) != 0 {
		t.Fatalf("short %v %v", legs[0].Price, legs[1].Price)
	}
	// A share that rounds to nothing at the lot step is left unplaced, with the warning.
	legs, warns = ladder(plancmd.Price(s, d("0.5"), d("1"), "buy", d("100"), d("1")))
	if len(warns) != 2 || warns[0].Code != "exit_plan_remainder_unplaced" {
		t.Fatalf("warnings %+v legs %+v", warns, legs)
	}
}

func ladder(l plancmd.Ladder) ([]plancmd.Leg, []plancmd.Warning) { return l.Legs, l.Warnings }

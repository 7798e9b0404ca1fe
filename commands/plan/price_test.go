package plan_test

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/apd/v3"

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

// textSteps is the rounding as it was first written, through the text of
// the quotient: the oracle Steps and Floor must agree with.
func textSteps(x, step events.Decimal, rounding apd.Rounder) events.Decimal {
	q := x.Quo(step)
	var z apd.Decimal
	c := events.Ctx
	c.Rounding = rounding
	_, _ = c.RoundToIntegralValue(&z, q.Apd())
	r, _ := events.ParseDecimal(z.Text('f'))
	return r.Mul(step).Quo(events.Int(1))
}

// Steps and Floor round to a step without the text round trip, to the
// same values and the same text (no trailing zeros), over prices and
// steps of every shape the engine meets.
func TestStepsAgreeWithTheTextRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	steps := []string{"0.5", "0.25", "0.01", "1", "5", "0.00000001", "0.1", "12.5", "0.0005"}
	for i := range 20000 {
		step := d(steps[i%len(steps)])
		// A price of up to 10 decimals, from -40,000 to 160,000, built from integers.
		scale := int32(r.IntN(10))
		whole := r.Int64N(200000) - 40000
		x := d(apd.New(whole*pow10(scale)+r.Int64N(pow10(scale)), -scale).Text('f'))
		if got, want := plancmd.Steps(x, step), textSteps(x, step, apd.RoundHalfUp); got.Cmp(want) != 0 || got.String() != want.String() {
			t.Fatalf("Steps(%s, %s) = %s, want %s", x, step, got, want)
		}
		if got, want := plancmd.Floor(x, step), textSteps(x, step, apd.RoundFloor); got.Cmp(want) != 0 || got.String() != want.String() {
			t.Fatalf("Floor(%s, %s) = %s, want %s", x, step, got, want)
		}
	}
	for _, c := range []struct{ x, step, steps, floor string }{
		{"59980.25", "0.5", "59980.5", "59980"}, {"100.75", "0.5", "101", "100.5"}, {"-100.25", "0.5", "-100.5", "-100.5"},
		{"0.3", "0.1", "0.3", "0.3"}, {"59980.0", "1", "59980", "59980"}, {"0", "0.25", "0", "0"},
	} {
		if got := plancmd.Steps(d(c.x), d(c.step)).String(); got != c.steps {
			t.Errorf("Steps(%s, %s) = %s, want %s", c.x, c.step, got, c.steps)
		}
		if got := plancmd.Floor(d(c.x), d(c.step)).String(); got != c.floor {
			t.Errorf("Floor(%s, %s) = %s, want %s", c.x, c.step, got, c.floor)
		}
	}
}

func pow10(n int32) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

func BenchmarkSteps(b *testing.B) {
	x, step := d("64123.37"), d("0.5")
	for b.Loop() {
		_ = plancmd.Steps(x, step)
	}
}

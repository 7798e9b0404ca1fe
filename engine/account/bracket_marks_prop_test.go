package account_test

import (
	"math/rand/v2"
	"testing"

	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// Property, the algebra the marks design rests on
// (docs/decisions.md, "Marks"): breakeven and trailing
// moved at every touch of a path leave a bracket's stop exactly where one
// move at the path's best touch (the highest bid for a long, the lowest ask
// for a short) leaves it. So a stop's level can be derived from the level
// stored at an anchor and the best touch since it, with nothing recorded
// for each move.
func TestPropertyStopLevelDependsOnlyOnTheBestTouch(t *testing.T) {
	tick := dec("0.5")
	checked, moved := 0, 0
	for seed := range 2000 {
		rng := rand.New(rand.NewPCG(uint64(seed), 14))
		spec := randomPlan(rng)
		side, bside := "buy", "long"
		if rng.IntN(2) == 0 {
			side, bside = "sell", "short"
		}
		entry := tick.Mul(events.Int(int64(2000 + rng.IntN(400))))
		ladder := plancmd.Price(spec, tick, dec("0.01"), side, entry, dec("1"))
		var stop *events.Decimal
		for _, l := range ladder.Legs {
			if l.Kind == evacct.LegStop {
				stop = l.Price
			}
		}
		if stop == nil || (ladder.Breakeven == nil && ladder.Trailing == nil) {
			continue
		}
		fresh := func() *evacct.Bracket {
			b := &evacct.Bracket{ID: "b", State: evacct.BracketActive, Side: bside, Tick: tick, EntryPrice: entry,
				Legs: []evacct.BracketLeg{{ID: "s", Kind: evacct.LegStop, State: evacct.LegWorking, Price: stop}}}
			if ladder.Breakeven != nil {
				be := *ladder.Breakeven
				b.Breakeven = &be
			}
			if ladder.Trailing != nil {
				tr := *ladder.Trailing
				b.Trailing = &tr
			}
			return b
		}
		// A walk of touches from the entry, in ticks, with a drift either way.
		steps, drift := 1+rng.IntN(60), rng.IntN(3)-1
		touch, best := entry, entry
		seq := fresh()
		for i := range steps {
			touch = touch.Add(tick.Mul(events.Int(int64(rng.IntN(9) - 4 + drift))))
			if i == 0 || (bside == "long" && touch.Cmp(best) > 0) || (bside == "short" && touch.Cmp(best) < 0) {
				best = touch
			}
			move(seq, touch)
		}
		once := fresh()
		move(once, best)
		checked++
		if seq.Legs[0].Price.Cmp(*stop) != 0 {
			moved++
		}
		if got, want := *once.Legs[0].Price, *seq.Legs[0].Price; got.Cmp(want) != 0 {
			t.Fatalf("seed %d, %s %s from %s (stop %s): moved at every touch the stop is %s, at the best touch %s alone %s",
				seed, bside, planString(spec), entry, stop, want, best, got)
		}
	}
	if checked < 500 || moved < checked/4 {
		t.Fatalf("the paths miss the rules: %d brackets checked, %d stops moved", checked, moved)
	}
	t.Logf("%d brackets, %d stops moved", checked, moved)
}

// move applies breakeven and trailing at touch, as the account's decision does.
func move(b *evacct.Bracket, touch events.Decimal) {
	level, best, be, trail := account.MoveTo(b, touch)
	if be {
		b.Breakeven.Done = true
	}
	if trail {
		b.Trailing.Active, b.Trailing.Best = true, &best
	}
	if be || trail {
		b.Legs[0].Price = &level
	}
}

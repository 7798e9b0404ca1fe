package account_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	plancmd "github.com/svc/engine/commands/plan"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/events/mark"
	evplan "github.com/svc/engine/events/plan"
)

// Property: in random interleavings of quotes (a walk on BTC-PERP's tick,
// sent as the paper book's FillWorking), entries carrying random exit plans,
// plain orders, cancels of any working order (legs and entries included),
// protections, leg changes, withdrawals, whole and partial closes, flattens
// and firm halts:
//  1. a leg's fill never takes its position through zero nor adds to it;
//  2. an active bracket arms no more than it planned, its targets rest no
//     more than it armed, its stop no more than the targets left; each
//     working leg rests as a reduce-only order carrying it, at the leg's
//     price and remaining quantity; pre_armed legs wait on the bracket's
//     entry, which is working; an armed bracket's position is open on its side;
//  3. breakeven and trailing never move a stop against its position;
//  4. every working order carrying a bracket is its entry or a working leg
//     of an active bracket;
//  5. every bracket a decision with the marks records (a quote's, a
//     market's, a Rebase) is anchored at the newest mark of the deciding
//     node (the account moves to another node half way);
//
// and the log replays to the live state, brackets included.
func TestPropertyBracketsNeverOvershoot(t *testing.T) {
	runs, steps := 200, 60
	if testing.Short() {
		runs = 40
	}
	var sum bracketTally
	for seed := range runs {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { sum.add(bracketRun(t, uint64(seed), steps)) })
	}
	t.Logf("%d runs, %d commands (%d refused): %d brackets armed, %d stops filled, %d targets filled, %d trailing moves, %d breakeven moves",
		runs, sum.commands, sum.refused, sum.armed, sum.stops, sum.targets, sum.trails, sum.breakevens)
	if sum.armed == 0 || sum.stops == 0 || sum.targets == 0 || sum.trails == 0 || sum.breakevens == 0 {
		t.Fatalf("the interleavings miss a path: %+v", sum)
	}
}

// bracketTally counts what one run exercised.
type bracketTally struct{ commands, refused, armed, stops, targets, trails, breakevens int }

func (a *bracketTally) add(b bracketTally) {
	a.commands, a.refused, a.armed = a.commands+b.commands, a.refused+b.refused, a.armed+b.armed
	a.stops, a.targets, a.trails, a.breakevens = a.stops+b.stops, a.targets+b.targets, a.trails+b.trails, a.breakevens+b.breakevens
}

// stopSnap is a bracket's stop and rules before a step.
type stopSnap struct {
	stop   *events.Decimal // the working stop leg's price; nil without one
	best   *events.Decimal
	beDone bool
}

// bracketRun plays one interleaving through a Replay and checks the
// properties after every command.
func bracketRun(t *testing.T, seed uint64, steps int) (n bracketTally) {
	rng := rand.New(rand.NewPCG(seed, 23))
	refused := false
	r := enginetest.NewReplay(t, enginetest.Core[*account.State]{
		New: func() *account.State { return account.New("a1") },
		Decide: func(s *account.State, env commands.Envelope) ([]events.Event, error) {
			evs, err := account.Decide(s, env)
			var ref *commands.Refusal
			if refused = errors.As(err, &ref); refused {
				return nil, nil // a refusal records nothing
			}
			return evs, err
		},
		Apply:    account.Apply,
		Registry: account.Registry(),
	})
	tick, lot := dec("0.5"), dec("0.1")
	bid := dec("100")
	// The paper book's marks: each quote sent, and now and then quotes the
	// account was not woken for (other accounts' moves), numbered as the
	// reactor does; half way through the account moves to another node,
	// whose marks it is rebased into (a Rebase, as the engine sends).
	node := ""
	stacks := map[string]*mark.Stack{"": {Instrument: "BTC-PERP"}, "n2": {Instrument: "BTC-PERP", Node: "n2"}}
	markAt := func(b events.Decimal) {
		s := stacks[node]
		ask := b.Add(tick)
		stacks[node] = s.Push(s.N+1, &b, &ask)
	}
	market := func() trading.Market {
		m := tmkt(bid.String(), bid.Add(tick).String())
		q := m.Quotes["BTC-PERP"]
		q.Marks = stacks[node]
		m.Quotes["BTC-PERP"] = q
		return m
	}
	ticks := func(k int) events.Decimal { return tick.Mul(events.Int(int64(k))) }
	lots := func(k int) events.Decimal { return lot.Mul(events.Int(int64(k))) }
	at := t0
	var trace []string
	step := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, step %d: %s\nthe steps:\n%s", seed, step, fmt.Sprintf(format, args...), strings.Join(trace, "\n"))
	}
	do := func(cmd commands.Command) []events.Event {
		t.Helper()
		if err := cmd.Validate(); err != nil {
			fail("%s does not validate: %v", describe(cmd), err)
		}
		n.commands++
		id := ulid.MustParse("01J00000000000000000000000")
		id[12], id[13], id[14], id[15] = byte(seed>>8), byte(seed), byte(n.commands>>8), byte(n.commands)
		at = at.Add(time.Second)
		evs := r.Do(commands.Envelope{ID: id, At: at, Key: fmt.Sprint("k", n.commands), Principal: events.Principal{TenantID: "t", KeyID: "key1"}, Cmd: cmd})
		line := fmt.Sprintf("%3d %s", n.commands, describe(cmd))
		if refused {
			n.refused++
			line += " (refused)"
		}
		trace = append(trace, line)
		return evs
	}
	do(&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("1000000")})
	armed := map[string]bool{}

	for step = 1; step <= steps; step++ {
		s := r.Live()
		legs := legOrders(s)
		stops := stopsOf(s)
		pos := s.Positions["BTC-PERP"].Quantity
		working := slices.Sorted(maps.Keys(s.Working))
		brackets := slices.Sorted(maps.Keys(s.Brackets))
		var cmd commands.Command
		switch k := rng.IntN(100); {
		case k < 45: // a quote: below, as the fallback of every other case
		case k < 57: // an entry with an exit plan
			spec := randomPlan(rng)
			if err := plancmd.Check(spec); err != nil {
				fail("the generated plan %s fails Check: %v", planString(spec), err)
			}
			side := []string{"buy", "sell"}[rng.IntN(2)]
			c := &trading.PlaceOrder{ClientOrderID: fmt.Sprint("e", step), Instrument: "BTC-PERP", Side: side, OrderType: "market",
				Quantity: lots(1 + rng.IntN(30)), TimeInForce: "gtc", Market: market()}
			touch := bid
			if side == "buy" {
				touch = bid.Add(tick)
			}
			entry := touch.Add(ticks(rng.IntN(9) - 4)) // the preview saw the market a few ticks away
			if rng.IntN(10) == 0 {
				entry = touch.Add(ticks(trading.DriftTicks + 1)) // or too far: refused
			}
			if rng.IntN(5) < 2 { // a limit entry, resting or marketable
				px := touch.Add(ticks(rng.IntN(12) - 10))
				if side == "sell" {
					px = touch.Sub(ticks(rng.IntN(12) - 10))
				}
				c.OrderType, c.LimitPrice, entry = "limit", &px, px
			}
			c.Bracket = &trading.BracketPlan{PlanID: "xp_1", PlanRevision: "rev_1", Spec: spec, Entry: entry}
			cmd = c
		case k < 63: // a plain order
			c := &trading.PlaceOrder{ClientOrderID: fmt.Sprint("o", step), Instrument: "BTC-PERP", Side: []string{"buy", "sell"}[rng.IntN(2)],
				OrderType: "market", Quantity: lots(1 + rng.IntN(30)), TimeInForce: "gtc", ReduceOnly: rng.IntN(5) == 0, Market: market()}
			if rng.IntN(2) == 0 {
				px := bid.Add(ticks(rng.IntN(17) - 8))
				c.OrderType, c.LimitPrice = "limit", &px
			}
			cmd = c
		case k < 70: // a cancel of any working order: a leg, an entry or a plain one
			if len(working) > 0 {
				cmd = &trading.CancelOrder{BrokerOrderID: working[rng.IntN(len(working))]}
			}
		case k < 76: // a protection of the position or of a resting order
			c := &trading.Protect{ClientOrderID: fmt.Sprint("p", step), PlanID: "xp_1", PlanRevision: "rev_1", Market: market()}
			spec := randomPlan(rng)
			c.Plan = &trading.BracketPlan{PlanID: "xp_1", PlanRevision: "rev_1", Spec: spec}
			if rng.IntN(2) == 0 || len(working) == 0 {
				c.Instrument = "BTC-PERP"
			} else {
				c.EntryOrderID = working[rng.IntN(len(working))]
			}
			cmd = c
		case k < 86: // a leg moved
			if len(brackets) > 0 {
				b := s.Brackets[brackets[rng.IntN(len(brackets))]]
				if len(b.Legs) > 0 { // a plan whose every share rounds to nothing at the lot step leaves none
					lg := b.Legs[rng.IntN(len(b.Legs))]
					px := bid.Add(ticks(rng.IntN(41) - 20)) // anywhere about the market,
					switch k := 1 + rng.IntN(4); {
					case rng.IntN(3) == 0 && lg.Price != nil: // nudged from where it rests,
						px = lg.Price.Add(ticks(rng.IntN(17) - 8))
					case rng.IntN(2) == 0: // or close behind the touch (a stop) or ahead of it (a target)
						if (b.Side == "long") == (lg.Kind == evacct.LegStop) {
							k = -k
						}
						px = bid.Add(ticks(k))
					}
					if px.Sign() <= 0 {
						px = tick
					}
					cmd = &trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: lg.ID, Price: px}}, Market: market()}
				}
			}
		case k < 89:
			if len(brackets) > 0 {
				cmd = &trading.WithdrawBracket{BracketID: brackets[rng.IntN(len(brackets))]}
			}
		case k < 95: // a close, whole or partial
			c := &trading.ClosePosition{Instrument: "BTC-PERP", Market: market()}
			if whole, _ := pos.Abs().Quo(lot).Int64(); whole > 1 && rng.IntN(2) == 0 {
				q := lots(1 + rng.IntN(int(whole)-1))
				c.Quantity = &q
			}
			cmd = c
		case k < 97:
			cmd = &trading.Flatten{Market: market()}
		case k < 98:
			cmd = &firmcmd.HaltAccount{}
		default:
			cmd = &firmcmd.ResumeAccount{}
		}
		if step == steps/2 {
			node = "n2"
			cmd = &trading.Rebase{Instrument: "BTC-PERP", Marks: stacks[node], Foreign: map[string]*mark.Stack{"": stacks[""]}}
		}
		fillWorking := cmd == nil
		if fillWorking { // the touch walks and the reactor sends it
			for range rng.IntN(3) {
				markAt(bid.Add(ticks(rng.IntN(13) - 6)))
			}
			bid = bid.Add(ticks(rng.IntN(9) - 4))
			if bid.Cmp(dec("50")) < 0 {
				bid = dec("50")
			}
			markAt(bid)
			fw := &trading.FillWorking{Quote: market().Quotes["BTC-PERP"]}
			// Now and then the reactor names stops an earlier quote traded
			// through (the quote it sends may have come back above them).
			for _, id := range working {
				if w := s.Working[id]; (w.OrderType == "stop" || w.OrderType == "stop_limit") && !w.Triggered && rng.IntN(4) == 0 {
					fw.TradedThrough = append(fw.TradedThrough, id)
				}
			}
			// Now and then the wake decides on the path of quotes since it
			// was queued (a few earlier touches, then this one): its best
			// bid and ask are the path's.
			if rng.IntN(3) == 0 {
				high, low := bid, bid.Add(tick)
				for range rng.IntN(6) {
					b := bid.Add(ticks(rng.IntN(17) - 8))
					fw.Quote.Path = append(fw.Quote.Path, trading.Touch{Bid: b, Ask: b.Add(tick)})
					if b.Cmp(high) > 0 {
						high = b
					}
					if a := b.Add(tick); a.Cmp(low) < 0 {
						low = a
					}
				}
				fw.Quote.Path = append(fw.Quote.Path, trading.Touch{Bid: bid, Ask: bid.Add(tick)})
				fw.Quote.HighBid, fw.Quote.LowAsk = &high, &low
				// Now and then the book no longer keeps the path's first
				// quotes: their best, where better than the rest's, comes
				// as each working stop's PathBest.
				if n := len(fw.Quote.Path); n > 2 && rng.IntN(2) == 0 {
					cut := 1 + rng.IntN(n-2)
					gone, kept := fw.Quote.Path[:cut], fw.Quote.Path[cut:]
					fw.Quote.Path = kept
					for _, id := range working {
						w := s.Working[id]
						if w.OrderType != "stop" || w.Triggered {
							continue
						}
						best := func(ts []trading.Touch) events.Decimal {
							b := ts[0].Bid
							if w.Side == "buy" {
								b = ts[0].Ask
							}
							for _, t := range ts {
								if w.Side == "sell" && t.Bid.Cmp(b) > 0 {
									b = t.Bid
								}
								if w.Side == "buy" && t.Ask.Cmp(b) < 0 {
									b = t.Ask
								}
							}
							return b
						}
						g, k := best(gone), best(kept)
						if (w.Side == "sell" && g.Cmp(k) > 0) || (w.Side == "buy" && g.Cmp(k) < 0) {
							if fw.Quote.PathBest == nil {
								fw.Quote.PathBest = map[string]events.Decimal{}
							}
							fw.Quote.PathBest[id] = g
						}
					}
				}
			}
			cmd = fw
		}
		evs := do(cmd)

		// 1. A leg's fill leaves its position on the same side or flat, never larger.
		for _, e := range evs {
			f, ok := e.(evacct.OrderFilled)
			if !ok {
				continue
			}
			if kind, isLeg := legs[f.BrokerOrderID]; isLeg {
				after := f.Position.Quantity
				if pos.IsZero() || (!after.IsZero() && after.Sign() != pos.Sign()) || after.Abs().Cmp(pos.Abs()) >= 0 {
					fail("the %s leg %s filled %s %s, taking the position from %s to %s", kind, f.BrokerOrderID, f.Side, f.Quantity, pos, after)
				}
				if kind == evacct.LegStop {
					n.stops++
				} else {
					n.targets++
				}
			}
			pos = f.Position.Quantity
		}
		// 3. Quotes move stops only in the position's favour; and the tally.
		for _, e := range evs {
			switch e := e.(type) {
			case evacct.BracketSet: // 5. a recorded bracket holds the marks so far
				if b := e.Bracket; carriesMarks(cmd) && (!b.Marked || b.MarkNode != node || b.Anchor != stacks[node].N) {
					fail("bracket %s recorded anchored at %d of %q (marked %v); the marks are at %d of %q", b.ID, b.Anchor, b.MarkNode, b.Marked, stacks[node].N, node)
				}
			}
		}
		for _, e := range evs {
			switch e := e.(type) {
			case evacct.OrderPlaced:
				if e.Order.BracketID != "" && e.Order.ReduceOnly && !armed[e.Order.BracketID] {
					armed[e.Order.BracketID] = true
					n.armed++
				}
			case evacct.BracketSet:
				b, was := e.Bracket, stops[e.Bracket.ID]
				if was == nil {
					continue
				}
				if b.Breakeven != nil && b.Breakeven.Done && !was.beDone {
					n.breakevens++
				}
				if b.Trailing != nil && b.Trailing.Best != nil && (was.best == nil || b.Trailing.Best.Cmp(*was.best) != 0) {
					n.trails++
				}
				st := leg(b, evacct.LegStop)
				if !fillWorking || was.stop == nil || st.State != evacct.LegWorking {
					continue
				}
				if d := st.Price.Cmp(*was.stop); (b.Side == "long" && d < 0) || (b.Side == "short" && d > 0) {
					fail("a quote moved the %s bracket %s's stop from %s to %s", b.Side, b.ID, was.stop, st.Price)
				}
			}
		}
		checkBrackets(r.Live(), fail)
		if step%20 == 0 {
			r.Check()
		}
	}
	r.Check()
	return n
}

// checkBrackets fails on any active bracket of s that rests more than it
// protects, a leg that is not what its order rests as, or a working order
// carrying a bracket that is not its entry or a working leg (2 and 4).
func checkBrackets(s *account.State, fail func(string, ...any)) {
	owner := map[string]string{} // order id -> bracket id, of entries and working legs
	for _, id := range slices.Sorted(maps.Keys(s.Brackets)) {
		b := s.Brackets[id]
		if b.State != evacct.BracketActive || b.Armed.Cmp(b.Planned) > 0 {
			fail("bracket %s is %s with %s armed of %s planned", id, b.State, b.Armed, b.Planned)
		}
		if b.EntryOrderID != "" {
			owner[b.EntryOrderID] = id
		}
		if p := s.Positions[b.Instrument].Quantity; b.Armed.Sign() > 0 && (p.IsZero() || (p.Sign() > 0) != (b.Side == "long")) {
			fail("bracket %s protects %s %s while the position is %s", id, b.Side, b.Armed, p)
		}
		resting, filled, stop := events.Int(0), events.Int(0), events.Int(0)
		for _, lg := range b.Legs {
			if lg.Kind == evacct.LegTarget {
				filled = filled.Add(lg.Filled)
			}
			switch {
			case lg.State == evacct.LegPreArmed:
				w, ok := s.Working[b.EntryOrderID]
				if b.EntryOrderID == "" || lg.ParentOrderID != b.EntryOrderID || !ok || w.BracketID != id {
					fail("pre_armed leg %s of bracket %s waits on %q; the bracket's entry is %q (working: %v)", lg.ID, id, lg.ParentOrderID, b.EntryOrderID, ok)
				}
			case lg.State == evacct.LegWorking && lg.Kind != evacct.LegRunner:
				w, ok := s.Working[lg.ID]
				if !ok || w.BracketID != id || !w.ReduceOnly || lg.ParentOrderID != "" {
					fail("working leg %s of bracket %s: order %+v (working: %v), parent %q", lg.ID, id, w, ok, lg.ParentOrderID)
				}
				owner[lg.ID] = id
				rest := w.Quantity.Sub(w.Filled)
				px := w.LimitPrice
				if lg.Kind == evacct.LegStop {
					px, stop = w.StopPrice, rest
				} else {
					resting = resting.Add(w.Quantity)
				}
				if px == nil || lg.Price == nil || px.Cmp(*lg.Price) != 0 || rest.Cmp(lg.Quantity.Sub(lg.Filled)) != 0 {
					fail("%s leg %s of bracket %s is %s at %v; its order rests %s at %v", lg.Kind, lg.ID, id, lg.Quantity.Sub(lg.Filled), lg.Price, rest, px)
				}
			}
		}
		if resting.Cmp(b.Armed) > 0 {
			fail("bracket %s's targets rest %s with %s armed", id, resting, b.Armed)
		}
		if stop.Cmp(b.Armed.Sub(filled)) > 0 {
			fail("bracket %s's stop rests %s with %s armed and %s closed by targets", id, stop, b.Armed, filled)
		}
	}
	for _, oid := range slices.Sorted(maps.Keys(s.Working)) {
		if w := s.Working[oid]; w.BracketID != "" && owner[oid] != w.BracketID {
			fail("working order %s carries bracket %s, which has it neither as entry nor as working leg (active: %v)", oid, w.BracketID, s.Brackets[w.BracketID] != nil)
		}
	}
}

// legOrders maps the order of every working stop or target leg to its kind.
func legOrders(s *account.State) map[string]string {
	out := map[string]string{}
	for _, b := range s.Brackets {
		for _, lg := range b.Legs {
			if lg.State == evacct.LegWorking && lg.Kind != evacct.LegRunner {
				out[lg.ID] = lg.Kind
			}
		}
	}
	return out
}

// stopsOf is every active bracket's stop and rules, by bracket id.
func stopsOf(s *account.State) map[string]*stopSnap {
	out := map[string]*stopSnap{}
	for id, b := range s.Brackets {
		sn := &stopSnap{}
		if st := leg(*b, evacct.LegStop); st.State == evacct.LegWorking && st.Price != nil {
			p := *st.Price
			sn.stop = &p
		}
		if b.Trailing != nil && b.Trailing.Best != nil {
			p := *b.Trailing.Best
			sn.best = &p
		}
		sn.beDone = b.Breakeven != nil && b.Breakeven.Done
		out[id] = sn
	}
	return out
}

// randomPlan is an exit plan that plan.Check accepts: a stop (ticks, or now
// and then an offset), 0 to 3 targets whose shares sum to 1, or to less with
// a runner, and optional breakeven and trailing rules.
func randomPlan(rng *rand.Rand) evplan.Spec {
	dist := func(max int) evplan.Distance {
		if rng.IntN(8) == 0 {
			o := dec("0.25").Mul(events.Int(int64(1 + rng.IntN(4*max)))) // off the tick: priced at the nearest
			return evplan.Distance{Offset: &o}
		}
		return evplan.Distance{Ticks: int64(1 + rng.IntN(max))}
	}
	s := evplan.Spec{Name: "random"}
	if rng.IntN(6) != 0 {
		d := dist(20)
		s.Stop = &d
	}
	if nt := rng.IntN(4); nt > 0 {
		total := 100 // in hundredths
		if rng.IntN(2) == 0 {
			total, s.Runner = nt+rng.IntN(100-nt), true
		}
		cuts := []int{0, total}
		for len(cuts) < nt+1 {
			if c := 1 + rng.IntN(total-1); !slices.Contains(cuts, c) {
				cuts = append(cuts, c)
			}
		}
		slices.Sort(cuts)
		for i := range nt {
			share := events.Int(int64(cuts[i+1] - cuts[i])).Quo(events.Int(100))
			s.Targets = append(s.Targets, evplan.Target{Distance: dist(16), Share: share})
		}
	}
	if s.Stop != nil && rng.IntN(3) != 0 {
		s.Breakeven = &evplan.Breakeven{Trigger: dist(10), PlusTicks: int64(rng.IntN(4))}
	}
	if rng.IntN(2) == 0 || (s.Stop == nil && len(s.Targets) == 0) {
		s.Trailing = &evplan.Trailing{Distance: dist(16)}
		if rng.IntN(3) != 0 {
			s.Trailing.Activation = dist(20)
		}
	}
	return s
}

func distString(d evplan.Distance) string {
	if d.Offset != nil {
		return "+" + d.Offset.String()
	}
	return fmt.Sprint(d.Ticks, "t")
}

func planString(s evplan.Spec) string {
	var out []string
	if s.Stop != nil {
		out = append(out, "stop "+distString(*s.Stop))
	}
	for _, tg := range s.Targets {
		out = append(out, "target "+distString(tg.Distance)+"×"+tg.Share.String())
	}
	if s.Runner {
		out = append(out, "runner")
	}
	if b := s.Breakeven; b != nil {
		out = append(out, fmt.Sprintf("breakeven at %s +%d", distString(b.Trigger), b.PlusTicks))
	}
	if tr := s.Trailing; tr != nil {
		out = append(out, fmt.Sprintf("trailing %s from %s", distString(tr.Distance), distString(tr.Activation)))
	}
	return "{" + strings.Join(out, ", ") + "}"
}

// describe is a command as one line of a failing run's steps.
func describe(c commands.Command) string {
	switch c := c.(type) {
	case *trading.FillWorking:
		out := fmt.Sprintf("quote %s/%s", c.Quote.Bid, c.Quote.Ask)
		if len(c.TradedThrough) > 0 {
			out += fmt.Sprintf(", traded through %v", c.TradedThrough)
		}
		if len(c.Quote.Path) > 0 {
			bids := make([]string, len(c.Quote.Path))
			for i, t := range c.Quote.Path {
				bids[i] = t.Bid.String()
			}
			out += ", bids since the last wake " + strings.Join(bids, " ")
		}
		return out
	case *trading.PlaceOrder:
		s := fmt.Sprintf("place %s %s %s %s", c.ClientOrderID, c.Side, c.OrderType, c.Quantity)
		if c.LimitPrice != nil {
			s += " @" + c.LimitPrice.String()
		}
		if c.ReduceOnly {
			s += " reduce-only"
		}
		if c.Bracket != nil {
			s += fmt.Sprintf(" plan %s previewed at %s", planString(c.Bracket.Spec), c.Bracket.Entry)
		}
		return s
	case *trading.CancelOrder:
		return "cancel " + c.BrokerOrderID
	case *trading.Protect:
		what := "position " + c.Instrument
		if c.EntryOrderID != "" {
			what = "entry " + c.EntryOrderID
		}
		return fmt.Sprintf("protect %s %s plan %s", c.ClientOrderID, what, planString(c.Plan.Spec))
	case *trading.ChangeBracket:
		return fmt.Sprintf("change %s leg %s to %s", c.BracketID, c.Legs[0].ID, c.Legs[0].Price)
	case *trading.WithdrawBracket:
		return "withdraw " + c.BracketID
	case *trading.ClosePosition:
		if c.Quantity != nil {
			return "close " + c.Quantity.String()
		}
		return "close all"
	case *trading.Flatten:
		return "flatten"
	}
	return fmt.Sprintf("%T", c)
}

// carriesMarks reports whether cmd hands its decision the paper book's marks.
func carriesMarks(cmd commands.Command) bool {
	switch cmd.(type) {
	case *trading.FillWorking, *trading.Rebase, *trading.PlaceOrder, *trading.ReplaceOrder, *trading.ClosePosition,
		*trading.Flatten, *trading.Reverse, *trading.Protect, *trading.ChangeBracket:
		return true
	}
	return false
}

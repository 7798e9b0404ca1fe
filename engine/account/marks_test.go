package account_test

import (
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/events/mark"
)

// stackOf is node's marks of BTC-PERP: empty up to mark n0, then one mark
// a bid (its ask half a point above), numbered on.
func stackOf(node string, n0 uint64, bids ...string) *mark.Stack {
	s := &mark.Stack{Instrument: "BTC-PERP", Node: node, N: n0}
	for _, b := range bids {
		bid := dec(b)
		ask := bid.Add(dec("0.5"))
		s = s.Push(s.N+1, &bid, &ask)
	}
	return s
}

func marked(m trading.Market, s *mark.Stack) trading.Market {
	q := m.Quotes["BTC-PERP"]
	q.Marks = s
	m.Quotes["BTC-PERP"] = q
	return m
}

// Brackets and the paper book's marks (events/mark): a decision that
// records a bracket anchors it at the newest mark it was handed, and first
// moves it where the marks since its anchor put it (one of this node's, or
// of the node it comes from), so its recorded level holds every mark up to
// its anchor; a trader's change is anchored where the trader set it.
func TestBracketsTakeInTheMarks(t *testing.T) {
	// A stop 20 ticks under the entry at 100.5 (90.5), breakeven at 104.5 to
	// 101, trailing 12 ticks from 108.5.
	plan := atm()
	plan.Targets, plan.Runner = nil, false
	a3 := stackOf("a", 3)        // node a, no mark since the entry
	a4 := stackOf("a", 3, "112") // a high of 112 since: the trailing rule puts the stop at 106
	entry := bracketed(buy("e1", "2", marked(tmkt("100", "100.5"), a3)), plan, "100.5")
	wake := func(s *mark.Stack, bid string) *trading.FillWorking {
		fw := quoteAt(bid, dec(bid).Add(dec("0.5")).String())
		fw.Quote.Marks = s
		return fw
	}
	anchoredAt := func(t *testing.T, b evacct.Bracket, node string, n uint64) {
		t.Helper()
		if !b.Marked || b.MarkNode != node || b.Anchor != n {
			t.Fatalf("bracket anchored at %d of %q (marked %v), want %d of %q", b.Anchor, b.MarkNode, b.Marked, n, node)
		}
	}
	cases := []struct {
		name  string
		given []commands.Command
		when  func(s *account.State) commands.Command
		check func(t *testing.T, evs []events.Event)
	}{
		{"a bracket opens anchored at the newest mark", nil,
			func(*account.State) commands.Command { return entry },
			func(t *testing.T, evs []events.Event) {
				anchoredAt(t, only[evacct.BracketSet](t, evs).Bracket, "a", 3)
			}},
		{"a wake moves it where the marks since its anchor put it", []commands.Command{entry},
			func(*account.State) commands.Command { return wake(a4, "107") }, // 107 alone: breakeven only
			func(t *testing.T, evs []events.Event) {
				b := only[evacct.BracketSet](t, evs).Bracket
				r := only[evacct.OrderReplaced](t, evs)
				if leg(b, "stop").Price.String() != "106" || r.StopPrice.String() != "106" || !b.Breakeven.Done || !b.Trailing.Active {
					t.Fatalf("bracket %+v replaced %+v", b, r)
				}
				anchoredAt(t, b, "a", 4)
			}},
		{"marks before its anchor move nothing", []commands.Command{bracketed(buy("e1", "2", marked(tmkt("100", "100.5"), a4)), plan, "100.5")},
			func(*account.State) commands.Command { return wake(a4, "100") },
			func(t *testing.T, evs []events.Event) {
				if n := count[evacct.OrderReplaced](evs); n != 0 {
					t.Fatalf("a mark from before the bracket moved it: %+v", evs)
				}
			}},
		{"a trader's change is anchored where the trader set it", []commands.Command{entry},
			func(s *account.State) commands.Command {
				for _, b := range s.Brackets {
					return &trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: leg(*b, "stop").ID, Price: dec("95")}},
						Market: marked(tmkt("110", "110.5"), a4)}
				}
				return nil
			},
			func(t *testing.T, evs []events.Event) {
				b := only[evacct.BracketSet](t, evs).Bracket
				if leg(b, "stop").Price.String() != "95" {
					t.Fatalf("the changed stop is at %s, want the trader's 95", leg(b, "stop").Price)
				}
				anchoredAt(t, b, "a", 4)
			}},
		{"a rebase onto another node first takes in the marks of the node it comes from", []commands.Command{entry},
			func(*account.State) commands.Command {
				return &trading.Rebase{Instrument: "BTC-PERP", Marks: stackOf("b", 7), Foreign: map[string]*mark.Stack{"a": a4}}
			},
			func(t *testing.T, evs []events.Event) {
				b := only[evacct.BracketSet](t, evs).Bracket
				if leg(b, "stop").Price.String() != "106" || only[evacct.OrderReplaced](t, evs).StopPrice.String() != "106" {
					t.Fatalf("bracket %+v", b)
				}
				anchoredAt(t, b, "b", 7)
			}},
		{"a short's stop follows the lowest ask of the marks", []commands.Command{bracketed(sell("s1", "2", marked(tmkt("100", "100.5"), a3)), plan, "100")},
			func(*account.State) commands.Command {
				// Asks of 88.5 and 90.5 since the entry at 100: the short's trailing rule
				// (12 ticks from 8 under the entry) puts its stop at 88.5 + 6 = 94.5.
				return wake(stackOf("a", 3, "88", "90"), "92")
			},
			func(t *testing.T, evs []events.Event) {
				b := only[evacct.BracketSet](t, evs).Bracket
				if b.Side != "short" || leg(b, "stop").Price.String() != "94.5" {
					t.Fatalf("short bracket %+v, stop %s", b, leg(b, "stop").Price)
				}
				anchoredAt(t, b, "a", 5)
			}},
		{"a rebase onto the node it is anchored at records nothing", []commands.Command{entry},
			func(*account.State) commands.Command {
				return &trading.Rebase{Instrument: "BTC-PERP", Marks: a4}
			},
			func(t *testing.T, evs []events.Event) {
				if len(evs) != 0 {
					t.Fatalf("events %+v", evs)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _, err := run(t, c.given, &trading.ExpireDayOrders{})
			if err != nil {
				t.Fatal(err)
			}
			_, evs, err := run(t, c.given, c.when(s))
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, evs)
		})
	}
}

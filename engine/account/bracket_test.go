package account_test

import (
	"net/http"
	"testing"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evplan "github.com/svc/engine/events/plan"
)

// tmkt quotes BTC-PERP at bid/ask with a tick of 0.5 and a lot step of 0.1.
func tmkt(bid, ask string) trading.Market {
	m := mkt(bid, ask)
	m.Specs["BTC-PERP"] = trading.Spec{Symbol: "BTC-PERP", Multiplier: dec("1"), MaxQuantity: dec("100"), TickSize: dec("0.5"), LotStep: dec("0.1")}
	return m
}

func quoteAt(bid, ask string) *trading.FillWorking {
	return &trading.FillWorking{Quote: tmkt(bid, ask).Quotes["BTC-PERP"]}
}

// bestAt is quoteAt with the highest bid since the account's last wake.
func bestAt(bid, ask, highBid string) *trading.FillWorking {
	q := quoteAt(bid, ask)
	h := dec(highBid)
	q.Quote.HighBid = &h
	return q
}

// pathAt is the wake of a quote whose bid walked bids (oldest first, the
// last is this quote's; each ask half a point above): HighBid is their best.
func pathAt(bids ...string) *trading.FillWorking {
	last := dec(bids[len(bids)-1])
	q := quoteAt(last.String(), last.Add(dec("0.5")).String())
	high := dec(bids[0])
	for _, b := range bids {
		d := dec(b)
		if d.Cmp(high) > 0 {
			high = d
		}
		q.Quote.Path = append(q.Quote.Path, trading.Touch{Bid: d, Ask: d.Add(dec("0.5"))})
	}
	q.Quote.HighBid = &high
	return q
}

// atm is a plan: stop 20 ticks, half at 10 ticks, a runner, breakeven at 8 ticks (+1), trailing 12 ticks from 16.
func atm() evplan.Spec {
	return evplan.Spec{Name: "atm", Stop: &evplan.Distance{Ticks: 20}, Runner: true,
		Targets:   []evplan.Target{{Distance: evplan.Distance{Ticks: 10}, Share: dec("0.5")}},
		Breakeven: &evplan.Breakeven{Trigger: evplan.Distance{Ticks: 8}, PlusTicks: 1},
		Trailing:  &evplan.Trailing{Activation: evplan.Distance{Ticks: 16}, Distance: evplan.Distance{Ticks: 12}}}
}

func planned(spec evplan.Spec, entry string) *trading.BracketPlan {
	return &trading.BracketPlan{PlanID: "xp_1", PlanRevision: "rev_1", Spec: spec, Entry: dec(entry)}
}

func bracketed(c *trading.PlaceOrder, spec evplan.Spec, entry string) *trading.PlaceOrder {
	c.Bracket = planned(spec, entry)
	return c
}

// only is the one event of type T in evs.
func only[T events.Event](t *testing.T, evs []events.Event) T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if x, ok := e.(T); ok {
			out = append(out, x)
		}
	}
	if len(out) != 1 {
		var z T
		t.Fatalf("want one %s in %+v, got %d", z.Type(), evs, len(out))
	}
	return out[0]
}

func count[T events.Event](evs []events.Event) int {
	n := 0
	for _, e := range evs {
		if _, ok := e.(T); ok {
			n++
		}
	}
	return n
}

func leg(b evacct.Bracket, kind string) evacct.BracketLeg {
	for _, l := range b.Legs {
		if l.Kind == kind {
			return l
		}
	}
	return evacct.BracketLeg{}
}

func apply(s *account.State, evs []events.Event) *account.State {
	for _, e := range evs {
		s = account.Apply(s, e)
	}
	return s
}

func TestMarketEntryArmsItsBracketInTheSameCommit(t *testing.T) {
	m := tmkt("100", "100.5")
	_, evs, err := run(t, nil, bracketed(buy("e1", "2", m), atm(), "100.5"))
	if err != nil {
		t.Fatal(err)
	}
	set := only[evacct.BracketSet](t, evs).Bracket
	if set.State != "active" || set.EntryOrderID != "" || set.Armed.Cmp(dec("2")) != 0 || set.Side != "long" {
		t.Fatalf("bracket %+v", set)
	}
	stop, target, runner := leg(set, "stop"), leg(set, "target"), leg(set, "runner")
	if stop.State != "working" || stop.Price.String() != "90.5" || stop.Quantity.Cmp(dec("2")) != 0 || stop.ParentOrderID != "" {
		t.Fatalf("stop %+v", stop)
	}
	if target.Price.String() != "105.5" || target.Quantity.Cmp(dec("1")) != 0 || runner.Quantity.Cmp(dec("1")) != 0 {
		t.Fatalf("target %+v runner %+v", target, runner)
	}
	if n := count[evacct.OrderPlaced](evs); n != 3 { // the entry, the stop, the target
		t.Fatalf("%d orders placed: %+v", n, evs)
	}
	if set.Breakeven.Trigger.String() != "104.5" || set.Breakeven.StopPrice.String() != "101" || set.Trailing.Activation.String() != "108.5" {
		t.Fatalf("rules %+v %+v", set.Breakeven, set.Trailing)
	}
}

func TestBracketTransitions(t *testing.T) {
	m := tmkt("100", "100.5")
	entry := bracketed(buy("e1", "2", m), atm(), "100.5")
	rest := bracketed(limit("e2", "buy", "2", "95", m), atm(), "95")
	cases := []struct {
		name  string
		given []commands.Command
		when  func(s *account.State) commands.Command
		check func(t *testing.T, s *account.State, evs []events.Event, err error)
	}{
		{"a resting entry holds its legs pre_armed", nil,
			func(*account.State) commands.Command { return rest },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				b := only[evacct.BracketSet](t, evs).Bracket
				o := only[evacct.OrderPlaced](t, evs).Order
				if b.EntryOrderID != o.BrokerOrderID || o.BracketID != b.ID || b.Armed.Sign() != 0 {
					t.Fatalf("bracket %+v entry %+v", b, o)
				}
				for _, l := range b.Legs {
					if l.State != "pre_armed" || l.ParentOrderID != o.BrokerOrderID {
						t.Fatalf("leg %+v", l)
					}
				}
			}},
		{"the entry's fill arms the legs and re-parents them", []commands.Command{rest},
			func(*account.State) commands.Command { return quoteAt("94", "95") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				b := only[evacct.BracketSet](t, evs).Bracket
				if b.EntryOrderID != "" || b.Armed.Cmp(dec("2")) != 0 || leg(b, "stop").State != "working" || leg(b, "stop").ParentOrderID != "" {
					t.Fatalf("bracket %+v", b)
				}
				if leg(b, "stop").Price.String() != "85" || count[evacct.OrderPlaced](evs) != 2 {
					t.Fatalf("legs %+v events %+v", b.Legs, evs)
				}
			}},
		{"a target's fill shrinks the stop in the same commit", []commands.Command{entry},
			func(*account.State) commands.Command { return quoteAt("105.5", "106") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				b := only[evacct.BracketSet](t, evs).Bracket
				r := only[evacct.OrderReplaced](t, evs)
				if leg(b, "target").State != "filled" || r.BrokerOrderID != leg(b, "stop").ID || r.Quantity.Cmp(dec("1")) != 0 {
					t.Fatalf("bracket %+v replaced %+v", b, r)
				}
				f := only[evacct.OrderFilled](t, evs)
				if f.Position.Quantity.Cmp(dec("1")) != 0 {
					t.Fatalf("position %+v", f.Position)
				}
			}},
		{"the stop's fill cancels the targets and ends the bracket", []commands.Command{entry},
			func(*account.State) commands.Command { return quoteAt("90", "90.5") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				e := only[evacct.BracketEnd](t, evs)
				c := only[evacct.OrderCanceled](t, evs)
				f := only[evacct.OrderFilled](t, evs)
				if e.Reason != "stop_filled" || !f.Position.Quantity.IsZero() || s.Working[c.BrokerOrderID].OrderType != "limit" {
					t.Fatalf("end %+v fill %+v cancel %+v", e, f, c)
				}
			}},
		{"breakeven moves the stop to entry plus its ticks once", []commands.Command{entry},
			func(*account.State) commands.Command { return quoteAt("104.5", "105") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				r := only[evacct.OrderReplaced](t, evs)
				b := only[evacct.BracketSet](t, evs).Bracket
				if r.StopPrice.String() != "101" || !b.Breakeven.Done || leg(b, "stop").Price.String() != "101" {
					t.Fatalf("replaced %+v bracket %+v", r, b)
				}
			}},
		{"a quote short of breakeven moves nothing", []commands.Command{entry},
			func(*account.State) commands.Command { return quoteAt("104", "104.5") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if len(evs) != 0 || err != nil {
					t.Fatalf("events %+v %v", evs, err)
				}
			}},
		{"trailing follows the best bid by its distance", []commands.Command{entry, quoteAt("104.5", "105")},
			func(*account.State) commands.Command { return quoteAt("109", "109.5") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				r := only[evacct.OrderReplaced](t, evs)
				b := only[evacct.BracketSet](t, evs).Bracket
				if r.StopPrice.String() != "103" || !b.Trailing.Active || b.Trailing.Best.String() != "109" {
					t.Fatalf("replaced %+v trailing %+v", r, b.Trailing)
				}
			}},
		{"trailing follows the best bid since the last wake, not only the quote's", []commands.Command{entry, quoteAt("104.5", "105")},
			func(*account.State) commands.Command { return bestAt("108", "108.5", "110") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				r := only[evacct.OrderReplaced](t, evs)
				b := only[evacct.BracketSet](t, evs).Bracket
				if r.StopPrice.String() != "104" || !b.Trailing.Active || b.Trailing.Best.String() != "110" {
					t.Fatalf("replaced %+v trailing %+v", r, b.Trailing)
				}
			}},
		{"a stop the quote crosses fills at the quote's bid, not the best", []commands.Command{entry, quoteAt("104.5", "105"), bestAt("108", "108.5", "110")},
			func(*account.State) commands.Command { return bestAt("103.5", "104", "106") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if f := only[evacct.OrderFilled](t, evs); f.Price.String() != "103.5" || only[evacct.BracketEnd](t, evs).Reason != "stop_filled" {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"a dip of the path through the level its rise had moved the stop to triggers it there, though the bid came back", []commands.Command{entry, quoteAt("104.5", "105")},
			func(*account.State) commands.Command { return pathAt("108", "110", "103.5", "108") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				// 110 moved the stop to 104 (12 ticks of 0.5 under it); 103.5 came after
				r, tr := only[evacct.OrderReplaced](t, evs), only[evacct.StopTriggered](t, evs)
				f := only[evacct.OrderFilled](t, evs)
				if r.StopPrice.String() != "104" || tr.Price.String() != "104" || f.Price.String() != "108" || only[evacct.BracketEnd](t, evs).Reason != "stop_filled" {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"a dip of the path before the rise that moved the stop triggers nothing", []commands.Command{entry, quoteAt("104.5", "105")},
			func(*account.State) commands.Command { return pathAt("103.5", "110", "105", "108") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				// 103.5 was above the stop of then (101); the stop ends at 104, as at the best
				// bid alone (the target at 105.5 fills at 108)
				if r := only[evacct.OrderReplaced](t, evs); r.StopPrice.String() != "104" || count[evacct.StopTriggered](evs) != 0 || leg(only[evacct.BracketSet](t, evs).Bracket, evacct.LegStop).State != evacct.LegWorking {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"a dip of the path before the stop was set where it rests triggers nothing", []commands.Command{entry, quoteAt("104.5", "105")},
			func(s *account.State) commands.Command {
				// the stop was set at 101 after the dip to 103.5 (say, a trader's
				// change while the wake waited): the walk starts after it
				fw := pathAt("108", "110", "103.5", "108")
				fw.Quote.PathFrom = map[string]int{leg(*s.Brackets[anyBracket(s)], evacct.LegStop).ID: 3}
				return fw
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if r := only[evacct.OrderReplaced](t, evs); r.StopPrice.String() != "104" || count[evacct.StopTriggered](evs) != 0 || count[evacct.BracketEnd](evs) != 0 {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"a high before the path the book still kept moves the stop before the walk, so the path's dip triggers it there", []commands.Command{entry, quoteAt("104.5", "105")},
			func(s *account.State) commands.Command {
				// the wake waited past the quotes the reactor keeps: its path
				// starts after the high of 110, which PathBest carries
				fw := pathAt("108", "103.5", "108")
				h := dec("110")
				fw.Quote.HighBid = &h
				fw.Quote.PathBest = map[string]events.Decimal{leg(*s.Brackets[anyBracket(s)], evacct.LegStop).ID: h}
				return fw
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				// 110 moved the stop to 104 before the path; 103.5 then went through it
				r, tr := only[evacct.OrderReplaced](t, evs), only[evacct.StopTriggered](t, evs)
				if r.StopPrice.String() != "104" || tr.Price.String() != "104" || only[evacct.BracketEnd](t, evs).Reason != "stop_filled" {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"trailing never moves the stop back", []commands.Command{entry, quoteAt("104.5", "105"), quoteAt("109", "109.5")},
			func(*account.State) commands.Command { return quoteAt("108", "108.5") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if len(evs) != 0 {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"withdrawing an armed bracket cancels its orders and keeps the position", []commands.Command{entry},
			func(s *account.State) commands.Command { return &trading.WithdrawBracket{BracketID: anyBracket(s)} },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if only[evacct.BracketEnd](t, evs).Reason != "withdrawn" || count[evacct.OrderCanceled](evs) != 2 || count[evacct.OrderFilled](evs) != 0 {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"withdrawing a bracket on a resting entry rests the entry again without it", []commands.Command{rest},
			func(s *account.State) commands.Command { return &trading.WithdrawBracket{BracketID: anyBracket(s)} },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				p := only[evacct.OrderPlaced](t, evs).Order
				c := only[evacct.OrderCanceled](t, evs)
				if p.BracketID != "" || p.ClientOrderID != "e2" || c.Reason != "replaced" || p.BrokerOrderID == c.BrokerOrderID || p.LimitPrice.String() != "95" {
					t.Fatalf("placed %+v canceled %+v", p, c)
				}
			}},
		{"a hold refuses the withdrawal that would re-rest an entry", []commands.Command{rest, &firmcmd.HaltAccount{}},
			func(s *account.State) commands.Command { return &trading.WithdrawBracket{BracketID: anyBracket(s)} },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				wantRefusal(t, err, evs, http.StatusLocked, "risk_locked", nil)
			}},
		{"a hold refuses a protection: it places orders", []commands.Command{buy("p1", "1", m), &firmcmd.HaltAccount{}},
			func(*account.State) commands.Command {
				return &trading.Protect{ClientOrderID: "pr1", Instrument: "BTC-PERP", Plan: planned(atm(), "0"), Market: tmkt("100", "100.5")}
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				wantRefusal(t, err, evs, http.StatusLocked, "risk_locked", nil)
			}},
		{"a hold leaves the withdrawal of an armed bracket: it only cancels", []commands.Command{entry, &firmcmd.HaltAccount{}},
			func(s *account.State) commands.Command { return &trading.WithdrawBracket{BracketID: anyBracket(s)} },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if only[evacct.BracketEnd](t, evs).Reason != "withdrawn" {
					t.Fatalf("events %+v %v", evs, err)
				}
			}},
		{"canceling the entry withdraws its bracket", []commands.Command{rest},
			func(s *account.State) commands.Command {
				return &trading.CancelOrder{BrokerOrderID: s.OrderID("e2")}
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if only[evacct.BracketEnd](t, evs).Reason != "entry_canceled" {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"closing the position ends the bracket and cancels its legs", []commands.Command{entry},
			func(*account.State) commands.Command {
				return &trading.ClosePosition{Instrument: "BTC-PERP", Market: tmkt("100", "100.5")}
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if only[evacct.BracketEnd](t, evs).Reason != "position_closed" || count[evacct.OrderCanceled](evs) != 2 {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"flatten withdraws brackets, canceling each order once", []commands.Command{entry},
			func(*account.State) commands.Command { return &trading.Flatten{Market: tmkt("100", "100.5")} },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				if only[evacct.BracketEnd](t, evs).Reason != "flatten" || count[evacct.OrderCanceled](evs) != 2 {
					t.Fatalf("events %+v", evs)
				}
			}},
		{"a market entry past the drift bound is refused", nil,
			func(*account.State) commands.Command { return bracketed(buy("e1", "2", m), atm(), "80") },
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				wantRefusal(t, err, evs, http.StatusConflict, "exit_plan_conflict", map[string]any{"reason": "drift", "maxTicks": 20})
			}},
		{"protecting a position arms at once from its average price", []commands.Command{buy("p1", "1", m)},
			func(*account.State) commands.Command {
				return &trading.Protect{ClientOrderID: "pr1", Instrument: "BTC-PERP", Plan: planned(atm(), "0"), Market: tmkt("100", "100.5")}
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				b := only[evacct.BracketSet](t, evs).Bracket
				if b.Armed.Cmp(dec("1")) != 0 || leg(b, "stop").Price.String() != "90.5" || b.ClientOrderID != "pr1" {
					t.Fatalf("bracket %+v", b)
				}
			}},
		{"protecting a resting entry rests it again carrying the bracket", []commands.Command{limit("r1", "buy", "1", "95", m)},
			func(s *account.State) commands.Command {
				return &trading.Protect{ClientOrderID: "pr2", EntryOrderID: s.OrderID("r1"), Plan: planned(atm(), "0"), Market: tmkt("100", "100.5")}
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				b := only[evacct.BracketSet](t, evs).Bracket
				p := only[evacct.OrderPlaced](t, evs).Order
				if b.EntryOrderID != p.BrokerOrderID || p.BracketID != b.ID || leg(b, "stop").Price.String() != "85" {
					t.Fatalf("bracket %+v entry %+v", b, p)
				}
			}},
		{"changing a leg moves its order", []commands.Command{entry},
			func(s *account.State) commands.Command {
				b := s.Brackets[anyBracket(s)]
				return &trading.ChangeBracket{BracketID: b.ID, Legs: []trading.LegPrice{{ID: leg(*b, "stop").ID, Price: dec("95")}}, Market: tmkt("100", "100.5")}
			},
			func(t *testing.T, s *account.State, evs []events.Event, err error) {
				r := only[evacct.OrderReplaced](t, evs)
				if r.StopPrice.String() != "95" || leg(only[evacct.BracketSet](t, evs).Bracket, "stop").Price.String() != "95" {
					t.Fatalf("replaced %+v", r)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := run(t, tc.given, &trading.ExpireDayOrders{})
			evs, err := account.Decide(s, env(99, tc.when(s)))
			tc.check(t, s, evs, err)
		})
	}
}

func anyBracket(s *account.State) string {
	for id := range s.Brackets {
		return id
	}
	return ""
}

func TestBracketOrdersMoveOnlyThroughTheirBracket(t *testing.T) {
	m := tmkt("100", "100.5")
	targetsOnly := evplan.Spec{Name: "t", Targets: []evplan.Target{{Distance: evplan.Distance{Ticks: 10}, Share: dec("0.78")},
		{Distance: evplan.Distance{Ticks: 20}, Share: dec("0.22")}}}
	// A plan that places no leg for the quantity is refused, nothing recorded.
	_, evs, err := run(t, nil, bracketed(buy("e0", "0.1", m), targetsOnly, "100.5"))
	wantRefusal(t, err, evs, http.StatusUnprocessableEntity, "invalid_request", map[string]any{"field": "quantity"})

	// Replace refuses a leg and a bracketed entry: the bracket would not follow.
	s, _, _ := run(t, []commands.Command{bracketed(buy("e1", "2", m), atm(), "100.5"), bracketed(limit("e2", "buy", "1", "95", m), atm(), "95")}, &trading.ExpireDayOrders{})
	var legID string
	for id, w := range s.Working {
		if w.ReduceOnly {
			legID = id
		}
	}
	for _, id := range []string{legID, s.OrderID("e2")} {
		evs, err := account.Decide(s, env(98, &trading.ReplaceOrder{BrokerOrderID: id, Quantity: ptr("7"), Market: m}))
		wantRefusal(t, err, evs, http.StatusUnprocessableEntity, "invalid_request", map[string]any{"field": "brokerOrderId"})
	}
}

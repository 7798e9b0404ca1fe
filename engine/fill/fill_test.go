package fill

import (
	"testing"

	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/events"
)

func d(s string) events.Decimal  { return events.MustDecimal(s) }
func p(s string) *events.Decimal { v := d(s); return &v }

// The rules at a quote of bid 99, ask 101, for each type and side.
func TestAtDecidesEachTypeAtAQuote(t *testing.T) {
	bid, ask := d("99"), d("101")
	cases := []struct {
		name          string
		o             Order
		seen          Seen
		trigger, fill bool
		at, price     string
	}{
		{name: "a market buy fills at the ask", o: Order{Side: order.Buy, Type: order.Market}, fill: true, price: "101"},
		{name: "a market sell fills at the bid", o: Order{Side: order.Sell, Type: order.Market}, fill: true, price: "99"},
		{name: "a buy limit at the ask fills at the ask", o: Order{Side: order.Buy, Type: order.Limit, Limit: p("101")}, fill: true, price: "101"},
		{name: "a buy limit above the ask fills at the ask", o: Order{Side: order.Buy, Type: order.Limit, Limit: p("105")}, fill: true, price: "101"},
		{name: "a buy limit below the ask rests", o: Order{Side: order.Buy, Type: order.Limit, Limit: p("100")}},
		{name: "a buy limit an earlier quote touched fills at its limit", o: Order{Side: order.Buy, Type: order.Limit, Limit: p("100")}, seen: Seen{Touched: true}, fill: true, price: "100"},
		{name: "a sell limit below the bid fills at the bid", o: Order{Side: order.Sell, Type: order.Limit, Limit: p("98")}, fill: true, price: "99"},
		{name: "a sell limit above the bid rests", o: Order{Side: order.Sell, Type: order.Limit, Limit: p("100")}},
		{name: "a sell stop at the bid triggers and fills at the bid", o: Order{Side: order.Sell, Type: order.Stop, Stop: p("99")}, trigger: true, at: "99", fill: true, price: "99"},
		{name: "a sell stop below the bid waits", o: Order{Side: order.Sell, Type: order.Stop, Stop: p("98")}},
		{name: "a sell stop a quote traded through triggers at its stop and fills at the bid", o: Order{Side: order.Sell, Type: order.Stop, Stop: p("98")}, seen: Seen{Through: true}, trigger: true, at: "98", fill: true, price: "99"},
		{name: "a buy stop at or below the ask triggers at the ask", o: Order{Side: order.Buy, Type: order.Stop, Stop: p("100")}, trigger: true, at: "101", fill: true, price: "101"},
		{name: "a buy stop above the ask waits", o: Order{Side: order.Buy, Type: order.Stop, Stop: p("102")}},
		{name: "a triggered stop fills at the touch", o: Order{Side: order.Sell, Type: order.Stop, Stop: p("50"), Triggered: true}, fill: true, price: "99"},
		{name: "a sell stop-limit triggers and fills when the bid is at its limit", o: Order{Side: order.Sell, Type: order.StopLimit, Stop: p("100"), Limit: p("99")}, trigger: true, at: "99", fill: true, price: "99"},
		{name: "a sell stop-limit triggers and rests when the bid is below its limit", o: Order{Side: order.Sell, Type: order.StopLimit, Stop: p("100"), Limit: p("99.5")}, trigger: true, at: "99"},
		{name: "a triggered stop-limit rests at its limit", o: Order{Side: order.Sell, Type: order.StopLimit, Stop: p("100"), Limit: p("99.5"), Triggered: true}},
		{name: "a triggered stop-limit an earlier quote touched fills at its limit", o: Order{Side: order.Sell, Type: order.StopLimit, Stop: p("100"), Limit: p("99.5"), Triggered: true}, seen: Seen{Touched: true}, fill: true, price: "99.5"},
		{name: "a stop-limit traded through but not touched triggers at its stop and rests", o: Order{Side: order.Buy, Type: order.StopLimit, Stop: p("102"), Limit: p("100")}, seen: Seen{Through: true}, trigger: true, at: "102"},
		{name: "an unknown type does nothing", o: Order{Side: order.Buy, Type: "trailing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := At(c.o, bid, ask, c.seen)
			if got.Trigger != c.trigger || got.Fill != c.fill {
				t.Fatalf("At = %+v, want trigger %v fill %v", got, c.trigger, c.fill)
			}
			if c.trigger && got.TriggerAt.Cmp(d(c.at)) != 0 {
				t.Errorf("triggers at %s, want %s", got.TriggerAt, c.at)
			}
			if c.fill && got.Price.Cmp(d(c.price)) != 0 {
				t.Errorf("fills at %s, want %s", got.Price, c.price)
			}
			// The reactor wakes the account for every order this quote
			// triggers or fills without help from an earlier quote.
			if c.seen == (Seen{}) && !c.o.Triggered && (got.Trigger || got.Fill) && !c.o.Crosses(bid, ask) {
				t.Errorf("At acts on the quote but Crosses says it does not reach the order")
			}
			if c.seen == (Seen{}) && !got.Trigger && !got.Fill && c.o.Crosses(bid, ask) {
				t.Errorf("Crosses wakes the account for a quote At does nothing with")
			}
		})
	}
}

// Crosses waits at a triggered stop's level: a triggered stop still working
// (a reduce-only stop with nothing left to reduce) does not wake every quote.
func TestCrossesKeepsATriggeredStopAtItsLevel(t *testing.T) {
	o := Order{Side: order.Sell, Type: order.Stop, Stop: p("90"), Triggered: true}
	if o.Crosses(d("99"), d("101")) {
		t.Fatal("a triggered sell stop at 90 wakes at a bid of 99")
	}
	if !o.Crosses(d("90"), d("91")) {
		t.Fatal("a triggered sell stop at 90 does not wake at a bid of 90")
	}
}

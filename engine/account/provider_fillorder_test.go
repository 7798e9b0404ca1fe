package account_test

import (
	"testing"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// esOrder places a market order on ESZ6 (50 a point).
func esOrder(id, side, qty string) *trading.PlaceOrder {
	return &trading.PlaceOrder{ClientOrderID: id, Instrument: "ESZ6", Side: side, OrderType: "market", Quantity: dec(qty), TimeInForce: "gtc"}
}

// esFill is the stream's report of the order filled at px, as a futures
// login's provider sends it: no realized figure of its own.
func esFill(id, side, qty, px string) *providercmd.Observe {
	p := dec(px)
	return &providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{{ProviderClientOrderID: provider.ClientOrderID("a1", id),
		ProviderOrderID: "o-" + id, Instrument: "ESZ6", Side: side, OrderType: "market", Status: "filled", Quantity: dec(qty),
		Filled: dec(qty), AvgPrice: &p, LastPrice: &p, Multiplier: dec("50")}}}
}

// esPosition is the stream's report of the position (qty 0: flat).
func esPosition(qty, avg string) *providercmd.Observe {
	return &providercmd.Observe{Cause: "stream", Positions: []evacct.Position{{Instrument: "ESZ6", Quantity: dec(qty), AvgPrice: dec(avg),
		Multiplier: dec("50")}}}
}

// A fill's realized PnL and the position it leaves are the same whether
// the provider reports the position it moved before or after the fill.
func TestProviderFillWhicheverComesFirst(t *testing.T) {
	long := []commands.Command{esOrder("b1", "buy", "2"), esFill("b1", "buy", "2", "5000"), esPosition("2", "5000")}
	for _, tc := range []struct {
		name         string
		given        []commands.Command
		fill         *providercmd.Observe // after given
		position     *providercmd.Observe // before or after the fill
		wantRealized string               // of the fill
		wantQty      string               // the position after both ("0": flat)
		wantAvg      string
	}{
		{name: "a close two points up realizes 2 x 2 x 50", given: append(long, esOrder("s1", "sell", "2")),
			fill: esFill("s1", "sell", "2", "5002"), position: esPosition("0", "0"), wantRealized: "200", wantQty: "0"},
		{name: "a partial close keeps the rest at its entry", given: append(long, esOrder("s1", "sell", "1")),
			fill: esFill("s1", "sell", "1", "4999"), position: esPosition("1", "5000"), wantRealized: "-50", wantQty: "1", wantAvg: "5000"},
		{name: "crossing zero realizes the long and opens the short at the fill", given: append(long, esOrder("s1", "sell", "3")),
			fill: esFill("s1", "sell", "3", "5001"), position: esPosition("-1", "5001"), wantRealized: "100", wantQty: "-1", wantAvg: "5001"},
		{name: "an opening fill realizes nothing and opens once", given: []commands.Command{esOrder("b1", "buy", "1")},
			fill: esFill("b1", "buy", "1", "5000"), position: esPosition("1", "5000"), wantRealized: "0", wantQty: "1", wantAvg: "5000"},
		{name: "adding averages the entry", given: append(long, esOrder("b2", "buy", "2")),
			fill: esFill("b2", "buy", "2", "5004"), position: esPosition("4", "5002"), wantRealized: "0", wantQty: "4", wantAvg: "5002"},
	} {
		for _, order := range []string{"fill first", "position first"} {
			t.Run(tc.name+", "+order, func(t *testing.T) {
				steps := []commands.Command{tc.fill, tc.position}
				if order == "position first" {
					steps = []commands.Command{tc.position, tc.fill}
				}
				s, recorded := loginSteps(t, tc.given, steps)
				var fill *evacct.OrderFilled
				for _, e := range recorded {
					if f, ok := e.(evacct.OrderFilled); ok {
						fill = &f
					}
				}
				if fill == nil || fill.Realized.Cmp(dec(tc.wantRealized)) != 0 {
					t.Errorf("the fill %+v, want it to realize %s", fill, tc.wantRealized)
				}
				p, open := s.Positions["ESZ6"]
				switch {
				case tc.wantQty == "0" && open:
					t.Errorf("position %+v, want flat", p)
				case tc.wantQty != "0" && (p.Quantity.Cmp(dec(tc.wantQty)) != 0 || p.AvgPrice.Cmp(dec(tc.wantAvg)) != 0 || p.Multiplier.Cmp(dec("50")) != 0):
					t.Errorf("position %+v, want %s at %s (50 a point)", p, tc.wantQty, tc.wantAvg)
				}
			})
		}
	}
}

// loginSteps runs given on an account linked through a login, then steps,
// and returns the state and what the steps recorded.
func loginSteps(t *testing.T, given, steps []commands.Command) (*account.State, []events.Event) {
	t.Helper()
	s, _, err := login(t, given, &providercmd.Observe{Cause: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Event
	for i, c := range steps {
		evs, err := account.Decide(s, env(100+i, c))
		if err != nil {
			t.Fatalf("step %d (%T): %v", i, c, err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
		out = append(out, evs...)
	}
	return s, out
}

// A provider that reports a fill's realized PnL itself (Binance's rp) is
// taken at its word, and the position is still the one before the fill
// moved by it, whichever the provider reported first.
func TestProviderRealizedFigureWithPositionFirst(t *testing.T) {
	pnl, px := dec("1.5"), dec("50150")
	sell := &providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{{ProviderClientOrderID: pcoid("s1"), ProviderOrderID: "10",
		Instrument: "BTCUSDT", Side: "sell", OrderType: "market", Status: "filled", Quantity: dec("0.01"), Filled: dec("0.01"),
		AvgPrice: &px, LastPrice: &px, LastPnL: &pnl}}}
	flat := &providercmd.Observe{Cause: "stream", Positions: []evacct.Position{{Instrument: "BTCUSDT", Quantity: dec("0")}}}
	s, evs, err := provide(t, evacct.ProviderSettings{}, []commands.Command{pbuy("c1", "market"),
		settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000")), &trading.PlaceOrder{ClientOrderID: "s1", Instrument: "BTCUSDT",
			Side: "sell", OrderType: "market", Quantity: dec("0.01"), TimeInForce: "gtc"}, flat}, sell)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		s = account.Apply(s, e)
		if f, ok := e.(evacct.OrderFilled); ok && (f.Realized.Cmp(pnl) != 0 || !f.Position.Quantity.IsZero()) {
			t.Fatalf("fill %+v, want the provider's 1.5 and a flat position", f)
		}
	}
	if p, open := s.Positions["BTCUSDT"]; open {
		t.Fatalf("position %+v, want flat", p)
	}
}

package account_test

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
	evtenant "github.com/svc/engine/events/tenant"
)

// extremes are values at the input's bounds (events.MinDecimalExponent and
// the rest): the smallest, the largest, 34 digits at either end, and a few
// ordinary ones so that orders meet.
var extremes = []string{"1e-18", "0.000000000000000001234567890123456789012345678901234", "9.99e15",
	"9999999999999999.999999999999999999", "1234567890123456.789012345678901234", "0.5", "1", "65000.25"}

// Property: whatever Decide makes of commands carrying values at the input's
// bounds (orders, replaces, closes, fills at extreme quotes, balance
// operations) encodes and decodes to the same events in MessagePack and in
// JSON; Decide and Apply never panic on them.
func TestPropertyBoundedCommandsMakeReadableCommits(t *testing.T) {
	// engine.Registry(), without importing the engine
	reg := events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry())
	runs, steps := 120, 40
	if testing.Short() {
		runs = 20
	}
	committed := 0
	for seed := range runs {
		rng := rand.New(rand.NewPCG(uint64(seed), 19))
		pick := func() events.Decimal { return dec(extremes[rng.IntN(len(extremes))]) }
		pptr := func() *events.Decimal { d := pick(); return &d }
		market := func() trading.Market {
			a, b := pick(), pick()
			if a.Cmp(b) > 0 {
				a, b = b, a
			}
			return trading.Market{
				Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: a, Ask: b, At: t0}},
				Specs: map[string]trading.Spec{"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: dec([]string{"1", "50", "0.001"}[seed%3])},
					"ES": {Symbol: "ES", Multiplier: dec("50")}},
			}
		}
		s := account.New("a1")
		n := 0
		do := func(cmd commands.Command) {
			t.Helper()
			if v, ok := cmd.(interface{ Validate() error }); ok && v.Validate() != nil {
				return // the gateway would have refused it
			}
			n++
			id := ulid.MustParse("01J00000000000000000000000")
			id[13], id[14], id[15] = byte(seed), byte(n>>8), byte(n)
			e := commands.Envelope{ID: id, At: t0.Add(time.Duration(n) * time.Minute), Cmd: cmd}
			evs, err := account.Decide(s, e)
			if err != nil || len(evs) == 0 {
				return
			}
			c := events.Commit{CommandID: id.String(), At: e.At, Events: evs}
			for how, r := range map[string]events.Registry{"MessagePack": reg, "JSON": reg.WritingJSON()} {
				b, err := r.Encode(c)
				if err != nil {
					t.Fatalf("seed %d step %d %T: %s encoding refused the commit: %v", seed, n, cmd, how, err)
				}
				got, err := reg.Decode(b)
				if err != nil {
					t.Fatalf("seed %d step %d %T: the %s commit does not decode: %v", seed, n, cmd, how, err)
				}
				for i := range evs {
					want, _ := stdjson.Marshal(evs[i])
					back, _ := stdjson.Marshal(got.Events[i])
					if !bytes.Equal(want, back) {
						t.Fatalf("seed %d step %d: %s %s reads back as\n%s\nwant\n%s", seed, n, how, evs[i].Type(), back, want)
					}
				}
			}
			for _, x := range evs {
				s = account.Apply(s, x)
			}
			committed++
		}
		do(&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: []string{"USD", "USDC"}[seed%2], StartingBalance: pick()})
		for i := range steps {
			side := []string{"buy", "sell"}[rng.IntN(2)]
			switch k := rng.IntN(9); k {
			case 0, 1, 2:
				c := &trading.PlaceOrder{ClientOrderID: fmt.Sprintf("o%d", i), Instrument: "BTC-PERP", Side: side,
					OrderType: []string{"market", "limit", "stop", "stop_limit"}[rng.IntN(4)], Quantity: pick(),
					TimeInForce: []string{"day", "gtc", "ioc", "fok"}[rng.IntN(4)], Market: market()}
				if c.OrderType == "limit" || c.OrderType == "stop_limit" {
					c.LimitPrice = pptr()
				}
				if c.OrderType == "stop" || c.OrderType == "stop_limit" {
					c.StopPrice = pptr()
				}
				do(c)
			case 3:
				if len(s.Working) > 0 {
					ids := make([]string, 0, len(s.Working))
					for id := range s.Working {
						ids = append(ids, id)
					}
					sort.Strings(ids)
					w := s.Working[ids[rng.IntN(len(ids))]]
					c := &trading.ReplaceOrder{BrokerOrderID: w.BrokerOrderID, Quantity: pptr(), Market: market()}
					if w.LimitPrice != nil {
						c.LimitPrice = pptr()
					}
					if w.StopPrice != nil && !w.Triggered {
						c.StopPrice = pptr()
					}
					do(c)
				}
			case 4:
				do(&trading.FillWorking{Quote: market().Quotes["BTC-PERP"]})
			case 5:
				c := &trading.ClosePosition{Instrument: "BTC-PERP", Market: market()}
				if rng.IntN(2) == 0 {
					c.Quantity = pptr()
				}
				do(c)
			case 6:
				do(&trading.Reverse{Instrument: "BTC-PERP", Market: market()})
			case 7:
				do(&firmcmd.BalanceOp{ReferenceID: fmt.Sprintf("ref-%d", i), AccountNumber: "PA1",
					Op: []string{firmcmd.OpCredit, firmcmd.OpDebit, firmcmd.OpAdjustment}[rng.IntN(3)], Amount: pick(), Env: "sandbox",
					Marks: map[string]events.Decimal{"BTC-PERP": pick()}})
			case 8:
				do(&trading.Flatten{Market: market()})
			}
		}
	}
	if committed < runs*5 {
		t.Fatalf("only %d commits in %d runs: the commands are rarely accepted", committed, runs)
	}
	t.Logf("%d commits", committed)
}

// The orders: a quantity or a price at the input's bounds is
// accepted and its commit reads back; a fill of the largest quantity at the
// largest price, closed at the smallest, realizes a loss of about 1e32 that
// rounds exactly.
func TestExtremeOrdersMakeReadableCommits(t *testing.T) {
	reg := events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry())
	quote := func(bid, ask string) trading.Market {
		return trading.Market{
			Quotes: map[string]trading.Quote{"BTC-PERP": {Instrument: "BTC-PERP", Bid: dec(bid), Ask: dec(ask), At: t0}},
			Specs:  map[string]trading.Spec{"BTC-PERP": {Symbol: "BTC-PERP", Multiplier: dec("1")}},
		}
	}
	s := account.New("a1")
	for i, c := range []commands.Command{
		&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("50000")},
		&firmcmd.BalanceOp{ReferenceID: "r1", AccountNumber: "PA1", Op: firmcmd.OpCredit, Amount: dec("999999950000"), Env: "sandbox"},
		&trading.PlaceOrder{ClientOrderID: "tiny", Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: dec("1e-18"), TimeInForce: "day", Market: quote("1e-18", "1e-18")},
		&trading.PlaceOrder{ClientOrderID: "lim", Instrument: "BTC-PERP", Side: "buy", OrderType: "limit", Quantity: dec("1e-18"), LimitPrice: ptr("1e-18"), TimeInForce: "gtc", Market: quote("9.99e15", "9.99e15")},
		&trading.ReplaceOrder{BrokerOrderID: env(4, nil).ID.String(), Quantity: ptr("9.99e15"), LimitPrice: ptr("9.99e15"), Market: quote("9.99e15", "9.99e15")},
		&trading.PlaceOrder{ClientOrderID: "huge", Instrument: "BTC-PERP", Side: "buy", OrderType: "market", Quantity: dec("9.99e15"), TimeInForce: "day", Market: quote("9.99e15", "9.99e15")},
		&trading.PlaceOrder{ClientOrderID: "out", Instrument: "BTC-PERP", Side: "sell", OrderType: "market", Quantity: dec("9999999999999999.999999999999999999"), TimeInForce: "day", Market: quote("1e-18", "1e-18")},
	} {
		evs, err := account.Decide(s, env(i+1, c))
		if err != nil {
			t.Fatalf("%d %T: %v", i, c, err)
		}
		if len(evs) == 0 {
			t.Fatalf("%d %T: no events", i, c)
		}
		for _, r := range []events.Registry{reg, reg.WritingJSON()} {
			b, err := r.Encode(events.Commit{CommandID: fmt.Sprint(i), At: t0, Events: evs})
			if err != nil {
				t.Fatalf("%d %T: %v", i, c, err)
			}
			if _, err := reg.Decode(b); err != nil {
				t.Fatalf("%d %T: %v", i, c, err)
			}
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	if s.Balance.Cmp(dec("-1e15").Mul(dec("1e15"))) > 0 {
		t.Errorf("balance %s, want a loss of about 1e32", s.Balance)
	}
}

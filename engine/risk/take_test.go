package risk_test

import (
	"context"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	riskcmd "github.com/svc/engine/commands/risk"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/risk"
	"github.com/svc/engine/events"
)

// longUnderLimit is an account long 1 X at 100 with a daily loss limit of 10.
func longUnderLimit(t *testing.T, at time.Time) *account.State {
	t.Helper()
	m := trading.Market{Quotes: map[string]trading.Quote{"X": {Instrument: "X", Bid: events.Int(100), Ask: events.Int(100)}},
		Specs: map[string]trading.Spec{"X": {Symbol: "X", Multiplier: events.Int(1), MaxQuantity: events.Int(1000)}}}
	s := account.New("a")
	for _, c := range []commands.Command{
		&tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "a", Currency: "USD", StartingBalance: events.Int(1000)},
		&riskcmd.SetSettings{DailyLossEnabled: on(), DailyLossValue: num("10")},
		&trading.PlaceOrder{ClientOrderID: "1", Instrument: "X", Side: "buy", OrderType: "market", Quantity: events.Int(1), TimeInForce: "day", Market: m},
	} {
		evs, err := account.Decide(s, commands.Envelope{ID: ulid.Make(), At: at.Add(-time.Minute), Cmd: c})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
	return s
}

// A node that takes an account over checks its controls at the lowest and
// highest marks it saw since the gap began, not only at the newest: a dip
// through a loss limit while no node acted on the account is sent as an
// Evaluate carrying the gap's marks, and the account locks at them; a dip
// before the gap, or none, sends nothing.
func TestATakeoverChecksTheGapsExtremes(t *testing.T) {
	at := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	sent := make(chan *riskcmd.Evaluate, 4)
	r := risk.New(func() time.Time { return at }, func(_ context.Context, _ string, c commands.Command) error {
		if ev, ok := c.(*riskcmd.Evaluate); ok {
			sent <- ev
		}
		return nil
	}, nil)
	defer r.Close()
	s := longUnderLimit(t, at)
	r.Mark("X", events.Int(85)) // a dip before the gap
	time.Sleep(2 * time.Millisecond)
	since := time.Now()
	r.Mark("X", events.Int(99))
	r.Take("a", s, 3, since)
	select {
	case ev := <-sent:
		t.Fatalf("an Evaluate %+v for a dip before the gap", ev)
	case <-time.After(100 * time.Millisecond):
	}

	r.Mark("X", events.Int(89)) // through the limit, in the gap
	r.Mark("X", events.Int(99)) // and back
	r.Take("a", s, 3, since)
	var ev *riskcmd.Evaluate
	select {
	case ev = <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("no Evaluate for the gap's dip")
	}
	if len(ev.Gap) != 1 || ev.Gap[0]["X"].Cmp(events.Int(89)) != 0 {
		t.Fatalf("the Evaluate's gap marks %v, want [X:89]", ev.Gap)
	}
	ev.Market = trading.Market{Quotes: map[string]trading.Quote{"X": {Instrument: "X", Bid: events.Int(99), Ask: events.Int(99)}}}
	evs, err := account.Decide(s, commands.Envelope{ID: ulid.Make(), At: at, Cmd: ev})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		s = account.Apply(s, e)
	}
	if v := s.RiskLock(at); !v.TradingLocked || v.LockReason != "daily_loss_limit" || v.TriggerPnl.Cmp(events.Int(-11)) != 0 {
		t.Fatalf("after the gap's Evaluate: locked %v by %q at %v, want daily_loss_limit at -11", v.TradingLocked, v.LockReason, v.TriggerPnl)
	}
}

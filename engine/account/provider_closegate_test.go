package account_test

import (
	"errors"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/engine/provider/binance"
	"github.com/svc/engine/engine/provider/tradovate"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// A close on a provider that does not enforce reduce-only (Tradovate) is
// refused while a risk lock holds: 409 risk_locked, since the engine cannot
// prove it only reduces. Under the reconciliation hold alone, unheld, and
// on a provider that enforces reduce-only (Binance) the close goes out;
// a flatten and a reduce-only order stay open under the lock.
func TestProviderCloseUnderRiskLock(t *testing.T) {
	esLong := []commands.Command{esOrder("b1", "buy", "1"), esFill("b1", "buy", "1", "5000"), esPosition("1", "5000")}
	btcLong := []commands.Command{pbuy("c1", "market"), settle("c1", evacct.OutcomeAccepted, filled("c1", "0.01", "50000"))}
	halt := &firmcmd.HaltAccount{}
	recon := &firmcmd.HoldForReconciliation{Reason: "test", By: "operator"}
	for _, tc := range []struct {
		name       string
		binance    bool
		given      []commands.Command
		lock       bool // a fired daily loss control holds too
		when       commands.Command
		wantStatus int // 0: decided, an order intended
	}{
		{name: "tradovate, unheld: the close goes out", given: esLong, when: &trading.ClosePosition{Instrument: "ESZ6"}},
		{name: "tradovate, firm halt: 409 risk_locked", given: append(esLong, halt), when: &trading.ClosePosition{Instrument: "ESZ6"},
			wantStatus: 409},
		{name: "tradovate, a fired risk control: 409 risk_locked", given: esLong, lock: true,
			when: &trading.ClosePosition{Instrument: "ESZ6", Quantity: ptr("1")}, wantStatus: 409},
		{name: "tradovate, reconciliation hold alone: the close goes out", given: append(esLong, recon),
			when: &trading.ClosePosition{Instrument: "ESZ6"}},
		{name: "tradovate, firm halt: a flatten still goes out", given: append(esLong, halt), when: &trading.Flatten{}},
		{name: "tradovate, firm halt: a reduce-only order still goes out", given: append(esLong, halt),
			when: &trading.PlaceOrder{ClientOrderID: "r1", Instrument: "ESZ6", Side: "sell", OrderType: "market", Quantity: dec("1"),
				TimeInForce: "gtc", ReduceOnly: true}},
		{name: "binance, firm halt: the close goes out (reduce-only at the exchange)", binance: true, given: append(btcLong, halt),
			when: &trading.ClosePosition{Instrument: "BTCUSDT"}},
		{name: "binance, a fired risk control: the close goes out", binance: true, given: btcLong, lock: true,
			when: &trading.ClosePosition{Instrument: "BTCUSDT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := login
			if tc.binance {
				run = func(t *testing.T, given []commands.Command, when commands.Command) (*account.State, []events.Event, error) {
					return provide(t, evacct.ProviderSettings{}, given, when)
				}
			}
			s, _, err := run(t, tc.given, &providercmd.Observe{Cause: "stream"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.lock {
				s = account.Apply(s, evacct.RiskLocked{Control: evacct.ControlDailyLoss, TradingUnlockAt: t0.Add(24 * time.Hour), At: t0})
			}
			evs, err := account.Decide(s, env(99, tc.when))
			if tc.wantStatus != 0 {
				var r *commands.Refusal
				if !errors.As(err, &r) || r.Code != commands.CodeRiskLocked || r.Status() != tc.wantStatus || r.Params["holds"] == nil {
					t.Fatalf("err %v (%+v), want %d risk_locked with params.holds", err, r, tc.wantStatus)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			intended := false
			for _, e := range evs {
				_, ok := e.(evacct.OrderIntended)
				intended = intended || ok
			}
			if !intended {
				t.Fatalf("events %v, want an order intended", evs)
			}
		})
	}
}

// EnforcesReduceOnly says what each built-in provider's capabilities say.
func TestEnforcesReduceOnlyIsTheProvidersCapability(t *testing.T) {
	tv, err := tradovate.New(tradovate.Options{Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	bn, err := binance.New(binance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if account.EnforcesReduceOnly(tv.Name()) != tv.Capabilities().ReduceOnly {
		t.Errorf("%s: EnforcesReduceOnly %v, capabilities %v", tv.Name(), account.EnforcesReduceOnly(tv.Name()), tv.Capabilities().ReduceOnly)
	}
	if account.EnforcesReduceOnly(bn.Name()) != bn.Capabilities().ReduceOnly {
		t.Errorf("%s: EnforcesReduceOnly %v, capabilities %v", bn.Name(), account.EnforcesReduceOnly(bn.Name()), bn.Capabilities().ReduceOnly)
	}
}

package account_test

import (
	"testing"
	"time"

	"github.com/svc/engine/commands"
	providercmd "github.com/svc/engine/commands/provider"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// The provider's clock in these tests: one transaction a second.
var pt0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func ptime(sec int) time.Time { return pt0.Add(time.Duration(sec) * time.Second) }

// cash is a stream's balance report of asset as of the provider's second sec
// (Binance ACCOUNT_UPDATE's wallet at its transaction time, Tradovate's
// cashBalance amount at its timestamp).
func cash(asset, wallet string, sec int) *providercmd.Observe {
	return &providercmd.Observe{Cause: "stream", Balances: []evacct.BalanceObserved{{Asset: asset, Wallet: dec(wallet), Available: dec(wallet),
		AsOf: ptime(sec)}}}
}

// btcTrade is Binance's ORDER_TRADE_UPDATE of order id filled whole at px
// in the provider's second sec, with its realized PnL (rp) and fee (n).
func btcTrade(id, side, px, pnl, fee string, sec int) *providercmd.Observe {
	p, r, f := dec(px), dec(pnl), dec(fee)
	return &providercmd.Observe{Cause: "stream", Orders: []providercmd.Order{{ProviderClientOrderID: pcoid(id), ProviderOrderID: "o-" + id,
		Instrument: "BTCUSDT", Side: side, OrderType: "market", Status: "filled", Quantity: dec("0.01"), Filled: dec("0.01"), AvgPrice: &p,
		LastPrice: &p, LastPnL: &r, LastFee: &f, LastAt: ptime(sec), At: ptime(sec)}}}
}

func btcOrder(id, side string) *trading.PlaceOrder {
	return &trading.PlaceOrder{ClientOrderID: id, Instrument: "BTCUSDT", Side: side, OrderType: "market", Quantity: dec("0.01"), TimeInForce: "gtc"}
}

// esTrade is a Tradovate fill of order id (no realized figure, no fee) in
// the provider's second sec.
func esTrade(id, side, qty, px string, sec int) *providercmd.Observe {
	c := esFill(id, side, qty, px)
	c.Orders[0].LastAt, c.Orders[0].At = ptime(sec), ptime(sec)
	return c
}

// A provider's balance report and the fill it holds may arrive in either
// order: the account's balance counts the fill's money once, whichever came
// first, for both providers' shapes, and a replay of what was recorded gives
// the same balance.
func TestProviderBalanceCountsAFillOnce(t *testing.T) {
	type step = commands.Command
	for _, tc := range []struct {
		name  string
		login bool   // a futures login's account (Tradovate), else an API key's (Binance)
		given []step // after the link
		steps [][]step
		want  string
	}{
		{
			name: "binance: a close's realized PnL less its fee",
			given: []step{cash("USDT", "1000", 0), btcOrder("b1", "buy"), btcTrade("b1", "buy", "50000", "0", "0.2", 1),
				cash("USDT", "999.8", 1), btcOrder("s1", "sell")},
			steps: [][]step{
				{btcTrade("s1", "sell", "50150", "1.5", "0.2", 2), cash("USDT", "1001.1", 2)},
				{cash("USDT", "1001.1", 2), btcTrade("s1", "sell", "50150", "1.5", "0.2", 2)},
			},
			want: "1001.1",
		},
		{
			name:  "binance: an opening fill's fee",
			given: []step{cash("USDT", "1000", 0), btcOrder("b1", "buy")},
			steps: [][]step{
				{btcTrade("b1", "buy", "50000", "0", "0.2", 1), cash("USDT", "999.8", 1)},
				{cash("USDT", "999.8", 1), btcTrade("b1", "buy", "50000", "0", "0.2", 1)},
			},
			want: "999.8",
		},
		{
			name:  "binance: a later fill's money stays on top of an earlier report that came after it",
			given: []step{cash("USDT", "1000", 0), btcOrder("b1", "buy"), btcOrder("b2", "buy")},
			steps: [][]step{
				{btcTrade("b2", "buy", "50000", "0", "0.2", 2), cash("USDT", "999.8", 1), btcTrade("b1", "buy", "50000", "0", "0.2", 1)},
				{cash("USDT", "999.8", 1), btcTrade("b2", "buy", "50000", "0", "0.2", 2), btcTrade("b1", "buy", "50000", "0", "0.2", 1)},
				{btcTrade("b1", "buy", "50000", "0", "0.2", 1), btcTrade("b2", "buy", "50000", "0", "0.2", 2), cash("USDT", "999.8", 1)},
			},
			want: "999.6",
		},
		{
			name:  "binance: a report older than the one held changes nothing",
			given: []step{cash("USDT", "1000", 0), btcOrder("b1", "buy"), btcOrder("b2", "buy")},
			steps: [][]step{
				{btcTrade("b1", "buy", "50000", "0", "0.2", 1), btcTrade("b2", "buy", "50000", "0", "0.2", 2), cash("USDT", "999.6", 2), cash("USDT", "999.8", 1)},
				{cash("USDT", "999.6", 2), cash("USDT", "999.8", 1), btcTrade("b2", "buy", "50000", "0", "0.2", 2), btcTrade("b1", "buy", "50000", "0", "0.2", 1)},
			},
			want: "999.6",
		},
		{
			name:  "tradovate: a close two points up on 2 ES (50 a point)",
			login: true,
			given: []step{cash("USD", "10000", 0), esOrder("b1", "buy", "2"), esTrade("b1", "buy", "2", "5000", 1), esOrder("s1", "sell", "2")},
			steps: [][]step{
				{esTrade("s1", "sell", "2", "5002", 2), cash("USD", "10200", 2)},
				{cash("USD", "10200", 2), esTrade("s1", "sell", "2", "5002", 2)},
			},
			want: "10200",
		},
		{
			name:  "tradovate: a loss reported before its fill",
			login: true,
			given: []step{cash("USD", "10000", 0), esOrder("b1", "buy", "1"), esTrade("b1", "buy", "1", "5000", 1), esOrder("s1", "sell", "1")},
			steps: [][]step{
				{esTrade("s1", "sell", "1", "4990", 3), cash("USD", "9500", 3)},
				{cash("USD", "9500", 3), esTrade("s1", "sell", "1", "4990", 3)},
			},
			want: "9500",
		},
	} {
		for i, steps := range tc.steps {
			t.Run(tc.name+", order "+string(rune('a'+i)), func(t *testing.T) {
				var linked commands.Command = link(evacct.ProviderSettings{})
				if tc.login {
					linked = loginLink("tok-1")
				}
				s, recorded := linkedSteps(t, linked, append(append([]step{}, tc.given...), steps...))
				if s.Balance.Cmp(dec(tc.want)) != 0 {
					t.Errorf("balance %s, want %s (the fill's money once)", s.Balance, tc.want)
				}
				// Replay: the recorded events alone give the same balance.
				r := account.New("a1")
				for _, e := range recorded {
					r = account.Apply(r, e)
				}
				if r.Balance.Cmp(s.Balance) != 0 {
					t.Errorf("replayed balance %s, live %s", r.Balance, s.Balance)
				}
			})
		}
	}
}

// linkedSteps runs the link and then cmds through Decide and Apply, and
// returns the state and everything recorded.
func linkedSteps(t *testing.T, linked commands.Command, cmds []commands.Command) (*account.State, []events.Event) {
	t.Helper()
	s := account.New("a1")
	var out []events.Event
	for i, c := range append([]commands.Command{linked}, cmds...) {
		evs, err := account.Decide(s, env(i, c))
		if err != nil {
			t.Fatalf("command %d (%T): %v", i, c, err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
		out = append(out, evs...)
	}
	return s, out
}

package account_test

import (
	"fmt"
	"testing"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/account"
)

// BenchmarkDecideMarketOrder is the account aggregate's share of one market
// order on a paper account: Decide and Apply of a new clientOrderId, with the
// account alternating buys and sells so its position stays small.
//
//	go test -run '^$' -bench DecideMarketOrder -benchmem ./engine/account/
func BenchmarkDecideMarketOrder(b *testing.B) {
	s := account.New("a1")
	open := &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "PA1", Currency: "USD", StartingBalance: dec("50000")}
	evs, err := account.Decide(s, env(0, open))
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range evs {
		s = account.Apply(s, e)
	}
	m := mkt("100", "101")
	cmds := make([]commands.Command, 2)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := buy(fmt.Sprint("c", i), "1", m)
		if i%2 == 1 {
			c.Side = "sell"
		}
		cmds[i%2] = c
		evs, err := account.Decide(s, env(i%250+1, c))
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			s = account.Apply(s, e)
		}
	}
}

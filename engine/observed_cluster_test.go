package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// A node reads another node's account as of a sequence once Observed says
// it holds the log that far: the risk lock a stream sends after a frame the
// read models built at that sequence (or a read with X-Engine-After) is
// never older than the frame. Each commit n1 makes is read on n2 at once
// after Observed: its revision is the commit's, every time.
func TestANodeReadsAnotherNodesCommitsOnceObserved(t *testing.T) {
	ctx := context.Background()
	log := tempLog(t)
	n1 := node(t, log, "n1", market.NewSim(market.DefaultCrypto(), 1, clock))
	defer n1.Close()
	const id = "observed"
	until(t, n1, id, &tenantcmd.OpenAccount{TenantID: "t", Broker: "paper", AccountNumber: "OB1", Currency: "USD", StartingBalance: dec("100000")})
	n2 := node(t, log, "n2", market.NewSim(market.DefaultCrypto(), 1, clock))
	defer n2.Close()
	if _, _, err := n2.RiskLock(ctx, id); err != nil { // n2 holds the account from here on
		t.Fatal(err)
	}
	for i := range 40 {
		res, err := n1.Account(ctx, id, n1.Envelope(events.Principal{System: "test"}, "",
			&trading.PlaceOrder{ClientOrderID: fmt.Sprintf("o%d", i), Instrument: "BTC-PERP", Side: "buy",
				OrderType: "market", Quantity: dec("0.01"), TimeInForce: "day"}))
		if err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = n2.Observed(wait, res.Seq)
		cancel()
		if err != nil {
			t.Fatalf("order %d: n2 never observed sequence %d: %v", i, res.Seq, err)
		}
		if _, rev, err := n2.RiskLock(ctx, id); err != nil || rev != res.Seq {
			t.Fatalf("order %d: n2 read the account at revision %d (%v) after observing %d", i, rev, err, res.Seq)
		}
	}
	// A sequence the log does not hold is waited for until the caller's
	// context ends.
	wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := n2.Observed(wait, 1<<40); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Observed of a sequence past the log: %v, want the context's deadline", err)
	}
}

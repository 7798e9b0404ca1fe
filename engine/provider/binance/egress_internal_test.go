package binance

import (
	"context"
	"testing"

	"github.com/svc/engine/engine/egress"
	binancesim "github.com/svc/engine/sim/binance"
)

// The streams go through the same guarded transport as the REST calls: an
// adapter whose transport refuses private addresses cannot open a stream to
// a loopback exchange, and one that allows them can.
func TestStreamsDialThroughTheEgressGuard(t *testing.T) {
	sim := binancesim.New(binancesim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, tc := range []struct {
		allow bool
		opens bool
	}{{false, false}, {true, true}} {
		p, err := New(Options{RestURL: sim.URL(), WSURL: sim.WSURL(), SpotURL: sim.URL(),
			HTTP: egress.NewTransport(egress.Options{AllowPrivate: tc.allow})})
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.dial(context.Background(), sim.WSURL()+"/ws/btcusdt@markPrice")
		if (err == nil) != tc.opens {
			t.Fatalf("AllowPrivate %v: the stream opened %v (%v), want %v", tc.allow, err == nil, err, tc.opens)
		}
		if c != nil {
			_ = c.CloseNow()
		}
	}
}

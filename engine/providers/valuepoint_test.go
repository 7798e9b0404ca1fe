package providers_test

import (
	"testing"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/providers"
	"github.com/svc/engine/events"
)

// A position and an order the provider reports with its contract's value
// per point are observed with it as their multiplier; without one, a
// position is at 1 and an order names none.
func TestSnapshotObservationCarriesTheValuePerPoint(t *testing.T) {
	five := events.MustDecimal("5")
	obs := providers.SnapshotObservation(provider.Snapshot{
		Positions: []provider.Position{{Instrument: "MESZ6", Quantity: events.Int(1), ValuePerPoint: five}, {Instrument: "BTCUSDT", Quantity: events.Int(1)}},
		Orders: []provider.OrderState{{ClientOrderID: "a", Instrument: "MESZ6", ValuePerPoint: five, Status: provider.StatusWorking},
			{ClientOrderID: "b", Instrument: "BTCUSDT", Status: provider.StatusWorking}},
	}, "periodic")
	if m := obs.Positions[0].Multiplier; m.Cmp(five) != 0 {
		t.Errorf("MESZ6's position multiplier %s, want 5", m)
	}
	if m := obs.Positions[1].Multiplier; m.Cmp(events.Int(1)) != 0 {
		t.Errorf("BTCUSDT's position multiplier %s, want 1", m)
	}
	if m := obs.Orders[0].Multiplier; m.Cmp(five) != 0 {
		t.Errorf("MESZ6's order multiplier %s, want 5", m)
	}
	if m := obs.Orders[1].Multiplier; !m.IsZero() {
		t.Errorf("BTCUSDT's order multiplier %s, want none", m)
	}
}

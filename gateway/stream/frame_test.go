package stream

import (
	"context"
	"strings"
	"testing"

	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
)

type panickyMarks struct{}

func (panickyMarks) Mark(string) (events.Decimal, bool) { panic("mark exploded") }

// A panic while building a frame is that frame's error, not the process's end.
func TestAFramePanicIsAnError(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	err := store.Update(ctx, 1, func(tx projections.Tx) error {
		if err := tx.Put(projections.CollAccount, "a1", projections.Account{AccountID: "a1", Revision: 1}); err != nil {
			return err
		}
		return tx.Put(projections.CollPosition, "a1/BTC-PERP", projections.Position{Instrument: "BTC-PERP", Quantity: events.Int(1)})
	})
	if err != nil {
		t.Fatal(err)
	}
	h := NewHub(store, panickyMarks{}, nil)
	if _, err := h.Frame(ctx, "a1"); err == nil || !strings.Contains(err.Error(), "mark exploded") {
		t.Fatalf("frame answered %v", err)
	}
}

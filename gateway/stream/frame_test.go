package stream

import (
	"bytes"
	"context"
	"encoding/json"
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

// A frame is rendered once into its chunk: its data is what encoding/json
// writes, and its SSE form and chunk are those every other payload gets.
func TestAFrameIsRenderedAsAnyPayload(t *testing.T) {
	v := map[string]any{"accountId": "a1", "note": "<b>\n\"x\" & y</b>", "revision": 7}
	p, err := render("account", 7, v)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Data, want) {
		t.Fatalf("data %s, want %s", p.Data, want)
	}
	if p.Name != "account" || p.ID != "7" || p.Rev != 7 {
		t.Fatalf("payload %q %q %d", p.Name, p.ID, p.Rev)
	}
	plain := Payload{Name: p.Name, ID: p.ID, Data: want, Rev: p.Rev}
	if !bytes.Equal(p.Wire(), plain.Wire()) {
		t.Fatalf("wire %q, want %q", p.Wire(), plain.Wire())
	}
	if !bytes.Equal(p.chunkBytes(), plain.chunkBytes()) {
		t.Fatalf("chunk %q, want %q", p.chunkBytes(), plain.chunkBytes())
	}
}

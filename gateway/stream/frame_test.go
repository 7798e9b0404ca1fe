package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc/engine/events"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
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

type fixedMarks map[string]events.Decimal

func (m fixedMarks) Mark(inst string) (events.Decimal, bool) { d, ok := m[inst]; return d, ok }

// The hub renders each frame from a frame it reuses: what it renders is
// what encoding/json writes of frames.Build, whatever frame it rendered
// before (more positions, fewer, none).
func TestAReusedFrameRendersAsAFreshOne(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	dec := func(s string) events.Decimal {
		d, err := events.ParseDecimal(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	err := store.Update(ctx, 1, func(tx projections.Tx) error {
		for _, a := range []projections.Account{
			{AccountID: "a1", Revision: 1, Currency: "USD", Balance: dec("10000.50"), StartingBalance: dec("10000"), Realized: dec("0.5"), Commissions: dec("0")},
			{AccountID: "a2", Revision: 1, Currency: "USDC", Balance: dec("99.000001"), StartingBalance: dec("100"), Realized: dec("-1"), Commissions: dec("0.000001")},
			{AccountID: "a3", Revision: 1, Currency: "USD", Balance: dec("1"), StartingBalance: dec("1"), Realized: dec("0"), Commissions: dec("0")},
		} {
			if err := tx.Put(projections.CollAccount, a.AccountID, a); err != nil {
				return err
			}
		}
		for _, p := range []struct {
			acct string
			pos  projections.Position
		}{
			{"a1", projections.Position{Instrument: "ETH-PERP", Quantity: dec("-2.5"), AvgPrice: dec("3000.1234567891"), Multiplier: dec("1")}},
			{"a1", projections.Position{Instrument: "BTC-PERP", Quantity: dec("0.01"), AvgPrice: dec("50000.5"), Multiplier: dec("1")}},
			{"a1", projections.Position{Instrument: "SOL-PERP", Quantity: dec("3"), AvgPrice: dec("150"), Multiplier: dec("1")}},
			{"a2", projections.Position{Instrument: "BTC-PERP", Quantity: dec("1"), AvgPrice: dec("49999"), Multiplier: dec("1")}},
		} {
			if err := tx.Put(projections.CollPosition, p.acct+"/"+p.pos.Instrument, p.pos); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	marks := fixedMarks{"BTC-PERP": dec("50010.25"), "ETH-PERP": dec("2999")}
	h := NewHub(store, marks, nil)
	for _, id := range []string{"a1", "a2", "a3", "a1", "a3", "a2"} {
		p, err := h.Frame(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		f, err := frames.Build(ctx, store, id, marks)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p.Data, want) {
			t.Fatalf("frame of %s\n%s\nwant\n%s", id, p.Data, want)
		}
	}
}

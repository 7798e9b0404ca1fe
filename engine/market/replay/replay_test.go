package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

func TestReplayStepsRecordedRows(t *testing.T) {
	rows, err := ReadFile("testdata/session.csv")
	if err != nil {
		t.Fatal(err)
	}
	f := New(rows, Options{})
	var got []market.Quote
	f.Subscribe(func(q market.Quote) { got = append(got, q) })
	if n := f.StepN(100); n != 9 {
		t.Fatalf("stepped %d rows, want 9", n)
	}
	if f.Step() {
		t.Fatal("a finished recording must not step")
	}
	first := got[0]
	if first.Instrument != "BTC-PERP" || first.Last.Cmp(events.MustDecimal("65000")) != 0 || first.Size.String() != "1" || first.Bid.String() != "64999.5" ||
		!first.At.Equal(time.Date(2024, 6, 3, 10, 0, 5, 0, time.UTC)) {
		t.Fatalf("first quote %+v", first)
	}
	quote := got[6] // the ETH quote row: a quote-only update keeps the last trade price
	if quote.Size.Sign() != 0 || quote.Bid.String() != "3203" || quote.Last.String() != "3205.5" {
		t.Fatalf("quote row %+v", quote)
	}
	if q, ok := f.Quote("BTC-PERP"); !ok || q.Last.String() != "65015" || q.Bid.String() != "64999.5" {
		t.Fatalf("newest BTC quote %+v", q)
	}
}

func TestReplayRebasesAndLoops(t *testing.T) {
	rows, _ := ReadFile("testdata/session.csv")
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := New(rows, Options{Rebase: true, Speed: events.Int(10), Loop: true, Now: func() time.Time { return start }})
	var at []time.Time
	f.Subscribe(func(q market.Quote) { at = append(at, q.At) })
	f.StepN(10)
	if !at[0].Equal(start) || !at[8].Equal(start.Add(14500*time.Millisecond)) || !at[9].Equal(start) {
		t.Fatalf("stamps %v", at)
	}
}

func TestReadRefusesBadRecordings(t *testing.T) {
	for _, doc := range []string{
		"price,size\n1,2\n",
		"time,instrument,price\nyesterday,BTC-PERP,1\n",
		"time,instrument,price\n2024-01-01T00:00:01Z,BTC-PERP,x\n",
		"time,instrument,bid\n2024-01-01T00:00:01Z,BTC-PERP,1\n",
		"time,instrument,price\n2024-01-01T00:00:02Z,BTC-PERP,1\n2024-01-01T00:00:01Z,BTC-PERP,1\n",
		"time,instrument,price\n",
	} {
		if _, err := Read(strings.NewReader(doc)); err == nil {
			t.Errorf("accepted %q", doc)
		}
	}
}

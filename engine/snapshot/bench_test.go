package snapshot

import (
	"fmt"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
)

// BenchmarkMailboxHold is what a snapshot round holds an account's mailbox
// for, with 100,000 orders in its history: the whole state encoded there
// (whole: as before the history was taken apart) against Marshal (the
// head; the history is encoded after the mailbox is let go: lists, in a
// first round, and lists-again, in a round with the full segments stored).
func BenchmarkMailboxHold(b *testing.B) {
	s := account.New("acct_1")
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i := range 100_000 {
		s = account.Apply(s, evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: fmt.Sprintf("ord_01JC%022d", i),
			ClientOrderID: fmt.Sprintf("client-order-%08d", i), Instrument: "BTC-PERP", Side: "buy", OrderType: "market",
			Quantity: events.Int(1), TimeInForce: "day", CreatedAt: at}})
		s = account.Apply(s, evacct.OrderFilled{BrokerOrderID: fmt.Sprintf("ord_01JC%022d", i), Done: true, Instrument: "BTC-PERP",
			Quantity: events.Int(1), Price: events.Int(65000), Balance: events.Int(100000), At: at})
	}
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			if _, err := gojson.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lists", func(b *testing.B) { // a first round's: every segment
		p, err := Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := p.Encode(&Segs{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lists-again", func(b *testing.B) { // a later round's: the segments stored already
		known := &Segs{lists: encoded(b, s, &Segs{}).next}
		p, err := Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := p.Encode(known); err != nil {
				b.Fatal(err)
			}
		}
	})
}

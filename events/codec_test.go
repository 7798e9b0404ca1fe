package events_test

import (
	"bytes"
	stdjson "encoding/json"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
	evtenant "github.com/svc/engine/events/tenant"
)

func dec(s string) events.Decimal   { return events.MustDecimal(s) }
func pdec(s string) *events.Decimal { d := dec(s); return &d }

// The codec is goccy/go-json for speed; every commit it writes and reads must
// be byte for byte what encoding/json makes of the same values, so the log
// stays plain JSON any reader can take.
func TestCodecRoundTripsAndMatchesEncodingJSON(t *testing.T) {
	reg := events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry())
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.UTC)
	unlock := at.Add(time.Hour)
	commits := []events.Commit{
		{CommandID: "01J0000000000000000000000A", Key: "c-1", Principal: events.Principal{TenantID: "t1", KeyID: "k1"}, At: at,
			Events: []events.Event{
				evacct.OrderPlaced{Order: evacct.Order{BrokerOrderID: "o1", ClientOrderID: "c-1", Instrument: "BTC-PERP", Side: "buy",
					OrderType: "stop_limit", Quantity: dec("0.001"), LimitPrice: pdec("65000.5"), StopPrice: pdec("-0"), TimeInForce: "gtc", ReduceOnly: true, CreatedAt: at}},
				evacct.OrderFilled{BrokerOrderID: "o1", FillID: "f1", Instrument: "BTC-PERP", Side: "buy", Quantity: dec("0.001"), Price: dec("65000.5"),
					Realized: dec("-12.3456789012345678901234"), Position: evacct.Position{Instrument: "BTC-PERP", Quantity: dec("-0.5"), AvgPrice: dec("1e3"), Multiplier: dec("1")},
					Balance: dec("49999.99"), OrderFilled: dec("0.001"), OrderAvgPrice: dec("65000.5"), Done: true, At: at},
			}},
		{CommandID: "01J0000000000000000000000B", Principal: events.Principal{System: "risk"}, At: at,
			Events: []events.Event{
				evacct.RiskLocked{Control: "dailyLoss", PeriodStart: at, TriggerPnl: pdec("-500"), TradingUnlockAt: unlock, SettingsLocked: true, SettingsUnlockAt: &unlock, At: at},
				evacct.OrderCanceled{BrokerOrderID: "o2", Reason: "risk", At: at},
			}},
		{CommandID: "01J0000000000000000000000C", At: at, Events: []events.Event{
			evtenant.Created{TenantID: "t1", Name: "Demo \"quoted\" <tag> é", Kind: "user", At: at},
			evtenant.KeyIssued{KeyID: "k1", Digest: "ab", Kind: "trading", Prefix: "svc_sk_", At: at},
		}},
		{CommandID: "01J0000000000000000000000D", At: at},
	}
	for _, c := range commits {
		b, err := reg.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if !stdjson.Valid(b) {
			t.Fatalf("commit %s is not valid JSON: %s", c.CommandID, b)
		}
		got, err := reg.Decode(b)
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		again, err := reg.Encode(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Errorf("round trip changed the commit:\n got %s\nwant %s", again, b)
		}
		if got.CommandID != c.CommandID || got.Key != c.Key || got.Principal != c.Principal || !got.At.Equal(c.At) || len(got.Events) != len(c.Events) {
			t.Errorf("envelope %+v, want %+v", got, c)
		}
		for i, e := range c.Events {
			want, err := stdjson.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			gotE, err := stdjson.Marshal(got.Events[i])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotE, want) {
				t.Errorf("event %s decoded as %s, want %s", e.Type(), gotE, want)
			}
			if !bytes.Contains(b, want) {
				t.Errorf("event %s encoded unlike encoding/json: %s does not hold %s", e.Type(), b, want)
			}
		}
	}
	if _, err := reg.Decode([]byte(`{"id":"x","at":"2026-01-01T00:00:00Z","events":[{"type":"nope.v1","data":{}}]}`)); err == nil {
		t.Error("an unknown event type decoded")
	}
	if _, err := reg.Decode([]byte(`{"id":"x","events":[{"type":"order.canceled.v1","data":{"at":12}}]}`)); err == nil {
		t.Error("a malformed event decoded")
	}
}

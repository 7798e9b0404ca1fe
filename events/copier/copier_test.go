package copier_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evcopier "github.com/svc/engine/events/copier"
)

// Every copier event reads back as written, in MessagePack and in JSON,
// every field set.
func TestCopierEventsRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 0, 123456789, time.UTC)
	d := func(s string) *events.Decimal { v := events.MustDecimal(s); return &v }
	f := evcopier.Follower{AccountID: "F1", Sizing: evcopier.Sizing{Mode: evcopier.SizeEquity, Value: *d("1.5"), Max: d("10")},
		InstrumentMap: map[string]string{"ES": "MES"}, Direction: evcopier.DirectionInverse, Enabled: true}
	evs := []events.Event{
		evcopier.GroupCreated{GroupID: "cg_1", Leader: "L", Name: "desk", Owner: "t1", OnBehalfOf: "a@b.c", LeaderRev: 7, At: at},
		evcopier.FollowerSet{Follower: f, LeaderRev: 8, At: at},
		evcopier.FollowerRemoved{AccountID: "F1", LeaderRev: 9, At: at},
		evcopier.MirrorsRecorded{LeaderSeq: 11, Partial: true, At: at, Actions: []evcopier.Action{{Op: evcopier.OpPlace, LeaderOrderID: "o1",
			Mirrors: []evcopier.Mirror{{Follower: "F1", Status: evcopier.StatusMirrored, ClientOrderID: "cp-x", BrokerOrderID: "b1",
				Instrument: "MES", Side: "sell", Quantity: d("0.25"), LeaderEquity: d("100000"), FollowerEquity: d("25000.5")},
				{Follower: "F2", Status: evcopier.StatusRefused, Code: "risk_locked"}}}}},
	}
	for _, reg := range []events.Registry{evcopier.Registry(), evcopier.Registry().WritingJSON()} {
		b, err := reg.Encode(events.Commit{CommandID: "c1", At: at, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		c, err := reg.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.Events, evs) {
			t.Fatalf("read back\n%+v\nwrote\n%+v", c.Events, evs)
		}
	}
}

package events_test

import (
	"bytes"
	stdjson "encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evfirm "github.com/svc/engine/events/firm"
	evidem "github.com/svc/engine/events/idem"
	evorg "github.com/svc/engine/events/org"
	evplan "github.com/svc/engine/events/plan"
	evtenant "github.com/svc/engine/events/tenant"
	evvenue "github.com/svc/engine/events/venue"
)

func dec(s string) events.Decimal   { return events.MustDecimal(s) }
func pdec(s string) *events.Decimal { d := dec(s); return &d }

// legacyJSON renders c as the JSON commits earlier versions wrote, which
// the log may still hold.
func legacyJSON(t *testing.T, c events.Commit) []byte {
	t.Helper()
	type ev struct {
		Type string `json:"type"`
		Data any    `json:"data"`
	}
	w := struct {
		ID        string           `json:"id"`
		Key       string           `json:"key,omitempty"`
		Principal events.Principal `json:"principal"`
		At        time.Time        `json:"at"`
		Events    []ev             `json:"events"`
	}{ID: c.CommandID, Key: c.Key, Principal: c.Principal, At: c.At}
	for _, e := range c.Events {
		w.Events = append(w.Events, ev{e.Type(), e})
	}
	b, err := stdjson.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameCommit fails unless got holds what want does, compared as the JSON
// encoding/json makes of them (the form every read model and answer takes).
func sameCommit(t *testing.T, how string, got, want events.Commit) {
	t.Helper()
	if got.CommandID != want.CommandID || got.Key != want.Key || got.Principal != want.Principal ||
		!got.At.Equal(want.At) || got.At.Location() != time.UTC || len(got.Events) != len(want.Events) {
		t.Fatalf("%s: envelope %+v, want %+v", how, got, want)
	}
	for i, e := range want.Events {
		wantJSON, err := stdjson.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		gotJSON, err := stdjson.Marshal(got.Events[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("%s: event %s decoded as\n%s\nwant\n%s", how, e.Type(), gotJSON, wantJSON)
		}
	}
}

// The engine writes commits in MessagePack and reads both that and the
// JSON commits of earlier versions, to the same values.
func TestCodecRoundTripsInBothEncodings(t *testing.T) {
	reg := events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry(), evorg.Registry(), evplan.Registry())
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
		{CommandID: "01J0000000000000000000000B", Principal: events.Principal{System: "risk"}, At: at.In(time.FixedZone("x", 3600)),
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
		if b[0] == '{' {
			t.Fatalf("commit %s was written as JSON", c.CommandID)
		}
		var asJSON bytes.Buffer
		if _, err := msgp.UnmarshalAsJSON(&asJSON, b); err != nil || !stdjson.Valid(asJSON.Bytes()) {
			t.Fatalf("commit %s does not read as JSON through a MessagePack reader: %v %s", c.CommandID, err, asJSON.Bytes())
		}
		got, err := reg.Decode(b)
		if err != nil {
			t.Fatalf("decode %s: %v", c.CommandID, err)
		}
		sameCommit(t, "MessagePack", got, c)
		again, err := reg.Encode(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Errorf("round trip changed commit %s", c.CommandID)
		}
		legacy, err := reg.Decode(legacyJSON(t, c))
		if err != nil {
			t.Fatalf("decode the JSON of %s: %v", c.CommandID, err)
		}
		legacy.At = legacy.At.UTC()
		sameCommit(t, "JSON", legacy, c)
	}
	// Another writer may put an event's data before its type.
	canceled := evacct.OrderCanceled{BrokerOrderID: "o9", Reason: "requested", At: at}
	swapped := msgp.AppendMapHeader(nil, 3)
	swapped = msgp.AppendString(msgp.AppendString(swapped, "id"), "01J0000000000000000000000F")
	swapped = msgp.AppendTimeExt(msgp.AppendString(swapped, "at"), at)
	swapped = msgp.AppendArrayHeader(msgp.AppendString(swapped, "events"), 1)
	swapped = msgp.AppendString(msgp.AppendMapHeader(swapped, 2), "data")
	swapped, _ = canceled.MarshalMsg(swapped)
	swapped = msgp.AppendString(msgp.AppendString(swapped, "type"), canceled.Type())
	got, err := reg.Decode(swapped)
	if err != nil {
		t.Fatalf("data before type: %v", err)
	}
	sameCommit(t, "data before type", got, events.Commit{CommandID: "01J0000000000000000000000F", At: at, Events: []events.Event{canceled}})
	for name, b := range map[string][]byte{
		"unknown JSON type":    []byte(`{"id":"x","at":"2026-01-01T00:00:00Z","events":[{"type":"nope.v1","data":{}}]}`),
		"malformed JSON event": []byte(`{"id":"x","events":[{"type":"order.canceled.v1","data":{"at":12}}]}`),
		"unknown binary type":  bytes.Replace(mustEncode(t, reg, commits[1]), []byte("order.canceled.v1"), []byte("order.canceled.v9"), 1),
		"truncated binary":     mustEncode(t, reg, commits[0])[:40],
		"binary with garbage":  append(mustEncode(t, reg, commits[0]), 0xc0),
		"not a commit":         {0x93, 1, 2, 3},
		"huge array header":    {0x81, 0xa6, 'e', 'v', 'e', 'n', 't', 's', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"empty":                {},
	} {
		if c, err := reg.Decode(b); err == nil {
			t.Errorf("%s decoded: %+v", name, c)
		}
	}
}

func mustEncode(t *testing.T, reg events.Registry, c events.Commit) []byte {
	t.Helper()
	b, err := reg.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fill sets every field of v, recursively, to a value that is not its zero.
func fill(t *testing.T, v reflect.Value, at time.Time) {
	fillWith(t, v, at, func() events.Decimal { return dec("-1234.5678") })
}

// Every event type the engine registers is written in MessagePack and reads
// back, with every field set, to what it was.
func TestEveryEventTypeRoundTripsInMessagePack(t *testing.T) {
	reg := events.Merge(evacct.Registry(), evtenant.Registry(), evfirm.Registry(), evorg.Registry(), evplan.Registry(),
		evvenue.Registry(), evidem.Registry())
	all := []events.Event{
		evvenue.Created{}, evvenue.KeyIssued{}, evvenue.KeyRevoked{}, evvenue.ProviderRegistered{}, evvenue.ConfigSet{},
		evvenue.PolicyStated{}, evvenue.PolicyPublished{}, evvenue.LiveHeld{}, evvenue.LiveReleased{}, evidem.KeyUsed{},
		evacct.Opened{}, evacct.OrderPlaced{}, evacct.OrderFilled{}, evacct.OrderCanceled{}, evacct.OrderReplaced{},
		evacct.StopTriggered{}, evacct.BalanceChanged{}, evacct.AccountReset{}, evacct.FirmHalted{}, evacct.FirmResumed{},
		evacct.ReconciliationHeld{}, evacct.ReconciliationReleased{}, evacct.RiskSettingsChanged{}, evacct.RiskLocked{},
		evacct.RiskUnlocked{}, evacct.EvaluationBreached{}, evacct.EvaluationReleased{}, evacct.BracketSet{}, evacct.BracketEnd{}, evacct.RiskPolicyBound{},
		evacct.ProviderLinked{}, evacct.ProviderUnlinked{}, evacct.OrderIntended{}, evacct.IntentSettled{}, evacct.BalanceObserved{},
		evacct.PositionObserved{}, evacct.SettingsObserved{}, evacct.Reconciled{}, evacct.ProviderTokenRenewed{}, evacct.ProviderLoginLost{},
		evacct.LiveConsentSet{},
		evtenant.Created{}, evtenant.KeyIssued{}, evtenant.KeyRevoked{},
		evtenant.PasswordSet{}, evtenant.VerificationIssued{}, evtenant.EmailVerified{}, evtenant.ResetIssued{},
		evtenant.SessionStarted{}, evtenant.SessionEnded{}, evtenant.OperatorGranted{}, evtenant.DemoReserved{},
		evtenant.LiveTradingSet{},
		evorg.Created{}, evorg.MemberInvited{}, evorg.MemberJoined{}, evorg.MemberRemoved{}, evorg.InvitationWithdrawn{},
		evplan.Saved{}, evplan.Deleted{},
		evfirm.WebhookRegistered{}, evfirm.WebhookRemoved{}, evfirm.RegistrationCreated{}, evfirm.RegistrationRefreshed{},
		evfirm.RegistrationRevoked{}, evfirm.RegistrationLinked{}, evfirm.DeliveryAttempted{}, evfirm.DeliveryStarted{},
	}
	if len(all) != len(reg) {
		t.Fatalf("the test lists %d event types, the registries %d: list the new ones", len(all), len(reg))
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.UTC)
	for _, zero := range all {
		v := reflect.New(reflect.TypeOf(zero)).Elem()
		fill(t, v, at)
		e := v.Interface().(events.Event)
		c := events.Commit{CommandID: "01J0000000000000000000000E", Key: "k", At: at, Events: []events.Event{e, zero}}
		b, err := reg.Encode(c)
		if err != nil {
			t.Fatalf("%s: %v", e.Type(), err)
		}
		if b[0] == '{' {
			t.Fatalf("%s has no MessagePack code: run go generate ./events/...", e.Type())
		}
		got, err := reg.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", e.Type(), err)
		}
		sameCommit(t, e.Type(), got, c)
	}
}

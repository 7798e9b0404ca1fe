package webhook

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	evvenue "github.com/svc/engine/events/venue"
)

// A venue's hold on live trading and its release reach the venue's firm as
// live_trading.held and live_trading.released, with the venue, the scope,
// the trader when one was held, the reason and who acted; other venue
// events reach no one. Both are types a firm can subscribe to.
func TestLiveHoldsBecomeTheFirmsWebhooks(t *testing.T) {
	at := time.Date(2026, 11, 2, 14, 0, 0, 0, time.UTC)
	by := evvenue.Actor{Kind: "key", ID: "vk_1", Name: "ops"}
	c := events.Committed{Subject: evvenue.Subject("v1"), Seq: 9, Commit: events.Commit{At: at, Events: []events.Event{
		evvenue.LiveHeld{Reason: "incident", By: by, Firm: "firm_1", At: at},
		evvenue.ConfigSet{Kind: "groups", ID: "g1", Version: 1, At: at},
		evvenue.LiveReleased{Trader: "a@example.com", By: by, Firm: "firm_1", At: at},
	}}}
	hooks := derive(c, map[string]acctInfo{})
	if len(hooks) != 2 {
		t.Fatalf("hooks %+v", hooks)
	}
	held, released := hooks[0], hooks[1]
	b, _ := json.Marshal(held.ev)
	if held.tenant != "firm_1" || held.ev.Type != "live_trading.held" || held.ev.ID != "evt_9_0" ||
		string(b) != `{"id":"evt_9_0","type":"live_trading.held","createdAt":"2026-11-02T14:00:00Z","data":{"heldAt":"2026-11-02T14:00:00Z","heldBy":{"kind":"key","id":"vk_1","name":"ops"},"reason":"incident","scope":"venue","venueId":"v1"}}` {
		t.Fatalf("held %s to %s", b, held.tenant)
	}
	if released.tenant != "firm_1" || released.ev.Type != "live_trading.released" || released.ev.Data["trader"] != "a@example.com" ||
		released.ev.Data["scope"] != "trader" || released.ev.ID != "evt_9_2" {
		t.Fatalf("released %+v", released)
	}
	for _, typ := range []string{held.ev.Type, released.ev.Type} {
		if !slices.Contains(evfirm.WebhookTypes, typ) {
			t.Errorf("%s is not a webhook type a firm can subscribe to", typ)
		}
	}
}

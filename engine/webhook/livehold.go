package webhook

import (
	"github.com/svc/engine/events"
	evfirm "github.com/svc/engine/events/firm"
	evvenue "github.com/svc/engine/events/venue"
)

// liveHoldHooks maps a venue's holds on live trading to its firm's events
// live_trading.held and live_trading.released: the venue, the trader when
// one was held (the email the venue registered), the venue's reason and who
// acted (owner or key), never a secret.
func liveHoldHooks(c events.Committed, id func(int) string) []hook {
	venueID, ok := events.SubjectID(c.Subject, events.KindVenue)
	if !ok {
		return nil
	}
	var out []hook
	for i, e := range c.Events {
		var firm, typ string
		var data map[string]any
		switch e := e.(type) {
		case evvenue.LiveHeld:
			firm, typ = e.Firm, evfirm.TypeLiveTradingHeld
			data = map[string]any{"venueId": venueID, "scope": scope(e.Trader), "reason": e.Reason, "heldBy": e.By, "heldAt": e.At.UTC()}
			if e.Trader != "" {
				data["trader"] = e.Trader
			}
		case evvenue.LiveReleased:
			firm, typ = e.Firm, evfirm.TypeLiveTradingReleased
			data = map[string]any{"venueId": venueID, "scope": scope(e.Trader), "releasedBy": e.By, "releasedAt": e.At.UTC()}
			if e.Trader != "" {
				data["trader"] = e.Trader
			}
		default:
			continue
		}
		if firm != "" {
			out = append(out, hook{firm, Event{ID: id(i), Type: typ, CreatedAt: c.At.UTC(), Data: data}})
		}
	}
	return out
}

func scope(trader string) string {
	if trader == "" {
		return "venue"
	}
	return "trader"
}

package venue

import (
	"net/http"
	"strings"

	"github.com/svc/engine/commands"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// A venue holds live trading off for its traders (engine/live.go): the
// whole venue, or one trader by the email it registered them by. The
// routes are GET .../live-trading, POST .../live-trading/hold and POST
// .../live-trading/release under /api/venues/{venueId} (a venue key:
// account:manage writes, account:read or account:manage reads) and their
// /api/back-office/venues/{venueId} twins (a verified owner's session).

// holdBody is a hold's body: the reason is required; no trader holds the
// whole venue.
type holdBody struct {
	Trader string `json:"trader"`
	Reason string `json:"reason"`
}

// releaseBody is a release's body ({} or empty: the whole venue's hold).
type releaseBody struct {
	Trader string `json:"trader"`
}

// actor is who acts through the door: the signed-in owner with their
// email, or the venue key.
func (h *Handlers) actor(r *http.Request) (venuecmd.Actor, error) {
	door := DoorOf(r)
	if door.Owner != nil {
		u, err := projections.GetInto[projections.User](r.Context(), h.d.Store, projections.CollUser, door.Owner.UserID)
		if err != nil {
			return venuecmd.Actor{}, err
		}
		return venuecmd.Actor{Owner: door.Owner, Email: u.Email}, nil
	}
	p, _ := httpx.PrincipalOf(r)
	return venuecmd.Actor{KeyID: p.KeyID}, nil
}

// HoldLive holds live trading off (POST .../live-trading/hold, body
// {reason, trader?}): the order and reverse routes refuse every order on
// the venue's traders' provider accounts (403 feature_disabled,
// params.heldBy venue) until the venue releases it. Answers {liveTrading,
// trader?} as the hold leaves them.
func (h *Handlers) HoldLive(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b holdBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return nil, err
	}
	by, err := h.actor(r)
	if err != nil {
		return nil, err
	}
	return h.exec(r, DoorOf(r).Venue.VenueID, &venuecmd.HoldLive{Trader: b.Trader, Reason: b.Reason, By: by})
}

// ReleaseLive ends a hold (POST .../live-trading/release, body {trader?}):
// the whole venue's, or one trader's. Releasing what is not held records
// nothing and answers the same.
func (h *Handlers) ReleaseLive(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b releaseBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return nil, err
	}
	by, err := h.actor(r)
	if err != nil {
		return nil, err
	}
	return h.exec(r, DoorOf(r).Venue.VenueID, &venuecmd.ReleaseLive{Trader: b.Trader, By: by})
}

// GetLive reads the venue's holds (GET .../live-trading, ?trader= for one
// trader's): {liveTrading, traders}, from the venue's aggregate.
func (h *Handlers) GetLive(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	trader := q.Get("trader")
	if len(q["trader"]) > 1 {
		return commands.BadField("trader", nil, "name one trader")
	}
	if q.Has("trader") {
		if err := commands.Email("trader", trader); err != nil {
			return err
		}
		trader = strings.ToLower(trader)
	}
	v, err := h.d.Engine.VenueLive(r.Context(), DoorOf(r).Venue.VenueID, trader)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

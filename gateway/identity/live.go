package identity

import (
	"context"
	"net/http"
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// liveBody sets the live trading switch: on needs the password again.
type liveBody struct {
	Enabled  *bool  `json:"enabled"`
	Password string `json:"password"`
}

// LiveTrading reads the caller's live trading switch
// (GET /api/account/live-trading, a session or the user's Trading API key),
// with the venues' holds on the caller's provider accounts.
func (h *Handlers) LiveTrading(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	return h.answerLive(r.Context(), w, p.TenantID)
}

// answerLive answers the user's switch and the venues' holds on the user's
// provider accounts; either unreadable is 503 live_trading_unreadable.
func (h *Handlers) answerLive(ctx context.Context, w http.ResponseWriter, userID string) error {
	v, err := h.d.Engine.LiveTrading(ctx, userID)
	if err != nil {
		return err
	}
	accts, err := projections.AccountsOf(ctx, h.d.Store, userID)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(accts))
	for _, a := range accts {
		ids = append(ids, a.AccountID) // the engine looks at its provider accounts only
	}
	holds, err := h.d.Engine.LiveHolds(ctx, ids)
	if err != nil {
		return err
	}
	writeLive(w, v, holds)
	return nil
}

// SetLiveTrading sets the caller's live trading switch
// (POST /api/account/live-trading, a signed-in session): on only with the
// account's password again (a wrong one is 401 invalid_credentials and
// counts as a failed sign-in); off with the session alone. Setting it to
// what it is records nothing and answers the same. Switching on lifts no
// venue's hold: the answer lists them.
func (h *Handlers) SetLiveTrading(w http.ResponseWriter, r *http.Request) error {
	var b liveBody
	if err := httpx.Decode(r, &b, 4<<10); err != nil {
		return err
	}
	if b.Enabled == nil {
		return commands.InvalidField("enabled", nil, "enabled is true (live trading on, with the password) or false")
	}
	p, _ := httpx.PrincipalOf(r)
	if *b.Enabled {
		if err := h.confirmPassword(r, p.UserID, b.Password); err != nil {
			return err
		}
	}
	if _, err := h.exec(r.Context(), p.Principal, p.UserID, &tenantcmd.SetLiveTrading{On: *b.Enabled}); err != nil {
		return err
	}
	return h.answerLive(r.Context(), w, p.UserID)
}

func writeLive(w http.ResponseWriter, v engine.LiveTradingView, holds []engine.VenueHold) {
	out := map[string]any{"enabled": v.On, "source": "default"}
	if v.Set {
		out["source"], out["changedAt"] = "user", v.At.UTC().Format(time.RFC3339Nano)
	}
	hs := make([]map[string]any, 0, len(holds))
	for _, x := range holds {
		hs = append(hs, map[string]any{"accountId": x.AccountID, "heldBy": engine.HeldByVenue,
			"venue": map[string]any{"id": x.VenueID, "name": x.VenueName}, "scope": x.Scope, "since": x.Since.UTC().Format(time.RFC3339Nano)})
	}
	out["holds"] = hs
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"liveTrading": out})
}

package identity

import (
	"net/http"
	"time"

	"github.com/svc/engine/commands"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/httpx"
)

// liveBody sets the live trading switch: on needs the password again.
type liveBody struct {
	Enabled  *bool  `json:"enabled"`
	Password string `json:"password"`
}

// LiveTrading reads the caller's live trading switch
// (GET /api/account/live-trading, a session or the user's Trading API key).
func (h *Handlers) LiveTrading(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	v, err := h.d.Engine.LiveTrading(r.Context(), p.TenantID)
	if err != nil {
		return err
	}
	writeLive(w, v)
	return nil
}

// SetLiveTrading sets the caller's live trading switch
// (POST /api/account/live-trading, a signed-in session): on only with the
// account's password again (a wrong one is 401 invalid_credentials and
// counts as a failed sign-in); off with the session alone. Setting it to
// what it is records nothing and answers the same.
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
	v, err := h.d.Engine.LiveTrading(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeLive(w, v)
	return nil
}

func writeLive(w http.ResponseWriter, v engine.LiveTradingView) {
	out := map[string]any{"enabled": v.On, "source": "default"}
	if v.Set {
		out["source"], out["changedAt"] = "user", v.At.UTC().Format(time.RFC3339Nano)
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"liveTrading": out})
}

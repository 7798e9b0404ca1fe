package connect

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/svc/engine/commands"
	evacct "github.com/svc/engine/events/account"
	evconnect "github.com/svc/engine/events/connect"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// A provider account the trader links through hosted Connect belongs to the
// app's tenant: whether the app may trade it live (real orders at the
// provider, on the trader's money) is the trader's word, asked on the link
// form (liveConsent) and recorded with the link. The page shows it beside
// each connected provider account; the trader withdraws it there in one
// step, and grants it by linking the account again with the box checked
// (the key or password again, which the app never holds). Disconnecting the
// app from the account ends it.

// consentView is the trader's consent on one provider account, as the
// session answers it: granted, the app's orders reach the provider; at,
// when the trader said (nil: never, and the engine's default applies).
type consentView struct {
	AccountID string     `json:"accountId"`
	Granted   bool       `json:"granted"`
	At        *time.Time `json:"at"`
}

// consents are the trader's consents on those of accts that are provider
// accounts linked through the app.
func (h *Handlers) consents(ctx context.Context, accts []projections.Account) ([]consentView, error) {
	out := []consentView{}
	for _, x := range accts {
		v, ok, err := h.d.Engine.LiveConsent(ctx, x.AccountID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		c := consentView{AccountID: x.AccountID, Granted: v.On}
		if v.Set {
			at := v.At.UTC()
			c.At = &at
		}
		out = append(out, c)
	}
	return out, nil
}

// traderAccount reads the account of accountId that the link's trader
// linked through the app: 404 for any other.
func (h *Handlers) traderAccount(ctx context.Context, a projections.App, trader, accountID string) (projections.Account, error) {
	x, err := projections.GetInto[projections.Account](ctx, h.d.Store, projections.CollAccount, accountID)
	if errors.Is(err, projections.ErrNotFound) || (err == nil && (x.AppID != a.AppID || x.Trader != trader)) {
		return x, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no account of yours connected to this app has that id")
	}
	return x, err
}

// WithdrawConsent is the trader's withdrawal of their consent to live
// trading by the app on one of their provider accounts (POST
// /api/connect/hosted/live-consent/withdraw, {accountId}, the frame
// session): from then the app's orders on it are refused (403
// feature_disabled, params.heldBy trader) before anything is sent, until
// the trader links the account again with live trading allowed. It answers
// {accountId, granted: false}; withdrawing again changes nothing. 404 for
// an account of the trader's that is no provider account linked through
// the app.
func (h *Handlers) WithdrawConsent(w http.ResponseWriter, r *http.Request) error {
	accountID, _, _, err := h.framedAccount(r)
	if err != nil {
		return err
	}
	if _, ok, err := h.d.Engine.LiveConsent(r.Context(), accountID); err != nil || !ok {
		if err == nil {
			err = httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "that account is not one you linked at a provider through this app")
		}
		return err
	}
	res, err := h.d.Engine.WithdrawLiveConsent(r.Context(), hostedSystem, accountID, evacct.ConsentHosted)
	if err != nil {
		return err
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accountId": accountID, "granted": false})
	return nil
}

// framedAccount reads the {accountId} body of a frame session's request on
// one of the trader's accounts, with the session's link and app: the
// account must be one the trader connected to the session's app.
func (h *Handlers) framedAccount(r *http.Request) (string, evconnect.Link, projections.App, error) {
	var b struct {
		AccountID string `json:"accountId"`
	}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return "", evconnect.Link{}, projections.App{}, err
	}
	if err := commands.Key("accountId", b.AccountID, 64); err != nil {
		return "", evconnect.Link{}, projections.App{}, err
	}
	l, a, err := h.frame(r)
	if err != nil {
		return "", l, a, err
	}
	if _, err := h.traderAccount(r.Context(), a, l.Trader, b.AccountID); err != nil {
		return "", l, a, err
	}
	return b.AccountID, l, a, nil
}

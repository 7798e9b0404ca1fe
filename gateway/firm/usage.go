package firm

import (
	"errors"
	"github.com/svc/engine/commands"
	"net/http"
	"time"

	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	firmproj "github.com/svc/engine/projections/firm"
)

func (h *Handlers) month(r *http.Request) (string, error) {
	m := r.URL.Query().Get("month")
	if m == "" {
		return h.d.Engine.Now().UTC().Format("2006-01"), nil
	}
	if _, err := time.Parse("2006-01", m); err != nil || len(m) != 7 {
		return "", httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "month must be YYYY-MM")
	}
	return m, nil
}

// usage is the metered usage of a month: the distinct accounts that traded,
// the price per account and the total, read from the usage projection.
func (h *Handlers) Usage(w http.ResponseWriter, r *http.Request) error {
	month, err := h.month(r)
	if err != nil {
		return err
	}
	m, err := projections.GetInto[firmproj.UsageMonth](r.Context(), h.d.Store, firmproj.CollUsageMonth, tenantOf(r)+"/"+month)
	if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"month": month, "accounts": m.Accounts, "pricePerAccount": h.cfg.UsagePrice,
		"currency": h.cfg.UsageCurrency, "total": h.cfg.UsagePrice.Mul(events.Int(int64(m.Accounts))),
	})
	return nil
}

// usageAccounts drills a month's usage down per account: fills, first and last fill.
func (h *Handlers) UsageAccounts(w http.ResponseWriter, r *http.Request) error {
	month, err := h.month(r)
	if err != nil {
		return err
	}
	us, err := projections.ListInto[firmproj.Usage](r.Context(), h.d.Store, firmproj.CollUsage, projections.Query{Prefix: tenantOf(r) + "/" + month + "/"})
	if err != nil {
		return err
	}
	if us == nil {
		us = []firmproj.Usage{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"month": month, "accounts": us})
	return nil
}

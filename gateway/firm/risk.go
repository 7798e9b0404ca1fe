package firm

import (
	"net/http"

	"github.com/svc/engine/gateway/httpx"
	riskgw "github.com/svc/engine/gateway/risk"
	"github.com/svc/engine/projections"
)

// riskAccount resolves ?accountNumber= to one of the firm's accounts.
func (h *Handlers) riskAccount(r *http.Request) (projections.Account, error) {
	q := r.URL.Query()
	n := q.Get("accountNumber")
	if n == "" {
		n = q.Get("account")
	}
	return h.account(r.Context(), tenantOf(r), n)
}

func (h *Handlers) riskAnswer(w http.ResponseWriter, r *http.Request, accountID string) error {
	v, _, err := riskgw.Read(r.Context(), h.d.Engine, accountID)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"lock": riskgw.Render(v)})
	return nil
}

// getRisk is the firm's view of an account's risk controls and lock: the same
// RiskLock the trader reads on GET /api/risk.
func (h *Handlers) GetRisk(w http.ResponseWriter, r *http.Request) error {
	a, err := h.riskAccount(r)
	if err != nil {
		return err
	}
	return h.riskAnswer(w, r, a.AccountID)
}

// putRisk replaces an account's five controls in one write, with the same
// command and rules as PUT /api/risk (settings_locked included).
func (h *Handlers) PutRisk(w http.ResponseWriter, r *http.Request) error {
	a, err := h.riskAccount(r)
	if err != nil {
		return err
	}
	c, err := riskgw.DecodeSettings(r, a)
	if err != nil {
		return err
	}
	if _, err := h.exec(r, a.AccountID, "", c); err != nil {
		return err
	}
	return h.riskAnswer(w, r, a.AccountID)
}

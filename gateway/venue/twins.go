package venue

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gorilla/mux"

	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	firmgw "github.com/svc/engine/gateway/firm"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
)

// Twins serve the venue door's twins of the legacy partner routes (halt and
// resume, balance operations and their receipts, usage, webhooks) under
// /api/partner/venues/{venueId}/ and /api/back-office/venues/{venueId}/. Each
// runs the same command as its partner route (gateway/firm), for the venue's
// firm tenant, and answers errors in the venue shape. Writes take an
// Idempotency-Key, which the aggregate written records with the answer (a
// balance operation's is its referenceId, the account's ledger reference).
type Twins struct {
	d *api.Deps
	f *firmgw.Handlers
}

// Twins makes the twins over the partner routes' handlers f (the same
// handlers: balance references are serialised in one place).
func (h *Handlers) Twins(f *firmgw.Handlers) *Twins { return &Twins{d: h.d, f: f} }

// AsFirm makes the partner handlers under next act for the door's venue's
// firm tenant (the tenant of its accounts, balances and webhooks). It runs
// after KeyDoor or OwnerDoor.
func AsFirm(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(firmgw.ForTenant(r.Context(), DoorOf(r).Venue.FirmTenantID)))
	})
}

// Halt halts trading on the path's account with the firm's halt (POST
// .../accounts/{accountId}/halt): the same operation as POST
// /api/partner/accounts/halt, answering {accountNumber, halted}. The body is
// {} or empty; the account must be one of the venue's (else 404).
func (t *Twins) Halt(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	return t.setHalt(r, true)
}

// Resume clears the firm's own halt (POST .../accounts/{accountId}/resume).
func (t *Twins) Resume(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	return t.setHalt(r, false)
}

func (t *Twins) setHalt(r *http.Request, halt bool) ([]events.Event, error) {
	if err := httpx.Decode(r, &struct{}{}, 0); err != nil {
		return nil, err
	}
	a, err := t.f.AccountByID(r, mux.Vars(r)["accountId"])
	if err != nil {
		return nil, err
	}
	res, err := t.f.SetHalt(r, a.AccountID, halt)
	return res.Events, err
}

// Reset returns the path's account to its starting state (POST
// .../accounts/{accountId}/reset): the partner route's operation with the
// Idempotency-Key as its referenceId, answering {account}.
func (t *Twins) Reset(w http.ResponseWriter, r *http.Request) error {
	if err := httpx.Decode(r, &struct{}{}, 0); err != nil {
		return err
	}
	a, err := t.f.AccountByID(r, mux.Vars(r)["accountId"])
	if err != nil {
		return err
	}
	v, err := t.f.ResetAccount(r, a, idem.Key(r))
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"account": v})
	return nil
}

// BalanceOp credits, debits or adjusts one of the venue's accounts (POST
// .../balance-ops): the partner route's operation with the Idempotency-Key
// as its referenceId, so the account's reference record keys it (the same
// key and body answer the original receipt, another body 409).
func (t *Twins) BalanceOp(w http.ResponseWriter, r *http.Request) error {
	var body firmgw.BalanceRequest
	if err := httpx.Decode(r, &body, firmgw.BalanceBodyLimit); err != nil {
		return err
	}
	rc, err := t.f.ApplyBalance(r, idem.Key(r), body)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, rc)
	return nil
}

// Receipt answers the receipt of a balance operation by its referenceId (GET
// .../balance-ops/{referenceId}), as the operator's receipt route does.
func (t *Twins) Receipt(w http.ResponseWriter, r *http.Request) error {
	rc, err := firmgw.ReadReceipt(r.Context(), t.d.Store, DoorOf(r).Venue.FirmTenantID, mux.Vars(r)["referenceId"])
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, rc)
	return nil
}

// RegisterWebhook adds an endpoint (POST .../webhooks). The firm records the
// answer without the signing secret; the secret, derived from the endpoint,
// is added to the first answer and to a replay of it alike.
func (t *Twins) RegisterWebhook(w http.ResponseWriter, r *http.Request) error {
	c, err := t.f.NewWebhook(r)
	if err != nil {
		return err
	}
	res, err := t.f.ExecFirm(r, c)
	w.Header().Set("Cache-Control", "no-store")
	status, body := 0, []byte(nil)
	if rp, ok := idem.AsReplay(err); ok {
		w.Header().Set(idem.ReplayedHeader, "true")
		status, body = rp.Status, rp.Body
	} else if err != nil {
		return err
	} else {
		status, body, _ = idem.Answer(res.Events)
	}
	var m struct {
		Webhook map[string]any `json:"webhook"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Webhook == nil {
		return fmt.Errorf("venue: the recorded answer of a webhook registration has no webhook: %v", err)
	}
	id, _ := m.Webhook["id"].(string)
	m.Webhook["secret"] = t.f.WebhookSecret(r, id)
	httpx.WriteJSON(w, status, m)
	return nil
}

// RemoveWebhook removes the endpoint of the path's id (DELETE .../webhooks/{id}).
func (t *Twins) RemoveWebhook(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	res, err := t.f.ExecFirm(r, &firmcmd.RemoveWebhook{ID: mux.Vars(r)["id"]})
	return res.Events, err
}

// TestWebhook delivers a signed ping at once and answers its outcome (POST
// .../webhooks/test). The firm keeps the outcome under the Idempotency-Key:
// a repeat answers it again and pings no more.
func (t *Twins) TestWebhook(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	id, err := firmgw.TestedWebhook(r)
	if err != nil {
		return nil, err
	}
	if err := t.f.AdviseFirm(r, &firmcmd.TestWebhook{WebhookID: id}); err != nil {
		return nil, err // a replay of the first outcome, or a refusal
	}
	out, err := t.f.PingWebhook(r, id)
	if err != nil {
		return nil, err
	}
	res, err := t.f.ExecFirm(r, &firmcmd.TestWebhook{WebhookID: id,
		Outcome: &firmcmd.PingOutcome{Status: out.Status, ResponseCode: out.ResponseCode, Error: out.Error}})
	return res.Events, err
}

package firm

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	firmproj "github.com/svc/engine/projections/firm"
)

// BalanceBodyLimit is the largest balance operation body (413 above).
const BalanceBodyLimit = 16 << 10

// referenceFree refuses a referenceId the firm already used on another account.
func (h *Handlers) referenceFree(ctx context.Context, tenant, ref, accountID string) error {
	rc, err := projections.GetInto[firmproj.Receipt](ctx, h.d.Store, firmproj.CollReceipt, tenant+"/"+ref)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return nil
	case err != nil:
		return retryable(err)
	case rc.AccountID != accountID:
		return &httpx.Error{Status: http.StatusConflict, Code: commands.CodeIdempotencyConflict,
			Msg: "referenceId was already used with a different request; the original operation stands", Extra: map[string]any{"referenceId": ref}}
	}
	return nil
}

// balanceOp credits, debits or adjusts an account, ledger-first on the
// referenceId: the same reference and body answers the original receipt, a
// different body 409; every 503 carries Retry-After: 1.
func (h *Handlers) BalanceOp(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ReferenceID string `json:"referenceId"`
		BalanceRequest
	}
	if err := httpx.Decode(r, &body, BalanceBodyLimit); err != nil {
		return err
	}
	rc, err := h.ApplyBalance(r, body.ReferenceID, body.BalanceRequest)
	if err != nil {
		return err
	}
	writeReceipt(w, rc)
	return nil
}

// BalanceRequest is a balance operation's body but its reference: the
// partner route's body carries referenceId, the venue door's twin takes its
// Idempotency-Key as the reference.
type BalanceRequest struct {
	AccountNumber string          `json:"accountNumber"`
	Op            string          `json:"op"`
	Amount        *events.Decimal `json:"amount"`
	Currency      string          `json:"currency"`
}

// ApplyBalance runs a balance operation of the firm's under reference ref,
// ledger-first: the account records ref with a digest of the operation, so the
// same reference and operation answer the original receipt and another
// operation (or another account) under it is 409 idempotency_conflict. Every
// 503 carries Retry-After: 1.
func (h *Handlers) ApplyBalance(r *http.Request, ref string, body BalanceRequest) (firmproj.ReceiptView, error) {
	if body.Amount == nil {
		return firmproj.ReceiptView{}, commands.BadField("amount", nil, "amount is required")
	}
	cmd := &firmcmd.BalanceOp{ReferenceID: ref, AccountNumber: body.AccountNumber, Op: body.Op,
		Amount: *body.Amount, Currency: body.Currency, Env: h.d.Env}
	if err := cmd.Validate(); err != nil {
		return firmproj.ReceiptView{}, err
	}
	tenant := tenantOf(r)
	a, err := h.account(r.Context(), tenant, body.AccountNumber)
	if err != nil {
		return firmproj.ReceiptView{}, retryable(err)
	}
	defer h.refs.lock(tenant + "/" + ref)()
	if err := h.referenceFree(r.Context(), tenant, ref, a.AccountID); err != nil {
		return firmproj.ReceiptView{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 15*time.Second)
	defer cancel()
	res, err := h.d.Engine.BalanceOp(ctx, a.AccountID, h.d.Engine.Envelope(api.Principal(r), ref, cmd))
	if err != nil {
		return firmproj.ReceiptView{}, retryable(err)
	}
	if err := h.d.Settle(ctx, res); err != nil {
		return firmproj.ReceiptView{}, retryable(err)
	}
	for _, e := range res.Events {
		if bc, ok := e.(evacct.BalanceChanged); ok {
			return firmproj.ReceiptView{ReferenceID: bc.ReferenceID, AccountNumber: a.AccountNumber, Op: bc.Op,
				Amount: bc.Amount, State: "applied", AppliedAt: bc.At}, nil
		}
	}
	rc, err := projections.GetInto[firmproj.Receipt](r.Context(), h.d.Store, firmproj.CollReceipt, tenant+"/"+ref)
	if err != nil {
		return firmproj.ReceiptView{}, retryable(err)
	}
	return rc.ReceiptView, nil
}

// ReadReceipt is the receipt of the balance operation tenant made under
// reference ref: 404 not_found when it made none.
func ReadReceipt(ctx context.Context, store projections.Store, tenant, ref string) (firmproj.ReceiptView, error) {
	rc, err := projections.GetInto[firmproj.Receipt](ctx, store, firmproj.CollReceipt, tenant+"/"+ref)
	if errors.Is(err, projections.ErrNotFound) {
		return firmproj.ReceiptView{}, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no balance operation has that referenceId")
	}
	return rc.ReceiptView, err
}

func writeReceipt(w http.ResponseWriter, rc firmproj.ReceiptView) {
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, rc)
}

package partner

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	fcmd "github.com/svc/engine/commands/firm"
	tcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/account"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// MaxBatch bounds the accounts one provisioning request creates.
const MaxBatch = 100

// DefaultStartingBalance is an evaluation account's balance when the firm states none.
var DefaultStartingBalance = events.Int(50000)

type provisionItem struct {
	ReferenceID     string          `json:"referenceId"`
	Email           string          `json:"email"`
	StartingBalance *events.Decimal `json:"startingBalance"`
	Currency        string          `json:"currency"`
	Label           string          `json:"label"`
}

type provisionResult struct {
	ReferenceID string         `json:"referenceId"`
	Status      string         `json:"status"` // created, existing, conflict, refused
	Account     *accountView   `json:"account,omitempty"`
	Code        string         `json:"code,omitempty"`
	Error       string         `json:"error,omitempty"`
	Params      map[string]any `json:"params,omitempty"`
}

// provision batch-creates evaluation accounts, idempotent per item on the
// firm's referenceId. A currency not issued here refuses the whole batch.
func (h *handlers) provision(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Accounts []provisionItem `json:"accounts"`
	}
	if err := httpx.Decode(r, &body, 0); err != nil {
		return err
	}
	if len(body.Accounts) == 0 || len(body.Accounts) > MaxBatch {
		return httpx.Errorf(http.StatusBadRequest, "invalid_request", "accounts must hold 1 to %d items", MaxBatch)
	}
	for i := range body.Accounts {
		it := &body.Accounts[i]
		if it.Currency == "" {
			it.Currency = "USD"
		}
		if !fcmd.Issuable(it.Currency, h.d.Env) {
			return fcmd.NotIssuable(it.Currency, h.d.Env)
		}
	}
	tenant := tenantOf(r)
	out := make([]provisionResult, len(body.Accounts))
	errs := make([]error, len(body.Accounts))
	// Items are independent aggregates: up to 8 commit at once, unless a
	// referenceId repeats inside the batch, which then runs in request order.
	par, seen := 8, map[string]bool{}
	for _, it := range body.Accounts {
		if seen[it.ReferenceID] {
			par = 1
		}
		seen[it.ReferenceID] = true
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, it := range body.Accounts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = h.provisionOne(r, tenant, it)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return retryable(err)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"results": out})
	return nil
}

func refused(ref string, err error) (provisionResult, bool) {
	var rf *commands.Refusal
	if errors.As(err, &rf) && rf.Status < 500 {
		return provisionResult{ReferenceID: ref, Status: "refused", Code: rf.Code, Error: rf.Msg, Params: rf.Params}, true
	}
	return provisionResult{}, false
}

func (h *handlers) provisionOne(r *http.Request, tenant string, it provisionItem) (provisionResult, error) {
	if err := fcmd.ValidReference(it.ReferenceID); err != nil {
		res, _ := refused(it.ReferenceID, err)
		return res, nil
	}
	email := strings.ToLower(strings.TrimSpace(it.Email))
	reg := fcmd.CreateRegistration{ID: "x", Email: email}
	if err := reg.Validate(); err != nil {
		res, _ := refused(it.ReferenceID, commands.BadRequest("email must be a plain email address"))
		return res, nil
	}
	start := DefaultStartingBalance
	if it.StartingBalance != nil {
		start = *it.StartingBalance
	}
	if start.Sign() < 0 {
		res, _ := refused(it.ReferenceID, commands.BadRequest("startingBalance must be zero or more"))
		return res, nil
	}
	if err := fcmd.CheckPrecision(start, it.Currency, "evaluation"); err != nil {
		res, _ := refused(it.ReferenceID, err)
		return res, nil
	}
	label := it.Label
	if label == "" {
		label = email
	}
	if len(label) > 128 {
		res, _ := refused(it.ReferenceID, commands.BadRequest("label is at most 128 characters"))
		return res, nil
	}
	id := fcmd.AccountID(tenant, it.ReferenceID)
	open := &tcmd.OpenAccount{TenantID: tenant, Broker: api.DefaultBroker, AccountNumber: fcmd.AccountNumber(tenant, it.ReferenceID),
		Label: label, Currency: it.Currency, StartingBalance: start, Kind: "evaluation", Email: email, ReferenceID: it.ReferenceID}
	res, err := h.exec(r, id, it.ReferenceID, open)
	if err != nil {
		if rr, ok := refused(it.ReferenceID, err); ok {
			return rr, nil
		}
		return provisionResult{}, err
	}
	status := "created"
	if len(res.Events) == 0 {
		same := false
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		err := h.d.Engine.InspectAccount(ctx, id, func(s *account.State, _ uint64) {
			same = s.Email == open.Email && s.Currency == open.Currency && s.Label == open.Label &&
				s.StartingBalance.Cmp(open.StartingBalance) == 0 && s.TenantID == tenant
		})
		if err != nil {
			return provisionResult{}, err
		}
		if !same {
			return provisionResult{ReferenceID: it.ReferenceID, Status: "conflict", Code: "idempotency_conflict",
				Error: "referenceId was already used with a different request; the original account stands"}, nil
		}
		status = "existing"
	}
	a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, id)
	if err != nil {
		return provisionResult{}, err
	}
	v, err := h.view(r.Context(), a)
	if err != nil {
		return provisionResult{}, err
	}
	return provisionResult{ReferenceID: it.ReferenceID, Status: status, Account: &v}, nil
}

// listAccounts lists the firm's evaluation accounts with live balances.
func (h *handlers) listAccounts(w http.ResponseWriter, r *http.Request) error {
	accts, err := projections.AccountsOf(r.Context(), h.d.Store, tenantOf(r))
	if err != nil {
		return err
	}
	out := make([]accountView, 0, len(accts))
	for _, a := range accts {
		if a.Kind != "evaluation" {
			continue
		}
		v, err := h.view(r.Context(), a)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accounts": out})
	return nil
}

type accountBody struct {
	AccountNumber string `json:"accountNumber"`
}

// reset returns an account to its starting state, ledger-first: the ledger
// entry is the first event of the one commit that makes every change.
func (h *handlers) reset(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		AccountNumber string `json:"accountNumber"`
		ReferenceID   string `json:"referenceId"`
	}
	if err := httpx.Decode(r, &body, 16<<10); err != nil {
		return err
	}
	tenant := tenantOf(r)
	a, err := h.account(r.Context(), tenant, body.AccountNumber)
	if err != nil {
		return err
	}
	cmd := &fcmd.ResetAccount{ReferenceID: body.ReferenceID}
	if body.ReferenceID != "" {
		defer h.refs.lock(tenant + "/" + body.ReferenceID)()
		if err := h.referenceFree(r.Context(), tenant, body.ReferenceID, a.AccountID); err != nil {
			return err
		}
	}
	if _, err := h.exec(r, a.AccountID, body.ReferenceID, cmd); err != nil {
		return retryable(err)
	}
	a, err = projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, a.AccountID)
	if err != nil {
		return err
	}
	v, err := h.view(r.Context(), a)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"account": v})
	return nil
}

func (h *handlers) haltOrResume(w http.ResponseWriter, r *http.Request, halt bool) error {
	var body accountBody
	if err := httpx.Decode(r, &body, 0); err != nil {
		return err
	}
	a, err := h.account(r.Context(), tenantOf(r), body.AccountNumber)
	if err != nil {
		return err
	}
	var cmd commands.Command = &fcmd.ResumeAccount{}
	if halt {
		cmd = &fcmd.HaltAccount{}
	}
	if _, err := h.exec(r, a.AccountID, "", cmd); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accountNumber": a.AccountNumber, "halted": halt})
	return nil
}

// halt is the firm's halt: idempotent; 409 lock_not_owned while a lock the firm
// does not own is on the account.
func (h *handlers) halt(w http.ResponseWriter, r *http.Request) error {
	return h.haltOrResume(w, r, true)
}

// resume clears only the firm's own halt.
func (h *handlers) resume(w http.ResponseWriter, r *http.Request) error {
	return h.haltOrResume(w, r, false)
}

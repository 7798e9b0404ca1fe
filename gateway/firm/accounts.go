package firm

import (
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
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
	Code        commands.Code  `json:"code,omitempty"`
	Error       string         `json:"error,omitempty"`
	Params      map[string]any `json:"params,omitempty"`
}

// provision batch-creates evaluation accounts, idempotent per item on the
// firm's referenceId. A currency not issued here refuses the whole batch.
func (h *Handlers) Provision(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Accounts []provisionItem `json:"accounts"`
	}
	if err := httpx.Decode(r, &body, 0); err != nil {
		return err
	}
	if len(body.Accounts) == 0 || len(body.Accounts) > MaxBatch {
		return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "accounts must hold 1 to %d items", MaxBatch)
	}
	for i := range body.Accounts {
		it := &body.Accounts[i]
		cur, err := firmcmd.IssueCurrency(it.Currency, h.d.Env)
		if err != nil {
			return err
		}
		it.Currency = cur
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
	if errors.As(err, &rf) && commands.StatusOf(rf.Code, rf.Malformed) < 500 {
		status := "refused"
		if rf.Code == commands.CodeIdempotencyConflict {
			status = "conflict" // the referenceId stands for an earlier, different request
		}
		return provisionResult{ReferenceID: ref, Status: status, Code: rf.Code, Error: rf.Msg, Params: rf.Params}, true
	}
	return provisionResult{}, false
}

func (h *Handlers) provisionOne(r *http.Request, tenant string, it provisionItem) (provisionResult, error) {
	if err := firmcmd.ValidReference(it.ReferenceID); err != nil {
		res, _ := refused(it.ReferenceID, err)
		return res, nil
	}
	email := strings.ToLower(strings.TrimSpace(it.Email))
	if err := commands.Email("email", email); err != nil {
		res, _ := refused(it.ReferenceID, err)
		return res, nil
	}
	start := DefaultStartingBalance
	if it.StartingBalance != nil {
		start = *it.StartingBalance
	}
	if start.Sign() < 0 {
		res, _ := refused(it.ReferenceID, commands.BadField("startingBalance", nil, "startingBalance must be zero or more"))
		return res, nil
	}
	if err := commands.Amount("startingBalance", start, commands.MaxAmount); err != nil {
		res, _ := refused(it.ReferenceID, err)
		return res, nil
	}
	if err := firmcmd.CheckPrecision(start, it.Currency, "evaluation"); err != nil {
		res, _ := refused(it.ReferenceID, err)
		return res, nil
	}
	label := it.Label
	if label == "" {
		label = email
	}
	if err := commands.Text("label", label, commands.MaxLabel); err != nil {
		res, _ := refused(it.ReferenceID, err)
		return res, nil
	}
	id := firmcmd.AccountID(tenant, it.ReferenceID)
	open := &tenantcmd.OpenAccount{TenantID: tenant, Broker: api.DefaultBroker, AccountNumber: firmcmd.AccountNumber(tenant, it.ReferenceID),
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
		status = "existing" // the same request again; a different one is refused by the aggregate
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

// ListAccounts lists the firm's evaluation accounts with live balances, in
// account id order, a page at a time (limit 1-1000, default 1000; cursor).
func (h *Handlers) ListAccounts(w http.ResponseWriter, r *http.Request) error {
	n, after, err := api.AccountCursor.Request(r, 1000, 1000)
	if err != nil {
		return err
	}
	ctx, tenant := r.Context(), tenantOf(r)
	accts, next, err := projections.AccountsPage(ctx, h.d.Store, tenant, after, n, func(a projections.Account) bool { return a.Kind == "evaluation" })
	if err != nil {
		return err
	}
	out := make([]accountView, 0, len(accts))
	for _, a := range accts {
		v, err := h.view(ctx, a)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accounts": out, "nextCursor": api.AccountCursor.NextCursor(next)})
	return nil
}

type accountBody struct {
	AccountNumber string `json:"accountNumber"`
}

// reset returns an account to its starting state, ledger-first: the ledger
// entry is the first event of the one commit that makes every change.
func (h *Handlers) Reset(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		AccountNumber string `json:"accountNumber"`
		ReferenceID   string `json:"referenceId"`
	}
	if err := httpx.Decode(r, &body, 16<<10); err != nil {
		return err
	}
	a, err := h.account(r.Context(), tenantOf(r), body.AccountNumber)
	if err != nil {
		return err
	}
	v, err := h.ResetAccount(r, a, body.ReferenceID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"account": v})
	return nil
}

// ResetAccount returns one of the firm's accounts to its starting state under
// ref (optional; a reference is used once per firm, the same request again
// changes nothing) and answers the account as the firm's list shows it. The
// partner route and the venue door's twin both run it.
func (h *Handlers) ResetAccount(r *http.Request, a projections.Account, ref string) (any, error) {
	tenant := tenantOf(r)
	cmd := &firmcmd.ResetAccount{ReferenceID: ref}
	if ref != "" {
		defer h.refs.lock(tenant + "/" + ref)()
		if err := h.referenceFree(r.Context(), tenant, ref, a.AccountID); err != nil {
			return nil, err
		}
	}
	if _, err := h.exec(r, a.AccountID, ref, cmd); err != nil {
		return nil, retryable(err)
	}
	a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, a.AccountID)
	if err != nil {
		return nil, err
	}
	return h.view(r.Context(), a)
}

func (h *Handlers) haltOrResume(w http.ResponseWriter, r *http.Request, halt bool) error {
	var body accountBody
	if err := httpx.Decode(r, &body, 0); err != nil {
		return err
	}
	a, err := h.account(r.Context(), tenantOf(r), body.AccountNumber)
	if err != nil {
		return err
	}
	if _, err := h.SetHalt(r, a.AccountID, halt); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accountNumber": a.AccountNumber, "halted": halt})
	return nil
}

// SetHalt puts the firm's halt on the account (halt) or clears it, and waits
// for the read models. A request that came through idem.Require (the venue
// door's twins) runs it keyed: the account records the Idempotency-Key with
// the answer {accountNumber, halted}, which the result's events carry, and a
// repeat answers it again (*commands.Replay). The partner route's is unkeyed.
func (h *Handlers) SetHalt(r *http.Request, accountID string, halt bool) (engine.Result, error) {
	var cmd commands.Command = &firmcmd.ResumeAccount{}
	if halt {
		cmd = &firmcmd.HaltAccount{}
	}
	return h.run(r, accountID, idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", cmd)))
}

// halt is the firm's halt: idempotent; 409 lock_not_owned while a lock the firm
// does not own is on the account.
func (h *Handlers) Halt(w http.ResponseWriter, r *http.Request) error {
	return h.haltOrResume(w, r, true)
}

// resume clears only the firm's own halt.
func (h *Handlers) Resume(w http.ResponseWriter, r *http.Request) error {
	return h.haltOrResume(w, r, false)
}

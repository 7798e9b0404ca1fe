// Package partner serves the firm (legacy partner) routes under /api/partner/:
// account provisioning, reset, halt and resume, balance operations, usage,
// webhooks and Connect pre-registrations. Every route needs a partner key; the
// caller's tenant is the firm.
package partner

import (
	"context"
	"errors"
	"hash/fnv"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/eventlog"
	"github.com/svc/engine/engine/mailbox"
	"github.com/svc/engine/engine/webhook"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	fproj "github.com/svc/engine/projections/firm"
)

// Config is what the partner routes need beyond the shared dependencies.
type Config struct {
	// Webhooks delivers test pings and derives signing secrets.
	Webhooks *webhook.Reactor
	// UsagePrice is the price of one account that traded in a month.
	UsagePrice    events.Decimal
	UsageCurrency string
}

// Routes registers the partner routes on partner (a subrouter of the
// /api/partner/ prefix, behind a partner key: paths are relative to it) and
// the sandbox's trader-side registration routes on trading (behind a Trading API key).
func Routes(d *api.Deps, cfg Config, partner, trading *mux.Router) {
	h := &handlers{d: d, cfg: cfg}
	s := func(f httpx.Handler) http.Handler { return httpx.Serve(httpx.Trading, f) }
	partner.Handle("/accounts", s(h.provision)).Methods(http.MethodPost)
	partner.Handle("/accounts", s(h.listAccounts)).Methods(http.MethodGet)
	partner.Handle("/accounts/reset", s(h.reset)).Methods(http.MethodPost)
	partner.Handle("/accounts/risk", s(h.getRisk)).Methods(http.MethodGet)
	partner.Handle("/accounts/risk", s(h.putRisk)).Methods(http.MethodPut)
	partner.Handle("/accounts/halt", s(h.halt)).Methods(http.MethodPost)
	partner.Handle("/accounts/resume", s(h.resume)).Methods(http.MethodPost)
	partner.Handle("/balance-op", s(h.balanceOp)).Methods(http.MethodPost)
	partner.Handle("/usage", s(h.usage)).Methods(http.MethodGet)
	partner.Handle("/usage/accounts", s(h.usageAccounts)).Methods(http.MethodGet)
	partner.Handle("/webhooks", s(h.registerWebhook)).Methods(http.MethodPost)
	partner.Handle("/webhooks", s(h.listWebhooks)).Methods(http.MethodGet)
	partner.Handle("/webhooks/test", s(h.testWebhook)).Methods(http.MethodPost)
	partner.Handle("/webhooks/deliveries", s(h.deliveries)).Methods(http.MethodGet)
	partner.Handle("/webhooks/{id}", s(h.removeWebhook)).Methods(http.MethodDelete)
	partner.Handle("/connect/accounts", s(h.createRegistration)).Methods(http.MethodPost)
	partner.Handle("/connect/accounts", s(h.listRegistrations)).Methods(http.MethodGet)
	partner.Handle("/connect/accounts/{id}", s(h.revokeRegistration)).Methods(http.MethodDelete)
	if d.Env == "sandbox" && trading != nil {
		trading.Handle("/api/sandbox/connect/registrations", s(h.traderRegistrations)).Methods(http.MethodGet)
		trading.Handle("/api/sandbox/connect/registrations/{id}/link", s(h.linkRegistration)).Methods(http.MethodPost)
	}
}

type handlers struct {
	d    *api.Deps
	cfg  Config
	refs stripes
}

// stripes serialise requests that share a referenceId inside this process, so
// that a reference is bound to one account before another request can use it.
type stripes struct{ mu [256]sync.Mutex }

func (s *stripes) lock(key string) func() {
	h := fnv.New32a()
	h.Write([]byte(key))
	m := &s.mu[h.Sum32()%uint32(len(s.mu))]
	m.Lock()
	return m.Unlock
}

func tenantOf(r *http.Request) string {
	p, _ := httpx.PrincipalOf(r)
	return p.TenantID
}

// account resolves one of the firm's accounts by its number: 404 when the
// number is unknown or another tenant's.
func (h *handlers) account(ctx context.Context, tenant, number string) (projections.Account, error) {
	if number == "" {
		return projections.Account{}, httpx.Errorf(http.StatusBadRequest, "invalid_request", "accountNumber is required")
	}
	id, err := projections.GetInto[string](ctx, h.d.Store, projections.CollAccountNumber, api.DefaultBroker+"/"+number)
	if err == nil {
		var a projections.Account
		a, err = projections.GetInto[projections.Account](ctx, h.d.Store, projections.CollAccount, id)
		if err == nil && a.TenantID == tenant {
			return a, nil
		}
	}
	if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return projections.Account{}, err
	}
	return projections.Account{}, httpx.Errorf(http.StatusNotFound, "not_found", "no account of the firm has that number")
}

// accountView is an account as the firm reads it.
type accountView struct {
	AccountNumber      string         `json:"accountNumber"`
	AccountID          string         `json:"accountId"`
	Email              string         `json:"email"`
	Balance            events.Decimal `json:"balance"`
	Currency           string         `json:"currency"`
	StartingBalance    events.Decimal `json:"startingBalance"`
	Label              string         `json:"label"`
	ReferenceID        string         `json:"referenceId"`
	Halted             bool           `json:"halted"`
	ReconciliationHold bool           `json:"reconciliationHold"`
}

func (h *handlers) view(ctx context.Context, a projections.Account) (accountView, error) {
	f, err := projections.GetInto[fproj.Account](ctx, h.d.Store, fproj.CollAccount, a.AccountID)
	if err != nil && !errors.Is(err, projections.ErrNotFound) {
		return accountView{}, err
	}
	return accountView{AccountNumber: a.AccountNumber, AccountID: a.AccountID, Email: a.Email, Balance: a.Balance,
		Currency: a.Currency, StartingBalance: a.StartingBalance, Label: a.Label, ReferenceID: a.ReferenceID,
		Halted: f.Halted, ReconciliationHold: f.Reconciliation}, nil
}

// exec runs an account command to its outcome, detached from the caller's
// connection (a lost answer never leaves a decision half made), and waits for
// the read models to show it.
func (h *handlers) exec(r *http.Request, accountID, key string, cmd commands.Command) (mailbox.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 15*time.Second)
	defer cancel()
	env := h.d.Engine.Envelope(api.Principal(r), key, cmd)
	res, err := h.d.Engine.Account(ctx, accountID, env)
	if err != nil {
		return res, err
	}
	return res, h.d.Settle(ctx, res)
}

// retryable gives every 503 Retry-After: 1, outcome_unknown included, as the
// balance routes require.
func retryable(err error) error {
	var he *httpx.Error
	var ref *commands.Refusal
	switch {
	case err == nil:
		return nil
	case errors.Is(err, eventlog.ErrOutcomeUnknown):
		return &httpx.Error{Status: http.StatusServiceUnavailable, Code: "outcome_unknown", RetryAfter: 1,
			Msg: "the operation may or may not have been recorded; read the receipt by referenceId or retry with the same referenceId"}
	case errors.As(err, &ref) && ref.Status == http.StatusServiceUnavailable:
		return &httpx.Error{Status: ref.Status, Code: ref.Code, Msg: ref.Msg, Params: ref.Params, RetryAfter: 1}
	case errors.As(err, &he) && he.Status == http.StatusServiceUnavailable && he.RetryAfter == 0:
		c := *he
		c.RetryAfter = 1
		return &c
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &httpx.Error{Status: http.StatusServiceUnavailable, Code: "outcome_unknown", RetryAfter: 1,
			Msg: "the engine did not answer in time; read the receipt by referenceId or retry with the same referenceId"}
	}
	return err
}

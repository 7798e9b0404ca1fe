// Package firm serves the firm area under /api/partner/ (the spec keeps the
// legacy name "partner" in the paths and the key): account provisioning, reset,
// halt and resume, balance operations, usage,
// webhooks and Connect pre-registrations. Every route needs a partner key; the
// caller's tenant is the firm. The venue door's twins of these routes
// (gateway/venue) run the same logic for the venue's firm tenant (ForTenant).
package firm

import (
	"context"
	"errors"
	"hash/fnv"
	"net/http"
	"sync"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	firmproj "github.com/svc/engine/projections/firm"
)

// Config is what the partner routes need beyond the shared dependencies.
type Config struct {
	// Webhooks delivers test pings and derives signing secrets.
	Webhooks Webhooks
	// UsagePrice is the price of one account that traded in a month.
	UsagePrice    events.Decimal
	UsageCurrency string
}

// Webhooks is what the webhook routes need of the engine's webhook sender.
type Webhooks interface {
	// CheckURL refuses an endpoint URL that is not https or not public.
	CheckURL(ctx context.Context, raw string) error
	// Secret is the signing secret of an endpoint.
	Secret(tenant, webhookID string) string
	// Ping sends a signed test event to target and reports the attempt.
	Ping(ctx context.Context, tenant, webhookID, target string) engine.WebhookOutcome
}

// New makes the firm (partner) handlers; the route table is gateway/routes.go.
func New(d *api.Deps, cfg Config) *Handlers { return &Handlers{d: d, cfg: cfg} }

type Handlers struct {
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

type tenantKey struct{}

// ForTenant makes the firm handlers serving a request with ctx act for tenant
// instead of the credential's own tenant: the venue door's twins of the
// partner routes act for the venue's firm tenant, once the door admitted the
// caller to the venue.
func ForTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantOf is the firm a request acts for: ForTenant's, else the credential's tenant.
func tenantOf(r *http.Request) string {
	if t, ok := r.Context().Value(tenantKey{}).(string); ok {
		return t
	}
	p, _ := httpx.PrincipalOf(r)
	return p.TenantID
}

// account resolves one of the firm's accounts by its number: 404 when the
// number is unknown or another tenant's.
func (h *Handlers) account(ctx context.Context, tenant, number string) (projections.Account, error) {
	if number == "" {
		return projections.Account{}, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "accountNumber is required")
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
	return projections.Account{}, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no account of the firm has that number")
}

// AccountByID resolves one of the firm's accounts by its id (the accountId of
// the account lists): 404 when the id is unknown or another tenant's.
func (h *Handlers) AccountByID(r *http.Request, id string) (projections.Account, error) {
	if id != "" && len(id) <= 128 {
		a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, id)
		if err == nil && a.TenantID == tenantOf(r) {
			return a, nil
		}
		if err != nil && !errors.Is(err, projections.ErrNotFound) {
			return projections.Account{}, err
		}
	}
	return projections.Account{}, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no account of the firm has that id")
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

func (h *Handlers) view(ctx context.Context, a projections.Account) (accountView, error) {
	f, err := projections.GetInto[firmproj.Account](ctx, h.d.Store, firmproj.CollAccount, a.AccountID)
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
func (h *Handlers) exec(r *http.Request, accountID, key string, cmd commands.Command) (engine.Result, error) {
	return h.run(r, accountID, h.d.Engine.Envelope(api.Principal(r), key, cmd))
}

// run is exec of a made envelope.
func (h *Handlers) run(r *http.Request, accountID string, env commands.Envelope) (engine.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 15*time.Second)
	defer cancel()
	res, err := h.d.Engine.Account(ctx, accountID, env)
	if err != nil {
		return res, err
	}
	return res, h.d.Settle(ctx, res)
}

// retryable gives every 503 Retry-After: 1, outcome_unknown included, as the
// balance routes require (the catalogue lets outcome_unknown carry one on a
// route; the writer still drops it from a code that is never retry-safe).
func retryable(err error) error {
	var he *httpx.Error
	var ref *commands.Refusal
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrOutcomeUnknown):
		return &httpx.Error{Status: http.StatusServiceUnavailable, Code: commands.CodeOutcomeUnknown, RetryAfter: 1,
			Msg: "the operation may or may not have been recorded; read the receipt by referenceId or retry with the same referenceId"}
	case errors.As(err, &ref) && commands.StatusOf(ref.Code, ref.Malformed) == http.StatusServiceUnavailable:
		return &httpx.Error{Status: commands.StatusOf(ref.Code, ref.Malformed), Code: ref.Code, Msg: ref.Msg, Params: ref.Params, RetryAfter: 1}
	case errors.As(err, &he) && he.Status == http.StatusServiceUnavailable && he.RetryAfter == 0:
		c := *he
		c.RetryAfter = 1
		return &c
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &httpx.Error{Status: http.StatusServiceUnavailable, Code: commands.CodeOutcomeUnknown, RetryAfter: 1,
			Msg: "the engine did not answer in time; read the receipt by referenceId or retry with the same referenceId"}
	}
	return err
}

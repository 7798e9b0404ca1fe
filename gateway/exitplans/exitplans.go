// Package exitplans serves saved exit plans (/api/exit-plans) and their
// preview at an order (/api/account/exit-plans/preview): the ladder priced
// at the instrument's tick and lot step, and a token that binds it to one
// order submission.
package exitplans

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	plancmd "github.com/svc/engine/commands/plan"
	"github.com/svc/engine/commands/trading"
	evplan "github.com/svc/engine/events/plan"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// PreviewFor is how long a preview's token is good for.
const PreviewFor = 2 * time.Minute

// Config is what the exit-plan routes need beyond the shared dependencies.
type Config struct {
	Tokens *auth.Sealer // signs preview tokens (NewTokens)
	Now    func() time.Time
}

// Handlers serve the exit-plan routes; the route table is gateway/routes.go.
type Handlers struct {
	d   *api.Deps
	cfg Config
}

// New makes the exit-plan handlers.
func New(d *api.Deps, cfg Config) *Handlers { return &Handlers{d: d, cfg: cfg} }

// NewTokens makes the sealer of preview tokens over key (32 bytes or more).
func NewTokens(key []byte) (*auth.Sealer, error) {
	return auth.NewSealer("xpt1", "exit-plan-preview.v1", 2048, key)
}

// view is a plan as the API answers it: id, revision, requires, the plan's
// own fields, and when it was made and last changed.
type view struct {
	ID       string   `json:"id"`
	Revision string   `json:"revision"`
	Requires []string `json:"requires"`
	evplan.Spec
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

func toView(p projections.Plan) view {
	return view{ID: p.ID, Revision: p.Revision, Requires: p.Requires, Spec: p.Spec, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

func owner(r *http.Request) string {
	p, _ := httpx.PrincipalOf(r)
	return p.TenantID
}

func (h *Handlers) exec(r *http.Request, cmd commands.Command) error {
	res, err := h.d.Engine.Plans(r.Context(), owner(r), h.d.Engine.Envelope(api.Principal(r), r.Header.Get("Idempotency-Key"), cmd))
	if err != nil {
		return err
	}
	return h.d.Settle(r.Context(), res)
}

func (h *Handlers) read(r *http.Request, id string) (projections.Plan, error) {
	p, err := projections.GetInto[projections.Plan](r.Context(), h.d.Store, projections.CollPlan, owner(r)+"/"+id)
	if errors.Is(err, projections.ErrNotFound) {
		return p, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no exit plan of yours has that id")
	}
	return p, err
}

// List answers the caller's saved plans.
func (h *Handlers) List(w http.ResponseWriter, r *http.Request) error {
	plans, err := projections.ListInto[projections.Plan](r.Context(), h.d.Store, projections.CollPlan, projections.Query{Prefix: owner(r) + "/"})
	if err != nil {
		return err
	}
	out := make([]view, 0, len(plans))
	for _, p := range plans {
		out = append(out, toView(p))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"plans": out})
	return nil
}

// Create saves a new plan. An Idempotency-Key makes a retry answer the same plan.
func (h *Handlers) Create(w http.ResponseWriter, r *http.Request) error {
	var s evplan.Spec
	if err := httpx.Decode(r, &s, 0); err != nil {
		return err
	}
	id, digest, err := api.IdempotentID(r, "xp_", owner(r), s)
	if err != nil {
		return err
	}
	if err := h.exec(r, &plancmd.Save{PlanID: id, Spec: s, Create: true, Digest: digest}); err != nil {
		return err
	}
	p, err := h.read(r, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"plan": toView(p)})
	return nil
}

// Replace replaces a plan when the body's revision is its current one (else
// 409 exit_plan_conflict with params.revision).
func (h *Handlers) Replace(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Revision string `json:"revision"`
		evplan.Spec
	}
	if err := httpx.Decode(r, &b, 0); err != nil {
		return err
	}
	id := mux.Vars(r)["id"]
	if len(id) > 64 {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no exit plan of yours has that id")
	}
	if err := h.exec(r, &plancmd.Save{PlanID: id, Spec: b.Spec, IfRevision: b.Revision}); err != nil {
		return err
	}
	p, err := h.read(r, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"plan": toView(p)})
	return nil
}

// Delete removes a plan when the revision (query `revision` or If-Match) is its current one.
func (h *Handlers) Delete(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["id"]
	if len(id) > 64 {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no exit plan of yours has that id")
	}
	rev := r.URL.Query().Get("revision")
	if rev == "" {
		rev = strings.Trim(r.Header.Get("If-Match"), `"`)
	}
	if err := h.exec(r, &plancmd.Delete{PlanID: id, IfRevision: rev}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Binding is what a preview token binds: one submission of one order
// (commands/trading decides what it binds and checks an order against it).
type Binding = trading.PreviewBinding

// Verify reads a preview token's binding when its signature holds.
func (h *Handlers) Verify(token string) (Binding, bool) {
	var b Binding
	return b, h.cfg.Tokens.Open(token, &b)
}

// Preview prices a plan's ladder for an order (trading.PreviewBracket) and
// answers the legs with a token binding account, plan and revision,
// instrument, side, quantity, entry and clientOrderId, good for one
// submission within PreviewFor.
func (h *Handlers) Preview(w http.ResponseWriter, r *http.Request) error {
	var c trading.PreviewBracket
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	acct, err := h.d.Account(r)
	if err != nil {
		return err
	}
	p, err := h.read(r, c.PlanID)
	if err != nil {
		return err
	}
	m := trading.PreviewMarket{Plan: p.Spec, Revision: p.Revision}
	if in, ok := h.d.Engine.Catalog().Get(c.Instrument); ok {
		m.Spec = &trading.Spec{Symbol: in.Symbol, TickSize: in.TickSize, LotStep: in.LotStep, MinQuantity: in.MinQuantity}
		m.Futures = in.AssetClass == "futures"
	}
	if q, ok := h.d.Engine.Feed().Quote(c.Instrument); ok {
		m.Quote = &trading.Touch{Bid: q.Bid, Ask: q.Ask}
	}
	entry, ladder, err := c.Price(m)
	if err != nil {
		return err
	}
	bind := c.Binding(acct.AccountID, p.Revision, entry, h.cfg.Now().Add(PreviewFor))
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"preview": map[string]any{
		"planId": p.ID, "planRevision": p.Revision, "instrument": c.Instrument, "side": c.Side, "quantity": c.Quantity,
		"entry": entry, "legs": ladder.Legs, "warnings": ladder.Warnings, "token": h.cfg.Tokens.Seal(bind), "expiresAt": time.Unix(bind.Expires, 0).UTC(),
	}})
	return nil
}

package exitplans

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	plancmd "github.com/svc/engine/commands/plan"
	tradecmd "github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
)

// conflict is 409 exit_plan_conflict naming why in params.reason.
func conflict(reason, msg string, params map[string]any) error {
	if params == nil {
		params = map[string]any{}
	}
	params["reason"] = reason
	return commands.Refuse(commands.CodeExitPlanConflict, msg, params)
}

// plan reads the caller's plan id from its aggregate and refuses it unless
// its current revision is rev (409 exit_plan_conflict with params.revision).
func (h *Handlers) plan(r *http.Request, id, rev string) (*tradecmd.BracketPlan, error) {
	spec, cur, ok, err := h.d.Engine.Plan(r.Context(), owner(r), id)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, conflict("plan_deleted", "the exit plan was deleted", map[string]any{"planId": id})
	case cur != rev:
		return nil, conflict("plan_changed", "the exit plan was edited since you read it: preview its current revision",
			map[string]any{"revision": cur})
	}
	return &tradecmd.BracketPlan{PlanID: id, PlanRevision: cur, Spec: spec}, nil
}

// Load checks an order's exitPlan against its preview token and attaches
// the plan at that revision: a token this engine sealed, not expired, for
// this account, plan and revision, instrument, side, quantity, entry and
// clientOrderId, on a plan not edited since. It answers the warnings of the
// ladder. Nothing is recorded on a refusal.
func (h *Handlers) Load(r *http.Request, a projections.Account, c *tradecmd.PlaceOrder) ([]plancmd.Warning, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ref := c.ExitPlan
	bind, ok := h.Verify(ref.PreviewToken)
	if !ok {
		return nil, commands.BadField("exitPlan.previewToken", nil, "exitPlan.previewToken is not a preview token of this engine: preview the order (POST /api/account/exit-plans/preview)")
	}
	var field string
	switch {
	case h.cfg.Now().Unix() > bind.Expires:
		return nil, conflict("token_expired", "the preview token expired: preview again", nil)
	case bind.AccountID != a.AccountID:
		return nil, conflict("account_changed", "the preview was made for another account: preview on this one", nil)
	case bind.PlanID != ref.PlanID:
		field = "exitPlan.planId"
	case bind.PlanRevision != ref.PlanRevision:
		field = "exitPlan.planRevision"
	case bind.Instrument != c.Instrument:
		field = "instrument"
	case bind.Side != c.Side:
		field = "side"
	case bind.Quantity.Cmp(c.Quantity) != 0:
		field = "quantity"
	case bind.ClientOrderID != c.ClientOrderID:
		field = "clientOrderId"
	case bind.OrderType != c.OrderType:
		field = "orderType"
	case c.OrderType == "limit" && bind.Entry.Cmp(*c.LimitPrice) != 0:
		field = "limitPrice"
	}
	if field != "" {
		return nil, conflict("binding", "the order's "+field+" is not what the preview priced: preview this order",
			map[string]any{"field": field})
	}
	p, err := h.plan(r, bind.PlanID, bind.PlanRevision)
	if err != nil {
		return nil, err
	}
	p.Entry = bind.Entry
	c.Bracket = p
	in, _ := h.d.Engine.Catalog().Get(c.Instrument)
	return plancmd.Price(p.Spec, in.TickSize, in.LotStep, c.Side, bind.Entry, c.Quantity).Warnings, nil
}

// answer is the spec's bracket withdrawal answer: the bracket after the
// change, the provider's refusal (the paper book refuses no pair), the
// orders that would not cancel (the paper book's cancels never stick), and
// the id a resting entry rests as afterwards where the change re-rested it
// (the one order placed that is not a reduce-only leg).
func answer(w http.ResponseWriter, bracketID string, evs []events.Event) {
	out := map[string]any{"refused": nil, "stuck": 0}
	state := evacct.BracketActive
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.BracketSet:
			bracketID = e.Bracket.ID
		case evacct.BracketEnd:
			if e.BracketID == bracketID || bracketID == "" {
				bracketID, state = e.BracketID, evacct.BracketEnded
			}
		case evacct.OrderPlaced:
			if !e.Order.ReduceOnly {
				out["entryOrderId"] = e.Order.BrokerOrderID
			}
		}
	}
	out["bracket"] = map[string]any{"id": bracketID, "state": state}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// Protect puts a bracket from a saved plan on a position (body instrument)
// or a resting entry (body entryOrderId): POST /api/trading/exits.
func (h *Handlers) Protect(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tradecmd.Protect
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Plan, err = h.plan(r, c.PlanID, c.PlanRevision); err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, c.ClientOrderID, &c)
	if err != nil {
		return err
	}
	answer(w, "", res.Events)
	return nil
}

func bracketID(r *http.Request) (string, error) {
	id := mux.Vars(r)["id"]
	if len(id) > tradecmd.MaxOrderID {
		return "", httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no active bracket with that id on this account")
	}
	return id, nil
}

// Withdraw cancels every order a bracket rests and ends it: DELETE /api/trading/exits/{id}.
func (h *Handlers) Withdraw(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	id, err := bracketID(r)
	if err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, "", &tradecmd.WithdrawBracket{BracketID: id})
	if err != nil {
		return err
	}
	answer(w, id, res.Events)
	return nil
}

// Change moves a bracket's levels: PATCH /api/trading/exits/{id} with {legs: [{id, price}]}.
func (h *Handlers) Change(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	id, err := bracketID(r)
	if err != nil {
		return err
	}
	c := tradecmd.ChangeBracket{BracketID: id}
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	c.BracketID = id
	res, err := h.d.Exec(r, a.AccountID, "", &c)
	if err != nil {
		return err
	}
	answer(w, id, res.Events)
	return nil
}

// Brackets answers the account's active brackets: {revision, items}.
func (h *Handlers) Brackets(w http.ResponseWriter, r *http.Request) error {
	return h.reads(w, r, func(b []frames.Bracket, _ []frames.ManagedExit) any { return b })
}

// ManagedExits answers the breakeven and trailing rules the engine manages: {revision, items}.
func (h *Handlers) ManagedExits(w http.ResponseWriter, r *http.Request) error {
	return h.reads(w, r, func(_ []frames.Bracket, m []frames.ManagedExit) any { return m })
}

func (h *Handlers) reads(w http.ResponseWriter, r *http.Request, pick func([]frames.Bracket, []frames.ManagedExit) any) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	bs, ms, rev, err := frames.Brackets(r.Context(), h.d.Store, a.AccountID, a.Revision)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"revision": rev, "items": pick(bs, ms)})
	return nil
}

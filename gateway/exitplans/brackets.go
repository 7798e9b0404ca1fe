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

// Load checks an order's exitPlan against its preview token and attaches
// the plan at that revision: a token this engine sealed, for the submission
// it binds (trading.PreviewBinding.Check), on a plan not edited since (the
// engine's BracketPlan). It answers the warnings of the ladder. Nothing is
// recorded on a refusal.
func (h *Handlers) Load(r *http.Request, a projections.Account, c *tradecmd.PlaceOrder) ([]plancmd.Warning, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	bind, ok := h.Verify(c.ExitPlan.PreviewToken)
	if !ok {
		return nil, commands.BadField("exitPlan.previewToken", nil, "exitPlan.previewToken is not a preview token of this engine: preview the order (POST /api/account/exit-plans/preview)")
	}
	if err := bind.Check(a.AccountID, h.cfg.Now(), c); err != nil {
		return nil, err
	}
	p, err := h.d.Engine.BracketPlan(r.Context(), owner(r), bind.PlanID, bind.PlanRevision)
	if err != nil {
		return nil, err
	}
	p.Entry = bind.Entry
	c.Bracket = p
	in, _ := h.d.Engine.Catalog().Get(c.Instrument)
	return p.Ladder(tradecmd.Spec{TickSize: in.TickSize, LotStep: in.LotStep}, c.Side, bind.Entry, c.Quantity).Warnings, nil
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
	if c.Plan, err = h.d.Engine.BracketPlan(r.Context(), owner(r), c.PlanID, c.PlanRevision); err != nil {
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

package exitplans

import (
	"context"
	"errors"
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

// answerProvider is the withdrawal answer on a provider account, read once
// the provider answered every order the change sent (the engine awaits
// them; the read models show their outcome): the bracket as it stands (it
// ends only once none of its orders rests), refused order_rejected when a
// leg it placed does not rest (the provider refused it, or it could not be
// sent: that part of the position is unprotected, until the engine places
// a leg that did not reach the provider again at its retryAt; a changed leg
// stays where it rested), stuck the orders it asked to cancel that still rest, and the
// entry a bracket waits on (entryID), which rests on unchanged.
func (h *Handlers) answerProvider(ctx context.Context, w http.ResponseWriter, accountID, bracketID, entryID string, evs []events.Event) error {
	var refused any
	stuck := 0
	for _, e := range evs {
		switch e := e.(type) {
		case evacct.BracketSet:
			bracketID = e.Bracket.ID
			if entryID == "" {
				entryID = e.Bracket.EntryOrderID
			}
		case evacct.OrderIntended:
			o, err := projections.GetOrder(ctx, h.d.Store, accountID, e.Order.BrokerOrderID)
			switch {
			case err != nil && !errors.Is(err, projections.ErrNotFound):
				return err
			case e.Op == evacct.IntentCancel && err == nil && (o.State == "working" || o.State == "partially_filled"):
				stuck++
			case e.Op != evacct.IntentCancel && e.Order.BracketID != "" && e.Order.ReduceOnly && err != nil: // a leg's placement
				refused = commands.CodeOrderRejected
			}
		}
	}
	state := evacct.BracketEnded
	if b, err := projections.GetInto[evacct.Bracket](ctx, h.d.Store, projections.CollBracket, accountID+"/"+bracketID); err == nil {
		state = b.State
	} else if !errors.Is(err, projections.ErrNotFound) {
		return err
	}
	out := map[string]any{"bracket": map[string]any{"id": bracketID, "state": state}, "refused": refused, "stuck": stuck}
	if entryID != "" {
		out["entryOrderId"] = entryID
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// waitsOn is the entry a provider account's bracket waits on, as read
// before a change or withdrawal ("" for none).
func (h *Handlers) waitsOn(ctx context.Context, a projections.Account, bracketID string) string {
	if a.Kind != frames.KindProvider {
		return ""
	}
	b, err := projections.GetInto[evacct.Bracket](ctx, h.d.Store, projections.CollBracket, a.AccountID+"/"+bracketID)
	if err != nil {
		return ""
	}
	return b.EntryOrderID
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
	if a.Kind == frames.KindProvider {
		return h.answerProvider(r.Context(), w, a.AccountID, "", "", res.Events)
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
	entry := h.waitsOn(r.Context(), a, id)
	res, err := h.d.Exec(r, a.AccountID, "", &tradecmd.WithdrawBracket{BracketID: id})
	if err != nil {
		return err
	}
	if a.Kind == frames.KindProvider {
		return h.answerProvider(r.Context(), w, a.AccountID, id, entry, res.Events)
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
	entry := h.waitsOn(r.Context(), a, id)
	res, err := h.d.Exec(r, a.AccountID, "", &c)
	if err != nil {
		return err
	}
	if a.Kind == frames.KindProvider {
		return h.answerProvider(r.Context(), w, a.AccountID, id, entry, res.Events)
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

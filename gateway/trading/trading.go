// Package trading serves /api/trading: place, cancel, replace, close, flatten,
// reverse and the advisory actions read.
package trading

import (
	"errors"
	"net/http"
	"net/url"
	"sync"

	"github.com/svc/engine/commands"
	plancmd "github.com/svc/engine/commands/plan"
	tradecmd "github.com/svc/engine/commands/trading"
	"github.com/svc/engine/domain/order"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// ExitPlans loads an order's exitPlan: the saved plan at the revision its
// preview token binds, checked against the order (gateway/exitplans).
type ExitPlans interface {
	Load(r *http.Request, a projections.Account, c *tradecmd.PlaceOrder) ([]plancmd.Warning, error)
}

// New makes the trading handlers; the route table is gateway/routes.go.
// plans may be nil: an order with an exitPlan is then refused.
func New(d *api.Deps, plans ExitPlans) *Handlers { return &Handlers{d, plans} }

// Order places an order (POST /api/trading/order); its clientOrderId is its
// key. With an exitPlan the order and its bracket are one commit, and the
// answer adds the bracket and the ladder's warnings.
func (h *Handlers) Order(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tradecmd.PlaceOrder
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	if c.ExitPlan == nil {
		res, err := h.d.Decide(r, a.AccountID, c.ClientOrderID, &c)
		if err != nil {
			return err
		}
		return h.answerOrder(w, r, a.AccountID, res, placedID(res.Events))
	}
	if h.plans == nil {
		return commands.InvalidField("exitPlan", nil, "this engine serves no exit plans")
	}
	warnings, err := h.plans.Load(r, a, &c)
	if err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, c.ClientOrderID, &c)
	if err != nil {
		return err
	}
	id := placedID(res.Events)
	o, err := projections.GetOrder(r.Context(), h.d.Store, a.AccountID, id)
	if err != nil {
		return err
	}
	var bracket any
	for _, e := range res.Events {
		if s, ok := e.(evacct.BracketSet); ok {
			bracket = map[string]any{"id": s.Bracket.ID, "state": s.Bracket.State}
		}
	}
	if bracket == nil {
		warnings = append(warnings, plancmd.Warning{Code: "exit_plan_not_recorded",
			Message: "the entry ended without a fill in the same step (" + c.TimeInForce + "), so its exit plan was not recorded"})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"order": o, "bracket": bracket, "warnings": warnings})
	return nil
}

// Cancel cancels a working order.
func (h *Handlers) Cancel(w http.ResponseWriter, r *http.Request) error {
	return orderCommand(h, noKey[*tradecmd.CancelOrder], named[*tradecmd.CancelOrder])(w, r)
}

// Replace changes a working order's quantity or prices.
func (h *Handlers) Replace(w http.ResponseWriter, r *http.Request) error {
	return orderCommand(h, noKey[*tradecmd.ReplaceOrder], named[*tradecmd.ReplaceOrder])(w, r)
}

// Close closes all or part of a position.
func (h *Handlers) Close(w http.ResponseWriter, r *http.Request) error {
	return orderCommand(h, func(c *tradecmd.ClosePosition) string { return c.ClientOrderID }, placed)(w, r)
}

// Reverse turns a position around.
func (h *Handlers) Reverse(w http.ResponseWriter, r *http.Request) error {
	return orderCommand(h, func(c *tradecmd.Reverse) string { return c.ClientOrderID }, placed)(w, r)
}

type Handlers struct {
	d     *api.Deps
	plans ExitPlans
}

// orderCommand decodes a command of type T, runs it on the caller's account
// and answers the order it placed or named.
func orderCommand[T any, P interface {
	*T
	commands.Command
}](h *Handlers, key func(P) string, orderID func(P, []events.Event) string) httpx.Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		a, err := h.d.Account(r)
		if err != nil {
			return err
		}
		c := P(new(T))
		if err := httpx.Decode(r, c, 0); err != nil {
			return err
		}
		res, err := h.d.Decide(r, a.AccountID, key(c), c)
		if err != nil {
			return err
		}
		return h.answerOrder(w, r, a.AccountID, res, orderID(c, res.Events))
	}
}

// answerOrder answers the order orderID: from the decision when its commit
// placed it (the order as the read model will show it; the credential's
// next read waits for that, api.CatchUp), else from the read model once it
// shows the commit.
func (h *Handlers) answerOrder(w http.ResponseWriter, r *http.Request, accountID string, res engine.Result, orderID string) error {
	if o, ok := projections.OrderIn(accountID, res.Seq, res.Events, orderID); ok {
		p := answerOrders.Get().(*projections.Order)
		*p = o
		httpx.WriteJSON(w, http.StatusOK, orderAnswer{p}) // encodes it before it returns
		*p = projections.Order{}
		answerOrders.Put(p)
		return nil
	}
	if err := h.d.Settle(r.Context(), res); err != nil {
		return err
	}
	return h.writeOrder(w, r, accountID, orderID)
}

// answerOrders is the orders answerOrder encodes: only the bytes written
// outlive an answer, so the order itself is reused.
var answerOrders = sync.Pool{New: func() any { return new(projections.Order) }}

func noKey[P any](P) string { return "" }

func named[P interface{ OrderID() string }](c P, _ []events.Event) string { return c.OrderID() }

func placed[P any](_ P, evs []events.Event) string { return placedID(evs) }

func placedID(evs []events.Event) string {
	for _, e := range evs {
		if p, ok := e.(evacct.OrderPlaced); ok {
			return p.Order.BrokerOrderID
		}
		if in, ok := e.(evacct.OrderIntended); ok && in.Op == evacct.IntentPlace {
			return in.Order.BrokerOrderID // a provider account's order: answered once its outcome is recorded
		}
	}
	return ""
}

func (h *Handlers) writeOrder(w http.ResponseWriter, r *http.Request, accountID, orderID string) error {
	o, err := projections.GetOrder(r.Context(), h.d.Store, accountID, orderID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, orderAnswer{&o})
	return nil
}

// orderAnswer is the answer of an order route, {"order": ...}: written as
// it is, without a map or a copy of the order boxed (an order's path).
type orderAnswer struct {
	Order *projections.Order `json:"order"`
}

// Flatten cancels the account's working orders and closes its positions
// (POST /api/trading/flatten); its clientOrderId is its key. The answer is
// projections.FlattenOf the commit.
func (h *Handlers) Flatten(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tradecmd.Flatten
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, c.ClientOrderID, &c)
	if err != nil {
		return err
	}
	f, err := projections.FlattenOf(r.Context(), h.d.Store, a.AccountID, res.Events)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, f)
	return nil
}

// actions answers the refusals an order described in the query would meet, without sending it.
func (h *Handlers) Actions(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	c, err := orderFromQuery(r.URL.Query())
	if err != nil {
		return err
	}
	refusals := []map[string]any{}
	env := h.d.Engine.Envelope(api.Principal(r), c.ClientOrderID, c)
	if err := h.d.Engine.Advise(r.Context(), a.AccountID, env); err != nil {
		var ref *commands.Refusal
		if !errors.As(err, &ref) {
			return err
		}
		item := map[string]any{"code": ref.Code, "error": ref.Msg, "status": commands.StatusOf(ref.Code, ref.Malformed)}
		if ref.Params != nil {
			item["params"] = ref.Params
		}
		refusals = append(refusals, item)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"allowed": len(refusals) == 0, "refusals": refusals})
	return nil
}

func orderFromQuery(q url.Values) (*tradecmd.PlaceOrder, error) {
	c := &tradecmd.PlaceOrder{ClientOrderID: q.Get("clientOrderId"), Instrument: q.Get("instrument"), Side: q.Get("side"),
		OrderType: q.Get("orderType"), TimeInForce: q.Get("timeInForce"), ReduceOnly: q.Get("reduceOnly") == "true"}
	if c.ClientOrderID == "" {
		c.ClientOrderID = "actions-preview"
	}
	if c.OrderType == "" {
		c.OrderType = string(order.Market)
	}
	dec := func(name string) (*events.Decimal, error) {
		if !q.Has(name) {
			return nil, nil
		}
		v, err := events.ParseDecimal(q.Get(name))
		if err != nil {
			return nil, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "%s is not a decimal", name)
		}
		return &v, nil
	}
	qty, err := dec("quantity")
	if err != nil {
		return nil, err
	}
	if qty != nil {
		c.Quantity = *qty
	}
	if c.LimitPrice, err = dec("limitPrice"); err != nil {
		return nil, err
	}
	if c.StopPrice, err = dec("stopPrice"); err != nil {
		return nil, err
	}
	return c, nil
}

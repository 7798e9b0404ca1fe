// Package trading serves /api/trading: place, cancel, replace, close, flatten,
// reverse and the advisory actions read.
package trading

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	tcmd "github.com/svc/engine/commands/trading"
	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
)

// Routes registers the trading routes on r (already behind credentials).
func Routes(r *mux.Router, d *api.Deps) {
	h := &handlers{d}
	r.Handle("/api/trading/order", httpx.Serve(httpx.Trading, h.order)).Methods(http.MethodPost)
	r.Handle("/api/trading/cancel", httpx.Serve(httpx.Trading, h.cancel)).Methods(http.MethodPost)
	r.Handle("/api/trading/replace", httpx.Serve(httpx.Trading, h.replace)).Methods(http.MethodPost)
	r.Handle("/api/trading/close", httpx.Serve(httpx.Trading, h.close)).Methods(http.MethodPost)
	r.Handle("/api/trading/flatten", httpx.Serve(httpx.Trading, h.flatten)).Methods(http.MethodPost)
	r.Handle("/api/trading/reverse", httpx.Serve(httpx.Trading, h.reverse)).Methods(http.MethodPost)
	r.Handle("/api/trading/actions", httpx.Serve(httpx.Trading, h.actions)).Methods(http.MethodGet)
}

type handlers struct{ d *api.Deps }

func (h *handlers) order(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tcmd.PlaceOrder
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, c.ClientOrderID, &c)
	if err != nil {
		return err
	}
	return h.writeOrder(w, r, a.AccountID, placedID(res.Events))
}

func placedID(evs []events.Event) string {
	for _, e := range evs {
		if p, ok := e.(evacct.OrderPlaced); ok {
			return p.Order.BrokerOrderID
		}
	}
	return ""
}

func (h *handlers) writeOrder(w http.ResponseWriter, r *http.Request, accountID, orderID string) error {
	o, err := projections.GetInto[projections.Order](r.Context(), h.d.Store, projections.CollOrder, accountID+"/"+orderID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"order": o})
	return nil
}

func (h *handlers) cancel(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tcmd.CancelOrder
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	if _, err := h.d.Exec(r, a.AccountID, "", &c); err != nil {
		return err
	}
	return h.writeOrder(w, r, a.AccountID, c.BrokerOrderID)
}

func (h *handlers) replace(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tcmd.ReplaceOrder
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	if _, err := h.d.Exec(r, a.AccountID, "", &c); err != nil {
		return err
	}
	return h.writeOrder(w, r, a.AccountID, c.BrokerOrderID)
}

func (h *handlers) close(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tcmd.ClosePosition
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, "", &c)
	if err != nil {
		return err
	}
	return h.writeOrder(w, r, a.AccountID, placedID(res.Events))
}

func (h *handlers) flatten(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tcmd.Flatten
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, "", &c)
	if err != nil {
		return err
	}
	canceled, orders := []string{}, []projections.Order{}
	for _, e := range res.Events {
		switch e := e.(type) {
		case evacct.OrderCanceled:
			canceled = append(canceled, e.BrokerOrderID)
		case evacct.OrderPlaced:
			o, err := projections.GetInto[projections.Order](r.Context(), h.d.Store, projections.CollOrder, a.AccountID+"/"+e.Order.BrokerOrderID)
			if err != nil {
				return err
			}
			orders = append(orders, o)
		}
	}
	ps, err := projections.ListInto[projections.Position](r.Context(), h.d.Store, projections.CollPosition, projections.Query{Prefix: a.AccountID + "/"})
	if err != nil {
		return err
	}
	unclosed := []string{}
	for _, p := range ps {
		unclosed = append(unclosed, p.Instrument)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"canceled": canceled, "orders": orders, "unclosed": unclosed})
	return nil
}

func (h *handlers) reverse(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var c tcmd.Reverse
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	res, err := h.d.Exec(r, a.AccountID, c.ClientOrderID, &c)
	if err != nil {
		return err
	}
	return h.writeOrder(w, r, a.AccountID, placedID(res.Events))
}

// actions answers the refusals an order described in the query would meet, without sending it.
func (h *handlers) actions(w http.ResponseWriter, r *http.Request) error {
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
		item := map[string]any{"code": ref.Code, "error": ref.Msg, "status": ref.Status}
		if ref.Params != nil {
			item["params"] = ref.Params
		}
		refusals = append(refusals, item)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"allowed": len(refusals) == 0, "refusals": refusals})
	return nil
}

func orderFromQuery(q url.Values) (*tcmd.PlaceOrder, error) {
	c := &tcmd.PlaceOrder{ClientOrderID: q.Get("clientOrderId"), Instrument: q.Get("instrument"), Side: q.Get("side"),
		OrderType: q.Get("orderType"), TimeInForce: q.Get("timeInForce"), ReduceOnly: q.Get("reduceOnly") == "true"}
	if c.ClientOrderID == "" {
		c.ClientOrderID = "actions-preview"
	}
	if c.OrderType == "" {
		c.OrderType = "market"
	}
	dec := func(name string) (*events.Decimal, error) {
		if !q.Has(name) {
			return nil, nil
		}
		v, err := events.ParseDecimal(q.Get(name))
		if err != nil {
			return nil, httpx.Errorf(http.StatusBadRequest, "invalid_request", "%s is not a decimal", name)
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

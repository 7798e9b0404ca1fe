// Package account serves /api/account: the caller's accounts, orders, fills,
// PnL history, instruments, the frame snapshot and the account stream.
package account

import (
	"github.com/svc/engine/commands"
	"net/http"

	"github.com/svc/engine/commands/trading"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/frames"
)

// New makes the account handlers; the route table is gateway/routes.go.
func New(d *api.Deps) *Handlers { return &Handlers{d} }

type Handlers struct{ d *api.Deps }

// ItemOf renders an account of the engine's paper book.
func ItemOf(a projections.Account) Item {
	it := Item{AccountID: a.AccountID, Broker: a.Broker, AccountNumber: a.AccountNumber, Label: a.Label,
		Currency: a.Currency, Clock: frames.ClockOf(a), PositionModel: "net"}
	if a.LoginLost {
		it.LinkState = LinkRelinkRequired
	}
	return it
}

// LinkRelinkRequired is the LinkState of a provider account whose login
// the provider no longer takes: its orders answer 409
// provider_relink_required until the trader links the login again.
const LinkRelinkRequired = "relink_required"

// Item is an account as the account list (and the demo account's answer) renders it.
type Item struct {
	AccountID     string `json:"accountId"`
	Broker        string `json:"broker"`
	AccountNumber string `json:"accountNumber"`
	Label         string `json:"label"`
	Currency      string `json:"currency"`
	Clock         string `json:"clock"`
	PositionModel string `json:"positionModel"`
	LinkState     string `json:"linkState,omitempty"` // LinkRelinkRequired, or absent
}

func (h *Handlers) List(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	accts, err := h.d.Accounts(r.Context(), p)
	if err != nil {
		return err
	}
	out := make([]Item, 0, len(accts))
	for _, a := range accts {
		out = append(out, ItemOf(a))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accounts": out})
	return nil
}

func (h *Handlers) Snapshot(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	p, err := h.d.Hub.Frame(r.Context(), a.AccountID)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, err = w.Write(append(p.Data, '\n'))
	return err
}

// stream serves the account stream: the frame on connect and on every change,
// named `account` with the revision as id, plus the newest other payloads
// (`lock`), heartbeats every 15 s, until the client goes or the server drains.
// An HTTP/1.1 stream is detached from net/http and written by the hub's
// fan-out directly; any other is pumped by this goroutine.
func (h *Handlers) Stream(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	if err := httpx.AdmitStream(w); err != nil {
		return err // over the credential's stream limit: refused before any frame is built
	}
	sub, cancel, err := h.d.Hub.Subscribe(r.Context(), a.AccountID)
	if err != nil {
		return err
	}
	defer cancel()
	sse, err := httpx.StartSSE(w)
	if err != nil {
		return err
	}
	if c, ok := sse.Detach(r); ok {
		h.d.Hub.Serve(sub, c)
		return nil
	}
	return httpx.Pump(r.Context(), sse, h.d.Hub.Done(), sub.Ready(), func(struct{}) error {
		for _, p := range sub.Take() {
			if err := sse.Write(p.Wire()); err != nil {
				return err
			}
		}
		sse.Flush()
		return nil
	})
}

func (h *Handlers) Orders(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	n, after, err := api.OrderCursor.Request(r, 100, 500)
	if err != nil {
		return err
	}
	state := r.URL.Query().Get("state")
	switch state {
	case "":
		state = "all"
	case "open", "closed", "all":
	default:
		return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "state must be open, closed or all")
	}
	os, next, err := projections.OrdersPage(r.Context(), h.d.Store, a.AccountID, state, after, n)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"orders": os, "nextCursor": api.OrderCursor.NextCursor(next)})
	return nil
}

func (h *Handlers) Fills(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	n, after, err := api.FillCursor.Request(r, 100, 1000)
	if err != nil {
		return err
	}
	fs, next, err := projections.FillsPage(r.Context(), h.d.Store, a.AccountID, after, n)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"fills": fs, "nextCursor": api.FillCursor.NextCursor(next)})
	return nil
}

func (h *Handlers) Pnl(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	days, err := projections.ListInto[projections.PnLDay](r.Context(), h.d.Store, projections.CollPnLDay, projections.Query{Prefix: a.AccountID + "/"})
	if err != nil {
		return err
	}
	if days == nil {
		days = []projections.PnLDay{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accountId": a.AccountID, "currency": a.Currency,
		"startingBalance": a.StartingBalance, "balance": a.Balance, "days": days})
	return nil
}

type symbolItem struct {
	Symbol    string `json:"symbol"`
	Name      string `json:"name"`
	Exchange  string `json:"exchange"`
	Type      string `json:"type"`
	Simulated bool   `json:"simulated"`
	Tradable  bool   `json:"tradable"`
	Reason    string `json:"notTradableReason,omitempty"`
}

func (h *Handlers) Instruments(w http.ResponseWriter, r *http.Request) error {
	a, err := h.d.Account(r)
	if err != nil {
		return err
	}
	var listed []market.Instrument
	var futures []string
	for _, in := range h.d.Engine.Catalog().All() {
		// A provider account lists its provider's perpetuals; a paper account the paper book's instruments.
		if a.Kind == frames.KindProvider && in.Broker != a.Broker || a.Kind != frames.KindProvider && in.Broker != "" {
			continue
		}
		listed = append(listed, in)
		if in.AssetClass == "futures" {
			futures = append(futures, in.Symbol)
		}
	}
	// Futures are tradable on a paper account where the paper book can
	// price them: from the engine's own source, or from the owner's own
	// futures login when the caller is that owner acting for no one else
	// (futures prices are licensed per trader).
	owner := ""
	if p, _ := httpx.PrincipalOf(r); a.Kind != frames.KindProvider && (p.Kind == "trading" || p.Kind == "session") &&
		p.OnBehalfOf == "" && p.TenantID == a.TenantID {
		owner = a.TenantID
	}
	priced := h.d.Engine.PaperFuturesPriced(r.Context(), owner, futures)
	out := make([]symbolItem, 0, len(listed))
	for _, in := range listed {
		it := symbolItem{Symbol: in.Symbol, Name: in.Name, Exchange: in.Exchange, Type: in.Type, Simulated: in.Simulated, Tradable: true}
		if in.AssetClass == "futures" && !priced[in.Symbol] {
			it.Tradable, it.Reason = false, trading.FuturesNotServed
		}
		out = append(out, it)
	}
	if a.Kind == frames.KindProvider {
		// A futures login's contracts come from its provider's own library
		// (not public): the months it trades now, tradable there.
		for _, in := range h.d.Engine.ProviderContracts(r.Context(), a.AccountID, a.Broker) {
			out = append(out, symbolItem{Symbol: in.Symbol, Name: in.Name, Exchange: in.Exchange, Type: in.Type, Tradable: true})
		}
	}
	label := a.Label
	if label == "" {
		label = a.AccountNumber
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"account": a.AccountNumber, "label": label, "symbols": out})
	return nil
}

package venue

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	tenantcmd "github.com/svc/engine/commands/tenant"
	venuecmd "github.com/svc/engine/commands/venue"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
)

func kindOf(r *http.Request) (string, error) {
	k := mux.Vars(r)["kind"]
	if !slices.Contains(venuecmd.ConfigKinds, k) {
		return "", httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no such route")
	}
	return k, nil
}

// ifMatch is the version an If-Match header names (0: none).
func ifMatch(r *http.Request) (int, error) {
	h := strings.Trim(r.Header.Get("If-Match"), `" `)
	if h == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(h)
	if err != nil || v < 1 {
		return 0, commands.BadField("If-Match", nil, "If-Match is the version you read, a whole number from 1")
	}
	return v, nil
}

// PutConfig creates (no If-Match) or changes (If-Match: the version read) one
// item: PUT /api/venues/{venueId}/{kind}/{id}. An instrument's id is a
// catalog symbol.
func (h *Handlers) PutConfig(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	kind, err := kindOf(r)
	if err != nil {
		return nil, err
	}
	v, err := ifMatch(r)
	if err != nil {
		return nil, err
	}
	var body map[string]any // the shape of the kind is checked by the command; here: one JSON object
	if err := httpx.Decode(r, &body, 0); err != nil {
		return nil, err
	}
	raw := idem.Body(r)
	id := mux.Vars(r)["id"]
	if kind == venuecmd.KindInstruments {
		if _, ok := h.d.Engine.Catalog().Get(id); !ok {
			return nil, commands.Refuse(commands.CodeInstrumentNotPermitted,
				"the catalog has no instrument "+id, map[string]any{"field": "id", "instrument": id})
		}
	}
	return h.exec(r, DoorOf(r).Venue.VenueID, &venuecmd.SetConfig{Kind: kind, ID: id, Body: raw, IfVersion: v})
}

// RetireConfig retires one item (If-Match: the version read): DELETE /api/venues/{venueId}/{kind}/{id}.
func (h *Handlers) RetireConfig(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	kind, err := kindOf(r)
	if err != nil {
		return nil, err
	}
	v, err := ifMatch(r)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return nil, commands.BadField("If-Match", nil, "retiring needs If-Match: the version you read")
	}
	return h.exec(r, DoorOf(r).Venue.VenueID, &venuecmd.SetConfig{Kind: kind, ID: mux.Vars(r)["id"], IfVersion: v, Retire: true})
}

// ListConfig lists the venue's items of a kind, retired ones included.
func (h *Handlers) ListConfig(w http.ResponseWriter, r *http.Request) error {
	kind, err := kindOf(r)
	if err != nil {
		return err
	}
	items, err := projections.ListInto[projections.VenueConfig](r.Context(), h.d.Store, projections.CollVenueConfig,
		projections.Query{Prefix: DoorOf(r).Venue.VenueID + "/" + kind + "/"})
	if err != nil {
		return err
	}
	if items == nil {
		items = []projections.VenueConfig{} // an empty list is [], never null
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}

// GetConfig answers one item, with its version in ETag.
func (h *Handlers) GetConfig(w http.ResponseWriter, r *http.Request) error {
	kind, err := kindOf(r)
	if err != nil {
		return err
	}
	id := mux.Vars(r)["id"]
	it, err := projections.GetInto[projections.VenueConfig](r.Context(), h.d.Store, projections.CollVenueConfig, DoorOf(r).Venue.VenueID+"/"+kind+"/"+id)
	if errors.Is(err, projections.ErrNotFound) || len(id) > 64 {
		return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "this venue holds no such item")
	}
	if err != nil {
		return err
	}
	w.Header().Set("ETag", `"`+strconv.Itoa(it.Version)+`"`)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"item": it})
	return nil
}

// issueBody is an account a venue issues into one of its groups.
type issueBody struct {
	GroupID         string          `json:"groupId"`
	Label           string          `json:"label"`
	Currency        string          `json:"currency"`
	StartingBalance *events.Decimal `json:"startingBalance"`
	Email           string          `json:"email"`
	DailyLossLimit  json.RawMessage `json:"dailyLossLimit"`  // an override: null or absent (the risk policy's)
	WeeklyLossLimit json.RawMessage `json:"weeklyLossLimit"` // an override: null or absent (the risk policy's)
}

// IssueAccount issues a paper-book account into a group of the venue (POST
// /api/venues/{venueId}/accounts): its id and number derive from the venue
// and the Idempotency-Key, and the account's aggregate records the key with
// its answer, so a retry answers the first answer and the same key with
// another request is 409. The account records the group's stage version; the
// group's terms then govern every order it places.
func (h *Handlers) IssueAccount(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b issueBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return nil, err
	}
	v := DoorOf(r).Venue
	if err := commands.Key("groupId", b.GroupID, 64); err != nil {
		return nil, err
	}
	if err := venuecmd.UnstatedLossLimits(b.DailyLossLimit, b.WeeklyLossLimit); err != nil {
		return nil, err
	}
	t, ok := h.d.Engine.Terms(v.VenueID, b.GroupID)
	if !ok {
		return nil, commands.Refuse(commands.CodeInvalidRequest, "the venue holds no live group "+b.GroupID,
			map[string]any{"field": "groupId"})
	}
	cur, err := firmcmd.IssueCurrency(b.Currency, h.d.Env)
	if err != nil {
		return nil, err
	}
	b.Currency = cur
	start := events.Int(50000)
	if b.StartingBalance != nil {
		start = *b.StartingBalance
	}
	if err := firmcmd.CheckPrecision(start, b.Currency, "evaluation"); err != nil {
		return nil, err
	}
	email := strings.ToLower(strings.TrimSpace(b.Email))
	if email != "" {
		if err := commands.Email("email", email); err != nil {
			return nil, err
		}
	}
	ref := "venue:" + idem.Key(r)
	id := firmcmd.AccountID(v.FirmTenantID, ref)
	open := &tenantcmd.OpenAccount{TenantID: v.FirmTenantID, Broker: api.DefaultBroker, AccountNumber: firmcmd.AccountNumber(v.FirmTenantID, ref),
		Label: b.Label, Currency: b.Currency, StartingBalance: start, Kind: "evaluation", Email: email, ReferenceID: ref,
		VenueID: v.VenueID, GroupID: b.GroupID, StageVersion: t.StageVersion,
		PolicyID: t.PolicyID, PolicyVersion: t.PolicyVersion, DailyLossLimit: t.DailyLossLimit, WeeklyLossLimit: t.WeeklyLossLimit}
	if open.Label == "" {
		open.Label = open.AccountNumber
	}
	res, err := h.d.Engine.Account(r.Context(), id, idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), ref, open)))
	if err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(r.Context(), res)
}

func accountView(a projections.Account) map[string]any {
	return venuecmd.AccountView(a.AccountID, a.AccountNumber, a.Label, a.GroupID, a.Currency, a.StartingBalance, a.Balance, a.Commissions, a.CreatedAt)
}

// ListAccounts lists the accounts the venue issued, with live balances, in
// account id order, a page at a time (limit 1-1000, default 1000; cursor).
func (h *Handlers) ListAccounts(w http.ResponseWriter, r *http.Request) error {
	n, after, err := api.VenueAccountCursor.Request(r, 1000, 1000)
	if err != nil {
		return err
	}
	v, ctx := DoorOf(r).Venue, r.Context()
	accts, next, err := projections.AccountsPage(ctx, h.d.Store, v.FirmTenantID, after, n, func(a projections.Account) bool { return a.VenueID == v.VenueID })
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(accts))
	for _, a := range accts {
		out = append(out, accountView(a))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"accounts": out, "nextCursor": api.VenueAccountCursor.NextCursor(next)})
	return nil
}

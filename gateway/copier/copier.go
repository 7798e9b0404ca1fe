// Package copier serves /api/copier/groups: copier groups, a leader account
// whose accepted orders the engine mirrors on follower accounts (engine's
// copiers.go), their followers, and the outcomes of the mirrors.
//
// A caller reaches a group through its leader: it must hold the leader (a
// Trading API key or session of the accounts' owner, a venue key with
// trader:trade or a Connect app key acting for its trader) and, to add a
// follower, the follower too. An account it does not hold is refused as
// the trading routes refuse it (400 invalid_request); a group whose leader
// it does not hold is not found. Writes take an Idempotency-Key.
package copier

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	copiercmd "github.com/svc/engine/commands/copier"
	"github.com/svc/engine/events"
	evcopier "github.com/svc/engine/events/copier"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
)

// Handlers serve the copier routes; the route table is gateway/routes.go.
type Handlers struct{ d *api.Deps }

// New makes the copier handlers.
func New(d *api.Deps) *Handlers { return &Handlers{d} }

// MaxGroupID bounds a group id in a path.
const MaxGroupID = 64

// Limits of the mirrors read.
const (
	defaultMirrors = 50
	maxMirrors     = 200
)

// notHeld is the trading routes' refusal of an account the caller does not hold.
func notHeld(field string) error {
	return &httpx.Error{Status: http.StatusBadRequest, Code: commands.CodeInvalidRequest, Params: map[string]any{"field": field},
		Msg: "account is not one of the caller's accounts"}
}

var errNoGroup = httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no copier group of yours has that id")

// hold checks that the caller holds the account (api.Deps.Reaches).
func (h *Handlers) hold(r *http.Request, field, accountID string) error {
	p, ok := httpx.PrincipalOf(r)
	if !ok {
		return httpx.Errorf(http.StatusUnauthorized, commands.CodeInvalidKey, "a valid API key is required")
	}
	a, err := projections.GetInto[projections.Account](r.Context(), h.d.Store, projections.CollAccount, accountID)
	if errors.Is(err, projections.ErrNotFound) {
		return notHeld(field)
	}
	if err != nil {
		return err
	}
	held, err := h.d.Reaches(r.Context(), p, a)
	if err != nil {
		return err
	}
	if !held {
		return notHeld(field)
	}
	return nil
}

// group reads the path's group, which the caller reaches through its leader.
func (h *Handlers) group(r *http.Request, leaderOrderID string, limit int) (view any, leader string, recent any, err error) {
	id := mux.Vars(r)["groupId"]
	if commands.Key("groupId", id, MaxGroupID) != nil {
		return nil, "", nil, errNoGroup
	}
	v, rec, ok, err := h.d.Engine.CopierGroup(r.Context(), id, leaderOrderID, limit)
	if err != nil {
		return nil, "", nil, err
	}
	if !ok {
		return nil, "", nil, errNoGroup
	}
	if err := h.hold(r, "groupId", v.LeaderAccountID); err != nil {
		var he *httpx.Error
		if errors.As(err, &he) && he.Code == commands.CodeInvalidRequest {
			return nil, "", nil, errNoGroup
		}
		return nil, "", nil, err
	}
	return v, v.LeaderAccountID, rec, nil
}

// exec runs a copier write on the group id, keyed by the request's Idempotency-Key.
func (h *Handlers) exec(r *http.Request, id string, cmd commands.Command) ([]events.Event, error) {
	env := idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", cmd))
	res, err := h.d.Engine.Copier(r.Context(), id, env)
	if err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(r.Context(), res)
}

// Create makes a group (POST /api/copier/groups, body {leaderAccountId,
// name?, followers?}): 201 with the group. Its id derives from the caller
// and the Idempotency-Key, so a retry meets the first answer.
func (h *Handlers) Create(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var c copiercmd.CreateGroup
	if err := httpx.Decode(r, &c, 0); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := h.hold(r, "leaderAccountId", c.Leader); err != nil {
		return nil, err
	}
	for i, f := range c.Followers {
		if err := h.hold(r, "followers["+strconv.Itoa(i)+"].accountId", f.AccountID); err != nil {
			return nil, err
		}
	}
	p, _ := httpx.PrincipalOf(r)
	id, _, err := api.IdempotentID(r, "cg_", p.TenantID+"/"+p.OnBehalfOf, nil)
	if err != nil {
		return nil, err
	}
	return h.exec(r, id, &c)
}

// List lists the groups the caller's accounts lead (GET /api/copier/groups).
func (h *Handlers) List(w http.ResponseWriter, r *http.Request) error {
	p, _ := httpx.PrincipalOf(r)
	accts, err := h.d.Accounts(r.Context(), p)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(accts))
	for _, a := range accts {
		ids = append(ids, a.AccountID)
	}
	groups := h.d.Engine.CopierGroupsLed(ids)
	w.Header().Set("Cache-Control", "no-store")
	if groups == nil {
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"groups": []any{}})
		return nil
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"groups": groups})
	return nil
}

// Get reads a group (GET /api/copier/groups/{groupId}).
func (h *Handlers) Get(w http.ResponseWriter, r *http.Request) error {
	v, _, _, err := h.group(r, "", 0)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

// Mirrors reads the group's recent mirror outcomes, newest first (GET
// /api/copier/groups/{groupId}/mirrors?leaderOrderId=&limit=): per leader
// order and action, which followers mirrored it (their order ids) and which
// refused or were skipped, and why.
func (h *Handlers) Mirrors(w http.ResponseWriter, r *http.Request) error {
	limit, err := api.PageLimit(r, defaultMirrors, maxMirrors)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	leaderOrderID := q.Get("leaderOrderId")
	if q.Has("leaderOrderId") {
		if err := commands.Key("leaderOrderId", leaderOrderID, commands.MaxClientOrderID); err != nil {
			return err
		}
	}
	v, _, recent, err := h.group(r, leaderOrderID, limit)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"group": v, "mirrors": recent})
	return nil
}

// streamMirrors is how many recent actions each event of a group's stream carries.
const streamMirrors = 20

// Stream streams the group (GET /api/copier/groups/{groupId}/stream): an
// event "group" with {group, mirrors} (the latest 20 actions' outcomes)
// at once and after each commit of the group, conflated (a slow client
// skips states, never the newest); a heartbeat comment every 15 s.
func (h *Handlers) Stream(w http.ResponseWriter, r *http.Request) error {
	if _, _, _, err := h.group(r, "", 0); err != nil {
		return err
	}
	if err := httpx.AdmitStream(w); err != nil {
		return err
	}
	id := mux.Vars(r)["groupId"]
	ch, stop := h.d.Engine.WatchCopierGroup(id)
	defer stop()
	sse, err := httpx.StartSSE(w)
	if err != nil {
		return err
	}
	send := func(struct{}) error {
		v, rec, ok, err := h.d.Engine.CopierGroup(r.Context(), id, "", streamMirrors)
		if err != nil || !ok {
			return errNoGroup
		}
		b, err := json.Marshal(map[string]any{"group": v, "mirrors": rec})
		if err != nil {
			return err
		}
		return sse.Event("group", "", b)
	}
	if err := send(struct{}{}); err != nil {
		return nil
	}
	return httpx.Pump(r.Context(), sse, h.d.Hub.Done(), ch, send)
}

// followerBody is a follower's settings as PUT states them.
type followerBody struct {
	Sizing        *evcopier.Sizing  `json:"sizing"`
	InstrumentMap map[string]string `json:"instrumentMap"`
	Direction     string            `json:"direction"`
	Enabled       *bool             `json:"enabled"`
}

// PutFollower adds a follower or sets how it follows (PUT
// /api/copier/groups/{groupId}/followers/{accountId}, body {sizing?,
// instrumentMap?, direction?, enabled?}; omitted: multiplier 1, same,
// enabled): 201 with the group when added, 200 when changed.
func (h *Handlers) PutFollower(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	var b followerBody
	if err := httpx.Decode(r, &b, 0); err != nil {
		return nil, err
	}
	c := &copiercmd.SetFollower{Spec: copiercmd.FollowerSpec{AccountID: mux.Vars(r)["accountId"], Sizing: b.Sizing,
		InstrumentMap: b.InstrumentMap, Direction: b.Direction, Enabled: b.Enabled}}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if _, _, _, err := h.group(r, "", 0); err != nil {
		return nil, err
	}
	if err := h.hold(r, "accountId", c.Spec.AccountID); err != nil {
		return nil, err
	}
	return h.exec(r, mux.Vars(r)["groupId"], c)
}

// RemoveFollower takes a follower out of the group (DELETE
// /api/copier/groups/{groupId}/followers/{accountId}): 200 with the group.
// The leader's holder may remove a follower it no longer holds.
func (h *Handlers) RemoveFollower(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	c := &copiercmd.RemoveFollower{AccountID: mux.Vars(r)["accountId"]}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if _, _, _, err := h.group(r, "", 0); err != nil {
		return nil, err
	}
	return h.exec(r, mux.Vars(r)["groupId"], c)
}

package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	connectcmd "github.com/svc/engine/commands/connect"
	"github.com/svc/engine/events"
	evconnect "github.com/svc/engine/events/connect"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/projections"
)

type ctxKey struct{}

// AppOf is the request's app, as AppDoor resolved it.
func AppOf(r *http.Request) projections.App {
	a, _ := r.Context().Value(ctxKey{}).(projections.App)
	return a
}

// live checks that the app of a Connect key still stands and that the
// owner who created the key still owns the app's organization.
func (h *Handlers) live(ctx context.Context, g *httpx.AppGrant) (projections.App, error) {
	if g == nil {
		return projections.App{}, httpx.Errorf(http.StatusForbidden, commands.CodePermissionDenied, "only a Connect app key reaches this route")
	}
	a, err := h.app(ctx, g.AppID)
	if err != nil {
		return a, err
	}
	role, err := h.d.OrgRole(ctx, a.OrgID, g.CreatedBy)
	if err != nil {
		return a, err
	}
	if role != "owner" {
		return a, &httpx.Error{Status: http.StatusForbidden, Code: commands.CodePermissionDenied, Params: map[string]any{"reason": "creator_not_owner"},
			Msg: "the owner who created this app key no longer owns the app's organization: the key stopped working; create another"}
	}
	return a, nil
}

// AppDoor admits a Connect app key (after auth.RequireConnectKey) to its
// own app's link routes.
func (h *Handlers) AppDoor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := httpx.PrincipalOf(r)
		a, err := h.live(r.Context(), p.App)
		if err != nil {
			httpx.WriteError(w, r, Fam, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, a)))
	})
}

// TraderHeader names the trader an app key (or a venue key) acts for.
const TraderHeader = "x-svc-trader"

// ActAsTrader admits a Connect app key on the account, market and trading
// routes for one of the app's own traders, named in x-svc-trader (else
// 400): the key then reaches that trader's connected accounts and no other
// account. The key's creator must still own the app's organization (else
// 403). Other credentials pass untouched.
func (h *Handlers) ActAsTrader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := httpx.PrincipalOf(r)
		if p.Kind != "connect" {
			next.ServeHTTP(w, r)
			return
		}
		if _, err := h.live(r.Context(), p.App); err != nil {
			httpx.WriteError(w, r, httpx.Trading, err)
			return
		}
		trader := r.Header.Get(TraderHeader)
		if err := connectcmd.Trader(TraderHeader, trader); err != nil {
			httpx.WriteError(w, r, httpx.Trading, commands.BadField(TraderHeader, nil,
				"a Connect app key names the trader it acts for in x-svc-trader: the app's own id of the trader, as its links name them"))
			return
		}
		p.OnBehalfOf = trader
		next.ServeHTTP(w, r.WithContext(httpx.WithPrincipal(r.Context(), p)))
	})
}

// hostedURL is the address that opens hosted Connect on a link: the link's
// token is a seal of its id under the engine's session keys, so the same
// link always has the same address and nothing secret is recorded.
func (h *Handlers) hostedURL(linkID string) string {
	return strings.TrimRight(h.cfg.BaseURL, "/") + "/connect/hosted/" + linkID + "?token=" + url.QueryEscape(h.links.Seal(linkToken{Link: linkID}))
}

type linkToken struct {
	Link string `json:"l"`
}

// linkOf reads a link of the door's app: 404 for any other.
func (h *Handlers) linkOf(r *http.Request) (evconnect.Link, error) {
	id := mux.Vars(r)["linkId"]
	notFound := httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no link of the app has that id in this environment")
	if len(id) > 64 {
		return evconnect.Link{}, notFound
	}
	l, err := projections.GetInto[evconnect.Link](r.Context(), h.d.Store, projections.CollLink, id)
	if errors.Is(err, projections.ErrNotFound) || (err == nil && l.AppID != AppOf(r).AppID) {
		return evconnect.Link{}, notFound
	}
	return l, err
}

// CreateLink makes a link for one of the app's traders (POST
// /api/connect/links, Idempotency-Key required): 201 {link, hostedUrl}. The
// link's id derives from the app and the key, so a retry reaches it and
// gets its first answer.
func (h *Handlers) CreateLink(w http.ResponseWriter, r *http.Request) error {
	var c connectcmd.CreateLink
	if err := httpx.Decode(r, &c, 0); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	p, _ := httpx.PrincipalOf(r)
	a := AppOf(r)
	id := uuidOf("link", a.AppID, idem.Key(r))
	c.AppID, c.KeyID, c.ExpiresAt = a.AppID, p.KeyID, h.cfg.Now().Add(connectcmd.LinkLife)
	env := idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", &c))
	res, err := h.d.Engine.Link(r.Context(), id, env)
	if err == nil {
		if err := h.d.Settle(r.Context(), res); err != nil {
			return err
		}
	}
	return idem.WriteAdding(w, res.Events, err, map[string]any{"hostedUrl": h.hostedURL(id)}, nil)
}

// GetLink answers one of the app's links.
func (h *Handlers) GetLink(w http.ResponseWriter, r *http.Request) error {
	l, err := h.linkOf(r)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"link": connectcmd.ViewLink(l, h.cfg.Now())})
	return nil
}

// Bounds of a page of links.
const (
	defaultPage = 20
	maxPage     = 100
)

// ListLinks pages through the app's links, newest first, filtered by trader
// and state: {links, hasMore, nextCursor}; nextCursor goes back as cursor.
func (h *Handlers) ListLinks(w http.ResponseWriter, r *http.Request) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return commands.BadRequest("the query string is malformed: %v", err)
	}
	limit := defaultPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			return commands.BadField("limit", map[string]any{"max": maxPage}, "limit is 1 to %d", maxPage)
		}
		limit = n
	}
	trader, state, cursor := q.Get("trader"), q.Get("state"), q.Get("cursor")
	if q.Has("trader") {
		if err := connectcmd.Trader("trader", trader); err != nil {
			return err
		}
	}
	states := []string{evconnect.StateCreated, evconnect.StateMounted, evconnect.StateConnected, evconnect.StateFailed, evconnect.StateClosed}
	if q.Has("state") && !slices.Contains(states, state) {
		return commands.BadField("state", map[string]any{"allowed": states}, "state is one of %s", strings.Join(states, ", "))
	}
	a := AppOf(r)
	// A trader's links have an index of their own: a page of them reads
	// that trader's links only, however many the app has.
	coll, prefix := projections.CollAppLink, a.AppID+"/"
	if trader != "" {
		coll, prefix = projections.CollTraderLink, a.AppID+"/"+projections.TraderKey(trader)+"/"
	}
	query := projections.Query{Prefix: prefix, Reverse: true}
	if q.Has("cursor") {
		if !cursorShape.MatchString(cursor) {
			return commands.BadField("cursor", nil, "cursor is not one this route gave: send back nextCursor as it came")
		}
		query.After = prefix + strings.Replace(cursor, ":", "/", 1)
	}
	now := h.cfg.Now()
	out := []connectcmd.LinkView{}
	next, more := "", false
	stop := errors.New("page full")
	err = h.d.Store.List(r.Context(), coll, query, func(key string, get func(any) error) error {
		var id string
		if err := get(&id); err != nil {
			return err
		}
		l, err := projections.GetInto[evconnect.Link](r.Context(), h.d.Store, projections.CollLink, id)
		if err != nil {
			return err
		}
		v := connectcmd.ViewLink(l, now)
		if (trader != "" && v.Trader != trader) || (state != "" && v.State != state) {
			return nil
		}
		if len(out) == limit {
			more = true
			return stop
		}
		out, next = append(out, v), strings.Replace(strings.TrimPrefix(key, prefix), "/", ":", 1)
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return err
	}
	body := map[string]any{"links": out, "hasMore": more, "nextCursor": nil}
	if more {
		body["nextCursor"] = next
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, body)
	return nil
}

// cursorShape is the shape of the cursors ListLinks gives: a commit's
// sequence key and a link's id.
var cursorShape = regexp.MustCompile(`^[0-9]{20}:[0-9a-f-]{36}$`)

// CloseLink closes one of the app's links (DELETE /api/connect/links/{linkId},
// body {} exactly, Idempotency-Key required): a created or mounted link
// closes, its token opens hosted Connect no more and the frame session on it
// ends; a connected link stays connected; closing twice changes nothing.
func (h *Handlers) CloseLink(w http.ResponseWriter, r *http.Request) ([]events.Event, error) {
	if len(bytes.TrimSpace(idem.Body(r))) == 0 {
		return nil, commands.BadRequest("the body is required: send {}")
	}
	var b map[string]json.RawMessage
	if err := httpx.Decode(r, &b, 0); err != nil {
		return nil, err
	}
	if b == nil || len(b) != 0 {
		return nil, commands.BadRequest("the body is {} exactly: an object with no properties")
	}
	l, err := h.linkOf(r)
	if err != nil {
		return nil, err
	}
	env := idem.Envelope(r, h.d.Engine.Envelope(api.Principal(r), "", &connectcmd.CloseLink{}))
	res, err := h.d.Engine.Link(r.Context(), l.ID, env)
	if err != nil {
		return nil, err
	}
	return res.Events, h.d.Settle(r.Context(), res)
}

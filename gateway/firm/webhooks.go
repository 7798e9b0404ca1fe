package firm

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
	firmcmd "github.com/svc/engine/commands/firm"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/engine/egress"
	evfirm "github.com/svc/engine/events/firm"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	firmproj "github.com/svc/engine/projections/firm"
)

// DeliveryRetention is how long the delivery log keeps an attempt.
const DeliveryRetention = 60 * 24 * time.Hour

// registerWebhook adds an https endpoint; its signing secret is in this answer only.
func (h *Handlers) RegisterWebhook(w http.ResponseWriter, r *http.Request) error {
	cmd, err := h.NewWebhook(r)
	if err != nil {
		return err
	}
	tenant := tenantOf(r)
	if err := h.firmExec(r, tenant, cmd); err != nil {
		return err
	}
	wh, err := projections.GetInto[firmproj.Webhook](r.Context(), h.d.Store, firmproj.CollWebhook, tenant+"/"+cmd.ID)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"webhook": map[string]any{
		"id": wh.ID, "url": wh.URL, "eventTypes": wh.EventTypes, "createdAt": wh.CreatedAt,
		"secret": h.WebhookSecret(r, wh.ID),
	}})
	return nil
}

// NewWebhook reads a webhook registration's body {url, eventTypes} and checks
// it: an https URL on the public internet (400 invalid_request, params.field
// url and params.rule), known event types. The command's endpoint id is new.
func (h *Handlers) NewWebhook(r *http.Request) (*firmcmd.RegisterWebhook, error) {
	var body struct {
		URL        string   `json:"url"`
		EventTypes []string `json:"eventTypes"`
	}
	if err := httpx.Decode(r, &body, 0); err != nil {
		return nil, err
	}
	if err := h.cfg.Webhooks.CheckURL(r.Context(), body.URL); err != nil {
		var eg *egress.Error
		if errors.As(err, &eg) {
			return nil, commands.BadField("url", map[string]any{"rule": eg.Rule},
				"url %s; webhooks reach only https:// endpoints on the public internet", eg.Reason())
		}
		return nil, err
	}
	known := map[string]bool{}
	for _, t := range evfirm.WebhookTypes {
		known[t] = true
	}
	for _, t := range body.EventTypes {
		if !known[t] {
			return nil, &httpx.Error{Status: http.StatusBadRequest, Code: commands.CodeInvalidRequest, Msg: "unknown event type " + strconv.Quote(t),
				Params: map[string]any{"eventTypes": evfirm.WebhookTypes}}
		}
	}
	if body.EventTypes == nil {
		body.EventTypes = []string{}
	}
	return &firmcmd.RegisterWebhook{ID: ulid.Make().String(), URL: body.URL, EventTypes: body.EventTypes}, nil
}

// WebhookSecret is the signing secret of the firm's endpoint id.
func (h *Handlers) WebhookSecret(r *http.Request, id string) string {
	return h.cfg.Webhooks.Secret(tenantOf(r), id)
}

func (h *Handlers) ListWebhooks(w http.ResponseWriter, r *http.Request) error {
	whs, err := projections.ListInto[firmproj.Webhook](r.Context(), h.d.Store, firmproj.CollWebhook, projections.Query{Prefix: tenantOf(r) + "/"})
	if err != nil {
		return err
	}
	if whs == nil {
		whs = []firmproj.Webhook{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"webhooks": whs})
	return nil
}

func (h *Handlers) webhook(ctx context.Context, tenant, id string) (firmproj.Webhook, error) {
	wh, err := projections.GetInto[firmproj.Webhook](ctx, h.d.Store, firmproj.CollWebhook, tenant+"/"+id)
	if errors.Is(err, projections.ErrNotFound) {
		return wh, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "webhook not found")
	}
	return wh, err
}

// removeNamedWebhook (DELETE /webhooks) removes the endpoint named by id or
// url, in the JSON body or the query. DELETE /webhooks/{id} is removeWebhook.
// removeWebhook removes the endpoint of the path's id.
func (h *Handlers) RemoveWebhook(w http.ResponseWriter, r *http.Request) error {
	tenant := tenantOf(r)
	wh, err := h.webhook(r.Context(), tenant, mux.Vars(r)["id"])
	if err != nil {
		return err
	}
	return h.remove(w, r, tenant, wh)
}

// removeNamedWebhook removes the endpoint named once, by id or by url, in the
// body ({"id": ...} or {"url": ...}) or the query (?id= or ?url=).
func (h *Handlers) RemoveNamedWebhook(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	if err := httpx.Decode(r, &body, 0); err != nil {
		return err
	}
	q := r.URL.Query()
	if len(q["id"]) > 1 || len(q["url"]) > 1 {
		return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "name the endpoint to remove once, by id or by url")
	}
	var id, target string
	n := 0
	for _, v := range []struct {
		val string
		dst *string
	}{{body.ID, &id}, {q.Get("id"), &id}, {body.URL, &target}, {q.Get("url"), &target}} {
		if v.val != "" {
			*v.dst = v.val
			n++
		}
	}
	switch {
	case n == 0:
		return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "name the endpoint to remove by id or by url, in the body or the query")
	case n > 1:
		return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "name the endpoint to remove once, by id or by url")
	}
	tenant := tenantOf(r)
	if id != "" {
		wh, err := h.webhook(r.Context(), tenant, id)
		if err != nil {
			return err
		}
		return h.remove(w, r, tenant, wh)
	}
	whs, err := projections.ListInto[firmproj.Webhook](r.Context(), h.d.Store, firmproj.CollWebhook, projections.Query{Prefix: tenant + "/"})
	if err != nil {
		return err
	}
	for _, wh := range whs {
		if wh.URL == target {
			return h.remove(w, r, tenant, wh)
		}
	}
	return httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no webhook of the firm has that url")
}

func (h *Handlers) remove(w http.ResponseWriter, r *http.Request, tenant string, wh firmproj.Webhook) error {
	if err := h.firmExec(r, tenant, &firmcmd.RemoveWebhook{ID: wh.ID}); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"webhook": wh})
	return nil
}

// testWebhook delivers a signed ping at once and reports the outcome.
func (h *Handlers) TestWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := TestedWebhook(r)
	if err != nil {
		return err
	}
	out, err := h.PingWebhook(r, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"delivery": out})
	return nil
}

// TestedWebhook reads a test ping's body {webhookId}.
func TestedWebhook(r *http.Request) (string, error) {
	var body struct {
		WebhookID string `json:"webhookId"`
	}
	err := httpx.Decode(r, &body, 0)
	return body.WebhookID, err
}

// PingWebhook delivers a signed ping to the firm's endpoint id at once (404
// when the firm has no such endpoint) and reports the outcome, which the
// delivery log records too.
func (h *Handlers) PingWebhook(r *http.Request, id string) (engine.WebhookOutcome, error) {
	tenant := tenantOf(r)
	wh, err := h.webhook(r.Context(), tenant, id)
	if err != nil {
		return engine.WebhookOutcome{}, err
	}
	return h.cfg.Webhooks.Ping(r.Context(), tenant, wh.ID, wh.URL), nil
}

// deliveries lists the delivery log, newest first, in pages; attempts older
// than 60 days are not kept.
func (h *Handlers) Deliveries(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := api.PageLimit(r, 50, 200)
	if err != nil {
		return err
	}
	tenant := tenantOf(r)
	prefix := tenant + "/"
	query := projections.Query{Prefix: prefix, Reverse: true, Limit: limit + 1}
	if c := q.Get("cursor"); c != "" {
		if len(c) < 20 || strings.ContainsAny(c, "/") {
			return httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "cursor is not one this route gave")
		}
		query.After = prefix + strings.Replace(c, ".", "/", 1)
	}
	cutoff := h.d.Engine.Now().Add(-DeliveryRetention)
	out := []firmproj.Delivery{}
	var keys []string
	next := ""
	err = h.d.Store.List(r.Context(), firmproj.CollDelivery, query, func(key string, decode func(any) error) error {
		var d firmproj.Delivery
		if err := decode(&d); err != nil {
			return err
		}
		if d.CreatedAt.Before(cutoff) {
			return errStop
		}
		if len(out) == limit {
			next = strings.Replace(strings.TrimPrefix(keys[len(keys)-1], prefix), "/", ".", 1)
			return errStop
		}
		keys = append(keys, key)
		out = append(out, d)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	var nc any
	if next != "" {
		nc = next
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"deliveries": out, "nextCursor": nc})
	return nil
}

var errStop = errors.New("stop")

// Package news serves headlines, their thumbnails and the economic calendar:
// /api/news, /api/news/stream, /api/news/image/{id}, /api/calendar and
// /api/calendar/stream.
package news

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/news"
	"github.com/svc/engine/gateway/httpx"
)

// Limits of the news routes.
const (
	DefaultLimit  = 50
	MaxLimit      = 100
	MaxWindowDays = 31 // calendar window
)

// Deps are what the routes read.
type Deps struct {
	News     *news.Service
	Products []market.Product // roots for the instrument filter
	Now      func() time.Time
	Done     <-chan struct{} // ends every stream when closed
}

// New makes the news and calendar handlers; the route table is gateway/routes.go.
func New(n *Deps) *Handlers {
	if n.Now == nil {
		n.Now = time.Now
	}
	return &Handlers{n: n}
}

type Handlers struct{ n *Deps }

func bad(code commands.Code, msg string, params map[string]any) error {
	return &httpx.Error{Status: http.StatusBadRequest, Code: code, Msg: msg, Params: params}
}

// ItemOut is a headline as served.
type ItemOut struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Summary     string   `json:"summary"`
	URL         string   `json:"url"`
	Source      string   `json:"source"`
	PublishedAt string   `json:"publishedAt"`
	Roots       []string `json:"roots"`
	ImageURL    *string  `json:"imageUrl"`
}

func itemOut(it news.Item) ItemOut {
	o := ItemOut{ID: it.ID, Title: it.Title, Summary: it.Summary, URL: it.URL, Source: it.Source,
		PublishedAt: it.PublishedAt.UTC().Format(time.RFC3339), Roots: it.Roots}
	if o.Roots == nil {
		o.Roots = []string{}
	}
	if it.ImageURL != "" {
		u := "/api/news/image/" + it.ID
		o.ImageURL = &u
	}
	return o
}

// root reads the instrument filter: a futures root or contract; unknown is 400.
func (h *Handlers) root(r *http.Request) (string, error) {
	in := strings.TrimSpace(r.URL.Query().Get("instrument"))
	if in == "" {
		return "", nil
	}
	root, ok := market.FuturesRoot(in, h.n.Products)
	if !ok {
		return "", bad(commands.CodeInvalidRequest, "instrument must be a futures root or contract, e.g. ES or ESZ5", map[string]any{"instrument": in})
	}
	return root, nil
}

func (h *Handlers) List(w http.ResponseWriter, r *http.Request) error {
	root, err := h.root(r)
	if err != nil {
		return err
	}
	limit := DefaultLimit
	if raw := r.URL.Query().Get("limit"); raw != "" || r.URL.Query().Has("limit") {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > MaxLimit {
			return bad(commands.CodeInvalidRequest, "limit must be a whole number from 1 to 100", map[string]any{"limit": raw})
		}
		limit = n
	}
	var after *news.Cursor
	if raw := r.URL.Query().Get("cursor"); raw != "" || r.URL.Query().Has("cursor") {
		c, err := news.DecodeCursor(raw)
		if err != nil {
			return bad(commands.CodeInvalidCursor, "cursor is not one this service gave", nil)
		}
		after = &c
	}
	items, next := h.n.News.News.Page(root, after, limit)
	out := make([]ItemOut, 0, len(items))
	for _, it := range items {
		out = append(out, itemOut(it))
	}
	var nextCursor *string
	if next != nil {
		s := next.Encode()
		nextCursor = &s
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": out, "nextCursor": nextCursor})
	return nil
}

func (h *Handlers) Stream(w http.ResponseWriter, r *http.Request) error {
	root, err := h.root(r)
	if err != nil {
		return err
	}
	if err := httpx.AdmitStream(w); err != nil {
		return err
	}
	ch, cancel := h.n.News.SubscribeNews()
	defer cancel()
	sse, err := httpx.StartSSE(w)
	if err != nil {
		return err
	}
	return httpx.Pump(r.Context(), sse, h.n.Done, ch, func(it news.Item) error {
		if root != "" && !contains(it.Roots, root) {
			return nil
		}
		b, _ := json.Marshal(itemOut(it))
		return sse.Event("news_item", it.ID, b)
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (h *Handlers) Image(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["id"]
	it, ok := h.n.News.News.Get(id)
	if !ok {
		return &httpx.Error{Status: http.StatusNotFound, Code: commands.CodeNotFound, Msg: "no such news item"}
	}
	img, err := h.n.News.Images.Get(r.Context(), it)
	switch {
	case errors.Is(err, news.ErrNoImage):
		return &httpx.Error{Status: http.StatusNotFound, Code: commands.CodeNotFound, Msg: "this news item has no image"}
	case err != nil:
		return &httpx.Error{Status: http.StatusBadGateway, Code: commands.CodeImageUnavailable, Msg: "the image could not be fetched or is not an acceptable image"}
	}
	w.Header().Set("Content-Type", img.Type)
	w.Header().Set("Content-Length", strconv.Itoa(len(img.Data)))
	w.Header().Set("Cache-Control", "public, max-age=86400, immutable")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(img.Data)
	return err
}

// EventOut is a calendar event as served.
type EventOut struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Country   string   `json:"country"`
	Currency  string   `json:"currency"`
	Time      string   `json:"time"`
	Impact    string   `json:"impact"`
	Forecast  *string  `json:"forecast"`
	Previous  *string  `json:"previous"`
	Actual    *string  `json:"actual"`
	Roots     []string `json:"roots"`
	UpdatedAt string   `json:"updatedAt"`
}

func parseWhen(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), true
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

func (h *Handlers) Calendar(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	now := h.n.Now().UTC()
	from, to := now.Truncate(24*time.Hour).AddDate(0, 0, -1), now.Truncate(24*time.Hour).AddDate(0, 0, 7)
	if q.Has("from") {
		t, ok := parseWhen(q.Get("from"))
		if !ok {
			return bad(commands.CodeInvalidRequest, "from must be a date (2006-01-02) or an RFC 3339 time", map[string]any{"from": q.Get("from")})
		}
		from = t
		if !q.Has("to") {
			to = from.AddDate(0, 0, 7)
		}
	}
	if q.Has("to") {
		t, ok := parseWhen(q.Get("to"))
		if !ok {
			return bad(commands.CodeInvalidRequest, "to must be a date (2006-01-02) or an RFC 3339 time", map[string]any{"to": q.Get("to")})
		}
		to = t
	}
	if !to.After(from) || to.Sub(from) > MaxWindowDays*24*time.Hour {
		return bad(commands.CodeInvalidWindow, "the window must run forward and span at most 31 days", map[string]any{"maxDays": MaxWindowDays})
	}
	minImpact := 0
	if q.Has("impact") {
		if minImpact = news.ImpactRank(q.Get("impact")); minImpact == 0 {
			return bad(commands.CodeInvalidRequest, "impact must be low, medium or high (the lowest tier listed)", map[string]any{"impact": q.Get("impact")})
		}
	}
	currency := strings.ToUpper(strings.TrimSpace(q.Get("currency")))
	events := h.n.News.Calendar.Window(from, to, minImpact, currency)
	out := make([]EventOut, 0, len(events))
	for _, e := range events {
		roots := e.Roots
		if roots == nil {
			roots = []string{}
		}
		out = append(out, EventOut{ID: e.ID, Title: e.Title, Country: e.Country, Currency: e.Currency, Time: e.Time.UTC().Format(time.RFC3339),
			Impact: e.Impact, Forecast: e.Forecast, Previous: e.Previous, Actual: e.Actual, Roots: roots, UpdatedAt: e.UpdatedAt.UTC().Format(time.RFC3339)})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339), "events": out})
	return nil
}

func (h *Handlers) CalendarStream(w http.ResponseWriter, r *http.Request) error {
	if err := httpx.AdmitStream(w); err != nil {
		return err
	}
	ch, cancel := h.n.News.SubscribeCalendar()
	defer cancel()
	sse, err := httpx.StartSSE(w)
	if err != nil {
		return err
	}
	return httpx.Pump(r.Context(), sse, h.n.Done, ch, func(n news.Nudge) error {
		b, _ := json.Marshal(map[string]any{"ids": n.IDs, "updatedAt": n.UpdatedAt.Format(time.RFC3339Nano)})
		return sse.Event("calendar_update", "", b)
	})
}

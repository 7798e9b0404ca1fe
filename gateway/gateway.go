// Package gateway is the HTTP face of the engine: the route table (routes.go),
// middleware in the order DESIGN.md gives, health, readiness and metrics.
package gateway

import (
	"github.com/svc/engine/commands"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svc/engine/gateway/api"
	connectgw "github.com/svc/engine/gateway/connect"
	"github.com/svc/engine/gateway/docs"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/gateway/idem"
	"github.com/svc/engine/gateway/identity"
	venuegw "github.com/svc/engine/gateway/venue"
)

// DefaultWriteTimeout bounds writing a response, counted from the request's
// arrival: a client that does not read its answer holds a connection no longer.
// A stream lifts it when it starts (httpx.StartSSE).
const DefaultWriteTimeout = 60 * time.Second

// Options shape the handler.
type Options struct {
	Ready        func() (ok bool, why string) // why names what is not ready
	Registry     *prometheus.Registry
	Areas        Areas           // the areas served beyond trading, account and risk (routes.go)
	WriteTimeout time.Duration   // of every response but a stream's; 0: DefaultWriteTimeout
	Reference    *docs.Reference // serves /openapi.yaml, /openapi.json and /docs; nil: not served
}

// Handler builds the gateway's http.Handler.
func Handler(d *api.Deps, o Options) http.Handler {
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	// A path that is not clean ("//", "/./", "/../", a segment's %2F) is
	// no route: it answers the JSON 404, never a 301 with no body that a
	// client would follow with its write turned into a GET.
	root := mux.NewRouter().SkipClean(true)
	ls := layers{root: {mws: []mux.MiddlewareFunc{d.Sequenced}}}
	root.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})).Methods(http.MethodGet)
	root.Handle("/readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Ready != nil {
			if ok, why := o.Ready(); !ok {
				w.Header().Set("Retry-After", "1")
				httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": why})
				return
			}
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})).Methods(http.MethodGet)
	if o.Registry != nil {
		root.Handle("/metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	}
	if ref := o.Reference; ref != nil { // to anyone, as /healthz
		root.Handle("/openapi.yaml", ref.YAML()).Methods(http.MethodGet, http.MethodHead)
		root.Handle("/openapi.json", ref.JSON()).Methods(http.MethodGet, http.MethodHead)
		root.Handle("/docs", ref.Page()).Methods(http.MethodGet, http.MethodHead)
		for name, h := range ref.Assets() {
			root.Handle("/docs/"+name, h).Methods(http.MethodGet, http.MethodHead)
		}
	}

	open := ls.sub(root, root.NewRoute().Subrouter(), d.Auth.Origin, d.Auth.Writes(httpx.Trading))

	// Venue routes: a venue key under /api/venues/ and /api/partner/venues/
	// (before the partner routes, which would take the prefix), an owner's
	// session under /api/back-office/; every write with an Idempotency-Key.
	venueKey := func(prefix string) *mux.Router {
		return ls.sub(root, root.PathPrefix(prefix).Subrouter(),
			d.Auth.Origin, d.Auth.RequireVenueKey(httpx.Venue), d.Auth.Writes(httpx.Venue), idem.Require(httpx.Venue))
	}
	venues, partnerVenues := venueKey("/api/venues"), venueKey("/api/partner/venues")
	backOffice := ls.sub(root, root.PathPrefix("/api/back-office").Subrouter(),
		d.Auth.Origin, d.Auth.RequireSession(httpx.Venue), d.Auth.Writes(httpx.Venue), idem.Require(httpx.Venue))

	firm := ls.sub(root, root.PathPrefix("/api/partner/").Subrouter(),
		d.Auth.Origin, d.Auth.Require(httpx.Trading, "partner"), d.Auth.Writes(httpx.Trading))

	// Identity's handlers serve sign-in for traders and for the Connect dashboard alike (one limiter).
	var id *identity.Handlers
	if o.Areas.Identity != nil {
		id = identity.New(d, *o.Areas.Identity)
	}
	// Connect (with identity): an app key acts for one of its traders on the
	// trading, account and market routes, as a venue key with trader:trade does.
	var cn *connectgw.Handlers
	if o.Areas.Connect != nil && id != nil {
		cfg := *o.Areas.Connect
		cfg.NewUser, cfg.StartDashboard = id.VerifiedUser, id.StartDashboard
		cn = connectgw.New(d, cfg)
	}
	var tr *mux.Router
	if cn != nil {
		tr = ls.sub(root, root.NewRoute().Subrouter(), d.Auth.Origin, d.Auth.Require(httpx.Trading, "trading", "venue", "connect"),
			venuegw.New(d, nil).ActAsTrader, cn.ActAsTrader, d.Auth.Writes(httpx.Trading), d.CatchUp)
	} else {
		tr = ls.sub(root, root.NewRoute().Subrouter(), d.Auth.Origin, d.Auth.Require(httpx.Trading, "trading", "venue"),
			venuegw.New(d, nil).ActAsTrader, d.Auth.Writes(httpx.Trading), d.CatchUp)
	}
	var g guarded
	f := routes(d, o.Areas, id, &g, tr, firm, open)
	venueRoutes(d, f, venues, partnerVenues, backOffice)
	if cn != nil {
		connectRoutes(d, ls, cn, id, root, open)
	}
	ls.bake(root)
	root.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, r, httpx.Trading, httpx.Errorf(http.StatusNotFound, commands.CodeNotFound, "no such route"))
	})
	root.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(root, r); allow != "" {
			w.Header().Set("Allow", allow)
		}
		httpx.WriteError(w, r, httpx.Trading, httpx.Errorf(http.StatusMethodNotAllowed, commands.CodeMethodNotAllowed,
			"method not allowed on this route; the Allow header lists the methods it takes"))
	})
	// The log wraps the router, not a middleware of it: mux runs no middleware
	// for the not-found and method-not-allowed answers, and those are logged too.
	return BoundWrites(o.WriteTimeout, logRequests(dispatch(root, staticRoutes(root, g))))
}

// layers are the middleware of each router of the route table and the
// router it is a subrouter of. mux would wrap a route's handler in its
// routers' middleware on every request (Router.Use): bake wraps each once,
// when the table is built, in the same order (the root's outermost).
type layers map[*mux.Router]layer

type layer struct {
	parent *mux.Router // nil: the root
	mws    []mux.MiddlewareFunc
}

// sub records r, a subrouter of parent, with its middleware, and returns it.
func (ls layers) sub(parent, r *mux.Router, mws ...mux.MiddlewareFunc) *mux.Router {
	ls[r] = layer{parent: parent, mws: mws}
	return r
}

// bake wraps every route's handler of root in its routers' middleware, and
// outermost in one that names the route's template in the request's trace
// (the request log's route). Every subrouter must have been recorded (sub).
func (ls layers) bake(root *mux.Router) {
	_ = root.Walk(func(route *mux.Route, router *mux.Router, _ []*mux.Route) error {
		h := route.GetHandler()
		if h == nil {
			return nil // a subrouter's route: its own routes are walked
		}
		for r := router; r != nil; r = ls[r].parent {
			l, ok := ls[r]
			if !ok {
				panic("gateway: a subrouter of the route table without its layer (layers.sub)")
			}
			for i := len(l.mws) - 1; i >= 0; i-- {
				h = l.mws[i].Middleware(h)
			}
		}
		tpl, err := route.GetPathTemplate()
		if err != nil {
			tpl = ""
		}
		route.Handler(namedRoute(tpl, h))
		return nil
	})
}

// namedRoute writes the route's template into the request's trace, for the
// log line, and serves next.
func namedRoute(tpl string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tr := httpx.TraceOf(r); tr != nil {
			tr.Route = tpl
		}
		next.ServeHTTP(w, r)
	})
}

// dispatch serves root's routes as root.ServeHTTP does, but with no copy
// of the request for a route without variables and one for a route with
// them: mux puts the route (which bake made unneeded) and the variables in
// the request's context, a copy of the request each. Variables are read
// as ever with mux.Vars. A path mux would redirect to its clean form, and
// a request root matches no handler for, root serves itself. A method and
// path of the static table (staticRoutes) is served from it without asking
// root, whose match tries the routes in turn, a regular expression each.
func dispatch(root *mux.Router, static statics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := static[r.Method][r.URL.Path]; h != nil {
			h.ServeHTTP(w, r)
			return
		}
		var m mux.RouteMatch
		if muxClean(r.URL.Path) != r.URL.Path || !root.Match(r, &m) || m.Handler == nil {
			root.ServeHTTP(w, r)
			return
		}
		if len(m.Vars) > 0 {
			r = mux.SetURLVars(r, m.Vars) // what mux.Router.ServeHTTP does: context.WithValue, one copy
		}
		m.Handler.ServeHTTP(w, r)
	})
}

// guarded are the routes whose match depends on more than the method and
// the path (a matcher of the request's headers): the static table leaves
// out every path one of them could take. A route gets such a matcher only
// through only (TestMatchersOnlyThroughGuarded).
type guarded []*mux.Route

// only makes route match only when f holds of the request, and records it.
func (g *guarded) only(route *mux.Route, f mux.MatcherFunc) {
	*g = append(*g, route.MatcherFunc(f))
}

// statics is root's answer for each method and path of a route without
// variables: method, then path, to the handler root would serve.
type statics map[string]map[string]http.Handler

// staticRoutes works out, once, the handler root serves for each method
// and clean path of a route without variables, by asking root itself with
// that method and path: so an earlier route that takes the path (one with
// variables, registered first) keeps it, and a path only some method takes
// is absent for the others (mux's 405). The paths are the table's own
// templates, so the table is as big as the route table and no request adds
// to it. A path a guarded route could take is left out: its answer
// depends on the request's headers.
func staticRoutes(root *mux.Router, g guarded) statics {
	var guards []*regexp.Regexp
	for _, route := range g {
		if re, err := route.GetPathRegexp(); err == nil {
			guards = append(guards, regexp.MustCompile(re))
		}
	}
	out := statics{}
	_ = root.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		methods, merr := route.GetMethods()
		if route.GetHandler() == nil || err != nil || merr != nil || strings.ContainsAny(tpl, "{}") || muxClean(tpl) != tpl {
			return nil
		}
		for _, re := range guards {
			if re.MatchString(tpl) {
				return nil
			}
		}
		for _, method := range methods {
			req := &http.Request{Method: method, URL: &url.URL{Path: tpl}, Header: http.Header{}}
			var m mux.RouteMatch
			if !root.Match(req, &m) || m.Route != route || m.Handler == nil || m.MatchErr != nil || len(m.Vars) > 0 {
				continue
			}
			if out[method] == nil {
				out[method] = map[string]http.Handler{}
			}
			out[method][tpl] = m.Handler
		}
		return nil
	})
	return out
}

// muxClean is the clean form of a path that mux.Router.ServeHTTP
// redirects a request to when it differs from the request's path.
func muxClean(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// allowed lists the methods root serves on r's path, for the Allow header of a 405.
func allowed(root *mux.Router, r *http.Request) string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		c := r.Clone(r.Context())
		c.Method = m
		var match mux.RouteMatch
		if root.Match(c, &match) && match.MatchErr == nil {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}

// BoundWrites sets a write deadline of d from now on every request's
// connection: http.Server.WriteTimeout would end streams too, this one a
// stream lifts. net/http lifts it once the response is sent, so it never
// reaches into the connection's next request.
func BoundWrites(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = setWriteDeadline(w, time.Now().Add(d))
		next.ServeHTTP(w, r)
	})
}

// setWriteDeadline is http.ResponseController's SetWriteDeadline without
// the controller (made on the heap for every request): the first writer of
// the Unwrap chain that sets a write deadline does.
func setWriteDeadline(w http.ResponseWriter, t time.Time) error {
	for {
		switch x := w.(type) {
		case interface{ SetWriteDeadline(time.Time) error }:
			return x.SetWriteDeadline(t)
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
	id     [1]string // the X-Request-Id header's values
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logRequests gives each request an id, sends it as X-Request-Id on every
// answer (error bodies carry it as requestId) and logs one line: id, method,
// route, status, the error code if any, duration. Never a key, a query or a
// body.
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, tr := httpx.Begin(r, ulid.Make().String())
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		sw.id[0] = tr.ID
		w.Header()[httpx.RequestIDHeader] = sw.id[:1:1] // the writer's own: no slice made for the header
		next.ServeHTTP(sw, r)
		route := tr.Route
		if route == "" {
			route = r.URL.Path
		}
		attrs := make([]slog.Attr, 0, 6)
		attrs = append(attrs, slog.String("id", tr.ID), slog.String("method", r.Method),
			slog.String("route", route), slog.Int("status", sw.status))
		if tr.Code != "" {
			attrs = append(attrs, slog.String("code", tr.Code))
		}
		attrs = append(attrs, slog.Duration("duration", time.Since(start)))
		slog.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	})
}

// Package gateway is the HTTP face of the engine: the route table (routes.go),
// middleware in the order DESIGN.md gives, health, readiness and metrics.
package gateway

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
)

// DefaultWriteTimeout bounds writing a response, counted from the request's
// arrival: a client that does not read its answer holds a connection no longer.
// A stream lifts it when it starts (httpx.StartSSE).
const DefaultWriteTimeout = 60 * time.Second

// Options shape the handler.
type Options struct {
	Ready        func() (ok bool, why string) // why names what is not ready
	Registry     *prometheus.Registry
	Areas        Areas         // the areas served beyond trading, account and risk (routes.go)
	WriteTimeout time.Duration // of every response but a stream's; 0: DefaultWriteTimeout
}

// Handler builds the gateway's http.Handler.
func Handler(d *api.Deps, o Options) http.Handler {
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	root := mux.NewRouter()
	root.Use(logRequests)
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

	open := root.NewRoute().Subrouter()
	open.Use(d.Auth.Origin, d.Auth.Writes(httpx.Trading))

	firm := root.PathPrefix("/api/partner/").Subrouter()
	firm.Use(d.Auth.Origin, d.Auth.Require(httpx.Trading, "partner"), d.Auth.Writes(httpx.Trading))

	tr := root.NewRoute().Subrouter()
	tr.Use(d.Auth.Origin, d.Auth.Require(httpx.Trading, "trading"), d.Auth.Writes(httpx.Trading))
	routes(d, o.Areas, tr, firm, open)
	root.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "no such route", "code": "not_found"})
	})
	root.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed on this route"})
	})
	return BoundWrites(o.WriteTimeout, root)
}

// BoundWrites sets a write deadline of d from now on every request's
// connection: http.Server.WriteTimeout would end streams too, this one a
// stream lifts. net/http lifts it once the response is sent, so it never
// reaches into the connection's next request.
func BoundWrites(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		next.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
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

// logRequests gives each request an id and logs one line: id, route, status,
// duration. Never a key, a query or a body.
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ulid.Make().String()
		w.Header().Set("X-Request-Id", id)
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := r.URL.Path
		if m := mux.CurrentRoute(r); m != nil {
			if t, err := m.GetPathTemplate(); err == nil {
				route = t
			}
		}
		slog.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("id", id), slog.String("method", r.Method),
			slog.String("route", route), slog.Int("status", sw.status), slog.Duration("duration", time.Since(start)))
	})
}

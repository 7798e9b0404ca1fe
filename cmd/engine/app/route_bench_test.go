package app_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// BenchmarkRouteToAuth is the gateway's work before a handler's own: a
// request through the real handler (request log, router, the route group's
// middleware) to an answer that needs no engine work (401 without a key), on
// the trading routes every order takes and on an open route, beside
// /healthz (the router's first route) and a path no route takes.
func BenchmarkRouteToAuth(b *testing.B) {
	e := apptest.Start(b, apptest.Options{})
	for _, c := range []struct{ name, method, path string }{
		{"healthz", http.MethodGet, "/healthz"},
		{"order", http.MethodPost, "/api/trading/order"},
		{"account-list", http.MethodGet, "/api/account/list"},
		{"exit-plans", http.MethodGet, "/api/exit-plans"},
		{"no-route", http.MethodGet, "/api/nothing/here"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(c.method, c.path, nil)
			for b.Loop() {
				w := httptest.NewRecorder()
				e.App.Handler.ServeHTTP(w, req)
				if w.Code == http.StatusOK && c.name != "healthz" {
					b.Fatalf("%s answered 200 without a key", c.path)
				}
			}
		})
	}
}

package gateway

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/mux"
)

// named answers 200 with its name, so a test sees which route served.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(name)) })
}

// dispatchTable is a route table shaped as the gateway's: a route with
// variables registered before a static path it also takes, subrouters under
// a prefix and without one, one path for two methods, and the copier's pair
// of guarded routes on one path (a key route and a session route).
func dispatchTable() (*mux.Router, guarded) {
	root := mux.NewRouter().SkipClean(true)
	var g guarded
	root.Handle("/v/{id}", named("var")).Methods(http.MethodGet)
	root.Handle("/v/open", named("v-open")).Methods(http.MethodGet)
	root.Handle("/v/open", named("v-open-post")).Methods(http.MethodPost)
	pre := root.PathPrefix("/p").Subrouter()
	pre.Handle("/s", named("p-s")).Methods(http.MethodPost)
	pre.Handle("", named("p")).Methods(http.MethodGet, http.MethodHead)
	open := root.NewRoute().Subrouter()
	open.Handle("/o", named("o")).Methods(http.MethodGet)
	hasKey := func(r *http.Request, _ *mux.RouteMatch) bool { return r.Header.Get("Authorization") != "" }
	noKey := func(r *http.Request, m *mux.RouteMatch) bool { return !hasKey(r, m) }
	g.only(root.Handle("/c", named("c-key")).Methods(http.MethodGet), hasKey)
	g.only(open.Handle("/c", named("c-session")).Methods(http.MethodGet), noKey)
	g.only(root.Handle("/c/{id}", named("c-id-key")).Methods(http.MethodGet), hasKey)
	open.Handle("/c/all", named("c-all")).Methods(http.MethodGet)
	root.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "none", http.StatusNotFound) })
	root.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "method", http.StatusMethodNotAllowed)
	})
	return root, g
}

// The static table answers every request exactly as asking the route
// table does, and holds the static paths no earlier or guarded route takes.
func TestStaticRoutesAnswerAsTheRouteTable(t *testing.T) {
	root, g := dispatchTable()
	static := staticRoutes(root, g)
	want := map[string][]string{
		http.MethodGet:  {"/p", "/o"},
		http.MethodHead: {"/p"},
		http.MethodPost: {"/v/open", "/p/s"},
	}
	n := 0
	for method, paths := range want {
		for _, p := range paths {
			if static[method][p] == nil {
				t.Errorf("%s %s: not in the static table", method, p)
			}
			n++
		}
	}
	for method, paths := range static {
		for p := range paths {
			if !strings.Contains(strings.Join(want[method], " ")+" ", p+" ") {
				t.Errorf("%s %s: in the static table, but the route table may answer it otherwise", method, p)
			}
		}
	}

	fast, slow := dispatch(root, static), dispatch(root, nil)
	for _, c := range []struct{ method, path, auth, served string }{
		{http.MethodGet, "/v/open", "", "var"}, // the earlier route with variables takes it
		{http.MethodPost, "/v/open", "", "v-open-post"},
		{http.MethodGet, "/v/x", "", "var"},
		{http.MethodPost, "/p/s", "", "p-s"},
		{http.MethodGet, "/p/s", "", "none"}, // mux: a method mismatch inside a subrouter is not found
		{http.MethodGet, "/p", "", "p"},
		{http.MethodHead, "/p", "", "p"},
		{http.MethodGet, "/o", "", "o"},
		{http.MethodPut, "/o", "", "method"},
		{http.MethodGet, "/c", "Bearer k", "c-key"},
		{http.MethodGet, "/c", "", "c-session"},
		{http.MethodGet, "/c/all", "Bearer k", "c-all"}, // the open subrouter came first
		{http.MethodGet, "/c/all", "", "c-all"},
		{http.MethodGet, "/p//s", "", "none"},
		{http.MethodGet, "/o/", "", "none"},
		{http.MethodGet, "/nowhere", "", "none"},
	} {
		var got [2]string
		for i, h := range []http.Handler{fast, slow} {
			r := httptest.NewRequest(c.method, c.path, nil)
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got[i] = strings.TrimSpace(w.Body.String())
		}
		if got[0] != got[1] || got[0] != c.served {
			t.Errorf("%s %s (auth %q): served by %q with the static table, %q without; want %q", c.method, c.path, c.auth, got[0], got[1], c.served)
		}
	}
}

// A matcher beyond the method and the path is set only through
// guarded.only, so the static table knows every path it could take.
func TestMatchersOnlyThroughGuarded(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{".MatcherFunc(", ".Headers(", ".HeadersRegexp(", ".Queries(", ".Host(", ".Schemes("} {
			n := strings.Count(string(b), m)
			if f == "gateway.go" && m == ".MatcherFunc(" {
				n-- // guarded.only's own
			}
			if n > 0 {
				t.Errorf("%s: %d uses of %s outside guarded.only", f, n, m)
			}
		}
	}
}

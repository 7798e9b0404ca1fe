package docs_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc/engine/gateway/docs"
)

func TestYAMLToJSON(t *testing.T) {
	for _, tc := range []struct{ name, yaml, json string }{
		{"keys keep their order", "b: 1\na: 2\nc: 3\n", `{"b":1,"a":2,"c":3}`},
		{"quoted stays a string", "'200': {x: '1', y: 'true', z: 'null'}", `{"200":{"x":"1","y":"true","z":"null"}}`},
		{"plain scalars keep their type", "i: 42\nh: 0x1f\nf: 1.5\nb: true\nn: null\nt: ~\ns: text", `{"i":42,"h":31,"f":1.5,"b":true,"n":null,"t":null,"s":"text"}`},
		{"a date is its text", "d: 2026-11-24\nt: 2026-11-24T15:40:29Z", `{"d":"2026-11-24","t":"2026-11-24T15:40:29Z"}`},
		{"block text", "d: |\n  one\n  two\n", `{"d":"one\ntwo\n"}`},
		{"flow and block sequences", "a: [1, x]\nb:\n  - {c: d}\n", `{"a":[1,"x"],"b":[{"c":"d"}]}`},
		{"an alias is its anchor's value", "a: &v {x: 1}\nb: *v\n", `{"a":{"x":1},"b":{"x":1}}`},
		{"JSON-special characters", `s: "quote \" backslash \\ tab \t <tag>"`, `{"s":"quote \" backslash \\ tab \t \u003ctag\u003e"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := docs.YAMLToJSON([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.json {
				t.Errorf("got  %s\nwant %s", got, tc.json)
			}
		})
	}
	for _, bad := range []string{"a: .inf", "a: [", "? [a, b]\n: c", "---\na: 1\n---\nb: 2\n"} {
		if got, err := docs.YAMLToJSON([]byte(bad)); err == nil {
			t.Errorf("%q converted to %s", bad, got)
		}
	}
}

func TestReferenceHandlers(t *testing.T) {
	ref, err := docs.New([]byte("openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	y := get(ref.YAML())
	if y.Code != 200 || y.Header().Get("Content-Type") != "application/yaml" || !strings.HasPrefix(y.Body.String(), "openapi: 3.1.0") {
		t.Fatalf("yaml: %d %v %s", y.Code, y.Header(), y.Body)
	}
	if again := get(ref.YAML(), "If-None-Match", y.Header().Get("ETag")); again.Code != http.StatusNotModified {
		t.Errorf("a fresh ETag: %d", again.Code)
	}
	if j := get(ref.JSON()); j.Body.String() != `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{}}` {
		t.Errorf("json: %s", j.Body)
	}
	page := get(ref.Page())
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("page CSP %q", csp)
	}
	assets := ref.Assets()
	for _, name := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "init.js", "LICENSE", "NOTICE"} {
		h, ok := assets[name]
		if !ok {
			t.Errorf("no asset %s", name)
			continue
		}
		if w := get(h); w.Code != 200 || w.Body.Len() == 0 {
			t.Errorf("%s: %d, %d bytes", name, w.Code, w.Body.Len())
		}
		if !strings.Contains(page.Body.String(), "docs/"+name) && strings.HasSuffix(name, ".js") {
			t.Errorf("the page does not load %s", name)
		}
	}
	if _, err := docs.New([]byte("a: [")); err == nil {
		t.Error("a document that is not YAML")
	}
}

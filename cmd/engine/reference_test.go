package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"go.yaml.in/yaml/v4"

	"github.com/svc/engine/schema/openapilint"
)

// TestReferenceIsServed: the binary serves the OpenAPI document it was built
// with, as YAML and as the same document in JSON, valid OpenAPI 3.1 by the
// project's lint; and /docs renders the reference in Chromium with every
// request the page makes going to 127.0.0.1.
func TestReferenceIsServed(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)

	yml := fetch(t, p.base+"/openapi.yaml", "application/yaml")
	t.Run("the YAML document lints as OpenAPI 3.1", func(t *testing.T) {
		for _, err := range openapilint.Lint(yml) {
			t.Error(err)
		}
	})
	t.Run("it is the document of the source tree", func(t *testing.T) {
		src, err := os.ReadFile("../../schema/openapi.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(yml, src) {
			t.Error("/openapi.yaml differs from schema/openapi.yaml")
		}
	})
	t.Run("the JSON is the same document", func(t *testing.T) {
		js := fetch(t, p.base+"/openapi.json", "application/json")
		var fromYAML, fromJSON any
		if err := yaml.Unmarshal(yml, &fromYAML); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(js, &fromJSON); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(t, fromYAML), fromJSON) {
			t.Error("/openapi.json is not /openapi.yaml's document")
		}
		if !bytes.HasPrefix(js, []byte(`{"openapi":"3.1.0","info":`)) {
			t.Errorf("the JSON does not keep the document's order of keys: %.60s", js)
		}
	})
	t.Run("the reference renders offline in Chromium", func(t *testing.T) {
		renderDocs(t, p.base)
	})
}

// fetch GETs u and returns its body, failing unless it is a 200 of contentType.
func fetch(t *testing.T, u, contentType string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentType {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return b
}

// normalize passes v through JSON, as the JSON document was.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// chromium finds Debian's chromium (or another Chrome); its absence fails
// the test (scripts/test installs it where it can).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: apt-get install -y chromium (scripts/test does where apt-get runs as root)")
	return ""
}

// renderDocs opens base/docs in headless Chromium, waits for the reference to
// list the operations, and fails on any request the page made to a host other
// than 127.0.0.1. Chromium resolves no other name meanwhile, so a renderer
// that reached for a CDN fails here without traffic leaving the machine.
func renderDocs(t *testing.T, base string) {
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()

	var mu sync.Mutex
	var requested, elsewhere, errs []string
	err := chromedp.Listen(ctx, func(ev any) { // starts the browser
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			requested = append(requested, e.Request.URL)
			u, err := url.Parse(e.Request.URL)
			if err != nil || (u.Scheme != "data" && u.Scheme != "blob" && u.Hostname() != "127.0.0.1") {
				elsewhere = append(elsewhere, e.Request.URL)
			}
		case *cdplog.EventEntryAdded: // a request the page's Content-Security-Policy refused never reaches the network: it is logged
			if e.Entry.Level == cdplog.EntryLevelError {
				errs = append(errs, string(e.Entry.Source)+": "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	})
	if err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/docs"),
		chromedp.WaitVisible(chromedp.CSS(".opblock-summary-description")),
	)
	var text string
	if err == nil {
		text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#reference")))
	}
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		t.Fatalf("render /docs: %v (requests: %v)", err, requested)
	}
	for _, u := range elsewhere {
		t.Errorf("the reference page requested %s: only 127.0.0.1 may be asked", u)
	}
	for _, e := range errs {
		t.Errorf("the browser logged an error: %s", e)
	}
	for _, want := range []string{"Trading engine service", "/api/trading/order", "Place an order", "placeOrder"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered reference lacks %q", want)
		}
	}
	if !strings.Contains(strings.Join(requested, " "), "/openapi.json") {
		t.Errorf("the page did not load /openapi.json: %v", requested)
	}
}

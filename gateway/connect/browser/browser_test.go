package browser_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/gateway/connect/browser"
)

// hits counts the requests a test server saw, by name.
type hits struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *hits) add(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[name]++
}

func (h *hits) get(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[name]
}

// framePage is B's page. Its script reports, with a synchronous request, that
// it ran in the embedding named by ?embed=: a synchronous request holds the
// parser, so the report reaches B before the frame's load event can fire, and
// a frame that fired load without a report never ran B's script.
const framePage = `<!doctype html>
<title>B</title>
<button id="go" style="width:200px;height:60px">Go</button>
<p id="out"></p>
<script>
const embed = new URLSearchParams(location.search).get("embed");
const x = new XMLHttpRequest();
x.open("POST", "/ran?embed=" + embed, false);
x.send();
document.getElementById("go").onclick = async () => {
  const r = await fetch("/click?embed=" + embed, {method: "POST"});
  document.getElementById("out").textContent = await r.text();
};
</script>`

// embedderPage embeds src and marks the body once the iframe fires load,
// whether it shows src or the browser's error page.
func embedderPage(src string) string {
	return fmt.Sprintf(`<!doctype html>
<title>embedder</title>
<iframe id="f" src=%q width="400" height="200" onload="document.body.dataset.frameLoaded = 'yes'"></iframe>`, src)
}

func html(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, body)
}

// TestFrameAncestors proves the harness and what Connect relies on: a page
// sent with frame-ancestors naming one origin works inside that origin's
// iframe, clicks included, and does not run at all inside another's.
func TestFrameAncestors(t *testing.T) {
	var seen hits
	frameMux := http.NewServeMux()
	frameSrv := httptest.NewServer(frameMux) // B, the framed page
	t.Cleanup(frameSrv.Close)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		html(w, embedderPage(frameSrv.URL+"/?embed=allowed"))
	})) // A, named by B's frame-ancestors
	t.Cleanup(allowed.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		html(w, embedderPage(frameSrv.URL+"/?embed=other"))
	})) // C, another origin
	t.Cleanup(other.Close)

	frameMux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		seen.add("page:" + r.URL.Query().Get("embed"))
		w.Header().Set("Content-Security-Policy", "frame-ancestors "+allowed.URL)
		html(w, framePage)
	})
	frameMux.HandleFunc("POST /ran", func(w http.ResponseWriter, r *http.Request) {
		seen.add("ran:" + r.URL.Query().Get("embed"))
	})
	frameMux.HandleFunc("POST /click", func(w http.ResponseWriter, r *http.Request) {
		seen.add("click:" + r.URL.Query().Get("embed"))
		fmt.Fprint(w, "clicked in B")
	})
	for _, s := range []*httptest.Server{frameSrv, allowed, other} {
		if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
			t.Fatalf("server at %s, want 127.0.0.1", s.URL)
		}
	}

	ctx := browser.New(t, 20*time.Second)

	t.Run("embedded by the named origin", func(t *testing.T) {
		browser.Run(t, ctx,
			chromedp.Navigate(allowed.URL),
			chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")),
		)
		iframe := browser.Frame(t, ctx, "iframe#f")
		if got := seen.get("ran:allowed"); got != 1 {
			t.Fatalf("B's script ran %d times in A's frame, want 1", got)
		}
		// A real mouse click, dispatched at the button's place in the page.
		browser.Run(t, ctx, chromedp.Click(chromedp.CSS("#go"), chromedp.FromNode(iframe)))
		got := browser.Get(t, ctx, chromedp.Poll[string](
			`document.getElementById("out").textContent`,
			chromedp.WithPollingInFrame(iframe), chromedp.WithPollingTimeout(5*time.Second)))
		if got != "clicked in B" {
			t.Errorf("B's page shows %q after the click, want %q", got, "clicked in B")
		}
		if n := seen.get("click:allowed"); n != 1 {
			t.Errorf("B saw %d click requests, want 1", n)
		}
	})

	t.Run("embedded by another origin", func(t *testing.T) {
		browser.Run(t, ctx,
			chromedp.Navigate(other.URL),
			chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")),
		)
		// The browser asked B for the page, and got it with the header...
		enginetest.WaitFor(t, 5*time.Second, func() error {
			if seen.get("page:other") == 0 {
				return fmt.Errorf("B never asked for its page from C's frame")
			}
			return nil
		})
		// ...and the frame's load fired, which B's synchronous report would
		// have preceded: B's script never ran.
		if n := seen.get("ran:other"); n != 0 {
			t.Fatalf("B's script ran %d times in C's frame: frame-ancestors not enforced", n)
		}
		// The frame holds the browser's error page, not B's document.
		iframe := browser.Frame(t, ctx, "iframe#f")
		if doc := iframe.ContentDocument; strings.HasPrefix(doc.DocumentURL, frameSrv.URL) {
			t.Errorf("C's frame holds %s, want the browser's error page", doc.DocumentURL)
		}
		if n := len(browser.Get(t, ctx, chromedp.Nodes(chromedp.CSS("#go"), chromedp.FromNode(iframe), chromedp.AtLeast(0)))); n != 0 {
			t.Errorf("C's frame shows B's button")
		}
	})
}

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNewFailsNamingWhatToInstall(t *testing.T) {
	t.Setenv("CHROMIUM", filepath.Join(t.TempDir(), "no-such-chromium"))
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		browser.New(f, time.Second)
	}()
	<-done
	if !strings.Contains(f.msg, "apt-get install chromium") {
		t.Errorf("New without a browser failed with %q, want it to name the package", f.msg)
	}
}

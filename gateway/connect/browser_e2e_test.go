package connect_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/gateway/connect/browser"
)

// newApp makes an app whose hosted Connect the websites may embed, through
// the dashboard of a new verified owner, and answers its app key.
func (e env) newApp(t *testing.T, email string, websites ...string) string {
	t.Helper()
	dash, trader := e.dashboard(email)
	org := want(t, e.AsSession(trader, apptest.Req{Method: http.MethodPost, Path: "/api/organizations", Body: map[string]string{"name": "Org of " + email}}), 201, "")["organization"].(map[string]any)["id"].(string)
	app := want(t, e.board(dash, "app", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps",
		Body: map[string]any{"orgId": org, "name": "Embedded", "websites": websites}}), 201, "")["app"].(map[string]any)
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	return want(t, e.board(dash, "key", apptest.Req{Method: http.MethodPost, Path: "/api/connect/dashboard/apps/" + app["id"].(string) + "/keys",
		Body: map[string]any{"name": "server", "expiresAt": exp}}), 201, "")["secret"].(string)
}

// embedder serves a page that embeds src in an iframe, as an app's website does.
func embedder(t *testing.T, src string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>app</title>
<iframe id="f" src=%q width="480" height="360" onload="document.body.dataset.frameLoaded = 'yes'"></iframe>`, src)
	}))
	t.Cleanup(s.Close)
	return s
}

// The app's website embeds hosted Connect; the trader clicks through in a
// real browser (headless Chromium) and opens the app's white-label paper;
// the link is connected with the accountId GET /api/account/list gives the
// app's key acting for that trader. Another website cannot embed it.
func TestHostedConnectInABrowser(t *testing.T) {
	e := start(t)
	// The embedding website's origin must be known before the app is made: reserve it.
	var src string
	site := httptest.NewUnstartedServer(nil)
	site.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>app</title>
<iframe id="f" src=%q width="480" height="360" onload="document.body.dataset.frameLoaded = 'yes'"></iframe>`, src)
	})
	site.Start()
	t.Cleanup(site.Close)
	key := e.newApp(t, "web@example.com", site.URL)

	link, hosted := e.createLink(key, "b1", "trader-web")
	src = e.local(hosted)
	ctx := browser.New(t, 30*time.Second)
	browser.Run(t, ctx, chromedp.Navigate(site.URL), chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")))
	frame := browser.Frame(t, ctx, "iframe#f")
	browser.Run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS("#open-paper"), chromedp.FromNode(frame)),
		chromedp.Click(chromedp.CSS("#open-paper"), chromedp.FromNode(frame)),
		chromedp.WaitVisible(chromedp.CSS("#connected"), chromedp.FromNode(frame)),
	)
	shown := browser.Get(t, ctx, chromedp.AttributeValue(chromedp.CSS("#connected"), "data-account", chromedp.FromNode(frame))).Value

	got := want(t, e.app(key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + link["id"].(string)}), 200, "")["link"].(map[string]any)
	list := want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: key, Headers: map[string]string{"x-svc-trader": "trader-web"}}), 200, "")["accounts"].([]any)
	if got["state"] != "connected" || len(list) != 1 {
		t.Fatalf("link %v, accounts %v", got, list)
	}
	acct := list[0].(map[string]any)["accountId"]
	if got["result"].(map[string]any)["accountId"] != acct || shown != acct {
		t.Fatalf("link's accountId %v, page's %q, account list's %v", got["result"], shown, acct)
	}

	// A website the app did not register embeds a link of it: the browser refuses the frame.
	other, hosted2 := e.createLink(key, "b2", "trader-other")
	evil := embedder(t, e.local(hosted2))
	browser.Run(t, ctx, chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")))
	blocked := browser.Frame(t, ctx, "iframe#f")
	if doc := blocked.ContentDocument; doc != nil && strings.HasPrefix(doc.DocumentURL, e.URL) {
		t.Fatalf("another website's frame holds hosted Connect: %s", doc.DocumentURL)
	}
	if n := len(browser.Get(t, ctx, chromedp.Nodes(chromedp.CSS("#open-paper"), chromedp.FromNode(blocked), chromedp.AtLeast(0)))); n != 0 {
		t.Fatal("another website's frame shows hosted Connect's button")
	}
	if l := want(t, e.app(key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + other["id"].(string)}), 200, "")["link"].(map[string]any); l["state"] == "connected" {
		t.Fatalf("a blocked frame connected the link: %v", l)
	}
}

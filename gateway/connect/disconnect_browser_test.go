package connect_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/gateway/connect/browser"
)

// A returning trader, in a real browser (headless Chromium) on the app's
// website, clicks Disconnect beside their account in hosted Connect: the
// page says so, and the app's key acting for them is refused on it.
func TestHostedDisconnectInABrowser(t *testing.T) {
	e := start(t)
	var mu sync.Mutex
	src := ""
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>app</title>
<iframe id="f" src=%q width="480" height="360" onload="document.body.dataset.frameLoaded = 'yes'"></iframe>`, src)
	}))
	site.Start()
	t.Cleanup(site.Close)
	key := e.newApp(t, "leave@example.com", site.URL)
	embed := func(hosted string) {
		mu.Lock()
		src = e.local(hosted)
		mu.Unlock()
	}
	ctx := browser.New(t, 60*time.Second)

	// First visit: the trader opens the paper account.
	_, hosted := e.createLink(key, "v1", "trader-leave")
	embed(hosted)
	browser.Run(t, ctx, chromedp.Navigate(site.URL), chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")))
	frame := browser.Frame(t, ctx, "iframe#f")
	browser.Run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS("#open-paper"), chromedp.FromNode(frame)),
		chromedp.Click(chromedp.CSS("#open-paper"), chromedp.FromNode(frame)),
		chromedp.WaitVisible(chromedp.CSS("#connected"), chromedp.FromNode(frame)),
	)
	acct := browser.Get(t, ctx, chromedp.AttributeValue(chromedp.CSS("#connected"), "data-account", chromedp.FromNode(frame))).Value
	as := func() *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/orders?account=" + acct, Key: key, Headers: map[string]string{"x-svc-trader": "trader-leave"}})
	}
	want(t, as(), 200, "")

	// Back through a new link: Disconnect beside the account.
	_, hosted2 := e.createLink(key, "v2", "trader-leave")
	embed(hosted2)
	browser.Run(t, ctx, chromedp.Navigate(site.URL), chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")))
	frame = browser.Frame(t, ctx, "iframe#f")
	button := `button.disconnect[data-account="` + acct + `"]`
	browser.Run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS(button), chromedp.FromNode(frame)),
		chromedp.Click(chromedp.CSS(button), chromedp.FromNode(frame)),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-disconnected="`+acct+`"]`), chromedp.FromNode(frame)),
	)
	if n := len(browser.Get(t, ctx, chromedp.Nodes(chromedp.CSS(button), chromedp.FromNode(frame), chromedp.AtLeast(0)))); n != 0 {
		t.Fatal("the Disconnect button is still shown")
	}
	want(t, as(), 403, "app_disconnected")
}

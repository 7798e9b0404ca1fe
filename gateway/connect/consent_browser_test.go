package connect_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/gateway/connect/browser"
)

// In a real browser, with live trading off by default as in production:
// the trader links their exchange account in hosted Connect with "Allow
// live trading" checked, and the app's order reaches the exchange; back
// through a new link, the page says the app may trade live there, with a
// button that stops it; after the click the page says it is off and the
// app's next order is refused, held by the trader, and never sent.
func TestHostedConnectLiveConsentInABrowser(t *testing.T) {
	e := startLiveOff(t)
	var mu sync.Mutex
	src := ""
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>app</title>
<iframe id="f" src=%q width="520" height="1100" onload="document.body.dataset.frameLoaded = 'yes'"></iframe>`, src)
	}))
	site.Start()
	t.Cleanup(site.Close)
	key := e.newApp(t, "live-consent@example.com", site.URL)
	ctx := browser.New(t, 90*time.Second)
	visit := func(idem string) chromedp.QueryOption {
		t.Helper()
		_, hosted := e.createLink(key, idem, "trader-live")
		mu.Lock()
		src = e.local(hosted)
		mu.Unlock()
		browser.Run(t, ctx, chromedp.Navigate(site.URL), chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")))
		return chromedp.FromNode(browser.Frame(t, ctx, "iframe#f"))
	}
	order := func(q, coid string) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order" + q, Key: key, Headers: map[string]string{"x-svc-trader": "trader-live"},
			Body: map[string]any{"clientOrderId": coid, "instrument": "BTCUSDT", "side": "buy", "orderType": "market", "quantity": "0.01"}})
	}

	// The first visit: the key, the secret, the box checked.
	in := visit("l1")
	form := `form.provider[data-provider="binance-futures"]`
	browser.Run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS(form+` input[name="apiKey"]`), in),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="apiKey"]`), consentKey, in),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="apiSecret"]`), consentSecret, in),
		chromedp.Click(chromedp.CSS(form+` input[name="liveConsent"]`), in),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`), in),
		chromedp.WaitVisible(chromedp.CSS("#connected"), in))
	acct := browser.Get(t, ctx, chromedp.AttributeValue(chromedp.CSS("#connected"), "data-account", in)).Value
	lst := want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: key, Headers: map[string]string{"x-svc-trader": "trader-live"}}), 200, "")
	q := ""
	for _, a := range lst["accounts"].([]any) {
		if a := a.(map[string]any); a["accountId"] == acct {
			q = "?broker=" + a["broker"].(string) + "&account=" + a["accountNumber"].(string)
		}
	}
	if q == "" {
		t.Fatalf("the app does not list %q: %v", acct, lst)
	}
	want(t, order(q, "live-1"), 200, "")
	if n := e.placed(); n != 1 {
		t.Fatalf("the exchange saw %d orders, want 1", n)
	}

	// Back: the page says the app trades live there, and the trader stops it.
	in = visit("l2")
	live := `p.live[data-account="` + acct + `"]`
	browser.Run(t, ctx, chromedp.WaitVisible(chromedp.CSS(live+`[data-granted="yes"] button.withdraw`), in))
	if got := browser.Get(t, ctx, chromedp.Text(chromedp.CSS(live), in)); !strings.Contains(got, "real orders") || !strings.Contains(got, "your money") {
		t.Fatalf("the page says %q", got)
	}
	browser.Run(t, ctx,
		chromedp.Click(chromedp.CSS(live+` button.withdraw`), in),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-withdrawn="`+acct+`"]`), in),
		chromedp.WaitVisible(chromedp.CSS(live+`[data-granted="no"]`), in))
	if got := browser.Get(t, ctx, chromedp.Text(chromedp.CSS(live), in)); !strings.Contains(got, "is off") || !strings.Contains(got, "link this account again") {
		t.Fatalf("after stopping, the page says %q", got)
	}
	heldBy(t, "an order after the trader stopped it", order(q, "live-2"), "trader")
	if n := e.placed(); n != 1 {
		t.Fatalf("the exchange saw %d orders, want 1", n)
	}
}

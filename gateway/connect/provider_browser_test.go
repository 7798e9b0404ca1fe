package connect_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/gateway/connect/browser"
	"github.com/svc/engine/sim/binance"
)

const (
	simKey    = "hostedKEYq81VqXlinkedBinanceAPIkey01"
	simSecret = "hostedSECRETqq42nnNeverInThePage0009"
)

// startWithSim starts the engine with its Binance provider on an
// in-process simulator holding one account (simKey, simSecret).
func startWithSim(t *testing.T) env {
	t.Helper()
	sim := binance.New(binance.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	if err := sim.AddAccount(binance.Account{APIKey: simKey, Secret: simSecret}); err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	e := apptest.Start(t, apptest.Options{Now: c.now, Configure: func(cfg *app.Config) {
		cfg.Providers.BinanceREST, cfg.Providers.BinanceWS, cfg.Providers.BinanceSpot = sim.URL(), sim.WSURL(), sim.URL()
		cfg.Providers.AllowPrivate = true
	}})
	return env{e, e.Creds["connectKey"].(string), e.Creds["connectAppId"].(string), c}
}

// A trader opens an app's link in hosted Connect, embedded in the app's
// website, in a real browser: the page names who runs it, the app and what
// it may do, and offers Binance USDⓈ-M Futures. A wrong secret shows the
// page's own plain sentence (never the API's); the right key links the
// simulator's account, and the app reads the link connected with an
// accountId its key lists for the trader with clock observation. Neither
// the page nor any answer ever holds the secret.
func TestHostedConnectLinksAProviderAccount(t *testing.T) {
	e := startWithSim(t)
	var src string
	site := httptest.NewUnstartedServer(nil)
	site.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>app</title>
<iframe id="f" src=%q width="520" height="900" onload="document.body.dataset.frameLoaded = 'yes'"></iframe>`, src)
	})
	site.Start()
	t.Cleanup(site.Close)
	key := e.newApp(t, "exchange@example.com", site.URL)
	link, hosted := e.createLink(key, "p1", "trader-binance")
	src = e.local(hosted)

	ctx := browser.New(t, 60*time.Second)
	browser.Run(t, ctx, chromedp.Navigate(site.URL), chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")))
	frame := browser.Frame(t, ctx, "iframe#f")
	in := chromedp.FromNode(frame)
	form := `form.provider[data-provider="binance-futures"]`
	browser.Run(t, ctx, chromedp.WaitVisible(chromedp.CSS(form+` input[name="apiKey"]`), in))
	text := func(sel string) string {
		t.Helper()
		return browser.Get(t, ctx, chromedp.Text(chromedp.CSS(sel), in))
	}
	host := strings.TrimPrefix(e.URL, "http://")
	host = host[:strings.LastIndex(host, ":")]
	if got := text("#operator"); !strings.Contains(got, host) {
		t.Fatalf("who runs the page: %q, want %s", got, host)
	}
	if got := text("#app-name"); !strings.Contains(got, "Embedded") {
		t.Fatalf("the app's name: %q", got)
	}
	if got := text("#scopes"); !strings.Contains(got, "Place, change and cancel orders") || !strings.Contains(got, "cannot withdraw") {
		t.Fatalf("what the app may do: %q", got)
	}
	if got := text(form); !strings.Contains(got, "Binance USDⓈ-M Futures") || !strings.Contains(got, "Withdrawals off") {
		t.Fatalf("the provider: %q", got)
	}
	if n := len(browser.Get(t, ctx, chromedp.Nodes(chromedp.CSS("#open-paper"), in))); n != 1 {
		t.Fatalf("%d paper buttons", n)
	}
	html := func() string {
		t.Helper()
		return browser.Get(t, ctx, chromedp.OuterHTML(chromedp.CSS("html"), in))
	}
	// The key stays in its field after a refusal; the secret is typed again.
	submit := func(secret string) {
		t.Helper()
		browser.Run(t, ctx,
			chromedp.SendKeys(chromedp.CSS(form+` input[name="apiSecret"]`), secret, in),
			chromedp.Click(chromedp.CSS(form+` button[type="submit"]`), in))
	}
	browser.Run(t, ctx, chromedp.SendKeys(chromedp.CSS(form+` input[name="apiKey"]`), simKey, in))

	// A wrong secret: the page's own sentence, the secret gone from the form.
	submit("hostedWRONGsecretNeverInThePage77")
	browser.Run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#status[data-code="provider_credentials_refused"]`), in))
	if got := text("#status"); !strings.Contains(got, "did not accept this API key and secret") || strings.Contains(got, "provider did not take") {
		t.Fatalf("the error shown: %q", got)
	}
	if h := html(); strings.Contains(h, "hostedWRONGsecret") || strings.Contains(h, simSecret) {
		t.Fatal("the page holds the secret after a refusal")
	}
	if l := want(t, e.app(key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + link["id"].(string)}), 200, "")["link"].(map[string]any); l["state"] != "mounted" {
		t.Fatalf("after a refused key the link is %v", l)
	}

	// The right key: connected, as the paper button connects.
	submit(simSecret)
	browser.Run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#connected"), in))
	shown := browser.Get(t, ctx, chromedp.AttributeValue(chromedp.CSS("#connected"), "data-account", in)).Value
	if strings.Contains(html(), simSecret) {
		t.Fatal("the page holds the secret")
	}

	lr := e.app(key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + link["id"].(string)})
	got := want(t, lr, 200, "")["link"].(map[string]any)
	res, _ := got["result"].(map[string]any)
	if got["state"] != "connected" || res["status"] != "connected" || res["accountId"] != shown || shown == "" {
		t.Fatalf("link %v, page's account %q", got, shown)
	}
	lst := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: key, Headers: map[string]string{"x-svc-trader": "trader-binance"}})
	found := false
	for _, a := range want(t, lst, 200, "")["accounts"].([]any) {
		a := a.(map[string]any)
		found = found || (a["accountId"] == shown && a["clock"] == "observation" && a["broker"] == "binance")
	}
	if !found {
		t.Fatalf("the trader's accounts lack %s with clock observation: %s", shown, lst.Body)
	}
	// Another trader of the app does not reach it.
	other := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: key, Headers: map[string]string{"x-svc-trader": "someone-else"}})
	if strings.Contains(string(other.Body), shown) {
		t.Fatalf("another trader lists the account: %s", other.Body)
	}

	// The page as served, and every answer above, hold no secret.
	resp, err := http.Get(src)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, b := range [][]byte{page, lr.Body, lst.Body} {
		if strings.Contains(string(b), simSecret) || strings.Contains(string(b), "hostedWRONGsecret") {
			t.Fatalf("an answer holds the secret: %s", b)
		}
	}
}

// The trader's cancel in hosted Connect closes the link (the close
// operation): the app reads it closed with result {status: closed}, and
// the page can connect nothing more on it.
func TestHostedConnectCancel(t *testing.T) {
	e := start(t)
	link, hosted := e.createLink(e.key, "c1", "trader-cancel")
	_, _, frame := e.open(hosted)
	asFrame := func(path string, body any) *apptest.Resp { return e.hosted(frame, http.MethodPost, path, body) }
	got := want(t, asFrame("/api/connect/hosted/cancel", map[string]any{}), 200, "")["link"].(map[string]any)
	if r, _ := got["result"].(map[string]any); got["state"] != "closed" || r["status"] != "closed" {
		t.Fatalf("cancel answered %v", got)
	}
	app := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + link["id"].(string)}), 200, "")["link"].(map[string]any)
	if app["state"] != "closed" {
		t.Fatalf("the app reads %v", app)
	}
	want(t, asFrame("/api/connect/hosted/connect", map[string]any{"whiteLabel": true}), 410, "link_closed")
}

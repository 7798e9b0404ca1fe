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
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

const tvPassword = "hostedTVpasswordNeverInThePage0042"

// startWithTradovate starts the engine with its Tradovate provider (the
// demo environment) on an in-process simulator holding one demo login of
// two accounts (hosted-tv, tvPassword).
func startWithTradovate(t *testing.T) env {
	t.Helper()
	sim, err := tradovatesim.New(tradovatesim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	if _, _, err := sim.AddLogin(tradovatesim.Login{Name: "hosted-tv", Password: tvPassword, Kind: "demo",
		Accounts: []tradovatesim.AccountSpec{{Name: "DEMO3001"}, {Name: "DEMO3002"}}}); err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	ae := apptest.Start(t, apptest.Options{Now: c.now, Configure: func(cfg *app.Config) {
		cfg.Providers.Tradovate.Envs = "demo"
		cfg.Providers.Tradovate.DemoREST, cfg.Providers.Tradovate.DemoWS, cfg.Providers.Tradovate.DemoMD = sim.URL(), sim.WSURL(), sim.MDURL()
		cfg.Providers.AllowPrivate = true
	}})
	return env{ae, ae.Creds["connectKey"].(string), ae.Creds["connectAppId"].(string), c}
}

// The trader links a Tradovate login in hosted Connect (the simulator's
// demo login holding two accounts): the session offers Tradovate with a
// login form; a key is refused for it, a wrong password links nothing and
// the link stays mounted; the right password with an account number links
// that account alone and connects the link to it, listed for the app's
// trader with clock observation; the page never holds the password.
func TestHostedConnectLinksATradovateLogin(t *testing.T) {
	e := startWithTradovate(t)
	link, hosted := e.createLink(e.key, "tv1", "trader-tv")
	status, _, frame := e.open(hosted)
	if status != 200 || frame == "" {
		t.Fatalf("page %d", status)
	}
	resp, err := http.Get(e.local(hosted))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `data-provider="tradovate"`) || !strings.Contains(string(page), `name="login"`) ||
		!strings.Contains(string(page), `name="password"`) {
		t.Fatalf("the page offers no Tradovate login form:\n%s", page)
	}
	s := want(t, e.hosted(frame, http.MethodGet, "/api/connect/hosted/session", nil), 200, "")
	offered := false
	for _, p := range s["providers"].([]any) {
		p := p.(map[string]any)
		offered = offered || (p["name"] == "tradovate" && p["login"] == true)
	}
	if !offered {
		t.Fatalf("providers %v", s["providers"])
	}

	linkBody := func(password string) map[string]any {
		return map[string]any{"provider": "tradovate", "login": "hosted-tv", "password": password, "environment": "demo", "accountNumber": "DEMO3002"}
	}
	want(t, e.hosted(frame, http.MethodPost, "/api/connect/hosted/providers", map[string]any{"provider": "tradovate", "apiKey": "k", "apiSecret": "s"}),
		422, "invalid_request")
	r := e.hosted(frame, http.MethodPost, "/api/connect/hosted/providers", linkBody("not-the-password"))
	want(t, r, 422, "provider_credentials_refused")
	id := link["id"].(string)
	if l := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + id}), 200, "")["link"].(map[string]any); l["state"] != "mounted" {
		t.Fatalf("after a refused password the link is %v", l)
	}
	r = e.hosted(frame, http.MethodPost, "/api/connect/hosted/providers", linkBody(tvPassword))
	c2 := want(t, r, 200, "")["link"].(map[string]any)
	res := c2["result"].(map[string]any)
	if c2["state"] != "connected" || res["status"] != "connected" || strings.Contains(string(r.Body), tvPassword) {
		t.Fatalf("connect %s", r.Body)
	}
	lst := want(t, e.asTrader("trader-tv", apptest.Req{Method: http.MethodGet, Path: "/api/account/list"}), 200, "")
	var tv []map[string]any
	for _, a := range lst["accounts"].([]any) {
		if a := a.(map[string]any); a["broker"] == "tradovate" {
			tv = append(tv, a)
		}
	}
	if len(tv) != 1 || tv[0]["accountId"] != res["accountId"] || tv[0]["clock"] != "observation" || tv[0]["label"] != "Tradovate DEMO3002" {
		t.Fatalf("the app's trader lists %v, want DEMO3002 alone as %v", tv, res["accountId"])
	}
}

// In a real browser: the page embedded in the app's website shows
// Tradovate's login form; a wrong password shows the page's own sentence
// for a login (never the API's) and clears the password field; the right
// one connects the link to the login's account, which the app's key lists
// for the trader; the page never holds the password.
func TestHostedConnectLoginFormInABrowser(t *testing.T) {
	e := startWithTradovate(t)
	var src string
	site := httptest.NewUnstartedServer(nil)
	site.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>app</title>
<iframe id="f" src=%q width="520" height="1100" onload="document.body.dataset.frameLoaded = 'yes'"></iframe>`, src)
	})
	site.Start()
	t.Cleanup(site.Close)
	key := e.newApp(t, "futures-app@example.com", site.URL)
	link, hosted := e.createLink(key, "tvb", "trader-tv-browser")
	src = e.local(hosted)

	ctx := browser.New(t, 60*time.Second)
	browser.Run(t, ctx, chromedp.Navigate(site.URL), chromedp.WaitVisible(chromedp.CSS("body[data-frame-loaded]")))
	in := chromedp.FromNode(browser.Frame(t, ctx, "iframe#f"))
	form := `form.provider[data-provider="tradovate"]`
	browser.Run(t, ctx, chromedp.WaitVisible(chromedp.CSS(form+` input[name="login"]`), in))
	html := func() string { return browser.Get(t, ctx, chromedp.OuterHTML(chromedp.CSS("html"), in)) }
	submit := func(password string) {
		t.Helper()
		browser.Run(t, ctx,
			chromedp.SendKeys(chromedp.CSS(form+` input[name="password"]`), password, in),
			chromedp.SetValue(chromedp.CSS(form+` input[name="accountNumber"]`), "DEMO3001", in),
			chromedp.Click(chromedp.CSS(form+` button[type="submit"]`), in))
	}
	browser.Run(t, ctx, chromedp.SendKeys(chromedp.CSS(form+` input[name="login"]`), "hosted-tv", in))
	submit("hostedWRONGpasswordNeverInThePage")
	browser.Run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#status[data-code="provider_credentials_refused"]`), in))
	if got := browser.Get(t, ctx, chromedp.Text(chromedp.CSS("#status"), in)); !strings.Contains(got, "did not accept this login name and password") {
		t.Fatalf("the error shown: %q", got)
	}
	if h := html(); strings.Contains(h, "hostedWRONGpassword") {
		t.Fatal("the page holds the password after a refusal")
	}
	submit(tvPassword)
	browser.Run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#connected"), in))
	shown := browser.Get(t, ctx, chromedp.AttributeValue(chromedp.CSS("#connected"), "data-account", in)).Value
	if strings.Contains(html(), tvPassword) {
		t.Fatal("the page holds the password")
	}
	got := want(t, e.app(key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + link["id"].(string)}), 200, "")["link"].(map[string]any)
	if got["state"] != "connected" || got["result"].(map[string]any)["accountId"] != shown || shown == "" {
		t.Fatalf("link %v, page's account %q", got, shown)
	}
	lst := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/list", Key: key, Headers: map[string]string{"x-svc-trader": "trader-tv-browser"}})
	if b := string(want(t, lst, 200, "")["accounts"].([]any)[0].(map[string]any)["accountId"].(string)); b != shown {
		t.Fatalf("the trader's accounts %s, want %s", lst.Body, shown)
	}
}

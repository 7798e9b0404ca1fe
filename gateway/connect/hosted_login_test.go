package connect_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

const tvPassword = "hostedTVpasswordNeverInThePage0042"

// The trader links a Tradovate login in hosted Connect (the simulator's
// demo login holding two accounts): the session offers Tradovate with a
// login form; a key is refused for it, a wrong password links nothing and
// the link stays mounted; the right password with an account number links
// that account alone and connects the link to it, listed for the app's
// trader with clock observation; the page never holds the password.
func TestHostedConnectLinksATradovateLogin(t *testing.T) {
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
	e := env{ae, ae.Creds["connectKey"].(string), ae.Creds["connectAppId"].(string), c}

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

package tradovate_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/sim/tradovate"
)

func TestAccessTokenRequestAnswersTokensAndUser(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	ans := e.login(liveLogin)
	for _, k := range []string{"accessToken", "mdAccessToken", "expirationTime", "userId", "name", "hasLive", "userStatus"} {
		if ans[k] == nil {
			t.Errorf("no %s in %v", k, ans)
		}
	}
	if ans["name"] != liveLogin || ans["hasLive"] != true || ans["hasMarketData"] != true || ans["userStatus"] != "Active" {
		t.Fatalf("answer = %v", ans)
	}
	exp, err := time.Parse(time.RFC3339, ans["expirationTime"].(string))
	if err != nil || !exp.Equal(start.Add(90*time.Minute)) {
		t.Fatalf("expirationTime = %v (%v), want 90 minutes after %s", ans["expirationTime"], err, start)
	}
	demo := e.login(demoLogin)
	if demo["hasLive"] != false || demo["hasMarketData"] != false {
		t.Fatalf("demo answer = %v", demo)
	}
	accts := e.list(ans["accessToken"].(string), "account/list")
	if len(accts) != 1 || accts[0]["name"] != liveAcct || accts[0]["userId"] != ans["userId"] || accts[0]["active"] != true {
		t.Fatalf("account/list = %v", accts)
	}
	// An md access token is for the market data socket only.
	if st, _ := e.call(ans["mdAccessToken"].(string), "account/list", nil); st != http.StatusUnauthorized {
		t.Fatalf("md token on REST: %d", st)
	}
	if st, _ := e.call("", "account/list", nil); st != http.StatusUnauthorized {
		t.Fatalf("no token: %d", st)
	}
}

func TestWrongPasswordThenCaptchaPenalty(t *testing.T) {
	e := newEnv(t, tradovate.Options{LoginFailures: 3, CaptchaFor: time.Hour})
	bad := map[string]any{"name": liveLogin, "password": "wrong", "appId": "a", "appVersion": "1", "cid": "8", "sec": "s"}
	for i := 0; i < 3; i++ {
		ans := e.ok("", "auth/accesstokenrequest", bad)
		if txt, _ := ans["errorText"].(string); !strings.Contains(txt, "Incorrect username or password") || ans["accessToken"] != nil {
			t.Fatalf("attempt %d: %v", i, ans)
		}
	}
	// Three wrong passwords in a row: even the right one now gets the captcha penalty.
	good := map[string]any{"name": liveLogin, "password": password, "appId": "a", "appVersion": "1", "cid": "8", "sec": "s"}
	ans := e.ok("", "auth/accesstokenrequest", good)
	if ans["p-ticket"] == nil || ans["p-captcha"] != true || ans["p-time"].(float64) < 3599 || ans["accessToken"] != nil {
		t.Fatalf("after failures: %v", ans)
	}
	// The ticket cannot be redeemed (a third-party application cannot answer a captcha) ...
	good["p-ticket"] = ans["p-ticket"]
	if again := e.ok("", "auth/accesstokenrequest", good); again["p-captcha"] != true {
		t.Fatalf("redeemed a captcha ticket: %v", again)
	}
	// ... and the penalty ends after its hour.
	e.clock.Advance(time.Hour + time.Second)
	delete(good, "p-ticket")
	if ans := e.ok("", "auth/accesstokenrequest", good); ans["accessToken"] == nil {
		t.Fatalf("after the hour: %v", ans)
	}
	// An unknown name answers the same text as a wrong password.
	bad["name"] = "nobody"
	if ans := e.ok("", "auth/accesstokenrequest", bad); !strings.Contains(ans["errorText"].(string), "Incorrect username or password") {
		t.Fatalf("unknown name: %v", ans)
	}
}

func TestAccessTokenRateLimitPenaltyTicket(t *testing.T) {
	e := newEnv(t, tradovate.Options{AuthPerMinute: 2, MaxSessions: -1})
	e.login(liveLogin)
	e.login(liveLogin)
	body := map[string]any{"name": liveLogin, "password": password}
	ans := e.ok("", "auth/accesstokenrequest", body)
	tik, _ := ans["p-ticket"].(string)
	if tik == "" || ans["p-time"].(float64) != 60 || ans["p-captcha"] != nil {
		t.Fatalf("third request in a minute: %v", ans)
	}
	// Redeeming before p-time passes is still penalized; after it, the ticketed request is handled.
	body["p-ticket"] = tik
	e.clock.Advance(30 * time.Second)
	if early := e.ok("", "auth/accesstokenrequest", body); early["p-ticket"] == nil {
		t.Fatalf("early redeem handled: %v", early)
	}
	e.clock.Advance(31 * time.Second)
	if ans := e.ok("", "auth/accesstokenrequest", body); ans["accessToken"] == nil {
		t.Fatalf("redeemed: %v", ans)
	}
}

func TestMissingCredentialsAnswer400(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	st, b := e.call("", "auth/accesstokenrequest", map[string]any{"name": liveLogin})
	if st != http.StatusBadRequest || !strings.Contains(string(b), "password") {
		t.Fatalf("%d %s", st, b)
	}
}

func TestAPIKeyIsCheckedWhenConfigured(t *testing.T) {
	e := newEnv(t, tradovate.Options{CID: "8", Sec: "the-secret"})
	ans := e.ok("", "auth/accesstokenrequest", map[string]any{"name": liveLogin, "password": password, "cid": 8, "sec": "wrong"})
	if ans["errorText"] == nil || ans["accessToken"] != nil {
		t.Fatalf("wrong sec: %v", ans)
	}
	ans = e.ok("", "auth/accesstokenrequest", map[string]any{"name": liveLogin, "password": password, "cid": 8, "sec": "the-secret"})
	if ans["accessToken"] == nil {
		t.Fatalf("numeric cid: %v", ans)
	}
}

func TestRenewExtendsAndExpiryRefuses(t *testing.T) {
	e := newEnv(t, tradovate.Options{TokenLifetime: 10 * time.Minute})
	tok := e.token(liveLogin)
	e.clock.Advance(8 * time.Minute)
	ren := e.ok(tok, "auth/renewaccesstoken", nil)
	tok2, _ := ren["accessToken"].(string)
	if tok2 == "" || tok2 == tok || ren["mdAccessToken"] == nil {
		t.Fatalf("renewal = %v", ren)
	}
	exp, _ := time.Parse(time.RFC3339, ren["expirationTime"].(string))
	if !exp.Equal(start.Add(18 * time.Minute)) {
		t.Fatalf("renewed expiry %s", exp)
	}
	// POST works as well as GET: the provider does not enforce the method.
	if st, _ := e.call(tok2, "auth/renewaccesstoken", map[string]any{}); st != http.StatusOK {
		t.Fatalf("POST renew: %d", st)
	}
	e.clock.Advance(3 * time.Minute) // the first token is past its 10 minutes, the renewed one is not
	if st, _ := e.call(tok, "account/list", nil); st != http.StatusUnauthorized {
		t.Fatalf("expired token: %d", st)
	}
	if st, _ := e.call(tok2, "account/list", nil); st != http.StatusOK {
		t.Fatalf("renewed token: %d", st)
	}
	if st, _ := e.call(tok, "auth/renewaccesstoken", nil); st != http.StatusUnauthorized {
		t.Fatalf("renewing an expired token: %d", st)
	}
}

func TestExpireTokensMidSession(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	e.list(tok, "account/list")
	e.sim.ExpireTokens()
	for _, ep := range []string{"account/list", "auth/renewaccesstoken", "position/list"} {
		if st, _ := e.call(tok, ep, nil); st != http.StatusUnauthorized {
			t.Fatalf("%s after ExpireTokens: %d", ep, st)
		}
	}
	// A new access token request works again.
	e.list(e.token(liveLogin), "account/list")
}

func TestThirdSessionClosesTheOldest(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	t1, t2 := e.token(liveLogin), e.token(liveLogin)
	s1 := dial(t, e.sim.WSURL())
	if r := s1.request("authorize", "", t1); r.S != 200 {
		t.Fatalf("authorize: %+v", r)
	}
	t3 := e.token(liveLogin)
	if st, _ := e.call(t1, "account/list", nil); st != http.StatusUnauthorized {
		t.Fatalf("oldest session still works: %d", st)
	}
	for _, tok := range []string{t2, t3} {
		if st, _ := e.call(tok, "account/list", nil); st != http.StatusOK {
			t.Fatalf("newer session refused: %d", st)
		}
	}
	// The oldest session's socket is closed with a close frame.
	s1.waitFrame(func(f string) bool { return strings.HasPrefix(f, "c[") })
	select {
	case <-s1.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("socket of the closed session still open")
	}
}

func TestMeAnswersTheUser(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	ans := e.login(demoLogin)
	me := e.ok(ans["accessToken"].(string), "auth/me", nil)
	if me["userId"] != ans["userId"] || me["name"] != demoLogin {
		t.Fatalf("me = %v", me)
	}
}

// The access token request's endpoint limit is the provider's published
// one: 5 failed requests an hour from one address, then a p-ticket of 15 s
// for every request from that address, of any login; successful sign-ins
// are not counted, of one login or of many.
func TestAccessTokenFailureLimitPerAddress(t *testing.T) {
	e := newEnv(t, tradovate.Options{MaxSessions: -1})
	for range 20 {
		e.login(liveLogin) // successes are not counted
	}
	for i := range 5 {
		ans := e.ok("", "auth/accesstokenrequest", map[string]any{"name": fmt.Sprint("nobody", i), "password": "wrong"})
		if ans["errorText"] == nil {
			t.Fatalf("failure %d: %v", i, ans)
		}
	}
	body := map[string]any{"name": liveLogin, "password": password}
	ans := e.ok("", "auth/accesstokenrequest", body)
	tik, _ := ans["p-ticket"].(string)
	if tik == "" || ans["p-time"].(float64) != 15 || ans["p-captcha"] != nil {
		t.Fatalf("after 5 failures in the hour: %v", ans)
	}
	body["p-ticket"] = tik
	e.clock.Advance(15 * time.Second)
	if ans := e.ok("", "auth/accesstokenrequest", body); ans["accessToken"] == nil {
		t.Fatalf("redeemed after the back-off: %v", ans)
	}
	e.clock.Advance(time.Hour)
	if ans := e.ok("", "auth/accesstokenrequest", map[string]any{"name": liveLogin, "password": password}); ans["accessToken"] == nil {
		t.Fatalf("an hour after the failures: %v", ans)
	}
}

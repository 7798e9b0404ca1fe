package connect_test

import (
	"net/http"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// A returning trader disconnects the app from their account in hosted
// Connect: the app's next request for them on it is 403 app_disconnected,
// the account leaves their list, every link that connected it reads closed
// with result {status: disconnected, accountId}; a second disconnect changes
// nothing; another trader of the app is untouched; a later link connects the
// account again. It holds after a restart (the read models rebuilt by replay).
func TestATraderDisconnectsTheApp(t *testing.T) {
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) { traderDisconnects(t, startOn(t, store == "postgres")) })
	}
}

// connected opens the white-label paper for trader through a new link and answers the link's id and the account.
func (e env) connected(idem, trader string) (link, account string) {
	e.T.Helper()
	l, hosted := e.createLink(e.key, idem, trader)
	_, _, frame := e.open(hosted)
	c := want(e.T.(*testing.T), e.hosted(frame, http.MethodPost, "/api/connect/hosted/connect", map[string]any{"whiteLabel": true}), 200, "")["link"].(map[string]any)
	return l["id"].(string), c["result"].(map[string]any)["accountId"].(string)
}

func traderDisconnects(t *testing.T, e env) {
	link1, acct := e.connected("d1", "alice")
	_, bobs := e.connected("d2", "bob")
	order := func(e env, trader, coid string) *apptest.Resp {
		return e.asTrader(trader, apptest.Req{Method: http.MethodPost, Path: "/api/trading/order",
			Body: map[string]any{"instrument": "BTC-PERP", "side": "buy", "quantity": "1", "orderType": "market", "clientOrderId": coid}})
	}
	want(t, order(e, "alice", "c-1"), 200, "")

	// Alice comes back through a new link: she connects her paper again (a second link granting it).
	l2, hosted2 := e.createLink(e.key, "d3", "alice")
	link2 := l2["id"].(string)
	_, _, frame2 := e.open(hosted2)
	s := want(t, e.hosted(frame2, http.MethodGet, "/api/connect/hosted/session", nil), 200, "")
	if c := s["connected"].([]any); len(c) != 1 || c[0] != acct {
		t.Fatalf("returning session's connected %v, want [%s]", c, acct)
	}
	want(t, e.hosted(frame2, http.MethodPost, "/api/connect/hosted/connect", map[string]any{"accountId": acct}), 200, "")

	// A third link, and from it the disconnect.
	_, hosted3 := e.createLink(e.key, "d4", "alice")
	_, _, frame3 := e.open(hosted3)
	want(t, e.hosted(frame3, http.MethodPost, "/api/connect/hosted/disconnect", map[string]any{"accountId": bobs}), 404, "not_found")
	want(t, e.hosted(frame3, http.MethodPost, "/api/connect/hosted/disconnect", map[string]any{}), 400, "invalid_request")
	want(t, e.hosted("f1.e30.AAAA", http.MethodPost, "/api/connect/hosted/disconnect", map[string]any{"accountId": acct}), 401, "frame_session_required")
	d := want(t, e.hosted(frame3, http.MethodPost, "/api/connect/hosted/disconnect", map[string]any{"accountId": acct}), 200, "")
	if d["accountId"] != acct || len(d["connected"].([]any)) != 0 {
		t.Fatalf("disconnect answered %v", d)
	}

	check := func(e env) {
		t.Helper()
		want(t, order(e, "alice", "c-2"), 403, "app_disconnected")
		want(t, e.asTrader("alice", apptest.Req{Method: http.MethodGet, Path: "/api/account/orders?account=" + acct}), 403, "app_disconnected")
		if l := want(t, e.asTrader("alice", apptest.Req{Method: http.MethodGet, Path: "/api/account/list"}), 200, "")["accounts"].([]any); len(l) != 0 {
			t.Fatalf("alice's list after the disconnect %v", l)
		}
		for _, id := range []string{link1, link2} {
			l := want(t, e.app(e.key, "", apptest.Req{Method: http.MethodGet, Path: "/api/connect/links/" + id}), 200, "")["link"].(map[string]any)
			if r, _ := l["result"].(map[string]any); l["state"] != "closed" || r["status"] != "disconnected" || r["accountId"] != acct {
				t.Fatalf("link %s after the disconnect: %v", id, l)
			}
		}
		// Bob's account, of the same app, is untouched.
		if l := want(t, e.asTrader("bob", apptest.Req{Method: http.MethodGet, Path: "/api/account/list"}), 200, "")["accounts"].([]any); len(l) != 1 {
			t.Fatalf("bob's list %v", l)
		}
	}
	check(e)
	// Twice: nothing new in the log, the same answer.
	before := len(e.Commits("evt.link." + link1))
	d = want(t, e.hosted(frame3, http.MethodPost, "/api/connect/hosted/disconnect", map[string]any{"accountId": acct}), 200, "")
	if len(d["connected"].([]any)) != 0 || len(e.Commits("evt.link."+link1)) != before {
		t.Fatalf("a second disconnect: %v, %d commits (were %d)", d, len(e.Commits("evt.link."+link1)), before)
	}
	e2 := env{e.Restart(), e.key, e.appID, e.clock}
	check(e2)

	// A later link connects the account again: the app acts for alice on it once more.
	_, hosted4 := e2.createLink(e2.key, "d5", "alice")
	_, _, frame4 := e2.open(hosted4)
	want(t, e2.hosted(frame4, http.MethodPost, "/api/connect/hosted/connect", map[string]any{"accountId": acct}), 200, "")
	want(t, order(e2, "alice", "c-3"), 200, "")
}

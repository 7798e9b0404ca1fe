package tradovate_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/svc/engine/sim/tradovate"
)

func TestUserSocketAuthorizeSyncAndProps(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	ans := e.login(liveLogin)
	tok := ans["accessToken"].(string)
	acct := e.ids[liveAcct]
	resting := e.place(tok, order(acct, "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900}))["orderId"]

	s := dial(t, e.sim.WSURL())
	if r := s.request("account/list", "", nil); r.S != 401 {
		t.Fatalf("before authorize: %+v", r)
	}
	if r := s.request("authorize", "", "not-a-token"); r.S != 401 {
		t.Fatalf("bad token: %+v", r)
	}
	if r := s.request("authorize", "", ans["mdAccessToken"]); r.S != 401 {
		t.Fatalf("md token on the user socket: %+v", r)
	}
	r := s.request("authorize", "", tok)
	if r.S != 200 || len(r.D) != 0 {
		t.Fatalf("authorize: %+v", r)
	}
	// REST endpoints work over the socket, with query parameters in the third field.
	if r := s.request("contract/find", "name=ESZ6", nil); r.S != 200 || !strings.Contains(string(r.D), `"name":"ESZ6"`) {
		t.Fatalf("contract/find: %+v %s", r, r.D)
	}
	if len(s.props()) != 0 {
		t.Fatal("props before user/syncrequest")
	}
	r = s.request("user/syncrequest", "", map[string]any{"users": []any{ans["userId"]}})
	var snap struct {
		Users          []map[string]any `json:"users"`
		Accounts       []map[string]any `json:"accounts"`
		Orders         []map[string]any `json:"orders"`
		OrderVersions  []map[string]any `json:"orderVersions"`
		CashBalances   []map[string]any `json:"cashBalances"`
		Contracts      []map[string]any `json:"contracts"`
		Products       []map[string]any `json:"products"`
		ContractGroups []map[string]any `json:"contractGroups"`
		Positions      []map[string]any `json:"positions"`
	}
	if r.S != 200 || json.Unmarshal(r.D, &snap) != nil {
		t.Fatalf("syncrequest: %+v %s", r, r.D)
	}
	if len(snap.Users) != 1 || snap.Users[0]["id"] != ans["userId"] || len(snap.Accounts) != 1 || len(snap.CashBalances) != 1 ||
		len(snap.Orders) != 1 || idText(snap.Orders[0]["id"]) != idText(resting) || len(snap.OrderVersions) != 1 ||
		len(snap.Contracts) != 1 || snap.Contracts[0]["name"] != "ESZ6" || len(snap.Products) != 1 || snap.ContractGroups == nil ||
		snap.Positions == nil {
		t.Fatalf("snapshot = %s", r.D)
	}
	// Another user's id is refused.
	if r := s.request("user/syncrequest", "", map[string]any{"users": []int64{1}}); r.S != 403 {
		t.Fatalf("foreign sync: %+v", r)
	}

	filled := e.place(tok, order(acct, "Buy", "ESZ6", 2, "Market", nil))["orderId"]
	waitFor(t, 5*time.Second, func() bool {
		for _, p := range s.props() {
			if p.EntityType == "cashBalance" || p.EntityType == "position" {
				return true
			}
		}
		return false
	})
	seen := map[string]bool{}
	var lastOrder map[string]any
	for _, p := range s.props() {
		seen[p.EntityType+" "+p.EventType] = true
		if p.EntityType == "order" {
			var o map[string]any
			must(t, json.Unmarshal(p.Entity, &o))
			if idText(o["id"]) == idText(filled) {
				lastOrder = o
			}
		}
	}
	for _, want := range []string{"command Created", "order Created", "orderVersion Created", "commandReport Created",
		"executionReport Created", "fill Created", "order Updated", "position Created"} {
		if !seen[want] {
			t.Errorf("no %s event in %v", want, seen)
		}
	}
	if lastOrder["ordStatus"] != "Filled" || lastOrder["accountId"] != float64(acct) {
		t.Fatalf("last order event = %v", lastOrder)
	}
	// Events of another login never reach this socket.
	before := len(s.props())
	other := e.token(plainLogin)
	e.place(other, order(e.ids[plainAcct], "Buy", "ESZ6", 1, "Market", nil))
	time.Sleep(50 * time.Millisecond)
	if len(s.props()) != before {
		t.Fatal("another login's events arrived")
	}
}

func TestHeartbeatsAndClientSilence(t *testing.T) {
	e := newEnv(t, tradovate.Options{HeartbeatInterval: 40 * time.Millisecond, ClientSilence: 300 * time.Millisecond})
	quiet := dial(t, e.sim.WSURL())
	talker := dial(t, e.sim.WSURL())
	quiet.waitFrame(func(f string) bool { return f == "h" })
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = talker.c.Write(t.Context(), websocket.MessageText, []byte("[]"))
			}
		}
	}()
	select {
	case <-quiet.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("a silent client was not closed")
	}
	if !strings.HasPrefix(quiet.snapshot()[len(quiet.snapshot())-1], "c[") {
		t.Fatalf("no close frame: %v", quiet.snapshot())
	}
	select {
	case <-talker.closed:
		t.Fatal("a heartbeating client was closed")
	case <-time.After(500 * time.Millisecond):
	}
	close(stop)
	<-done
}

func TestSocketAfterTokenExpiry(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	s, _ := e.userSocket(tok)
	e.sim.ExpireTokens()
	if r := s.request("account/list", "", nil); r.S != 401 {
		t.Fatalf("request after expiry: %+v", r)
	}
	// No events while the session is expired.
	fresh := e.token(liveLogin)
	e.place(fresh, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", nil))
	time.Sleep(50 * time.Millisecond)
	if n := len(s.props()); n != 0 {
		t.Fatalf("%d events after expiry", n)
	}
	// Authorized again with a fresh token, the socket serves and its events flow again.
	if r := s.request("authorize", "", fresh); r.S != 200 {
		t.Fatalf("re-authorize: %+v", r)
	}
	if r := s.request("account/list", "", nil); r.S != 200 {
		t.Fatalf("after re-authorize: %+v", r)
	}
	e.place(fresh, order(e.ids[liveAcct], "Sell", "ESZ6", 1, "Market", nil))
	waitFor(t, 5*time.Second, func() bool { return len(s.props()) > 0 })
}

func TestRenewalKeepsTheSocketAuthorized(t *testing.T) {
	e := newEnv(t, tradovate.Options{TokenLifetime: 10 * time.Minute})
	tok := e.token(liveLogin)
	s, _ := e.userSocket(tok)
	e.clock.Advance(9 * time.Minute)
	if r := s.request("auth/renewaccesstoken", "", nil); r.S != 200 || !strings.Contains(string(r.D), "accessToken") {
		t.Fatalf("renew over the socket: %+v", r)
	}
	e.clock.Advance(5 * time.Minute) // past the first token, within the renewed one
	if r := s.request("account/list", "", nil); r.S != 200 {
		t.Fatalf("after renewal: %+v", r)
	}
	e.clock.Advance(10 * time.Minute)
	if r := s.request("account/list", "", nil); r.S != 401 {
		t.Fatalf("after the renewed token expired: %+v", r)
	}
}

func TestDuplicatedAndReorderedEvents(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	s, _ := e.userSocket(tok)
	e.sim.SetStreamFaults(tradovate.StreamFaults{Duplicate: true})
	e.place(tok, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900}))
	waitFor(t, 5*time.Second, func() bool { return len(s.props()) >= 2 })
	time.Sleep(50 * time.Millisecond)
	ev := s.props()
	if len(ev)%2 != 0 || string(ev[0].Entity) != string(ev[1].Entity) || ev[0].EntityType != "command" {
		t.Fatalf("not duplicated: %v", ev)
	}

	e2 := newEnv(t, tradovate.Options{})
	tok2 := e2.token(liveLogin)
	s2, _ := e2.userSocket(tok2)
	e2.sim.SetStreamFaults(tradovate.StreamFaults{Reorder: true, ReorderHold: 100 * time.Millisecond})
	e2.place(tok2, order(e2.ids[liveAcct], "Buy", "ESZ6", 1, "Limit", map[string]any{"price": 4900}))
	waitFor(t, 5*time.Second, func() bool { return len(s2.props()) >= 2 })
	got := s2.props()
	// The order's events are command, order, orderVersion, ...: the first two arrive swapped.
	if got[0].EntityType != "order" || got[1].EntityType != "command" {
		t.Fatalf("not reordered: %s then %s", got[0].EntityType, got[1].EntityType)
	}
}

func TestDisconnectAndRestart(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	tok := e.token(liveLogin)
	s, _ := e.userSocket(tok)
	e.sim.DisconnectSockets(false)
	select {
	case <-s.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("socket not cut")
	}
	if f := s.snapshot(); strings.HasPrefix(f[len(f)-1], "c[") {
		t.Fatal("an abrupt cut sent a close frame")
	}

	g, _ := e.userSocket(tok)
	e.sim.DisconnectSockets(true)
	g.waitFrame(func(f string) bool { return strings.Contains(f, `"e":"shutdown"`) })
	g.waitFrame(func(f string) bool { return strings.HasPrefix(f, "c[") })

	r, _ := e.userSocket(tok)
	e.sim.Restart()
	select {
	case <-r.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("restart kept the socket")
	}
	// The token survives the restart.
	e.list(tok, "account/list")
	again, _ := e.userSocket(tok)
	e.place(tok, order(e.ids[liveAcct], "Buy", "ESZ6", 1, "Market", nil))
	waitFor(t, 5*time.Second, func() bool { return len(again.props()) > 0 })
}

func TestBadFramesAnswer400(t *testing.T) {
	e := newEnv(t, tradovate.Options{})
	s := dial(t, e.sim.WSURL())
	s.write("just-one-line")
	s.waitFrame(func(f string) bool { return strings.Contains(f, `"s":400`) })
	if r := s.request("authorize", "", e.token(liveLogin)); r.S != 200 {
		t.Fatalf("socket unusable after a bad frame: %+v", r)
	}
	if r := s.request("md/subscribequote", "", map[string]any{"symbol": "ESZ6"}); r.S != 404 {
		t.Fatalf("md request on the user socket: %+v", r)
	}
}

package app_test

import (
	"context"
	"testing"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// A deployment that kept ENGINE_COMMIT_ENCODING=json (to be able to roll
// back) writes JSON commits; switched to the default, it writes MessagePack,
// and the one log holding both replays whole: every order is listed, every
// clientOrderId stays used.
func TestCommitEncodingSwitchKeepsTheLogWhole(t *testing.T) {
	order := func(id string) map[string]any {
		return map[string]any{"clientOrderId": id, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}
	}
	lastCommitIsJSON := func(e *apptest.Env) bool {
		t.Helper()
		st, err := e.App.Log.JetStream().Stream(context.Background(), e.App.Log.StreamName())
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(context.Background(), e.App.Log.Subject("account."+e.Accounts[0].AccountID))
		if err != nil {
			t.Fatal(err)
		}
		return len(m.Data) > 0 && m.Data[0] == '{'
	}
	place := func(e *apptest.Env, id string, want int) {
		t.Helper()
		if r := e.Post("/api/trading/order", order(id)); r.Status != want {
			t.Fatalf("order %s: %d %s, want %d", id, r.Status, r.Body, want)
		}
	}
	orders := func(e *apptest.Env) int {
		t.Helper()
		return len(e.Get("/api/account/orders?state=all").Map(t)["orders"].([]any))
	}

	e := apptest.Start(t, apptest.Options{Configure: func(c *app.Config) { c.CommitEncoding = "json" }})
	place(e, "j1", 200)
	if !lastCommitIsJSON(e) {
		t.Fatal("with ENGINE_COMMIT_ENCODING=json the commit was not written in JSON")
	}
	dir := e.DataDir
	e.Stop()

	e = apptest.Start(t, apptest.Options{DataDir: dir})
	place(e, "j1", 409) // the JSON commit replayed: the id stays used
	place(e, "m1", 200)
	if lastCommitIsJSON(e) {
		t.Fatal("by default the commit was written in JSON, not MessagePack")
	}
	if n := orders(e); n != 2 {
		t.Fatalf("%d orders listed, want 2", n)
	}
	e.Stop()

	e = apptest.Start(t, apptest.Options{DataDir: dir})
	place(e, "j1", 409)
	place(e, "m1", 409)
	if n := orders(e); n != 2 {
		t.Fatalf("after a restart on the mixed log %d orders listed, want 2", n)
	}
}

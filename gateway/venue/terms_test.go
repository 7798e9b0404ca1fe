package venue_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/auth"
)

func (e env) put(kind, id, idem, ifMatch string, body any) *apptest.Resp {
	h := map[string]string{"Idempotency-Key": idem}
	if ifMatch != "" {
		h["If-Match"] = ifMatch
	}
	return e.Do(apptest.Req{Method: http.MethodPut, Path: "/api/venues/" + e.venueID + "/" + kind + "/" + id, Key: e.venueKey, Headers: h, Body: body})
}

// firmKey issues a Trading API key of the venue's firm tenant, which owns the
// accounts the venue issues, to place their orders through /api/trading/.
func firmKey(t *testing.T, e env) string {
	secret := auth.NewKey("svc_sk_")
	d := e.App.Deps
	res, err := d.Engine.Tenant(context.Background(), app.DemoFirm, d.Engine.Envelope(events.Principal{System: "test"}, "",
		&tenantcmd.IssueKey{KeyID: "key_firm_trading", Digest: auth.Digest(secret), Kind: "trading", Prefix: secret[:11], Name: "desk"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Settle(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	return secret
}

// A venue configures an instrument, a commission, a route and a stage, puts
// them in a group and issues an account into it; the paper book then
// accepts, refuses and charges the account's orders exactly as configured,
// and a restart rebuilds the same balance to the cent.
func TestTheBookObeysTheVenue(t *testing.T) {
	x := apptest.Start(t, apptest.Options{ManualFeed: true}) // quotes by hand
	e := env{x, x.Creds["venueId"].(string), x.Creds["venueKey"].(string), x.Creds["ownerSession"].(string)}
	quote := func(bid, ask string) {
		e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal(bid), Ask: events.MustDecimal(ask), Last: events.MustDecimal(bid), At: time.Now()})
	}
	quote("60000", "60000.5")

	want(t, e.put("instruments", "BTC-PERP", "c1", "", map[string]any{"active": true, "maxQuantity": "5"}), 201, "")
	want(t, e.put("instruments", "NOPE-PERP", "c1b", "", map[string]any{"active": true}), 422, "instrument_not_permitted")
	want(t, e.put("instruments", "ETH-PERP", "c1c", "", map[string]any{"active": true, "entitlement": map[string]any{"pricing": map[string]any{"sourceId": "cme"}}}), 400, "entitled_source_unserved")
	fee := map[string]any{"name": "fee", "basis": "per_unit", "amount": "0.5", "timing": "per_side", "direction": "both", "unit": "quantity"}
	bad := map[string]any{"name": "rt", "basis": "per_order", "amount": "1", "timing": "round_turn", "direction": "open"}
	if m := want(t, e.put("conditions", "std", "c2", "", map[string]any{"name": "Std", "commissions": []any{bad}}), 400, "round_turn_is_both"); m["field"] != "commissions[0].direction" {
		t.Fatalf("field %v", m)
	}
	noTiming := map[string]any{"name": "x", "basis": "per_unit", "amount": "1", "direction": "both", "unit": "quantity"}
	want(t, e.put("conditions", "std", "c2", "", map[string]any{"name": "Std", "commissions": []any{noTiming}}), 400, "unsupported_value")
	want(t, e.put("conditions", "std", "c2", "", map[string]any{"name": "Std", "commissions": []any{}, "margin": map[string]any{"initial": "0.1"}}), 400, "margin_policy_superseded")
	want(t, e.put("conditions", "std", "c2", "", map[string]any{"name": "Std", "commissions": []any{fee}}), 201, "")
	want(t, e.put("routes", "paper", "c3", "", map[string]any{"target": "paper"}), 201, "")
	want(t, e.put("stages", "eval", "c4", "", map[string]any{"name": "Evaluation", "version": "v1"}), 201, "")
	group := map[string]any{"name": "Evaluation 50k", "instruments": []any{"BTC-PERP"}, "conditionId": "std", "routeId": "paper", "stageId": "eval"}
	want(t, e.put("groups", "g1", "c5", "", map[string]any{"name": "x", "instruments": []any{"ETH-PERP"}}), 422, "invalid_request")
	want(t, e.put("groups", "g1", "c5", "", map[string]any{"name": "x", "instruments": []any{}, "dailyLossLimit": "500"}), 400, "loss_limit_unenforced")
	g := want(t, e.put("groups", "g1", "c5", "", group), 201, "")["item"].(map[string]any)
	if g["version"].(float64) != 1 {
		t.Fatalf("group %v", g)
	}

	issue := func(idem string) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey,
			Headers: map[string]string{"Idempotency-Key": idem}, Body: map[string]any{"groupId": "g1", "startingBalance": "10000"}})
	}
	a := want(t, issue("acct-1"), 201, "")["account"].(map[string]any)
	if again := issue("acct-1"); again.Status != 201 || string(again.Body) != string(issue("acct-1").Body) || again.Header.Get("Idempotent-Replayed") != "true" ||
		again.Map(t)["account"].(map[string]any)["accountId"] != a["accountId"] {
		t.Fatalf("a retry: %d %s", again.Status, again.Body)
	}
	want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey,
		Headers: map[string]string{"Idempotency-Key": "acct-1"}, Body: map[string]any{"groupId": "g1", "startingBalance": "20000"}}), 409, "idempotency_conflict")
	key := firmKey(t, e)
	order := func(coid, qty string) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order?account=" + a["accountNumber"].(string), Key: key,
			Body: map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": qty}})
	}
	code := func(r *apptest.Resp, status int, c string) map[string]any {
		t.Helper()
		if r.Status != status || (c != "" && r.Map(t)["code"] != c) {
			t.Fatalf("want %d %s: %d %s", status, c, r.Status, r.Body)
		}
		return r.Map(t)
	}
	code(order("o1", "2"), 200, "")
	if m := code(order("o2", "6"), 422, "order_quantity_above_limit"); m["params"].(map[string]any)["limit"] != "5" {
		t.Fatalf("limit %v", m)
	}
	code(e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order?account=" + a["accountNumber"].(string), Key: key,
		Body: map[string]any{"clientOrderId": "o3", "instrument": "ETH-PERP", "side": "buy", "orderType": "market", "quantity": "1"}}), 422, "instrument_not_permitted")

	// A fill of 2 at 60000.5 pays 0.5 a unit: 1.00.
	snap := code(e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/snapshot?account=" + a["accountNumber"].(string), Key: key}), 200, "")
	sum := snap["summary"].(map[string]any)
	if sum["commissions"] != "1" || sum["balance"] != "9999" {
		t.Fatalf("summary %v", sum)
	}

	// An entry halt refuses additions, not reductions; a new stage version makes the account close-only.
	want(t, e.put("rules", "halt", "c6", "", map[string]any{"entryHalted": true}), 201, "")
	code(order("o4", "1"), 422, "entry_halted")
	code(e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/close?account=" + a["accountNumber"].(string), Key: key,
		Body: map[string]any{"instrument": "BTC-PERP", "quantity": "1"}}), 200, "")
	want(t, e.Do(apptest.Req{Method: http.MethodDelete, Path: "/api/venues/" + e.venueID + "/rules/halt", Key: e.venueKey,
		Headers: map[string]string{"Idempotency-Key": "c7", "If-Match": "1"}}), 200, "")
	want(t, e.put("stages", "eval", "c8", "", map[string]any{"name": "Evaluation", "version": "v2"}), 409, "version_conflict")
	want(t, e.put("stages", "eval", "c9", "1", map[string]any{"name": "Evaluation", "version": "v2"}), 200, "")
	if m := want(t, e.put("stages", "eval", "c10", "1", map[string]any{"name": "Evaluation", "version": "v3"}), 409, "version_conflict"); m["params"].(map[string]any)["version"] != 2.0 {
		t.Fatalf("stale version %v", m)
	}
	if m := code(order("o5", "1"), 423, "stage_version_unrecorded"); m["params"].(map[string]any)["stageId"] != "eval" {
		t.Fatalf("stage %v", m)
	}
	// A group without a route: venue_route_missing.
	want(t, e.put("groups", "g1", "c11", "1", map[string]any{"name": "Evaluation 50k", "instruments": []any{"BTC-PERP"}, "conditionId": "std", "stageId": "eval"}), 200, "")
	code(order("o6", "1"), 422, "venue_route_missing")
	want(t, e.put("groups", "g1", "c12", "2", group), 200, "") // the route back

	snap = code(e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/snapshot?account=" + a["accountNumber"].(string), Key: key}), 200, "")
	before := snap["summary"].(map[string]any)
	e2 := env{e.Restart(), e.venueID, e.venueKey, e.owner}
	snap = code(e2.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/snapshot?account=" + a["accountNumber"].(string), Key: key}), 200, "")
	after := snap["summary"].(map[string]any)
	if after["balance"] != before["balance"] || after["commissions"] != before["commissions"] || before["commissions"] != "1.5" {
		t.Fatalf("before the restart %v, after %v", before, after)
	}
	// The terms are rebuilt with the venue: routed, and close-only on the new stage version.
	if r := e2.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order?account=" + a["accountNumber"].(string), Key: key,
		Body: map[string]any{"clientOrderId": "o7", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "1"}}); r.Status != 423 || r.Map(t)["code"] != "stage_version_unrecorded" {
		t.Fatalf("after the restart: %d %s", r.Status, r.Body)
	}
}

// A venue key with trader:trade acts on the trading routes for the trader it
// names in x-svc-trader: on the accounts the venue issued to that trader, no other.
func TestAVenueKeyActsForItsTrader(t *testing.T) {
	x := apptest.Start(t, apptest.Options{ManualFeed: true})
	e := env{x, x.Creds["venueId"].(string), x.Creds["venueKey"].(string), x.Creds["ownerSession"].(string)}
	e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal("100"), Ask: events.MustDecimal("101"), Last: events.MustDecimal("100"), At: time.Now()})
	want(t, e.put("instruments", "BTC-PERP", "c1", "", map[string]any{"active": true}), 201, "")
	want(t, e.put("routes", "paper", "c2", "", map[string]any{"target": "paper"}), 201, "")
	want(t, e.put("groups", "g1", "c3", "", map[string]any{"name": "G", "instruments": []any{"BTC-PERP"}, "routeId": "paper"}), 201, "")
	issue := func(idem, email string) map[string]any {
		return want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey,
			Headers: map[string]string{"Idempotency-Key": idem}, Body: map[string]any{"groupId": "g1", "email": email}}), 201, "")["account"].(map[string]any)
	}
	ana, bob := issue("a1", "ana@example.com"), issue("a2", "bob@example.com")
	as := func(key, trader, method, path string, body any) *apptest.Resp {
		return e.Do(apptest.Req{Method: method, Path: path, Key: key, Headers: map[string]string{"x-svc-trader": trader}, Body: body})
	}
	order := map[string]any{"clientOrderId": "o1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "1"}
	if r := as(e.venueKey, "Ana@Example.com", http.MethodPost, "/api/trading/order?account="+ana["accountNumber"].(string), order); r.Status != 200 {
		t.Fatalf("ana's order: %d %s", r.Status, r.Body)
	}
	if r := as(e.venueKey, "ana@example.com", http.MethodPost, "/api/trading/order?account="+bob["accountNumber"].(string), order); r.Status != 400 {
		t.Fatalf("ana's key on bob's account: %d %s", r.Status, r.Body)
	}
	list := as(e.venueKey, "bob@example.com", http.MethodGet, "/api/account/list", nil).Map(t)["accounts"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["accountNumber"] != bob["accountNumber"] {
		t.Fatalf("bob sees %v", list)
	}
	// A key without trader:trade acts for nobody.
	reader := e.venueKeyWithScopes(t, "account:read")
	if r := as(reader, "ana@example.com", http.MethodGet, "/api/account/list", nil); r.Status != 403 {
		t.Fatalf("a reader key: %d %s", r.Status, r.Body)
	}
}

func (e env) venueKeyWithScopes(t *testing.T, scopes ...string) string {
	r := e.AsSession(e.owner, apptest.Req{Method: http.MethodPost, Path: "/api/back-office/venues/" + e.venueID + "/keys",
		Headers: map[string]string{"Idempotency-Key": "k-" + strings.Join(scopes, "-")},
		Body:    map[string]any{"name": "scoped", "scopes": scopes, "expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	return want(t, r, 201, "")["secret"].(string)
}

// A venue's accounts page through nextCursor at both doors, in account id
// order: the pages together are the whole list once each, and a cursor of
// another listing is refused.
func TestVenueAccountsPageThroughCursors(t *testing.T) {
	e := start(t)
	want(t, e.put("instruments", "BTC-PERP", "p0", "", map[string]any{"active": true}), 201, "")
	want(t, e.put("conditions", "std", "p1", "", map[string]any{"name": "Std", "commissions": []any{}}), 201, "")
	want(t, e.put("routes", "paper", "p2", "", map[string]any{"target": "paper"}), 201, "")
	want(t, e.put("stages", "eval", "p3", "", map[string]any{"name": "Evaluation", "version": "v1"}), 201, "")
	want(t, e.put("groups", "g1", "p4", "", map[string]any{"name": "Evaluation 50k", "instruments": []any{"BTC-PERP"},
		"conditionId": "std", "routeId": "paper", "stageId": "eval"}), 201, "")
	for i := range 5 {
		want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey,
			Headers: map[string]string{"Idempotency-Key": fmt.Sprintf("page-%d", i)}, Body: map[string]any{"groupId": "g1"}}), 201, "")
	}
	doors := map[string]func(query string) *apptest.Resp{
		"venue key": func(q string) *apptest.Resp {
			return e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/accounts" + q, Key: e.venueKey})
		},
		"back office": func(q string) *apptest.Resp {
			return e.AsSession(e.owner, apptest.Req{Method: http.MethodGet, Path: "/api/back-office/venues/" + e.venueID + "/accounts" + q})
		},
	}
	for name, get := range doors {
		list := func(q string) ([]string, any) {
			t.Helper()
			m := want(t, get(q), 200, "")
			var ids []string
			for _, a := range m["accounts"].([]any) {
				ids = append(ids, a.(map[string]any)["accountId"].(string))
			}
			return ids, m["nextCursor"]
		}
		whole, last := list("")
		if len(whole) < 5 || last != nil {
			t.Fatalf("%s: the whole list %v, nextCursor %v", name, whole, last)
		}
		var paged []string
		q := "?limit=2"
		for range 10 {
			page, next := list(q)
			paged = append(paged, page...)
			if next == nil {
				break
			}
			q = "?limit=2&cursor=" + next.(string)
		}
		if fmt.Sprint(paged) != fmt.Sprint(whole) {
			t.Fatalf("%s: by 2 %v, want %v", name, paged, whole)
		}
		_, next := list("?limit=1")
		partner := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/partner/accounts?limit=1&cursor=" + next.(string), Key: e.Creds["partnerKey"].(string)})
		if partner.Status != 400 {
			t.Fatalf("%s: a venue cursor on the partner list: %d %s", name, partner.Status, partner.Body)
		}
		if m := want(t, get("?cursor=zzzz"), 400, "invalid_cursor"); m["field"] != "cursor" {
			t.Fatalf("%s: %v", name, m)
		}
	}
}

package venue_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/events"
)

// A venue states and publishes a risk policy, binds a group to it, and the
// policy's daily loss limit locks an issued account, under a lock reason of
// its own; every risk-policy code answers where the spec says.
func TestAPublishedPolicyLocksTheAccount(t *testing.T) {
	x := apptest.Start(t, apptest.Options{ManualFeed: true})
	e := env{x, x.Creds["venueId"].(string), x.Creds["venueKey"].(string), x.Creds["ownerSession"].(string)}
	quote := func(bid, ask string) {
		e.App.Sim.Publish(market.Quote{Instrument: "BTC-PERP", Bid: events.MustDecimal(bid), Ask: events.MustDecimal(ask), Last: events.MustDecimal(bid), At: time.Now()})
	}
	quote("60000", "60000.5")
	pol := func(id, version, idem string, body any) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPut, Path: "/api/venues/" + e.venueID + "/risk-policies/" + id + "/versions/" + version,
			Key: e.venueKey, Headers: map[string]string{"Idempotency-Key": idem}, Body: body})
	}
	publish := func(id, version, idem string) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/risk-policies/" + id + "/publish",
			Key: e.venueKey, Headers: map[string]string{"Idempotency-Key": idem}, Body: map[string]any{"version": version}})
	}
	body := func(limit string, sourced bool) map[string]any {
		return map[string]any{"authority": e.venueID, "posting": map[string]any{"currency": "USD", "decimals": 2},
			"dailyLossLimit": map[string]any{"value": limit, "sourced": sourced}}
	}
	want(t, pol("svc-house", "1", "p0", body("100", true)), 409, "risk_policy_id_reserved")
	want(t, pol("house", "1", "p1", map[string]any{"authority": "another-venue", "posting": map[string]any{"currency": "USD", "decimals": 2}}), 409, "risk_policy_owner_conflict")
	want(t, pol("house", "1", "p2", map[string]any{"authority": e.venueID, "posting": map[string]any{"currency": "USD", "decimals": 3}}), 409, "risk_policy_posting_mismatch")
	want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/risk-policies/house", Key: e.venueKey}), 404, "not_found")
	want(t, publish("house", "1", "p3"), 404, "not_found")
	want(t, pol("house", "1", "p4", body("100", false)), 201, "")
	want(t, pol("house", "1", "p5", body("100", false)), 200, "")
	want(t, pol("house", "1", "p6", body("90", true)), 409, "risk_policy_version_conflict")
	want(t, publish("house", "1", "p7"), 409, "risk_policy_unsourced")
	want(t, pol("house", "2", "p8", body("100", true)), 201, "")
	if p := want(t, publish("house", "2", "p9"), 200, "")["policy"].(map[string]any); p["inForce"] != "2" {
		t.Fatalf("policy %v", p)
	}
	want(t, publish("house", "2", "p10"), 409, "risk_policy_unchanged")

	want(t, e.put("instruments", "BTC-PERP", "c1", "", map[string]any{"active": true}), 201, "")
	want(t, e.put("routes", "paper", "c2", "", map[string]any{"target": "paper"}), 201, "")
	want(t, e.put("groups", "g1", "c3", "", map[string]any{"name": "x", "instruments": []any{"BTC-PERP"}, "routeId": "paper", "riskPolicyId": "nope"}), 422, "invalid_request")
	want(t, e.put("groups", "g1", "c3", "", map[string]any{"name": "Funded", "instruments": []any{"BTC-PERP"}, "routeId": "paper", "riskPolicyId": "house"}), 201, "")
	a := want(t, e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey,
		Headers: map[string]string{"Idempotency-Key": "acct-1"}, Body: map[string]any{"groupId": "g1", "startingBalance": "10000"}}), 201, "")["account"].(map[string]any)
	key, number := firmKey(t, e), a["accountNumber"].(string)
	// Issued into a bound group, the account lives under the policy from its first commit.
	if l := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/risk?broker=paper&account=" + number, Key: key}).Map(t)["lock"].(map[string]any); l["monitoring"] != "live" {
		t.Fatalf("not monitored at issue: %v", l)
	}
	if r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/trading/order?account=" + number, Key: key,
		Body: map[string]any{"clientOrderId": "o1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}}); r.Status != 200 {
		t.Fatalf("order %d %s", r.Status, r.Body)
	}
	// 0.01 BTC from 60000.5 to 40000 loses 205, past the policy's 100.
	quote("40000", "40000.5")
	apptest.WaitFor(t, 5*time.Second, func() error {
		r := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/risk?broker=paper&account=" + number, Key: key})
		l := r.Map(t)["lock"].(map[string]any)
		if l["tradingLocked"] != true || l["lockReason"] != "policy_daily_loss_limit" {
			return errf("lock %v", l)
		}
		return nil
	})
}

func errf(format string, a ...any) error { return fmt.Errorf(format, a...) }

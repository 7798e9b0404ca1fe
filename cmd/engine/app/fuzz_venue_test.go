package app_test

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzVenueBodies sends fuzzed bodies to the venue platform's writes: a
// provider registration with the venue key (the manifest is the attack
// surface), the venue's configuration, risk policies and account issue, and,
// as the demo venue's owner signed in, a key issue and a venue creation. The first byte picks the route; every attempt carries a
// fresh Idempotency-Key, and every other one repeats the previous key, so
// replays and conflicts are fuzzed too.
func FuzzVenueBodies(f *testing.F) {
	routes := []struct{ method, path string }{{"POST", "/api/partner/venues/%venue/providers"},
		{"POST", "/api/back-office/venues/%venue/keys"}, {"POST", "/api/back-office/venues"}, {"POST", "/api/venues/%venue/providers"},
		{"PUT", "/api/venues/%venue/conditions/c1"}, {"PUT", "/api/venues/%venue/groups/g1"}, {"PUT", "/api/venues/%venue/instruments/BTC-PERP"},
		{"PUT", "/api/venues/%venue/rules/r1"}, {"PUT", "/api/venues/%venue/risk-policies/p1/versions/1"},
		{"POST", "/api/venues/%venue/risk-policies/p1/publish"}, {"POST", "/api/venues/%venue/accounts"}}
	digest := strings.Repeat("ab", 32)
	seeds := []string{
		`{"name":"Acme","manifest":{"providerVersion":"1","protocolVersion":"1","schemaDigest":"` + digest + `","capabilities":{"marketData":true}}}`,
		`{"name":"ci","scopes":["account:read"],"expiresAt":"2099-01-01T00:00:00Z"}`,
		`{"orgId":"org_demo","name":"Second venue"}`,
		`{"name":"Acme","manifest":{"providerVersion":"1","protocolVersion":"1","schemaDigest":"` + digest + `","capabilities":{"accounts":true,"execution":true,"generationFencing":true,"completeOrderBook":true,"executionHistory":true,"orderTypes":["market","market"],"timeInForce":["day"],"positionModels":["net"],"replayRetentionSeconds":604800}}}`,
		`{"name":"x","manifest":{"providerVersion":"1","protocolVersion":"1","schemaDigest":"` + digest + `","capabilities":{"marketData":true,"replayRetentionSeconds":1e400}}}`,
		`{"name":"x","manifest":{"providerVersion":"\u0000","protocolVersion":"1","schemaDigest":"` + digest + `","capabilities":{"marketData":true,"marketData":false}}}`,
		`{"name":"ci","scopes":["account:read","account:read"],"expiresAt":"0001-01-01T00:00:00Z"}`,
	}
	for i, s := range seeds { // the first four routes: registrations, keys, venues
		f.Add(append([]byte{byte(i % 4)}, s...))
	}
	// The configuration, policy and issue routes (4 to 10), one seed each.
	for i, s := range []string{
		`{"name":"std","commissions":[{"name":"f","basis":"per_unit","amount":"0.5","timing":"round_turn","direction":"both","unit":"quantity"}]}`,
		`{"name":"G","instruments":["BTC-PERP"],"conditionId":"c1","routeId":"paper","riskPolicyId":"p1"}`,
		`{"active":true,"maxQuantity":"1e-70","entitlement":{"pricing":{"sourceId":"trader_feed"}}}`,
		`{"groupId":"g1","entryHalted":true,"instruments":["BTC-PERP"],"maxQuantity":"9999999999999999"}`,
		`{"authority":"%venue","posting":{"currency":"USD","decimals":2},"dailyLossLimit":{"value":"100","sourced":true}}`,
		`{"version":"1"}`,
		`{"groupId":"g1","startingBalance":"1e400","email":"t@example.com"}`,
	} {
		f.Add(append([]byte{byte(4 + i)}, s...))
	}
	fe := startFuzzEngine(f)
	venue, key, cookie := fe.Creds["venueId"].(string), fe.Creds["venueKey"].(string), fe.Creds["ownerSession"].(string)
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		r := routes[int(b[0])%len(routes)]
		n++
		idem := fmt.Sprintf("fz-%d", n-n%2) // pairs share a key
		h := map[string]string{"Idempotency-Key": idem}
		if strings.HasPrefix(r.path, "/api/back-office/") {
			h["Cookie"], h["Origin"] = "svc_session="+cookie, "http://example.com"
		} else {
			h["Authorization"] = "Bearer " + key
		}
		fe.sendWith(t, r.method, strings.ReplaceAll(r.path, "%venue", venue), h, []byte(strings.ReplaceAll(string(b[1:]), "%venue", venue)))
	})
}

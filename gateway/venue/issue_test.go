package venue_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
	venuecmd "github.com/svc/engine/commands/venue"
)

// Both doors that issue accounts answer a currency not issued here alike:
// 400 currency_not_issuable with the currency and the environment, before
// the amount's precision is looked at, recording nothing.
func TestBothDoorsRefuseACurrencyNotIssued(t *testing.T) {
	e := startTwins(t)
	want(t, e.put("groups", "g1", "g1", "", map[string]any{"name": "G", "instruments": []any{}}), 201, "")
	for _, cur := range []string{"EUR", "usd"} {
		venue := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey,
			Headers: map[string]string{"Idempotency-Key": "issue-" + cur}, Body: map[string]any{"groupId": "g1", "currency": cur, "startingBalance": "1000.5"}})
		m := want(t, venue, 400, "currency_not_issuable")
		partner := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/accounts", Key: e.partnerKey,
			Body: map[string]any{"accounts": []any{map[string]any{"referenceId": "p-" + cur, "email": "p@example.com", "currency": cur, "startingBalance": "1000.5"}}}})
		if partner.Status != 400 || partner.Map(t)["code"] != "currency_not_issuable" {
			t.Fatalf("partner door: %d %s", partner.Status, partner.Body)
		}
		if got, want := fmt.Sprint(m["params"]), fmt.Sprint(partner.Map(t)["params"]); got != want || got != "map[currency:"+cur+" environment:sandbox]" {
			t.Fatalf("%s: the venue door's params %s, the partner door's %s", cur, got, want)
		}
	}
	list := want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey}), 200, "")
	if n := len(list["accounts"].([]any)); n != 0 {
		t.Fatalf("refused issues recorded %d accounts", n)
	}
}

// A loss limit stated in a group or as an account's override is the
// published risk policy's: 400 loss_limit_unenforced naming the field,
// recording nothing; null passes.
func TestLossLimitsOutsideThePolicyAreRefused(t *testing.T) {
	e := start(t)
	for _, f := range []string{"dailyLossLimit", "weeklyLossLimit"} {
		m := want(t, e.put("groups", "g-"+f, "g-"+f, "", map[string]any{"name": "G", "instruments": []any{}, f: "500"}), 400, "loss_limit_unenforced")
		if m["field"] != f {
			t.Fatalf("a group's %s: %v", f, m)
		}
	}
	want(t, e.put("groups", "g1", "g1", "", map[string]any{"name": "G", "instruments": []any{}, "dailyLossLimit": nil, "weeklyLossLimit": nil}), 201, "")
	issue := func(idem string, body map[string]any) *apptest.Resp {
		return e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey,
			Headers: map[string]string{"Idempotency-Key": idem}, Body: body})
	}
	for _, f := range []string{"dailyLossLimit", "weeklyLossLimit"} {
		m := want(t, issue("a-"+f, map[string]any{"groupId": "g1", f: "500"}), 400, "loss_limit_unenforced")
		if m["field"] != f {
			t.Fatalf("an account's %s: %v", f, m)
		}
	}
	if n := len(want(t, e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/accounts", Key: e.venueKey}), 200, "")["accounts"].([]any)); n != 0 {
		t.Fatalf("refused issues recorded %d accounts", n)
	}
	want(t, issue("a-null", map[string]any{"groupId": "g1", "dailyLossLimit": nil, "weeklyLossLimit": nil}), 201, "")
}

// A venue with nothing configured lists every kind as an empty array, never
// null (the suite's schema check refuses a null where the document says array).
func TestEmptyConfigurationListsAreArrays(t *testing.T) {
	e := start(t)
	for _, kind := range venuecmd.ConfigKinds {
		for _, r := range []*apptest.Resp{
			e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/venues/" + e.venueID + "/" + kind, Key: e.venueKey}),
			e.AsSession(e.owner, apptest.Req{Method: http.MethodGet, Path: "/api/back-office/venues/" + e.venueID + "/" + kind}),
		} {
			if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"items":[]}` {
				t.Errorf("%s: %d %s", kind, r.Status, r.Body)
			}
		}
	}
}

package firm_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

func (f *firm) register(rc *receiver, path string, status int, types ...string) string {
	f.T.Helper()
	body := map[string]any{"url": rc.url(path)}
	if len(types) > 0 {
		body["eventTypes"] = types
	}
	r := f.partner(http.MethodPost, "/api/partner/webhooks", body)
	want(f.T, r, http.StatusOK)
	wh := r.Map(f.T)["webhook"].(map[string]any)
	rc.set(path, wh["secret"].(string), status)
	return wh["id"].(string)
}

func waitCount(t *testing.T, rc *receiver, path, typ string, n int) {
	t.Helper()
	apptest.WaitFor(t, 10*time.Second, func() error {
		if got := rc.count(path, typ); got != n {
			return fmt.Errorf("%s got %d %q deliveries, want %d", path, got, typ, n)
		}
		return nil
	})
}

func TestWebhooksAreSignedFilteredAndRetried(t *testing.T) {
	rc := newReceiver(t)
	backoff := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 60 * time.Millisecond, 80 * time.Millisecond, 100 * time.Millisecond}
	f := start(t, options{receiver: rc, backoff: backoff})
	all := f.register(rc, "/all", 200)
	f.register(rc, "/money", 200, "balance.recorded")
	failing := f.register(rc, "/failing", 500, "balance.recorded")
	a := f.provision("w-1", "1000")

	want(t, f.balanceOp("w-op-1", a, "credit", "10"), http.StatusOK)
	want(t, f.partner(http.MethodPost, "/api/partner/accounts/halt", map[string]any{"accountNumber": a}), http.StatusOK)
	want(t, f.partner(http.MethodPost, "/api/partner/accounts/resume", map[string]any{"accountNumber": a}), http.StatusOK)
	want(t, f.partner(http.MethodPost, "/api/partner/accounts/reset", map[string]any{"accountNumber": a}), http.StatusOK)

	waitCount(t, rc, "/all", "", 4)
	waitCount(t, rc, "/money", "", 1)
	var types []string
	for _, d := range rc.deliveries("/all") {
		types = append(types, d.Type)
	}
	sort.Strings(types) // endpoints receive up to 4 deliveries at once: arrival order is not promised
	if fmt.Sprint(types) != "[account.reset balance.recorded risk.locked risk.unlocked]" {
		t.Fatalf("types %v", types)
	}
	got := rc.deliveries("/money")[0]
	ids := map[string]bool{}
	for _, d := range rc.deliveries("/all") {
		ids[d.ID] = true
	}
	if got.Data["referenceId"] != "w-op-1" || got.Data["accountNumber"] != a || got.Data["amount"] != "10" || !ids[got.ID] {
		t.Fatalf("balance.recorded %+v", got)
	}
	// The failing endpoint sees 6 attempts, then no more.
	waitCount(t, rc, "/failing", "balance.recorded", 6)
	var log struct {
		Deliveries []map[string]any `json:"deliveries"`
		NextCursor *string          `json:"nextCursor"`
	}
	apptest.WaitFor(t, 5*time.Second, func() error {
		r := f.partner(http.MethodGet, "/api/partner/webhooks/deliveries?limit=200", nil)
		r.JSON(t, &log)
		n := 0
		for _, d := range log.Deliveries {
			if d["webhookId"] == failing {
				n++
			}
		}
		if n != 6 {
			return fmt.Errorf("%d attempts of the failing endpoint logged", n)
		}
		return nil
	})
	newest := log.Deliveries[0]
	for _, d := range log.Deliveries {
		if d["webhookId"] == failing {
			newest = d
			break
		}
	}
	if newest["attempt"] != float64(6) || newest["status"] != "failed" || newest["responseCode"] != float64(500) || newest["nextAttemptAt"] != nil {
		t.Fatalf("last attempt %v", newest)
	}
	// Paging: newest first, the cursor continues where the page ended.
	r := f.partner(http.MethodGet, "/api/partner/webhooks/deliveries?limit=3", nil)
	var page struct {
		Deliveries []map[string]any `json:"deliveries"`
		NextCursor *string          `json:"nextCursor"`
	}
	r.JSON(t, &page)
	if len(page.Deliveries) != 3 || page.NextCursor == nil || page.Deliveries[0]["id"] != log.Deliveries[0]["id"] {
		t.Fatalf("page %s", r.Body)
	}
	r = f.partner(http.MethodGet, "/api/partner/webhooks/deliveries?limit=3&cursor="+*page.NextCursor, nil)
	r.JSON(t, &page)
	if len(page.Deliveries) != 3 || page.Deliveries[0]["id"] != log.Deliveries[3]["id"] {
		t.Fatalf("second page %s", r.Body)
	}

	// A signed ping at once, with its outcome.
	r = f.partner(http.MethodPost, "/api/partner/webhooks/test", map[string]any{"webhookId": all})
	want(t, r, http.StatusOK)
	if d := r.Map(t)["delivery"].(map[string]any); d["status"] != "succeeded" || d["responseCode"] != float64(200) {
		t.Fatalf("ping %s", r.Body)
	}
	if rc.count("/all", "ping") != 1 {
		t.Fatal("ping not received")
	}
	r = f.partner(http.MethodPost, "/api/partner/webhooks/test", map[string]any{"webhookId": failing})
	if d := r.Map(t)["delivery"].(map[string]any); d["status"] != "failed" || d["responseCode"] != float64(500) {
		t.Fatalf("failing ping %s", r.Body)
	}
}

func TestWebhookEndpointsAreLimitedAndSecretsShownOnce(t *testing.T) {
	rc := newReceiver(t)
	f := start(t, options{receiver: rc})
	wantCode(t, f.partner(http.MethodPost, "/api/partner/webhooks", map[string]any{"url": "http://plain.example.test/h"}), http.StatusBadRequest, "invalid_request")
	wantCode(t, f.partner(http.MethodPost, "/api/partner/webhooks", map[string]any{"url": rc.url("/x"), "eventTypes": []string{"no.such"}}), http.StatusBadRequest, "invalid_request")
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, f.register(rc, fmt.Sprintf("/e%d", i), 200))
	}
	wantCode(t, f.partner(http.MethodPost, "/api/partner/webhooks", map[string]any{"url": rc.url("/e5")}), http.StatusConflict, "webhook_limit_reached")
	r := f.partner(http.MethodGet, "/api/partner/webhooks", nil)
	want(t, r, http.StatusOK)
	list := r.Map(t)["webhooks"].([]any)
	if len(list) != 5 {
		t.Fatalf("%d listed", len(list))
	}
	if _, has := list[0].(map[string]any)["secret"]; has {
		t.Fatal("a listed webhook shows its secret")
	}
	want(t, f.partner(http.MethodDelete, "/api/partner/webhooks/"+ids[0], nil), http.StatusOK)
	want(t, f.partner(http.MethodDelete, "/api/partner/webhooks/nosuch", nil), http.StatusNotFound)
	f.register(rc, "/e5", 200)
}

// TestWebhookDeliveriesSurviveRestarts: what was delivered is not delivered
// again after a restart; a retry that was due is made after it.
func TestWebhookDeliveriesSurviveRestarts(t *testing.T) {
	rc := newReceiver(t)
	backoff := []time.Duration{300 * time.Millisecond, time.Hour, time.Hour, time.Hour, time.Hour}
	clk := &clock{}
	o := options{receiver: rc, backoff: backoff, now: clk.now}
	f := start(t, o)
	f.register(rc, "/ok", 200)
	f.register(rc, "/flaky", 503)
	a := f.provision("s-1", "1000")
	for i := 0; i < 3; i++ {
		want(t, f.balanceOp(fmt.Sprintf("s-op-%d", i), a, "credit", "1"), http.StatusOK)
	}
	waitCount(t, rc, "/ok", "", 3)
	waitCount(t, rc, "/flaky", "", 3) // each failed once; the retry is due in 300 ms
	o.dataDir = f.DataDir
	f.Stop()
	rc.mu.Lock()
	rc.status["/flaky"] = 200 // the endpoint recovers while the engine is down
	rc.mu.Unlock()
	clk.advance(time.Second) // the retries fall due while the engine is down
	f = start(t, o)
	want(t, f.balanceOp("s-op-3", a, "credit", "1"), http.StatusOK)
	waitCount(t, rc, "/ok", "", 4)    // the new event only: nothing delivered twice
	waitCount(t, rc, "/flaky", "", 7) // 3 failed + 3 retries that were due + the new one
	seen := map[string]int{}
	for _, d := range rc.deliveries("/ok") {
		seen[d.ID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s delivered %d times to /ok", id, n)
		}
	}
}

// TestWebhookRegistrationRefusesURLsInsideTheNetwork: with the egress rules on,
// an endpoint on a loopback, unspecified or local host, in any spelling, or
// not https, is 400 naming the url and the rule, and nothing is registered.
func TestWebhookRegistrationRefusesURLsInsideTheNetwork(t *testing.T) {
	f := start(t, options{receiver: newReceiver(t), public: true})
	for u, rule := range map[string]string{
		"https://127.0.0.1/":         "loopback",
		"https://localhost/":         "local-name",
		"https://[::1]/":             "loopback",
		"https://127.1/":             "loopback",
		"https://2130706433/":        "loopback",
		"https://0.0.0.0/":           "unspecified",
		"https://0x7f.1/":            "loopback",
		"https://[::ffff:10.0.0.1]/": "private",
		"https://169.254.169.254/":   "link-local",
		"https://100.64.0.1/":        "shared",
		"https://metadata.internal/": "local-name",
		"http://example.com/":        "scheme",
	} {
		m := wantCode(t, f.partner(http.MethodPost, "/api/partner/webhooks", map[string]any{"url": u}), http.StatusBadRequest, "invalid_request")
		p, _ := m["params"].(map[string]any)
		if p["field"] != "url" || p["rule"] != rule || !strings.HasPrefix(m["error"].(string), "url ") {
			t.Fatalf("%s: %v", u, m)
		}
	}
	r := f.partner(http.MethodGet, "/api/partner/webhooks", nil)
	want(t, r, http.StatusOK)
	if list := r.Map(t)["webhooks"].([]any); len(list) != 0 {
		t.Fatalf("registered %v", list)
	}
}

// TestWebhookRegistrationWithPrivateAllowedIsStillHTTPSOnly: the dev switch
// lifts the address rules only.
func TestWebhookRegistrationWithPrivateAllowedIsStillHTTPSOnly(t *testing.T) {
	f := start(t, options{receiver: newReceiver(t)})
	want(t, f.partner(http.MethodPost, "/api/partner/webhooks", map[string]any{"url": "https://127.0.0.1:9/hook"}), http.StatusOK)
	m := wantCode(t, f.partner(http.MethodPost, "/api/partner/webhooks", map[string]any{"url": "http://127.0.0.1:9/hook"}), http.StatusBadRequest, "invalid_request")
	if p := m["params"].(map[string]any); p["field"] != "url" || p["rule"] != "scheme" {
		t.Fatalf("%v", m)
	}
}

// TestWebhookRemovalByBodyOrQuery: DELETE /api/partner/webhooks removes the
// endpoint named by id or url, in the body or the query.
func TestWebhookRemovalByBodyOrQuery(t *testing.T) {
	rc := newReceiver(t)
	f := start(t, options{receiver: rc})
	ids := map[string]string{}
	for _, p := range []string{"/by-body-url", "/by-body-id", "/by-query-url", "/by-query-id"} {
		ids[p] = f.register(rc, p, 200)
	}
	listed := func() map[string]bool {
		r := f.partner(http.MethodGet, "/api/partner/webhooks", nil)
		want(t, r, http.StatusOK)
		out := map[string]bool{}
		for _, w := range r.Map(t)["webhooks"].([]any) {
			out[w.(map[string]any)["id"].(string)] = true
		}
		return out
	}
	remove := func(path string, body any, gone string) {
		t.Helper()
		r := f.partner(http.MethodDelete, path, body)
		want(t, r, http.StatusOK)
		if got := r.Map(t)["webhook"].(map[string]any)["id"]; got != ids[gone] {
			t.Fatalf("removed %v, want %s", got, ids[gone])
		}
		if listed()[ids[gone]] {
			t.Fatalf("%s still listed", gone)
		}
	}
	wantCode(t, f.partner(http.MethodDelete, "/api/partner/webhooks", nil), http.StatusBadRequest, "invalid_request")
	wantCode(t, f.partner(http.MethodDelete, "/api/partner/webhooks?id="+ids["/by-body-id"], map[string]any{"url": rc.url("/by-body-url")}), http.StatusBadRequest, "invalid_request")
	wantCode(t, f.partner(http.MethodDelete, "/api/partner/webhooks", map[string]any{"url": rc.url("/nowhere")}), http.StatusNotFound, "not_found")
	wantCode(t, f.partner(http.MethodDelete, "/api/partner/webhooks?id=nosuch", nil), http.StatusNotFound, "not_found")
	wantCode(t, f.partner(http.MethodDelete, "/api/partner/webhooks", map[string]any{"name": "x"}), http.StatusBadRequest, "invalid_request")
	if len(listed()) != 4 {
		t.Fatal("a refused removal removed something")
	}
	remove("/api/partner/webhooks", map[string]any{"url": rc.url("/by-body-url")}, "/by-body-url")
	remove("/api/partner/webhooks", map[string]any{"id": ids["/by-body-id"]}, "/by-body-id")
	remove("/api/partner/webhooks?url="+url.QueryEscape(rc.url("/by-query-url")), nil, "/by-query-url")
	remove("/api/partner/webhooks?id="+ids["/by-query-id"], nil, "/by-query-id")
	if len(listed()) != 0 {
		t.Fatal("endpoints left")
	}
}

type panickingTransport struct{}

func (panickingTransport) RoundTrip(*http.Request) (*http.Response, error) { panic("transport bug") }

// TestAPanicInADeliveryIsAFailedAttempt: the engine lives on, and the attempt
// is in the delivery log as failed with its retry scheduled.
func TestAPanicInADeliveryIsAFailedAttempt(t *testing.T) {
	f := start(t, options{transport: panickingTransport{}, backoff: []time.Duration{time.Hour, time.Hour, time.Hour, time.Hour, time.Hour}})
	r := f.partner(http.MethodPost, "/api/partner/webhooks", map[string]any{"url": "https://hooks.example.com/in"})
	want(t, r, http.StatusOK)
	id := r.Map(t)["webhook"].(map[string]any)["id"]
	a := f.provision("p-1", "1000")
	want(t, f.balanceOp("p-op-1", a, "credit", "10"), http.StatusOK)
	apptest.WaitFor(t, 5*time.Second, func() error {
		var log struct {
			Deliveries []map[string]any `json:"deliveries"`
		}
		f.partner(http.MethodGet, "/api/partner/webhooks/deliveries", nil).JSON(t, &log)
		if len(log.Deliveries) != 1 {
			return fmt.Errorf("%d attempts logged", len(log.Deliveries))
		}
		d := log.Deliveries[0]
		if d["webhookId"] != id || d["status"] != "failed" || d["error"] != "the engine failed during the attempt" || d["nextAttemptAt"] == nil {
			return fmt.Errorf("attempt %v", d)
		}
		return nil
	})
	r = f.partner(http.MethodPost, "/api/partner/webhooks/test", map[string]any{"webhookId": id})
	want(t, r, http.StatusOK)
	if d := r.Map(t)["delivery"].(map[string]any); d["status"] != "failed" {
		t.Fatalf("ping %s", r.Body)
	}
	want(t, f.balanceOp("p-op-2", a, "credit", "10"), http.StatusOK)
}

package app_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svc/engine/cmd/engine/app/apptest"
)

// FuzzVenueLiveHolds sends fuzzed input through the real handler to a
// venue's holds on live trading: the hold and the release with the venue
// key and, as the demo venue's owner signed in, through the back office;
// the read with a fuzzed trader in its query. The first byte picks the
// route; every other attempt repeats the previous Idempotency-Key, so
// replays and conflicts are fuzzed too. No answer may be a 5xx or an error
// without its body, every answer matches schema/openapi.yaml, and every
// accepted write's commits must read back.
func FuzzVenueLiveHolds(f *testing.F) {
	routes := []struct{ method, path string }{
		{"POST", "/api/venues/%venue/live-trading/hold"}, {"POST", "/api/venues/%venue/live-trading/release"},
		{"POST", "/api/back-office/venues/%venue/live-trading/hold"}, {"POST", "/api/back-office/venues/%venue/live-trading/release"},
		{"GET", "/api/venues/%venue/live-trading"}, {"GET", "/api/back-office/venues/%venue/live-trading"},
	}
	seeds := []string{
		`{"reason":"exchange incident"}`,
		`{}`,
		`{"reason":"kyc review","trader":"T@example.com"}`,
		`{"trader":"t@example.com"}`,
		`t@example.com`,
		`Bob <bob@example.com>`,
		`{"reason":"` + strings.Repeat("r", 257) + `"}`,
		`{"reason":" padded "}`,
		`{"reason":"\u202e"}`,
		`{"reason":"x","trader":"a@b"}`,
		`{"reason":"x","scope":"all"}`,
		`{"reason":null,"trader":7}`,
		`null`,
		"\xff\xfe",
	}
	for i, s := range seeds {
		f.Add(append([]byte{byte(i)}, s...))
	}
	fe := startFuzzEngine(f)
	venue, key, cookie := fe.Creds["venueId"].(string), fe.Creds["venueKey"].(string), fe.Creds["ownerSession"].(string)
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		rt := routes[int(b[0])%len(routes)]
		n++
		target, body := strings.ReplaceAll(rt.path, "%venue", venue), b[1:]
		if rt.method == http.MethodGet {
			target += "?trader=" + url.QueryEscape(string(body))
			body = nil
		}
		var r *http.Request
		if body != nil {
			r = httptest.NewRequest(rt.method, target, bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
		} else {
			r = httptest.NewRequest(rt.method, target, nil)
		}
		r.Header.Set("Idempotency-Key", fmt.Sprintf("fz-%d", n-n%2)) // pairs share a key
		if strings.HasPrefix(rt.path, "/api/back-office/") {
			r.Header.Set("Cookie", "svc_session="+cookie)
			r.Header.Set("Origin", "http://example.com")
		} else {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		fe.App.Handler.ServeHTTP(w, r)
		apptest.ValidateResponse(t, r, w.Code, w.Header(), w.Body.Bytes())
		fe.check(t, rt.method, target, body, w)
	})
}

package httpx_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine"
	"github.com/svc/engine/gateway/httpx"
)

// answer writes err as the gateway does and returns the status, the
// Retry-After header and the body's code.
func answer(t *testing.T, fam httpx.Family, err error) (int, string, string) {
	t.Helper()
	w := httptest.NewRecorder()
	httpx.WriteError(w, httptest.NewRequest(http.MethodPost, "/api/trading/order", nil), fam, err)
	var body struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	code := body.Code
	if fam == httpx.Venue {
		code = body.Error
	}
	return w.Code, w.Header().Get("Retry-After"), code
}

// The writer answers the status and Retry-After the catalogue states for the
// code, whatever the call site stated.
func TestTheWriterTakesStatusAndRetryAfterFromTheCatalogue(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter string
	}{
		{"feed_requires_connection stated with Retry-After carries none",
			&httpx.Error{Status: http.StatusServiceUnavailable, Code: commands.CodeFeedRequiresConnection, RetryAfter: 1, Msg: "no source"}, 503, ""},
		{"feed_requires_connection through Unavailable carries none",
			httpx.Unavailable(commands.CodeFeedRequiresConnection, "no source"), 503, ""},
		{"a refusal of feed_requires_connection carries none",
			commands.Refuse(commands.CodeFeedRequiresConnection, "no source", nil), 503, ""},
		{"a retry-safe 503 refusal gets the catalogue's Retry-After",
			commands.Refuse(commands.CodeOwnerUnavailable, "moving", nil), 503, "1"},
		{"feed_unavailable gets its 5 s",
			&httpx.Error{Status: http.StatusServiceUnavailable, Code: commands.CodeFeedUnavailable, Msg: "down"}, 503, "5"},
		{"a retry-safe code keeps the wait its site computed",
			&httpx.Error{Status: http.StatusTooManyRequests, Code: commands.CodeRateLimited, RetryAfter: 30, Msg: "slow down"}, 429, "30"},
		{"a retry-safe 422 carries Retry-After too",
			commands.Refuse(commands.CodeMarketDataUnavailable, "no price yet", nil), 422, "1"},
		{"a status the catalogue does not list for the code gives way to its own",
			&httpx.Error{Status: http.StatusBadRequest, Code: commands.CodeRiskLocked, Msg: "locked"}, 423, ""},
		{"a status the catalogue lists among several stands (422)",
			commands.Invalid("no"), 422, ""},
		{"a status the catalogue lists among several stands (400)",
			commands.BadRequest("no"), 400, ""},
		{"outside the code's list the first stands",
			&httpx.Error{Status: http.StatusInternalServerError, Code: commands.CodeInvalidRequest, Msg: "no"}, 400, ""},
		{"outcome_unknown carries none where the route states none",
			engine.ErrOutcomeUnknown, 503, ""},
		{"outcome_unknown keeps a route's Retry-After (the partner balance routes)",
			&httpx.Error{Status: http.StatusServiceUnavailable, Code: commands.CodeOutcomeUnknown, RetryAfter: 1, Msg: "maybe"}, 503, "1"},
		{"a plain 500 has no code and no header",
			errors.New("boom"), 500, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, fam := range []httpx.Family{httpx.Trading, httpx.Venue} {
				st, ra, _ := answer(t, fam, tc.err)
				if st != tc.status || ra != tc.retryAfter {
					t.Errorf("family %d: answered %d with Retry-After %q; want %d with %q", fam, st, ra, tc.status, tc.retryAfter)
				}
			}
		})
	}
}

// For every code of the catalogue, a site that states an unlisted status and
// a Retry-After is answered with the catalogue's status, and the header only
// where the catalogue lets the code carry one.
func TestNoCodeIsAnsweredOtherwiseThanItsCatalogueEntry(t *testing.T) {
	table := commands.Codes()
	for _, c := range slices.Sorted(maps.Keys(table)) {
		spec, ok := commands.Lookup(commands.Code(c))
		if !ok {
			t.Fatalf("Codes lists %q and Lookup does not find it", c)
		}
		st, ra, code := answer(t, httpx.Trading, &httpx.Error{Status: http.StatusTeapot, Code: commands.Code(c), RetryAfter: 7, Msg: "x"})
		want := http.StatusTeapot // a stream-only code lists no status
		if len(spec.Status) > 0 {
			want = spec.Status[0]
		}
		if code != c || st != want {
			t.Errorf("%s: answered %d %q; want %d", c, st, code, want)
		}
		if carries := spec.RetrySafe || spec.RetryAfterOnRoute; carries != (ra == "7") || !carries && ra != "" {
			t.Errorf("%s: Retry-After %q; the catalogue says retry-safe %t, on route %t", c, ra, spec.RetrySafe, spec.RetryAfterOnRoute)
		}
	}
}

// An answer is the bytes encoding/json writes for it and a newline, HTML
// escaped as encoding/json escapes it, however often the writer's buffers
// are reused; a value that cannot be encoded answers 500 and nothing of it.
func TestWriteJSONWritesWhatEncodingJSONWrites(t *testing.T) {
	type inner struct {
		Price string `json:"price,omitempty"`
		N     int    `json:"n"`
	}
	values := []any{
		map[string]any{"order": inner{Price: "<1&2>", N: 3}, "list": []string{"a", "é", "\u2028"}},
		inner{N: 1},
		[]int{},
		nil,
		map[string]any{"long": string(make([]byte, 70000))},
		"short",
	}
	for round := range 3 {
		for i, v := range values {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			httpx.WriteJSON(w, http.StatusCreated, v)
			if got := w.Body.String(); got != string(want)+"\n" || w.Code != http.StatusCreated || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("round %d value %d: %d %q, want %q", round, i, w.Code, got, string(want)+"\n")
			}
		}
	}
	w := httptest.NewRecorder()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"bad": make(chan int)})
	if w.Code != http.StatusInternalServerError || w.Body.String() != "{\"error\":\"internal error\"}\n" {
		t.Fatalf("unencodable: %d %q", w.Code, w.Body.String())
	}
}

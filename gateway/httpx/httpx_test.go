package httpx_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/svc/engine/gateway/httpx"
)

func post(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

type order struct {
	ClientOrderID string `json:"clientOrderId"`
	Tags          any    `json:"tags"`
}

func TestDecodeRefusals(t *testing.T) {
	deep := func(open, close string, n int) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	nestedTags := func(n int) string {
		return `{"clientOrderId":"a","tags":` + deep("[", "]", n-1) + `}`
	}
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string // part of the sentence
	}{
		{"valid", `{"clientOrderId":"a"}`, 0, ""},
		{"invalid UTF-8 in a value", "{\"clientOrderId\":\"a\xff\"}", 400, "not valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"clientOrderId\":\"a\",\"\xffx\":1}", 400, "not valid UTF-8"},
		{"a lone surrogate byte sequence", "{\"clientOrderId\":\"\xed\xa0\x80\"}", 400, "not valid UTF-8"},
		{"valid multibyte", `{"clientOrderId":"ä€😀"}`, 0, ""},
		{"32 deep", nestedTags(32), 0, ""},
		{"33 deep", nestedTags(33), 400, "more than 32 deep"},
		{"10,000 arrays deep", deep("[", "]", 10000), 400, "more than 32 deep"},
		{"10,000 objects deep", strings.Repeat(`{"a":`, 10000), 400, "more than 32 deep"},
		{"unclosed and deep", strings.Repeat("[", 10000), 400, "more than 32 deep"},
		{"brackets inside strings do not count", `{"clientOrderId":"` + strings.Repeat("[{", 100) + `\"[[[["}`, 0, ""},
		{"stray closers do not hide depth", strings.Repeat("]", 100) + deep("[", "]", 40), 400, "more than 32 deep"},
		{"unknown field", `{"nope":1}`, 400, "malformed JSON body"},
		{"trailing data", `{"clientOrderId":"a"} {}`, 400, "trailing data"},
		{"a stray closer after the object", `{"clientOrderId":"a"}]`, 400, "trailing data"},
		{"too large", `{"clientOrderId":"` + strings.Repeat("a", httpx.DefaultBodyLimit) + `"}`, 413, "over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v order
			err := httpx.Decode(post(tc.body), &v, 0)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var he *httpx.Error
			if !errors.As(err, &he) || he.Status != tc.status || !strings.Contains(he.Msg, tc.msg) {
				t.Fatalf("got %#v, want %d %q", err, tc.status, tc.msg)
			}
			if tc.status == 400 && he.Code != "invalid_request" {
				t.Fatalf("code %q", he.Code)
			}
		})
	}
}

// A body nested as deep as the limit allows is refused after work bounded
// by its size (no recursion per level, no copy per level): measured in
// bytes allocated (at most 32 times the body: 8 measured under -race, a
// copy per level would be gigabytes), which a loaded machine does not
// change, not in time.
func TestDecodeRefusesDeepBodiesFast(t *testing.T) {
	body := strings.Repeat("[", httpx.DefaultBodyLimit/2) + strings.Repeat("]", httpx.DefaultBodyLimit/2)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 100; i++ {
		var v order
		err := httpx.Decode(post(body), &v, 0)
		var he *httpx.Error
		if !errors.As(err, &he) || he.Status != http.StatusBadRequest {
			t.Fatalf("a body nested %d deep: %v, want 400", httpx.DefaultBodyLimit/2, err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 32*uint64(len(body)) {
		t.Fatalf("a refusal of a %d-byte body allocated %d bytes", len(body), per)
	}
}

func TestStreamsAreAdmittedOnceThroughTheGate(t *testing.T) {
	admitted, released := 0, 0
	refuse := false
	admit := func(*httpx.StreamEnd) (func(), error) {
		if refuse {
			return nil, &httpx.Error{Status: http.StatusTooManyRequests, Code: "too_many_streams", Msg: "no"}
		}
		admitted++
		return func() { released++ }, nil
	}
	stream := httpx.Serve(httpx.Trading, func(w http.ResponseWriter, r *http.Request) error {
		if err := httpx.AdmitStream(w); err != nil {
			return err
		}
		if released != 0 {
			t.Error("released while the handler runs")
		}
		_, err := httpx.StartSSE(w) // admitted already: not again
		return err
	})
	plain := httpx.Serve(httpx.Trading, func(w http.ResponseWriter, r *http.Request) error {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{})
		return nil
	})
	serve := func(h http.Handler) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		httpx.GateStreams(w, r, h, admit)
		return w
	}

	if w := serve(stream); w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", w.Code, w.Body)
	}
	if admitted != 1 || released != 1 {
		t.Fatalf("admitted %d released %d, want 1 and 1", admitted, released)
	}
	if w := serve(plain); w.Code != 200 || admitted != 1 || released != 1 {
		t.Fatalf("a plain answer took a slot: %d, %d %d", w.Code, admitted, released)
	}
	refuse = true
	w := serve(stream)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "too_many_streams") || released != 1 {
		t.Fatalf("refused stream: %d %s, released %d", w.Code, w.Body, released)
	}
	// A writer without a gate admits every stream.
	if _, err := httpx.StartSSE(httptest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
}

// An event is its name, its id and one data line for each line of its
// data, the last line of a data ending in a newline being empty.
func TestFormatEventWritesOneDataLineForEachLine(t *testing.T) {
	for _, tc := range []struct {
		name, id, data, want string
	}{
		{"account", "7", `{"a":1}`, "event: account\nid: 7\ndata: {\"a\":1}\n\n"},
		{"", "", "", "data: \n\n"},
		{"x", "", "one\ntwo", "event: x\ndata: one\ndata: two\n\n"},
		{"x", "1", "one\n", "event: x\nid: 1\ndata: one\ndata: \n\n"},
		{"", "", "\n\n", "data: \ndata: \ndata: \n\n"},
	} {
		if got := string(httpx.FormatEvent(tc.name, tc.id, []byte(tc.data))); got != tc.want {
			t.Errorf("%q %q %q: %q, want %q", tc.name, tc.id, tc.data, got, tc.want)
		}
	}
}

// Decoders are reused across requests: a body decodes, and is refused with
// the same sentence (a syntax error at its own byte), whatever was decoded
// before it.
func TestDecodeAnswersEachBodyAsIfAlone(t *testing.T) {
	bad := `{"clientOrderId":"b",}`
	fresh := json.NewDecoder(strings.NewReader(bad)).Decode(&order{})
	var se *json.SyntaxError
	if !errors.As(fresh, &se) {
		t.Fatalf("encoding/json answered %v", fresh)
	}
	want := fmt.Sprintf("syntax error at byte %d", se.Offset)
	for i := range 5 {
		var v order
		if err := httpx.Decode(post(`{"clientOrderId":"a`+strconv.Itoa(i)+`"}`+" \n\t "), &v, 0); err != nil || v.ClientOrderID != "a"+strconv.Itoa(i) {
			t.Fatalf("body %d: %v, %+v", i, err, v)
		}
		var he *httpx.Error
		if err := httpx.Decode(post(bad), &v, 0); !errors.As(err, &he) || !strings.Contains(he.Msg, want) {
			t.Fatalf("bad body after %d: %v, want %q", i, err, want)
		}
		if err := httpx.Decode(post(`{"clientOrderId":"c"} {}`), &v, 0); !errors.As(err, &he) || !strings.Contains(he.Msg, "trailing data") {
			t.Fatalf("trailing data after %d: %v", i, err)
		}
	}
}

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// slowOrder is the handler the test traces: every fifth request sleeps 30 ms,
// the others yield once (a request is known by its handler's frame at a
// stop of its goroutine, as the engine's order handler waits for its commit).
func slowOrder(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("slow") != "" {
		time.Sleep(30 * time.Millisecond)
	} else {
		runtime.Gosched()
	}
	_, _ = w.Write([]byte("ok"))
}

// A trace of real HTTP requests is cut into those requests: all of them
// found on their keep-alive connection, the slow ones first, their time put
// in the wait they spent it in; another handler's requests are left out.
func TestAnalyzeCutsATraceIntoRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/other" {
			_, _ = w.Write([]byte("other"))
			return
		}
		slowOrder(w, r)
	}))
	defer srv.Close()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	get := func(path string) {
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = resp.Body.Read(make([]byte, 16))
		resp.Body.Close()
	}
	for i := range 20 {
		if i%5 == 0 {
			get("/order?slow=1")
		} else {
			get("/order")
		}
		get("/other")
	}
	time.Sleep(10 * time.Millisecond) // the last request's goroutine waits for the next
	trace.Stop()

	rep, err := Analyze(&buf, "tracereq.slowOrder")
	if err != nil {
		t.Fatal(err)
	}
	// A connection's first request begins before it was ever idle, and a
	// goroutine that finds the next request already read does not wait for
	// it: such requests are not cut (or cut together), so not all 20 are.
	if n := len(rep.Requests); n < 10 || n > 20 {
		t.Fatalf("%d requests of the handler, want 10 to 20 of 20 (the other handler's 20 left out)", n)
	}
	for i, q := range rep.Requests[:3] {
		if q.Took() < 30*time.Millisecond {
			t.Fatalf("request %d took %v: the slow ones are not first", i, q.Took())
		}
		if d := q.Parts["waiting: sleep in github.com/svc/engine/cmd/tracereq.slowOrder"]; d < 25*time.Millisecond {
			t.Fatalf("request %d's sleep is %v in %v", i, d, q.Parts)
		}
	}
	if q := rep.Requests[len(rep.Requests)-1]; q.Took() >= 30*time.Millisecond {
		t.Fatalf("the fastest request took %v", q.Took())
	}
	var out bytes.Buffer
	rep.Print(&out, 2)
	if !strings.Contains(out.String(), "waiting: sleep in github.com/svc/engine/cmd/tracereq.slowOrder") {
		t.Fatalf("the report does not name the wait:\n%s", out.String())
	}
}

package simkit_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/sim/internal/simkit"
)

func TestFaultsApplyInOrderAndRunOut(t *testing.T) {
	var l simkit.Faults[string]
	l.Add("POST /order", 2, "twice on orders")
	l.Add("", 0, "always")
	l.Add("GET /x", 1, "skipped")
	want := []struct{ route, got string }{
		{"GET /time", "always"},
		{"POST /order", "twice on orders"},
		{"POST /order", "twice on orders"},
		{"POST /order", "always"},
	}
	for i, w := range want {
		f := l.Take(w.route, nil)
		if f == nil || *f != w.got {
			t.Fatalf("request %d to %s: got %v, want %q", i, w.route, f, w.got)
		}
	}
	if f := l.Take("GET /x", func(f *string) bool { return *f == "always" }); f == nil || *f != "skipped" {
		t.Fatalf("with always passed over: got %v", f)
	}
	l.Clear()
	if f := l.Take("GET /time", nil); f != nil {
		t.Fatalf("after Clear: got %q", *f)
	}
}

func TestReorderSwapsPairsAndSendsALoneEventLate(t *testing.T) {
	var mu sync.Mutex
	var r simkit.Reorder[string]
	var sent []string
	send := func(s string) { sent = append(sent, s) }
	f := simkit.StreamFaults{Reorder: true, ReorderHold: 20 * time.Millisecond}

	mu.Lock()
	r.Pass(f, &mu, "1", send)
	r.Pass(f, &mu, "2", send)
	r.Pass(f, &mu, "3", send)
	got := strings.Join(sent, ",")
	mu.Unlock()
	if got != "2,1" {
		t.Fatalf("sent %s, want 2,1 with 3 held", got)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		got = strings.Join(sent, ",")
		mu.Unlock()
		if got == "2,1,3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sent %s, want 2,1,3 once the hold passed", got)
		}
		time.Sleep(5 * time.Millisecond)
	}

	mu.Lock()
	defer mu.Unlock()
	sent = nil
	r.Pass(simkit.StreamFaults{}, &mu, "4", send)
	r.Pass(f, &mu, "5", send)
	r.Flush(send)
	if got := strings.Join(sent, ","); got != "4,5" {
		t.Fatalf("without reorder and flushed: sent %s, want 4,5", got)
	}
}

func TestOutboxDropsAClientThatDoesNotKeepUp(t *testing.T) {
	o := simkit.NewOutbox[int](2)
	o.Send(1)
	o.Send(2)
	if o.Closing() {
		t.Fatal("closing with a full queue")
	}
	o.Send(3)
	if !o.Closing() || !o.Abrupt() || o.Ctx.Err() == nil {
		t.Fatalf("a send to a full queue: closing %v, abrupt %v, ctx %v", o.Closing(), o.Abrupt(), o.Ctx.Err())
	}

	q := simkit.NewOutbox[int](2)
	q.Send(1)
	q.Close()
	q.Send(2)
	var got []int
	for v := range q.Out {
		got = append(got, v)
	}
	if len(got) != 1 || q.Abrupt() {
		t.Fatalf("closed after 1: drained %v, abrupt %v", got, q.Abrupt())
	}
}

func TestControlDurations(t *testing.T) {
	var d simkit.Durations
	if v := d.Parse("latency", "250ms"); v != 250*time.Millisecond {
		t.Errorf("latency %v", v)
	}
	if v := d.Parse("ban", ""); v != 0 {
		t.Errorf("empty ban %v", v)
	}
	d.Parse("throttle", "soon")
	d.Parse("hold", "-")
	err := d.Err()
	if err == nil || !strings.Contains(err.Error(), "throttle: ") || !strings.Contains(err.Error(), "hold: ") {
		t.Fatalf("want both bad fields, got %v", err)
	}
	if _, err := simkit.Positive("ttl", "0s"); err == nil || err.Error() != "ttl: a positive duration is required" {
		t.Fatalf("0s: %v", err)
	}

	r := httptest.NewRequest("POST", "/_sim/streams/faults", strings.NewReader(`{"duplicate":true,"reorderHold":"1s"}`))
	f, err := simkit.DecodeStreamFaults(r)
	if err != nil || !f.Duplicate || f.Reorder || f.ReorderHold != time.Second || f.Copies() != 2 {
		t.Fatalf("stream faults %+v, %v", f, err)
	}
	r = httptest.NewRequest("POST", "/_sim/streams/faults", strings.NewReader(`{"duplicates":true}`))
	if _, err := simkit.DecodeStreamFaults(r); err == nil {
		t.Fatal("an unknown field was taken")
	}
}

func TestCounts(t *testing.T) {
	c := simkit.Counts{}
	c.Add("acct", "id-1")
	c.Add("acct", "id-1")
	c.Add("acct", "")
	cp := c.Copy()
	c.Add("acct", "id-1")
	if cp["acct"]["id-1"] != 2 || len(cp["acct"]) != 1 || c["acct"]["id-1"] != 3 {
		t.Fatalf("copy %v, counts %v", cp, c)
	}
}

func TestServerServesUntilShutdown(t *testing.T) {
	s := &simkit.Server{Name: "test sim"}
	if err := s.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "up")
	})); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.BaseURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "up" {
		t.Fatalf("body %q", body)
	}
	ended := make(chan struct{})
	s.Go(func() {
		<-s.Stopped()
		close(ended)
	})
	s.Stop()
	s.Stop()
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Shutdown returned before the goroutine of Go")
	}
	if _, err := http.Get(s.BaseURL() + "/"); err == nil {
		t.Fatal("served after Shutdown")
	}
	if err := (&simkit.Server{Name: "test sim"}).Start("127.0.0.1:-1", nil); err == nil || !strings.HasPrefix(err.Error(), "test sim: listen ") {
		t.Fatalf("bad address: %v", err)
	}
}

func TestControlRoutes(t *testing.T) {
	mux := http.NewServeMux()
	simkit.HandleBody(mux, "POST /_sim/price", func(_ *http.Request, b struct{ Symbol, Price string }) (any, error) {
		if b.Price == "" {
			return nil, errors.New("price: required")
		}
		return map[string]any{"symbol": b.Symbol}, nil
	})
	for _, tc := range []struct {
		body   string
		status int
		answer string
	}{
		{`{"symbol":"ES","price":"1"}`, 200, `{"symbol":"ES"}`},
		{`{"symbol":"ES"}`, 400, `{"error":"price: required"}`},
		{`{"symbol":"ES","qty":1}`, 400, `{"error":"body: json: unknown field \"qty\""}`},
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("POST", "/_sim/price", strings.NewReader(tc.body)))
		if w.Code != tc.status || strings.TrimSpace(w.Body.String()) != tc.answer || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s (%s), want %d %s", tc.body, w.Code, w.Body, w.Header().Get("Content-Type"), tc.status, tc.answer)
		}
	}
}

package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc/engine/engine"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections"
	"github.com/svc/engine/projections/memory"
)

// A credential's read after a write answered from its decision waits for
// the read models to show that write; another credential's read, and a
// write, do not wait.
func TestReadsWaitForTheCredentialsLastWrite(t *testing.T) {
	p := projections.NewProjector(memory.New(), engine.Registry(), projections.Core)
	d := &api.Deps{Projector: p}
	as := func(key, method string) *http.Request {
		r := httptest.NewRequest(method, "/api/account/orders", nil)
		return r.WithContext(httpx.WithPrincipal(r.Context(), httpx.Principal{Principal: events.Principal{KeyID: key}, Kind: "trading"}))
	}
	served := make(chan string, 4)
	h := d.CatchUp(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := httpx.PrincipalOf(r)
		served <- p.KeyID + " " + r.Method
	}))
	d.Wrote(as("a", http.MethodPost), 3)
	d.Wrote(as("a", http.MethodPost), 2) // an older write never lowers the mark
	go h.ServeHTTP(httptest.NewRecorder(), as("a", http.MethodGet))
	go h.ServeHTTP(httptest.NewRecorder(), as("b", http.MethodGet))
	go h.ServeHTTP(httptest.NewRecorder(), as("a", http.MethodPost))
	got := map[string]bool{}
	for range 2 {
		select {
		case s := <-served:
			got[s] = true
		case <-time.After(2 * time.Second):
			t.Fatalf("only %v served", got)
		}
	}
	if !got["b GET"] || !got["a POST"] {
		t.Fatalf("served %v before the read models reached a's write", got)
	}
	select {
	case s := <-served:
		t.Fatalf("%s served before the read models reached its write", s)
	case <-time.After(100 * time.Millisecond):
	}
	batch := []events.Committed{{Subject: "evt.account.x", Seq: 1}, {Subject: "evt.account.x", Seq: 2}}
	if err := p.ApplyBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-served:
		t.Fatalf("%s served at sequence 2, its write is 3", s)
	case <-time.After(100 * time.Millisecond):
	}
	if err := p.ApplyBatch(context.Background(), []events.Committed{{Subject: "evt.account.x", Seq: 3}}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-served:
		if s != "a GET" {
			t.Fatalf("served %s", s)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a's read never served once the read models showed its write")
	}
}

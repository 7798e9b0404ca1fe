package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The load generator's connection sends what a client sends (method, path,
// key, JSON body), reuses its connection, and redials after the service
// closed it.
func TestKeepAliveReusesItsConnectionAndRedials(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/api/trading/order" || r.URL.Query().Get("account") != "A1" ||
			r.Header.Get("Authorization") != "Bearer k1" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request line or headers", http.StatusBadRequest)
			return
		}
		if strings.Contains(string(b), "last") {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"echo":` + string(b) + `,"state":"filled"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	k := keepAlive{addr: strings.TrimPrefix(srv.URL, "http://"), key: "k1"}
	defer k.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":"last"}`, `{"n":4}`} {
		status, b, err := k.post(ctx, "/api/trading/order?account=A1", body)
		if err != nil || orderFilled(status, b) != nil || !strings.Contains(string(b), body) {
			t.Fatalf("post %d: %d %s %v", i, status, b, err)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one for the three requests up to the service's close, one after)", n)
	}
}

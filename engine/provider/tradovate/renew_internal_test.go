package tradovate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
)

// tokenServer is the API's token behaviour where the simulator has none: a
// token that stops working (a 401) while its renewal still works. Every
// token but the newest answers 401.
type tokenServer struct {
	mu      sync.Mutex
	current string
	n       int
	calls   map[string]int
}

func (ts *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.calls[r.URL.Path]++
	issue := func() {
		ts.n++
		ts.current = fmt.Sprint("token-", ts.n)
		_ = json.NewEncoder(w).Encode(map[string]any{"accessToken": ts.current, "expirationTime": time.Now().Add(time.Hour),
			"userId": 50001, "name": "trader1", "userStatus": "Active"})
	}
	if r.URL.Path == "/v1/auth/accesstokenrequest" {
		issue()
		return
	}
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.URL.Path == "/v1/auth/renewaccesstoken" {
		if bearer == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		issue() // the token being renewed, even one that stopped working
		return
	}
	if bearer != ts.current {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/v1/account/list":
		_, _ = w.Write([]byte(`[{"id":700001,"name":"DEMO700001","userId":50001,"accountType":"Customer","active":true}]`))
	case "/v1/order/placeorder":
		_, _ = w.Write([]byte(`{"orderId":1}`))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// stale makes the current token stop working (as if revoked): the next
// call answers 401 and its renewal gives a new one.
func (ts *tokenServer) stale() {
	ts.mu.Lock()
	ts.current = "nobody-has-this"
	ts.mu.Unlock()
}

func (ts *tokenServer) count(path string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.calls[path]
}

// A 401 renews the token at once: a read is sent again and answers; a
// write is not sent again (nothing was done) and says so, Unavailable; the
// caller is handed each renewed token.
func TestA401RenewsAtOnce(t *testing.T) {
	ts := &tokenServer{calls: map[string]int{}}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	p, err := New(Options{RestURL: srv.URL + "/v1", WSURL: "ws://127.0.0.1:1", MDURL: "ws://127.0.0.1:1", HTTP: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tok, err := p.Login(ctx, "trader1", []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var renewed []provider.Token
	ts.stale()
	s, err := p.Resume(ctx, tok, "700001", func(t provider.Token) {
		mu.Lock()
		renewed = append(renewed, t)
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("resume with a token gone stale: %v", err)
	}
	defer s.Close()
	// The renewal was before the session subscribed; the next one reaches it.
	ts.stale()
	o := provider.Order{ClientOrderID: provider.ClientOrderID("a", "b"), Instrument: "ESH6", Side: provider.Buy, Type: provider.Market, Quantity: dec("1")}
	_, err = s.Place(ctx, o)
	var una *provider.Unavailable
	if !errors.As(err, &una) || una.Status != http.StatusUnauthorized {
		t.Fatalf("a place answered 401: %v", err)
	}
	if n := ts.count("/v1/order/placeorder"); n != 1 {
		t.Fatalf("the place was sent %d times", n)
	}
	mu.Lock()
	got := append([]provider.Token(nil), renewed...)
	mu.Unlock()
	if len(got) != 1 || got[0].Access != "token-3" || got[0].ID() != tok.ID() {
		t.Fatalf("renewed %d tokens", len(got))
	}
	if _, err := s.Place(ctx, o); err != nil {
		t.Fatalf("with the renewed token: %v", err)
	}
	if n := ts.count("/v1/auth/accesstokenrequest"); n != 1 {
		t.Fatalf("the password was sent %d times", n)
	}
}

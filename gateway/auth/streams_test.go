package auth_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/mail"
	"github.com/svc/engine/gateway/httpx"
)

// sse is one open stream as a client reads it: its events (a comment is an
// event named ":") and, once the server ends the body, closed.
type sse struct {
	events chan apptest.Event
}

// open opens an SSE route with headers and reads it until it ends or the test does.
func open(t *testing.T, e *apptest.Env, path string, headers map[string]string) *sse {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.URL+path, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	apptest.ValidateResponse(t, req, resp.StatusCode, resp.Header, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("stream %s: %d", path, resp.StatusCode)
	}
	s := &sse{events: make(chan apptest.Event, 1024)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev apptest.Event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ": "):
				s.events <- apptest.Event{Name: ":"}
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.Data)
			case line == "" && ev.Name != "":
				s.events <- ev
				ev = apptest.Event{}
			}
		}
	}()
	return s
}

// next is the stream's next event other than a heartbeat, within d.
func (s *sse) next(t *testing.T, d time.Duration) (apptest.Event, bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return apptest.Event{}, false
			}
			if ev.Name != ":" {
				return ev, true
			}
		case <-deadline:
			t.Fatalf("no event within %v", d)
		}
	}
}

// endsRevoked checks the stream's next event is the final error with code
// credential_revoked and reason, and that the body ends right after, each within a second.
func (s *sse) endsRevoked(t *testing.T, name, reason string) {
	t.Helper()
	for {
		ev, ok := s.next(t, time.Second)
		if !ok {
			t.Fatalf("%s: ended without its final error event", name)
		}
		if ev.Name == "error" {
			params, _ := ev.Data["params"].(map[string]any)
			if ev.Data["code"] != "credential_revoked" || params["reason"] != reason || ev.Data["error"] == "" {
				t.Fatalf("%s: final event %v", name, ev.Data)
			}
			break
		}
	}
	if ev, ok := s.next(t, time.Second); ok {
		t.Fatalf("%s: %s after the final error event", name, ev.Name)
	}
}

// beats checks the stream is still open: a heartbeat arrives.
func (s *sse) beats(t *testing.T, name string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("%s ended", name)
			}
			if ev.Name == ":" {
				return
			}
			if ev.Name == "error" {
				t.Fatalf("%s: %v", name, ev.Data)
			}
		case <-deadline:
			t.Fatalf("%s: no heartbeat", name)
		}
	}
}

// trader signs a user in, issues them a Trading API key and opens them a
// demo account: the session cookie, the key, its id and the account number.
func trader(t *testing.T, e *apptest.Env, email string) (cookie, key, keyID, account string) {
	t.Helper()
	cookie = e.SignIn(email, "correct horse battery")
	r := e.AsSession(cookie, apptest.Req{Method: http.MethodPost, Path: "/api/keys", Body: map[string]any{"name": "bot"}})
	if r.Status != 201 {
		t.Fatalf("issue key: %d %s", r.Status, r.Body)
	}
	var issued struct {
		Key    struct{ ID string }
		Secret string
	}
	r.JSON(t, &issued)
	r = e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/account/demo", Body: map[string]any{}, Key: issued.Secret,
		Headers: map[string]string{"Idempotency-Key": "demo-" + email}})
	if r.Status != 201 {
		t.Fatalf("demo account: %d %s", r.Status, r.Body)
	}
	return cookie, issued.Secret, issued.Key.ID, r.Map(t)["account"].(map[string]any)["accountNumber"].(string)
}

func TestARevokedKeysStreamsEndWithAFinalError(t *testing.T) {
	beat := httpx.Heartbeat
	httpx.Heartbeat = 200 * time.Millisecond
	t.Cleanup(func() { httpx.Heartbeat = beat })
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	cookie, key, keyID, account := trader(t, e, "ann@example.com")
	bearer := map[string]string{"Authorization": "Bearer " + key}

	acct := open(t, e, "/api/account/stream?account="+account, bearer)
	if ev, _ := acct.next(t, 10*time.Second); ev.Name != "account" {
		t.Fatalf("first event %q", ev.Name)
	}
	bars := open(t, e, "/api/market/stream?instrument=BTC-PERP&tf=1m", bearer)
	many := open(t, e, "/api/market/streams?subs=BTC-PERP~1m,ETH-PERP~5m", bearer)
	news := open(t, e, "/api/news/stream", bearer)
	calendar := open(t, e, "/api/calendar/stream", bearer)
	for _, s := range []*sse{bars, many, news, calendar} {
		s.beats(t, "a stream before the revocation")
	}
	other := open(t, e, "/api/market/stream?instrument=BTC-PERP&tf=1m", map[string]string{"Authorization": "Bearer " + e.Key})

	if r := e.AsSession(cookie, apptest.Req{Method: http.MethodDelete, Path: "/api/keys/" + keyID}); r.Status != 204 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	for name, s := range map[string]*sse{"account": acct, "market": bars, "market streams": many, "news": news, "calendar": calendar} {
		s.endsRevoked(t, name, "revoked")
	}
	other.beats(t, "another key's stream")
	if r := e.Do(apptest.Req{Method: http.MethodGet, Path: "/api/account/stream?account=" + account, Key: key}); r.Status != 401 {
		t.Fatalf("a new stream with the revoked key: %d %s", r.Status, r.Body)
	}
}

func TestAnEndedSessionsStreamsEndWithAFinalError(t *testing.T) {
	e := apptest.Start(t, apptest.Options{ManualFeed: true})
	cookie, _, _, _ := trader(t, e, "bea@example.com")
	jar := map[string]string{"Cookie": "svc_session=" + cookie}
	news, calendar := open(t, e, "/api/news/stream", jar), open(t, e, "/api/calendar/stream", jar)
	second := login(t, e, "bea@example.com", "correct horse battery")
	kept := open(t, e, "/api/news/stream", map[string]string{"Cookie": "svc_session=" + second})

	if r := e.AsSession(cookie, apptest.Req{Method: http.MethodPost, Path: "/api/auth/logout"}); r.Status != 204 {
		t.Fatalf("logout: %d %s", r.Status, r.Body)
	}
	news.endsRevoked(t, "news", "logout")
	calendar.endsRevoked(t, "calendar", "logout")

	// A password reset ends every session of the user, and their streams.
	if r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/auth/password-reset", Key: "-", Body: map[string]string{"email": "bea@example.com"}}); r.Status != 202 {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	tok := resetToken(t, e, "bea@example.com")
	if r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/auth/password-reset/confirm", Key: "-",
		Body: map[string]string{"token": tok, "password": "a brand new password"}}); r.Status != 200 {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}
	ev, ok := kept.next(t, time.Second)
	if !ok || ev.Name != "error" || ev.Data["code"] != "credential_revoked" {
		t.Fatalf("the other session's stream after a reset: %v %v", ok, ev)
	}
	if _, ok := kept.next(t, time.Second); ok {
		t.Fatal("the stream went on after its final error event")
	}
}

// resetToken waits for the password reset mail to addr and reads its token.
func resetToken(t *testing.T, e *apptest.Env, addr string) string {
	t.Helper()
	var tok string
	apptest.WaitFor(t, 10*time.Second, func() error {
		m, _, err := mail.Latest(filepath.Join(e.DataDir, "mail"), addr)
		if err != nil {
			return err
		}
		if m.Subject != "Reset your password" {
			return fmt.Errorf("newest mail %q", m.Subject)
		}
		var ok bool
		if tok, ok = mail.Token(m.Text); !ok {
			return errors.New("no token in the mail")
		}
		return nil
	})
	return tok
}

// login signs an existing user in again: a second session's cookie.
func login(t *testing.T, e *apptest.Env, email, password string) string {
	t.Helper()
	r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/auth/login", Key: "-", Body: map[string]string{"email": email, "password": password}})
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "svc_session" {
			return c.Value
		}
	}
	t.Fatalf("login: %d %s", r.Status, r.Body)
	return ""
}

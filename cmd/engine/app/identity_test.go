package app_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	"github.com/svc/engine/engine/mail"
)

// session is a signed-in browser: its cookie, sent with the engine's own Origin.
type session struct {
	e      *apptest.Env
	cookie string
}

func (s session) do(method, path string, body any) *apptest.Resp {
	s.e.T.Helper()
	return s.e.Do(apptest.Req{Method: method, Path: path, Body: body, Key: "-",
		Headers: map[string]string{"Cookie": "svc_session=" + s.cookie, "Origin": s.e.URL}})
}

func anon(e *apptest.Env, method, path string, body any) *apptest.Resp {
	e.T.Helper()
	return e.Do(apptest.Req{Method: method, Path: path, Body: body, Key: "-"})
}

// mailToken reads the token of the newest mail to addr.
func mailToken(t *testing.T, e *apptest.Env, addr, subject string) string {
	t.Helper()
	m, file, err := mail.Latest(filepath.Join(e.DataDir, "mail"), addr)
	if err != nil {
		t.Fatalf("no mail to %s: %v", addr, err)
	}
	if m.Subject != subject {
		t.Fatalf("newest mail to %s (%s) is %q, want %q", addr, file, m.Subject, subject)
	}
	tok, ok := mail.Token(m.Text)
	if !ok {
		t.Fatalf("mail %s carries no token=", file)
	}
	return tok
}

// awaitToken waits for a mail to addr with subject, which the engine sends
// after its answer (a password reset, a new verification link), and reads its token.
func awaitToken(t *testing.T, e *apptest.Env, addr, subject string) string {
	t.Helper()
	var tok string
	apptest.WaitFor(t, 10*time.Second, func() error {
		m, file, err := mail.Latest(filepath.Join(e.DataDir, "mail"), addr)
		if err != nil {
			return err
		}
		if m.Subject != subject {
			return fmt.Errorf("newest mail to %s (%s) is %q, want %q", addr, file, m.Subject, subject)
		}
		var ok bool
		if tok, ok = mail.Token(m.Text); !ok {
			return fmt.Errorf("mail %s carries no token=", file)
		}
		return nil
	})
	return tok
}

func login(t *testing.T, e *apptest.Env, email, password string) session {
	t.Helper()
	r := anon(e, "POST", "/api/auth/login", map[string]string{"email": email, "password": password})
	if r.Status != 200 {
		t.Fatalf("login: %d %s", r.Status, r.Body)
	}
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "svc_session" {
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
				t.Fatalf("cookie flags %+v", c)
			}
			return session{e: e, cookie: c.Value}
		}
	}
	t.Fatalf("login set no svc_session cookie: %v", r.Header)
	return session{}
}

func code(t *testing.T, r *apptest.Resp, status int, want string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if got, _ := r.Map(t)["code"].(string); got != want {
		t.Fatalf("code %q, want %q: %s", got, want, r.Body)
	}
}

// The whole path of a new person: sign-up, the mail, verification, sign-in,
// a key, a demo account, an order, revocation, sign-out, a password reset.
func TestIdentityFromSignUpToTrading(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	const email, password = "Ann.Trader@Example.com", "correct horse battery"

	r := anon(e, "POST", "/api/auth/signup", map[string]string{"email": email, "password": password})
	if r.Status != 201 {
		t.Fatalf("signup: %d %s", r.Status, r.Body)
	}
	u := r.Map(t)["user"].(map[string]any)
	if u["email"] != "ann.trader@example.com" || u["emailVerified"] != false {
		t.Fatalf("user %v", u)
	}
	token := mailToken(t, e, "ann.trader@example.com", "Verify your email address")

	// A second sign-up answers alike and mails the owner instead.
	r = anon(e, "POST", "/api/auth/signup", map[string]string{"email": "ANN.TRADER@example.com", "password": "another password!"})
	if r.Status != 201 || r.Map(t)["user"].(map[string]any)["id"] != u["id"] {
		t.Fatalf("second signup: %d %s", r.Status, r.Body)
	}
	if m, _, _ := mail.Latest(filepath.Join(e.DataDir, "mail"), "ann.trader@example.com"); m.Subject != "You already have an account" {
		t.Fatalf("second signup mailed %q", m.Subject)
	}
	code(t, anon(e, "POST", "/api/auth/signup", map[string]string{"email": "b@example.com", "password": "short"}), 400, "invalid_request")

	// Signed in but unverified: no key.
	s := login(t, e, email, password)
	code(t, s.do("POST", "/api/keys", map[string]any{"name": "bot"}), 403, "email_unverified")

	// The link proves the mailbox, the password who made the account: without
	// the password, or with another one (a squatter's who signed up first), the
	// link verifies nothing and stays good for its owner.
	code(t, anon(e, "POST", "/api/auth/verify", map[string]string{"token": token}), 400, "invalid_request")
	code(t, anon(e, "POST", "/api/auth/verify", map[string]string{"token": token, "password": "another password!"}), 401, "invalid_credentials")
	code(t, s.do("POST", "/api/keys", map[string]any{"name": "bot"}), 403, "email_unverified")
	r = anon(e, "POST", "/api/auth/verify", map[string]string{"token": token, "password": password})
	if r.Status != 200 || r.Map(t)["user"].(map[string]any)["emailVerified"] != true {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	code(t, anon(e, "POST", "/api/auth/verify", map[string]string{"token": token, "password": password}), 400, "invalid_token")
	code(t, anon(e, "POST", "/api/auth/verify", map[string]string{"token": "usr_nope.x", "password": password}), 400, "invalid_token")

	// Wrong password and unknown email answer alike.
	bad := anon(e, "POST", "/api/auth/login", map[string]string{"email": email, "password": "wrong password here"})
	unknown := anon(e, "POST", "/api/auth/login", map[string]string{"email": "nobody@example.com", "password": "wrong password here"})
	code(t, bad, 401, "invalid_credentials")
	bm, um := bad.Map(t), unknown.Map(t)
	if bm["error"] != um["error"] || bm["code"] != um["code"] || len(bm) != len(um) || bad.Status != unknown.Status {
		t.Fatalf("wrong password %s vs unknown email %s", bad.Body, unknown.Body)
	}

	if r := s.do("GET", "/api/auth/me", nil); r.Status != 200 || r.Map(t)["user"].(map[string]any)["emailVerified"] != true {
		t.Fatalf("me: %d %s", r.Status, r.Body)
	}
	// A cookie-borne write without a trusted Origin is refused (CSRF), and a key never reaches /api/keys.
	r = e.Do(apptest.Req{Method: "POST", Path: "/api/keys", Body: map[string]any{}, Key: "-", Headers: map[string]string{"Cookie": "svc_session=" + s.cookie}})
	if r.Status != 403 {
		t.Fatalf("write without Origin: %d %s", r.Status, r.Body)
	}
	code(t, e.Do(apptest.Req{Method: "GET", Path: "/api/keys"}), 403, "permission_denied")
	// ... and a session never reaches the firm area or the key routes.
	code(t, s.do("GET", "/api/partner/accounts", nil), 401, "invalid_key")
	code(t, s.do("GET", "/api/account/list", nil), 401, "invalid_key")

	r = s.do("POST", "/api/keys", map[string]any{"name": "bot"})
	if r.Status != 201 || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("issue key: %d %s", r.Status, r.Body)
	}
	var issued struct {
		Key    struct{ ID, Name, Kind, Prefix string }
		Secret string
	}
	r.JSON(t, &issued)
	if !strings.HasPrefix(issued.Secret, "svc_sk_") || issued.Key.Kind != "trading" || !strings.HasPrefix(issued.Secret, issued.Key.Prefix) {
		t.Fatalf("issued %+v", issued)
	}
	key := issued.Secret

	// The key's user opens a demo account and trades on it; the key sees only its user's accounts.
	demo := apptest.Req{Method: "POST", Path: "/api/account/demo", Body: map[string]any{}, Key: key, Headers: map[string]string{"Idempotency-Key": "demo-1"}}
	r = e.Do(demo)
	if r.Status != 201 {
		t.Fatalf("demo account: %d %s", r.Status, r.Body)
	}
	acct := r.Map(t)["account"].(map[string]any)
	if again := e.Do(demo); again.Status != 201 || again.Map(t)["account"].(map[string]any)["accountId"] != acct["accountId"] {
		t.Fatalf("a retry with the same Idempotency-Key opened another account: %s", again.Body)
	}
	r = e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: key})
	if accts := r.Map(t)["accounts"].([]any); len(accts) != 1 || accts[0].(map[string]any)["accountId"] != acct["accountId"] {
		t.Fatalf("the user's accounts: %s", r.Body)
	}
	r = e.Do(apptest.Req{Method: "POST", Path: "/api/trading/order", Key: key, Body: map[string]any{
		"clientOrderId": "id-1", "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "0.01"}})
	if r.Status != 200 {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	code(t, e.Do(apptest.Req{Method: "GET", Path: "/api/account/snapshot?account=" + acct["accountNumber"].(string)}), 400, "invalid_request")

	if r := s.do("GET", "/api/keys", nil); r.Status != 200 || len(r.Map(t)["keys"].([]any)) != 1 {
		t.Fatalf("keys: %d %s", r.Status, r.Body)
	}
	if r := s.do("DELETE", "/api/keys/"+issued.Key.ID, nil); r.Status != 204 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	code(t, e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: key}), 401, "invalid_key")
	code(t, s.do("DELETE", "/api/keys/"+issued.Key.ID+"x", nil), 404, "not_found")

	// Sign-out ends the session on the server: the old cookie is refused.
	if r := s.do("POST", "/api/auth/logout", nil); r.Status != 204 {
		t.Fatalf("logout: %d %s", r.Status, r.Body)
	}
	code(t, s.do("GET", "/api/auth/me", nil), 401, "session_required")

	// A reset sets a new password and ends every session.
	other := login(t, e, email, password)
	if r := anon(e, "POST", "/api/auth/password-reset", map[string]string{"email": email}); r.Status != 202 {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	if r := anon(e, "POST", "/api/auth/password-reset", map[string]string{"email": "nobody@example.com"}); r.Status != 202 {
		t.Fatalf("reset of an unknown address: %d %s", r.Status, r.Body)
	}
	reset := awaitToken(t, e, "ann.trader@example.com", "Reset your password")
	r = anon(e, "POST", "/api/auth/password-reset/confirm", map[string]string{"token": reset, "password": "a brand new password"})
	if r.Status != 200 {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}
	code(t, other.do("GET", "/api/auth/me", nil), 401, "session_required")
	code(t, anon(e, "POST", "/api/auth/login", map[string]string{"email": email, "password": password}), 401, "invalid_credentials")
	login(t, e, email, "a brand new password")

	// The user and its sessions are in the log: a restart keeps them.
	e = e.Restart()
	login(t, e, email, "a brand new password")
}

// Sign-in failures lock an email out with growing back-off.
func TestSignInBackOff(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	body := map[string]string{"email": "x@example.com", "password": "wrong password here"}
	for i := 0; i < 5; i++ {
		code(t, anon(e, "POST", "/api/auth/login", body), 401, "invalid_credentials")
	}
	code(t, anon(e, "POST", "/api/auth/login", body), 401, "invalid_credentials") // the sixth locks it out
	r := anon(e, "POST", "/api/auth/login", body)
	code(t, r, 429, "rate_limited")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
}

// A revoked key and an ended session are refused by a second engine on the
// same log (a NATS server of their own: two engines never share an embedded one).
func TestRevocationsHoldOnEveryNode(t *testing.T) {
	url := apptest.NATS(t)
	name := "ti" + strings.ToLower(ulid.Make().String()[16:])
	// Nodes share the session keys (ENGINE_SESSION_KEYS), as a cluster must.
	keys := strings.Repeat("ab", 32)
	conf := func(c *app.Config) {
		c.NatsURL, c.Deployment.Name, c.Stream, c.SessionKeys = url, name, strings.ToUpper(name)+"_EVT", keys
	}
	a := apptest.Start(t, apptest.Options{Configure: conf})
	b := apptest.Start(t, apptest.Options{Configure: conf})

	const email, password = "node@example.com", "a long enough password"
	if r := anon(a, "POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); r.Status != 201 {
		t.Fatalf("signup: %d %s", r.Status, r.Body)
	}
	if r := anon(a, "POST", "/api/auth/verify", map[string]string{"token": mailToken(t, a, email, "Verify your email address"), "password": password}); r.Status != 200 {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	sa := login(t, a, email, password)
	r := sa.do("POST", "/api/keys", map[string]any{"name": "n"})
	var issued struct {
		Key    struct{ ID string }
		Secret string
	}
	r.JSON(t, &issued)
	sb := session{e: b, cookie: sa.cookie}
	apptest.WaitFor(t, 10*time.Second, func() error {
		if r := sb.do("GET", "/api/auth/me", nil); r.Status != 200 {
			return fmt.Errorf("node b: me %d %s", r.Status, r.Body)
		}
		if r := b.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: issued.Secret}); r.Status != 200 {
			return fmt.Errorf("node b: key %d", r.Status)
		}
		return nil
	})
	if r := sa.do("DELETE", "/api/keys/"+issued.Key.ID, nil); r.Status != 204 {
		t.Fatalf("revoke: %d", r.Status)
	}
	if r := sa.do("POST", "/api/auth/logout", nil); r.Status != 204 {
		t.Fatalf("logout: %d", r.Status)
	}
	apptest.WaitFor(t, 10*time.Second, func() error {
		if r := sb.do("GET", "/api/auth/me", nil); r.Status != 401 {
			return fmt.Errorf("node b still admits the ended session: %d", r.Status)
		}
		if r := b.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: issued.Secret}); r.Status != 401 {
			return fmt.Errorf("node b still admits the revoked key: %d", r.Status)
		}
		return nil
	})
}

// signedIn signs up, verifies and signs in a new user.
func signedIn(t *testing.T, e *apptest.Env, email string) session {
	t.Helper()
	const password = "a long enough password"
	if r := anon(e, "POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); r.Status != 201 {
		t.Fatalf("signup %s: %d %s", email, r.Status, r.Body)
	}
	if r := anon(e, "POST", "/api/auth/verify", map[string]string{"token": mailToken(t, e, email, "Verify your email address"), "password": password}); r.Status != 200 {
		t.Fatalf("verify %s: %d %s", email, r.Status, r.Body)
	}
	return login(t, e, email, password)
}

// Organizations: an owner creates one (idempotent by Idempotency-Key),
// invites by email, the verified invitee accepts, and one owner always remains.
func TestOrganizations(t *testing.T) {
	e := apptest.Start(t, apptest.Options{})
	ann, bob := signedIn(t, e, "ann@example.com"), signedIn(t, e, "bob@example.com")
	create := func(s session, key, name string) *apptest.Resp {
		return e.Do(apptest.Req{Method: "POST", Path: "/api/organizations", Body: map[string]string{"name": name}, Key: "-",
			Headers: map[string]string{"Cookie": "svc_session=" + s.cookie, "Origin": e.URL, "Idempotency-Key": key}})
	}
	r := create(ann, "o-1", "Desk One")
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	o := r.Map(t)["organization"].(map[string]any)
	if o["role"] != "owner" || o["name"] != "Desk One" {
		t.Fatalf("organization %v", o)
	}
	id := o["id"].(string)
	if r := create(ann, "o-1", "Desk One"); r.Status != 201 || r.Map(t)["organization"].(map[string]any)["id"] != id {
		t.Fatalf("a retry made another organization: %s", r.Body)
	}
	code(t, create(ann, "o-1", "Another"), 409, "idempotency_conflict")

	// Bob cannot see it, nor invite into it; Ann invites him.
	code(t, bob.do("GET", "/api/organizations/"+id+"/members", nil), 404, "not_found")
	code(t, bob.do("POST", "/api/organizations/"+id+"/invitations/accept", nil), 404, "not_found")
	if r := ann.do("POST", "/api/organizations/"+id+"/members", map[string]string{"email": "Bob@Example.com", "role": "member"}); r.Status != 201 {
		t.Fatalf("invite: %d %s", r.Status, r.Body)
	}
	if m, _, err := mail.Latest(filepath.Join(e.DataDir, "mail"), "bob@example.com"); err != nil || m.Subject != "You are invited to Desk One" {
		t.Fatalf("invitation mail: %v %q", err, m.Subject)
	}
	r = bob.do("POST", "/api/organizations/"+id+"/invitations/accept", nil)
	if r.Status != 200 || r.Map(t)["organization"].(map[string]any)["role"] != "member" {
		t.Fatalf("accept: %d %s", r.Status, r.Body)
	}
	if r := bob.do("GET", "/api/organizations", nil); len(r.Map(t)["organizations"].([]any)) != 1 {
		t.Fatalf("bob's organizations: %s", r.Body)
	}
	// A member invites nobody and removes nobody else; the last owner stays.
	code(t, bob.do("POST", "/api/organizations/"+id+"/members", map[string]string{"email": "c@example.com", "role": "reader"}), 403, "permission_denied")
	annID := ann.do("GET", "/api/auth/me", nil).Map(t)["user"].(map[string]any)["id"].(string)
	bobID := bob.do("GET", "/api/auth/me", nil).Map(t)["user"].(map[string]any)["id"].(string)
	code(t, bob.do("DELETE", "/api/organizations/"+id+"/members/"+annID, nil), 403, "permission_denied")
	code(t, ann.do("DELETE", "/api/organizations/"+id+"/members/"+annID, nil), 409, "last_owner")
	r = ann.do("GET", "/api/organizations/"+id+"/members", nil)
	if len(r.Map(t)["members"].([]any)) != 2 {
		t.Fatalf("members: %s", r.Body)
	}
	if r := ann.do("DELETE", "/api/organizations/"+id+"/members/"+bobID, nil); r.Status != 204 {
		t.Fatalf("remove: %d %s", r.Status, r.Body)
	}
	code(t, bob.do("GET", "/api/organizations/"+id+"/members", nil), 404, "not_found")
	// A key never reaches these routes.
	code(t, e.Do(apptest.Req{Method: "GET", Path: "/api/organizations"}), 403, "permission_denied")
}

// The identity read models (users, sessions, keys, organizations, plans) in
// PostgreSQL: the same answers as in memory, and a restart keeps them.
func TestIdentityOnPostgres(t *testing.T) {
	e := apptest.Start(t, apptest.Options{Postgres: true})
	cookie := e.SignIn("pg@example.com", "a long enough password")
	r := e.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/keys", Body: map[string]any{"name": "pg", "expiresAt": "2099-01-01T00:00:00Z"}})
	if r.Status != 201 {
		t.Fatalf("key: %d %s", r.Status, r.Body)
	}
	var issued struct {
		Key    struct{ ID, ExpiresAt string }
		Secret string
	}
	r.JSON(t, &issued)
	if issued.Key.ExpiresAt != "2099-01-01T00:00:00Z" {
		t.Fatalf("expiresAt %q", issued.Key.ExpiresAt)
	}
	if r := e.AsSession(cookie, apptest.Req{Method: "POST", Path: "/api/organizations", Body: map[string]string{"name": "PG desk"}}); r.Status != 201 {
		t.Fatalf("org: %d %s", r.Status, r.Body)
	}
	if r := e.Do(apptest.Req{Method: "POST", Path: "/api/exit-plans", Body: ladder, Key: issued.Secret}); r.Status != 201 {
		t.Fatalf("plan: %d %s", r.Status, r.Body)
	}
	e = e.Restart()
	if r := e.AsSession(cookie, apptest.Req{Method: "GET", Path: "/api/organizations"}); r.Status != 200 || len(r.Map(t)["organizations"].([]any)) != 1 {
		t.Fatalf("after a restart, organizations: %d %s", r.Status, r.Body)
	}
	if r := e.Do(apptest.Req{Method: "GET", Path: "/api/exit-plans", Key: issued.Secret}); r.Status != 200 || len(r.Map(t)["plans"].([]any)) != 1 {
		t.Fatalf("after a restart, plans: %d %s", r.Status, r.Body)
	}
	if r := e.AsSession(cookie, apptest.Req{Method: "DELETE", Path: "/api/keys/" + issued.Key.ID}); r.Status != 204 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	code(t, e.Do(apptest.Req{Method: "GET", Path: "/api/account/list", Key: issued.Secret}), 401, "invalid_key")
}

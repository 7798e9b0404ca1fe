package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	netmail "net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/engine/mail"
)

// The engine tells anonymous clients apart by their TCP peer address (it
// reads no X-Forwarded-For). Every 127.0.0.0/8 address reaches a loopback
// listener, so these attacks come from as many addresses as they need.

// peer calls the engine from one loopback source address.
type peer struct {
	t    *testing.T
	base string
	c    *http.Client
}

// from makes a peer whose requests leave from ip (a 127.x.y.z address).
func from(t *testing.T, base, ip string) peer {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return peer{t: t, base: base, c: &http.Client{Timeout: 15 * time.Second, Transport: tr}}
}

// reply is one response: its status, its headers and its JSON body.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	took   time.Duration
}

func (a reply) code() string { c, _ := a.body["code"].(string); return c }

// do sends a JSON request with the headers (Origin: the engine's own when a cookie is sent).
func (p peer) do(method, path string, body any, headers ...string) reply {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	resp, err := p.c.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return reply{status: resp.StatusCode, header: resp.Header, body: m, took: took}
}

// refusedAsRateLimited fails unless a is 429 rate_limited with a Retry-After.
func refusedAsRateLimited(t *testing.T, what string, a reply) {
	t.Helper()
	if a.status != http.StatusTooManyRequests || a.code() != "rate_limited" || a.header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d %v (Retry-After %q), want 429 rate_limited with Retry-After", what, a.status, a.body, a.header.Get("Retry-After"))
	}
}

// mailsTo counts the mail files addressed to addr.
func mailsTo(t *testing.T, dir, addr string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "mail"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, "mail", e.Name()))
		if err != nil {
			continue
		}
		m, err := netmail.ReadMessage(f)
		if err == nil {
			if to, err := netmail.ParseAddress(m.Header.Get("To")); err == nil && strings.EqualFold(to.Address, addr) {
				n++
			}
		}
		f.Close()
	}
	return n
}

const attackPassword = "a long enough password"

// Issue 41, item 12: anonymous identity routes are throttled per address
// mailed and per client address, and reply 429 rate_limited with
// Retry-After beyond; nothing is mailed then.
func TestIdentityRoutesAreThrottled(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)

	t.Run("25 password resets for one victim", func(t *testing.T) {
		const victim = "victim@attack.example"
		if a := from(t, p.base, "127.0.1.1").do("POST", "/api/auth/signup", map[string]string{"email": victim, "password": attackPassword}); a.status != 201 {
			t.Fatalf("signup: %d %v", a.status, a.body)
		}
		accepted := 0
		for i := range 25 {
			// Each from another address: the bound is the victim's, not the sender's.
			a := from(t, p.base, fmt.Sprintf("127.0.2.%d", i+1)).do("POST", "/api/auth/password-reset", map[string]string{"email": victim})
			switch a.status {
			case http.StatusAccepted:
				accepted++
			default:
				refusedAsRateLimited(t, fmt.Sprintf("reset %d", i+1), a)
			}
		}
		if accepted != 4 { // the sign-up's mail and four resets: five mails to one address
			t.Fatalf("%d of 25 resets for one address accepted, want 4", accepted)
		}
		enginetest.WaitFor(t, 10*time.Second, func() error {
			if n := mailsTo(t, dir, victim); n != 5 {
				return fmt.Errorf("%d mails to the victim, want 5 (a sign-up and four resets)", n)
			}
			return nil
		})
	})

	t.Run("20 sign-ups naming a victim's address", func(t *testing.T) {
		const victim = "victim2@attack.example"
		created := 0
		for i := range 20 {
			a := from(t, p.base, fmt.Sprintf("127.0.3.%d", i+1)).do("POST", "/api/auth/signup", map[string]string{"email": victim, "password": attackPassword})
			switch a.status {
			case http.StatusCreated:
				created++
			default:
				refusedAsRateLimited(t, fmt.Sprintf("sign-up %d", i+1), a)
			}
		}
		if created != 5 {
			t.Fatalf("%d of 20 sign-ups naming one address answered 201, want 5", created)
		}
		if n := mailsTo(t, dir, victim); n != 5 {
			t.Fatalf("%d mails to the victim, want 5", n)
		}
	})

	t.Run("30 sign-ups from one address", func(t *testing.T) {
		one := from(t, p.base, "127.0.4.1")
		for i := range 30 {
			a := one.do("POST", "/api/auth/signup", map[string]string{"email": fmt.Sprintf("bulk%d@attack.example", i), "password": attackPassword})
			if i < 20 && a.status != http.StatusCreated {
				t.Fatalf("sign-up %d: %d %v", i+1, a.status, a.body)
			}
			if i >= 20 {
				refusedAsRateLimited(t, fmt.Sprintf("sign-up %d from one address", i+1), a)
				if n := mailsTo(t, dir, fmt.Sprintf("bulk%d@attack.example", i)); n != 0 {
					t.Fatalf("a refused sign-up mailed %d times", n)
				}
			}
		}
		// Another address is not held back by that one.
		if a := from(t, p.base, "127.0.4.2").do("POST", "/api/auth/signup", map[string]string{"email": "other@attack.example", "password": attackPassword}); a.status != 201 {
			t.Fatalf("a sign-up from another address: %d %v", a.status, a.body)
		}
	})
}

// Issue 41, item 12: password hashing runs in a bounded number of slots, so
// a storm of parallel sign-ins leaves another tenant's orders fast (it
// pushed their p99 from 1 ms to 401 ms), and a sign-in that finds no slot
// in time is a retry-safe 503 engine_overloaded with Retry-After.
func TestSignInStormLeavesOrdersFast(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	c := readCreds(t, dir)
	place := func(coid string) time.Duration {
		t.Helper()
		start := time.Now()
		st, body, err := call(p.base, c.TradingKey, "POST", "/api/trading/order",
			map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": "buy", "orderType": "limit", "quantity": "0.01", "limitPrice": "1000"})
		if err != nil || st != 200 {
			t.Fatalf("order %s: %d %s %v", coid, st, body, err)
		}
		return time.Since(start)
	}
	for i := range 5 { // warm up
		place(fmt.Sprintf("warm-%d", i))
	}

	const signIns = 32
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]int{}
	)
	stop := make(chan struct{})
	for i := range signIns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each from its own address, under the address's back-off, and a new email each time.
			q := from(t, p.base, fmt.Sprintf("127.0.5.%d", i+1))
			for n := range 20 {
				select {
				case <-stop:
					return
				default:
				}
				a := q.do("POST", "/api/auth/login", map[string]string{"email": fmt.Sprintf("storm%d-%d@attack.example", i, n), "password": "not the password at all"})
				key := fmt.Sprintf("%d %s", a.status, a.code())
				if a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") == "" {
					key += " without Retry-After"
				}
				mu.Lock()
				answers[key]++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the storm builds up
	var took []time.Duration
	for i := range 40 {
		took = append(took, place(fmt.Sprintf("storm-%d", i)))
	}
	close(stop)
	wg.Wait()
	slices.Sort(took)
	median, p90 := took[len(took)/2], took[len(took)*9/10]
	t.Logf("orders during %d parallel sign-ins: median %v, p90 %v, max %v; sign-in answers %v", signIns, median, p90, took[len(took)-1], answers)
	for k := range answers {
		if k != "401 invalid_credentials" && k != "503 engine_overloaded" && k != "429 rate_limited" {
			t.Fatalf("a sign-in in the storm answered %q (answers %v)", k, answers)
		}
	}
	if median > 50*time.Millisecond {
		t.Fatalf("orders during the sign-in storm: median %v, p90 %v; want a median under 50ms", median, p90)
	}
}

// Issue 41, item 13: failed sign-ins count per account and address together
// and per address: failures at one address never lock the owner out at
// another, and a few failures of other people at an address never lock out
// a correct password there; many failures from one address still do.
func TestSignInBackOffIsPerAddress(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	const owner = "owner@attack.example"
	if a := from(t, p.base, "127.0.6.1").do("POST", "/api/auth/signup", map[string]string{"email": owner, "password": attackPassword}); a.status != 201 {
		t.Fatalf("signup: %d %v", a.status, a.body)
	}
	good := map[string]string{"email": owner, "password": attackPassword}
	wrong := map[string]string{"email": owner, "password": "a wrong password here"}

	attacker := from(t, p.base, "127.0.6.2")
	for i := range 6 {
		if a := attacker.do("POST", "/api/auth/login", wrong); a.status != 401 {
			t.Fatalf("wrong password %d: %d %v", i+1, a.status, a.body)
		}
	}
	refusedAsRateLimited(t, "the attacker's seventh try", attacker.do("POST", "/api/auth/login", wrong))
	if a := from(t, p.base, "127.0.6.3").do("POST", "/api/auth/login", good); a.status != 200 {
		t.Fatalf("the owner from a clean address after an attacker's 6 failures elsewhere: %d %v", a.status, a.body)
	}

	office := from(t, p.base, "127.0.6.4")
	for i := range 6 {
		a := office.do("POST", "/api/auth/login", map[string]string{"email": fmt.Sprintf("colleague%d@attack.example", i), "password": "a wrong password here"})
		if a.status != 401 {
			t.Fatalf("a colleague's failure %d: %d %v", i+1, a.status, a.body)
		}
	}
	if a := office.do("POST", "/api/auth/login", good); a.status != 200 {
		t.Fatalf("the owner's correct password at an address where 6 others failed: %d %v", a.status, a.body)
	}

	// Credential stuffing from one address is still held back.
	stuffer := from(t, p.base, "127.0.6.5")
	for i := range 21 {
		a := stuffer.do("POST", "/api/auth/login", map[string]string{"email": fmt.Sprintf("guess%d@attack.example", i), "password": "a wrong password here"})
		if a.status != 401 {
			t.Fatalf("stuffing try %d: %d %v", i+1, a.status, a.body)
		}
	}
	refusedAsRateLimited(t, "a 22nd failure from one address", stuffer.do("POST", "/api/auth/login", map[string]string{"email": "guess99@attack.example", "password": "x wrong password"}))
}

// Issue 41, item 11: a password reset and a new verification link reply in
// the same time whether or not the address has an account (they took
// 1.6-2.2 ms for a registered address and 0.4-0.5 ms for an unknown one).
func TestResetAndResendTakeTheSameTimeForEveryAddress(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	const users = 20
	known := make([]string, users)
	for i := range known {
		known[i] = fmt.Sprintf("known%d@attack.example", i)
		src := fmt.Sprintf("127.0.7.%d", i/10+1) // ten sign-ups from each address
		if a := from(t, p.base, src).do("POST", "/api/auth/signup", map[string]string{"email": known[i], "password": attackPassword}); a.status != 201 {
			t.Fatalf("signup %s: %d %v", known[i], a.status, a.body)
		}
	}
	// A round whose medians differ by more than the bound is measured again,
	// up to three rounds: a machine busy with other tests (CI runs packages
	// side by side) can slow one side of a single round, while a difference
	// the handler makes shows in every round.
	const rounds = 3
	for k, path := range []string{"/api/auth/password-reset", "/api/auth/verify/resend"} {
		for round := range rounds {
			m, n := resetTimes(t, p.base, path, known, 10*(rounds*k+round))
			t.Logf("%s: median %v for a registered address, %v for an unknown one", path, m, n)
			if m <= 2*n+200*time.Microsecond && n <= 2*m+200*time.Microsecond {
				break
			}
			if round == rounds-1 {
				t.Fatalf("%s: median %v for a registered address, %v for an unknown one; want them within a factor of 2 (in any of %d rounds)", path, m, n, rounds)
			}
		}
	}
	// The work was done after the answers: the registered addresses got their links.
	enginetest.WaitFor(t, 10*time.Second, func() error {
		m, _, err := mail.Latest(filepath.Join(dir, "mail"), known[users-1])
		if err != nil || m.Subject != "Verify your email address" || !strings.Contains(m.Text, "/verify-email?token=") {
			return fmt.Errorf("the last resend's mail: %v %+v", err, m)
		}
		return nil
	})
	if n := mailsTo(t, dir, "unknown0-0@attack.example") + mailsTo(t, dir, "unknown1-0@attack.example"); n != 0 {
		t.Fatalf("an unknown address got %d mails", n)
	}
}

// Issue 41, item 15: a user makes at most 10 organizations and an
// organization holds at most 20 venues (42 and 23 were made); a retry of the
// last one made still answers it.
func TestOrganizationAndVenueCaps(t *testing.T) {
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	const email = "many@attack.example"
	q := from(t, p.base, "127.0.9.1")
	if a := q.do("POST", "/api/auth/signup", map[string]string{"email": email, "password": attackPassword}); a.status != 201 {
		t.Fatalf("signup: %d %v", a.status, a.body)
	}
	msg, _, err := mail.Latest(filepath.Join(dir, "mail"), email)
	tok, ok := mail.Token(msg.Text)
	if err != nil || !ok {
		t.Fatalf("no verification mail: %v", err)
	}
	if a := q.do("POST", "/api/auth/verify", map[string]string{"token": tok, "password": attackPassword}); a.status != 200 {
		t.Fatalf("verify: %d %v", a.status, a.body)
	}
	login := q.do("POST", "/api/auth/login", map[string]string{"email": email, "password": attackPassword})
	var cookie string
	for _, c := range (&http.Response{Header: login.header}).Cookies() {
		if c.Name == "svc_session" {
			cookie = c.Value
		}
	}
	if login.status != 200 || cookie == "" {
		t.Fatalf("login: %d %v", login.status, login.body)
	}
	as := func(method, path, idem string, body any) reply {
		t.Helper()
		return q.do(method, path, body, "Cookie", "svc_session="+cookie, "Origin", p.base, "Idempotency-Key", idem)
	}

	var orgs []string
	for i := range 10 {
		a := as("POST", "/api/organizations", fmt.Sprintf("org-%d", i), map[string]string{"name": fmt.Sprintf("Org %d", i)})
		if a.status != 201 {
			t.Fatalf("organization %d: %d %v", i+1, a.status, a.body)
		}
		orgs = append(orgs, a.body["organization"].(map[string]any)["id"].(string))
	}
	a := as("POST", "/api/organizations", "org-10", map[string]string{"name": "Org 10"})
	if a.status != http.StatusConflict || a.code() != "organization_limit_reached" {
		t.Fatalf("the 11th organization: %d %v, want 409 organization_limit_reached", a.status, a.body)
	}
	if a := as("POST", "/api/organizations", "org-9", map[string]string{"name": "Org 9"}); a.status != 201 || a.body["organization"].(map[string]any)["id"] != orgs[9] {
		t.Fatalf("a retry of the 10th organization: %d %v", a.status, a.body)
	}
	if a := as("GET", "/api/organizations", "", nil); len(a.body["organizations"].([]any)) != 10 {
		t.Fatalf("organizations listed: %v", a.body)
	}

	var last any
	for i := range 20 {
		a := as("POST", "/api/back-office/venues", fmt.Sprintf("venue-%d", i), map[string]string{"orgId": orgs[0], "name": fmt.Sprintf("Venue %d", i)})
		if a.status != 201 {
			t.Fatalf("venue %d: %d %v", i+1, a.status, a.body)
		}
		last = a.body["venue"]
	}
	a = as("POST", "/api/back-office/venues", "venue-20", map[string]string{"orgId": orgs[0], "name": "Venue 20"})
	if a.status != http.StatusConflict || a.body["error"] != "venue_limit_reached" {
		t.Fatalf("the 21st venue: %d %v, want 409 venue_limit_reached", a.status, a.body)
	}
	if a := as("POST", "/api/back-office/venues", "venue-19", map[string]string{"orgId": orgs[0], "name": "Venue 19"}); a.status != 201 ||
		fmt.Sprint(a.body["venue"]) != fmt.Sprint(last) {
		t.Fatalf("a retry of the 20th venue: %d %v", a.status, a.body)
	}
	// Another organization has room of its own.
	if a := as("POST", "/api/back-office/venues", "venue-other", map[string]string{"orgId": orgs[1], "name": "Elsewhere"}); a.status != 201 {
		t.Fatalf("a venue of another organization: %d %v", a.status, a.body)
	}
}

// resetTimes is the median time of path's answer for the registered
// addresses known and for as many unknown ones, in pairs from fresh source
// addresses (127.0.8.base+1 and on, ten pairs each, on one connection),
// interleaved and in turns first, so both see the same machine.
func resetTimes(t *testing.T, base, path string, known []string, at int) (registered, unknown time.Duration) {
	t.Helper()
	var mine, none []time.Duration
	var q peer
	for i := range known {
		if i%10 == 0 {
			q = from(t, base, fmt.Sprintf("127.0.8.%d", at+i/10+1))
			q.do("GET", "/healthz", nil)
		}
		var a, b reply
		knownBody := map[string]string{"email": known[i]}
		other := map[string]string{"email": fmt.Sprintf("unknown%d-%d@attack.example", at, i)}
		if i%2 == 0 {
			a, b = q.do("POST", path, knownBody), q.do("POST", path, other)
		} else {
			b, a = q.do("POST", path, other), q.do("POST", path, knownBody)
		}
		if a.status != 202 || b.status != 202 {
			t.Fatalf("%s: %d %v, %d %v", path, a.status, a.body, b.status, b.body)
		}
		mine, none = append(mine, a.took), append(none, b.took)
	}
	slices.Sort(mine)
	slices.Sort(none)
	return mine[len(mine)/2], none[len(none)/2]
}

package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/sim/binance"
)

// simDoor serves a simulator on a fixed address that a test can take down
// (connections refused: the exchange is unreachable) and bring back, or
// make hang (requests are taken and never answered nor handled: the
// exchange is reachable and silent).
type simDoor struct {
	t    *testing.T
	sim  *binance.Sim
	addr string

	mu      sync.Mutex
	srv     *http.Server
	hang    atomic.Bool
	release chan struct{}
	// keyed, when set, drops every request that carries an API key (the
	// account's calls) unanswered and unhandled, the public ones (exchange
	// information, prices) served: a session cannot open.
	keyed atomic.Bool
}

func newSimDoor(t *testing.T, sim *binance.Sim) *simDoor {
	d := &simDoor{t: t, sim: sim, addr: freePort(t), release: make(chan struct{})}
	sim.SetBaseURL("http://" + d.addr)
	d.up()
	t.Cleanup(d.down)
	return d
}

func (d *simDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.keyed.Load() && r.Header.Get("X-MBX-APIKEY") != "" {
		panic(http.ErrAbortHandler)
	}
	if d.hang.Load() {
		d.mu.Lock()
		release := d.release
		d.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
		panic(http.ErrAbortHandler) // the connection closes unanswered; the simulator never saw it
	}
	d.sim.ServeHTTP(w, r)
}

// up listens on the door's address again.
func (d *simDoor) up() {
	d.t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", d.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		d.t.Fatal(err)
	}
	srv := &http.Server{Handler: d}
	d.mu.Lock()
	d.srv = srv
	d.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.t.Log(err)
		}
	}()
}

// down closes the listener and every connection, the streams with them.
func (d *simDoor) down() {
	d.mu.Lock()
	srv := d.srv
	d.srv = nil
	d.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	d.sim.Restart() // the user streams (hijacked connections) drop too
}

// silent makes every request hang unanswered (on) or ends it (off: the
// hung requests close unanswered).
func (d *simDoor) silent(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hang.Store(on)
	if !on {
		close(d.release)
		d.release = make(chan struct{})
	}
}

// behindDoor is an engine with a trader's Binance account linked, the
// simulator served behind a door the test opens and shuts.
type behindDoor struct {
	sim                 *binance.Sim
	door                *simDoor
	p                   *proc
	bin, dir, addr, key string
	q                   string // the query naming the account
	env                 []string
	accountID, apiKey   string
}

// linkedBehindDoor starts the simulator with the account of apiKey and
// secret behind a door, the engine, a signed-in trader, and links it.
func linkedBehindDoor(t *testing.T, apiKey, secret string) *behindDoor {
	t.Helper()
	e := &behindDoor{sim: binance.New(binance.Options{}), apiKey: apiKey}
	t.Cleanup(func() { _ = e.sim.Close() })
	if err := e.sim.AddAccount(binance.Account{APIKey: apiKey, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	e.door = newSimDoor(t, e.sim)
	e.bin, e.dir, e.addr, e.env = build(t), t.TempDir(), freePort(t), providerEnv(t, e.sim)
	e.p = start(t, e.bin, e.dir, e.addr, e.env...)
	b, key := signedIn(t, e.p, e.dir, "trader@example.com")
	e.key = key
	e.accountID, e.q = linkBinance(t, e.p, b, apiKey, secret)
	return e
}

// order is a limit buy below the market with clientOrderId id.
func (e *behindDoor) order(id string) map[string]any {
	return map[string]any{"clientOrderId": id, "instrument": "BTCUSDT", "side": "buy", "orderType": "limit",
		"quantity": "0.002", "limitPrice": "55000"}
}

// count is how many orders of clientOrderId id the exchange took.
func (e *behindDoor) count(id string) int {
	return e.sim.OrdersByClientID(e.apiKey, provider.ClientOrderID(e.accountID, id))
}

// The exchange goes away twice while a trader places orders on a linked
// Binance account, and comes back each time; every order ends at the
// exchange exactly once.
//
//   - Unreachable (connections refused): nothing can have been sent, so the
//     engine answers 503 provider_unavailable with Retry-After: 1; the
//     retry with the same clientOrderId once the exchange is back places it.
//   - Silent (the request is written and never answered): the order may
//     rest there, so the engine answers 503 outcome_unknown without
//     Retry-After; the exchange comes back without having taken it, the
//     reactor's lookups find nothing and settle it as never placed after
//     the exchange's receive window, and the retry with the same
//     clientOrderId places it then, once.
func TestProviderExchangeDown(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	e := linkedBehindDoor(t, "downKEY0001unreachable", "downSECRET0001unreachable")
	sim, door, p, key, q, order, count := e.sim, e.door, e.p, e.key, e.q, e.order, e.count
	// settle retries the order with the same clientOrderId, as a client
	// does, until a definite answer, waiting Retry-After when given.
	settle := func(id string) (int, map[string]any) {
		t.Helper()
		var last rawAnswer
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			last = rawCall(t, p.base, key, "/api/trading/order"+q, order(id))
			if last.status != 503 {
				return last.status, jsonOf(t, last.body)
			}
			wait := 200 * time.Millisecond
			if s, err := strconv.Atoi(last.retryAfter); err == nil {
				wait = time.Duration(s) * time.Second
			}
			time.Sleep(wait)
		}
		t.Fatalf("%s not settled in 30 s: %d %s", id, last.status, last.body)
		return 0, nil
	}

	if st, m := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, order("up-1")); st != 200 {
		t.Fatalf("an order with the exchange up: %d %v", st, m)
	}

	// Throttled: the exchange answers 429 with Retry-After 3 and refuses
	// the key so long; the engine answers its own code with the wait, and
	// sends nothing more until it ends.
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Times: 1, Throttle: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"busy-1", "busy-2"} {
		a := rawCall(t, p.base, key, "/api/trading/order"+q, order(id))
		m := jsonOf(t, a.body)
		params, _ := m["params"].(map[string]any)
		if ra, _ := strconv.Atoi(a.retryAfter); a.status != 503 || m["code"] != "provider_rate_limited" || ra < 2 || ra > 3 || params["provider"] != "binance-futures" {
			t.Fatalf("%s under the exchange's limit: %d Retry-After %q %s", id, a.status, a.retryAfter, a.body)
		}
		if n := count(id); n != 0 {
			t.Fatalf("the exchange holds %d of %s while its limit holds", n, id)
		}
	}
	if st, m := settle("busy-2"); st != 200 || count("busy-2") != 1 {
		t.Fatalf("busy-2 once the limit ended: %d %v, the exchange holds %d", st, m, count("busy-2"))
	}

	// Unreachable: refused before anything was written.
	door.down()
	time.Sleep(300 * time.Millisecond) // the engine's pooled connections see the close
	a := rawCall(t, p.base, key, "/api/trading/order"+q, order("down-1"))
	if a.status != 503 || jsonOf(t, a.body)["code"] != "provider_unavailable" || a.retryAfter != "1" {
		t.Fatalf("the exchange unreachable: %d %q %s", a.status, a.retryAfter, a.body)
	}
	if n := count("down-1"); n != 0 {
		t.Fatalf("the exchange holds %d of down-1 while unreachable", n)
	}
	door.up()
	if st, m := settle("down-1"); st != 200 {
		t.Fatalf("down-1 once the exchange is back: %d %v", st, m)
	}
	if n := count("down-1"); n != 1 {
		t.Fatalf("the exchange holds %d of down-1, want 1", n)
	}

	// Silent: the request is written and never answered.
	door.silent(true)
	a = rawCall(t, p.base, key, "/api/trading/order"+q, order("silent-1"))
	if a.status != 503 || jsonOf(t, a.body)["code"] != "outcome_unknown" || a.retryAfter != "" {
		t.Fatalf("the exchange silent: %d %q %s", a.status, a.retryAfter, a.body)
	}
	door.silent(false)
	began := time.Now()
	if st, m := settle("silent-1"); st != 200 {
		t.Fatalf("silent-1 once the exchange answers: %d %v", st, m)
	}
	if n := count("silent-1"); n != 1 {
		t.Fatalf("the exchange holds %d of silent-1, want 1", n)
	}
	if n := count("up-1"); n != 1 {
		t.Fatalf("the exchange holds %d of up-1, want 1", n)
	}
	t.Logf("silent-1 settled and placed once %s after the exchange answered again", time.Since(began).Round(100*time.Millisecond))
}

// A trader's own linked account has no venue, so no venue operator
// reaches its reconciliation_hold: the engine's own operator releases it
// with engine admin release-hold over the running engine's admin socket.
// A position no visible order explains holds the account (423 on an
// addition); the release is recorded and the next order is accepted, and
// the following reconciliations, which see the observed position as the
// log's, do not hold it again.
func TestProviderOperatorReleasesHold(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	const k, s = "holdKEY0001adminrelease", "holdSECRET0001adminrelease"
	sim, p, key, q, accountID, dir := linkedSim(t, k, s, "ENGINE_PROVIDER_RECONCILE_EVERY=1s")
	cutStream(t, sim, 2*time.Second)
	if _, err := sim.PlaceOutside(k, map[string]string{"symbol": "BTCUSDT", "side": "BUY", "type": "MARKET", "quantity": "0.03"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	var st int
	var m map[string]any
	place := func() (int, map[string]any) {
		n++
		return doJSON(t, p.base, key, "POST", "/api/trading/order"+q, map[string]any{"clientOrderId": fmt.Sprintf("probe-%d", n),
			"instrument": "BTCUSDT", "side": "buy", "orderType": "limit", "quantity": "0.002", "limitPrice": "55000"})
	}
	waitUntil(t, 15*time.Second, func() bool { st, m = place(); return st == 423 }, func() any { return m })
	if m["code"] != "reconciliation_hold" {
		t.Fatalf("an addition under the hold: %d %v", st, m)
	}

	bin, env := build(t), []string{"ENGINE_DATA_DIR=" + dir}
	out, code := run(t, bin, env, "admin", "release-hold", "-account", accountID, "-email", "Ops@Host.example")
	if code != 0 {
		t.Fatalf("release-hold: exit %d\n%s", code, out)
	}
	if r := releaseLine(t, out); r["accountId"] != accountID || r["released"] != true || r["by"] != "ops@host.example" {
		t.Fatalf("release-hold printed %v", r)
	}
	if st, m := place(); st != 200 {
		t.Fatalf("an addition after the release: %d %v", st, m)
	}
	time.Sleep(2500 * time.Millisecond) // two periodic reconciliations
	if st, m := place(); st != 200 {
		t.Fatalf("an addition after the next reconciliations: %d %v", st, m)
	}
	_, f := doJSON(t, p.base, key, "GET", "/api/account/snapshot"+q, nil)
	if hs, _ := f["holds"].([]any); len(hs) != 0 {
		t.Fatalf("holds after the release: %v", hs)
	}
	// Again: nothing held, answered released false; an unknown account is refused.
	out, code = run(t, bin, env, "admin", "release-hold", "-account", accountID)
	if r := releaseLine(t, out); code != 0 || r["released"] != false || r["by"] != "admin" {
		t.Fatalf("a second release-hold: exit %d\n%s", code, out)
	}
	out, code = run(t, bin, env, "admin", "release-hold", "-account", "acc_no_such_account")
	wantRefused(t, "release-hold of an unknown account", out, code, "not found")
	out, code = run(t, bin, env, "admin", "release-hold")
	wantRefused(t, "release-hold without an account", out, code, "-account is required")
}

// releaseLine is the JSON line engine admin release-hold printed.
func releaseLine(t *testing.T, out string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["action"] == "release-hold" {
			return m
		}
	}
	t.Fatalf("engine admin release-hold printed no action line:\n%s", out)
	return nil
}

// An engine started while the exchange takes none of the account's calls
// cannot open the linked account's session. An order placed then is answered at once that
// nothing was placed (503 provider_unavailable, Retry-After 1), and it is
// never sent later: when the exchange comes back and the session opens,
// the exchange still holds none of it, and the trader's retry with the
// same clientOrderId places it once. Sent when the session came, it would
// have been carried out long after its answer, and after a lookup could
// have settled it as never placed.
func TestProviderDownAtStartNeverSendsLate(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	e := linkedBehindDoor(t, "lateKEY0001neversentlate", "lateSECRET0001neversentlate")
	door, p, key, q, order, count := e.door, e.p, e.key, e.q, e.order, e.count
	bin, dir, addr, env := e.bin, e.dir, e.addr, e.env
	if st, m := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, order("before-1")); st != 200 {
		t.Fatalf("an order with the exchange up: %d %v", st, m)
	}

	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	door.keyed.Store(true)
	p = start(t, bin, dir, addr, env...)
	began := time.Now()
	a := rawCall(t, p.base, key, "/api/trading/order"+q, order("late-1"))
	if a.status != 503 || jsonOf(t, a.body)["code"] != "provider_unavailable" || a.retryAfter != "1" {
		t.Fatalf("an order with no session: %d %q %s\n%s", a.status, a.retryAfter, a.body, p.out)
	}
	if took := time.Since(began); took > 4*time.Second {
		t.Fatalf("the answer took %s: it waited for the exchange", took)
	}
	door.keyed.Store(false)
	// The session opens: an order of another id goes through it.
	waitUntil(t, 20*time.Second, func() bool {
		st, _ := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, order("after-1"))
		return st == 200
	}, func() any { return p.out.String() })
	time.Sleep(500 * time.Millisecond)
	if n := count("late-1"); n != 0 {
		t.Fatalf("the exchange holds %d of late-1: it was sent when the session opened", n)
	}
	if st, m := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, order("late-1")); st != 200 {
		t.Fatalf("late-1's retry: %d %v", st, m)
	}
	for _, id := range []string{"before-1", "late-1", "after-1"} {
		if n := count(id); n != 1 {
			t.Fatalf("the exchange holds %d of %s, want 1", n, id)
		}
	}

	// A restart while the exchange is unreachable altogether (its
	// maintenance): the engine starts with the instruments it read before,
	// answers that nothing can be placed, and trades again once the
	// exchange is back.
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	door.down()
	p = start(t, bin, dir, addr, env...)
	if !strings.Contains(p.out.String(), "starting with those read earlier") {
		t.Fatalf("the start did not say it used the instruments read earlier:\n%s", p.out)
	}
	if a := rawCall(t, p.base, key, "/api/trading/order"+q, order("down-1")); a.status != 503 || jsonOf(t, a.body)["code"] != "provider_unavailable" {
		t.Fatalf("an order with the exchange unreachable: %d %s", a.status, a.body)
	}
	door.up()
	waitUntil(t, 20*time.Second, func() bool {
		st, _ := doJSON(t, p.base, key, "POST", "/api/trading/order"+q, order("down-1"))
		return st == 200
	}, func() any { return p.out.String() })
	if n := count("down-1"); n != 1 {
		t.Fatalf("the exchange holds %d of down-1, want 1", n)
	}
}

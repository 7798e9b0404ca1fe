package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/provider/tradovate"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/events"
	tradovatesim "github.com/svc/engine/sim/tradovate"
)

// tvPassword is the simulator logins' password: it must never appear in
// anything the engine writes, prints or answers.
const tvPassword = "tvPASSWORDqq42nnNeverInTheLogOrAnswer7"

// startTradovate starts a Tradovate simulator on 127.0.0.1 holding the
// logins (each with tvPassword); it closes with the test.
func startTradovate(t *testing.T, o tradovatesim.Options, logins ...tradovatesim.Login) *tradovatesim.Sim {
	t.Helper()
	sim, err := tradovatesim.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	for _, l := range logins {
		l.Password = tvPassword
		if _, _, err := sim.AddLogin(l); err != nil {
			t.Fatal(err)
		}
	}
	return sim
}

// tradovateEnv is the engine's settings for linking demo logins at sim:
// its demo environment's addresses, private addresses allowed and a
// sealing key of the test's own, then extra.
func tradovateEnv(t *testing.T, sim *tradovatesim.Sim, extra ...string) []string {
	t.Helper()
	keys, err := seal.NewKeySetting("k1")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"ENGINE_TRADOVATE_ENV=demo", "ENGINE_TRADOVATE_DEMO_REST_URL=" + sim.URL(), "ENGINE_TRADOVATE_DEMO_WS_URL=" + sim.WSURL(),
		"ENGINE_TRADOVATE_DEMO_MD_URL=" + sim.MDURL(), "ENGINE_TRADOVATE_CID=8", "ENGINE_TRADOVATE_SEC=app-secret-never-logged",
		"ENGINE_PROVIDER_ALLOW_PRIVATE=1", "ENGINE_SEAL_KEYS=" + keys}, extra...)
}

// recorder keeps every answer the engine gave, to search for the password.
type recorder struct{ bytes.Buffer }

func (r *recorder) keep(m map[string]any) {
	j, _ := json.Marshal(m)
	r.Write(j)
}

// noPassword fails the test when the password is in the engine's output,
// its answers, or any file under its data directory (the log, the read
// models, the vault).
func noPassword(t *testing.T, p *proc, answers *recorder, dir string) {
	t.Helper()
	if strings.Contains(p.out.String(), tvPassword) || bytes.Contains(answers.Bytes(), []byte(tvPassword)) {
		t.Fatalf("the engine's output or answers hold the password")
	}
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(path)
		if bytes.Contains(data, []byte(tvPassword)) {
			t.Errorf("%s holds the password", path)
		}
		return nil
	})
}

// A trader links their Tradovate login (the simulator's demo login holding
// two accounts) with its login name and password, and trades it through the
// engine's HTTP API: a venue's pre-registration of that login cannot be
// linked by hand; a wrong password links nothing; the right one links both
// accounts, listed with clock observation, and the pre-registration the
// provider's answer confirms (login and account), not one naming an
// account the login does not hold; a market order fills and
// the frame shows it (clock observation, the provider's times in force);
// a limit in 32nds rests at its exact price and its cancel answers once the
// provider took it, while one off the product's fraction grid is refused
// before anything is sent; the tokens are renewed mid-session (the
// simulator's tokens live 6 s) and trading goes on; the close flattens; an
// answer lost after the provider accepted settles with one order there.
// Nothing the engine wrote, printed or answered holds the password.
func TestTradovateAccountThroughTheBinary(t *testing.T) {
	sim := startTradovate(t, tradovatesim.Options{TokenLifetime: 6 * time.Second},
		tradovatesim.Login{Name: "tv-trader", Kind: "demo", Accounts: []tradovatesim.AccountSpec{{Name: "DEMO1001"}, {Name: "DEMO1002"}}})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, tradovateEnv(t, sim, "ENGINE_LOG_LEVEL=info")...)
	b, key := signedIn(t, p, dir, "futures@example.com")
	answers := &recorder{}
	do := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		st, raw, err := call(p.base, key, method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		answers.Write(raw)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return st, m
	}
	link := func(body map[string]any) (int, map[string]any) {
		st, m := b.do("POST", "/api/account/providers", body)
		answers.keep(m)
		return st, m
	}

	// A venue pre-registers the trader's Tradovate login by email, login name
	// and account number, and an account that login does not hold; the trader
	// sees both ready to link, and cannot link them by hand: the provider
	// has confirmed no login yet.
	var cr struct {
		PartnerKey string `json:"partnerKey"`
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, "dev-credentials.json")); json.Unmarshal(raw, &cr) != nil || cr.PartnerKey == "" {
		t.Fatalf("dev-credentials.json: %s", raw)
	}
	register := func(accountNumber string) string {
		t.Helper()
		st, m := sendJSON(t, p.base, cr.PartnerKey, "POST", "/api/partner/connect/accounts", nil,
			map[string]any{"email": "futures@example.com", "provider": "tradovate", "loginName": "tv-trader", "accountNumber": accountNumber})
		if st != 200 {
			t.Fatalf("registration: %d %v", st, m)
		}
		return m["registration"].(map[string]any)["id"].(string)
	}
	named, other := register("DEMO1002"), register("DEMO9999")
	registrations := func() map[string]string {
		t.Helper()
		_, m := b.do("GET", "/api/connect/registrations", nil)
		out := map[string]string{}
		for _, r := range m["registrations"].([]any) {
			out[r.(map[string]any)["id"].(string)] = r.(map[string]any)["status"].(string)
		}
		return out
	}
	if st, m := b.do("POST", "/api/connect/registrations/"+named+"/link", nil); st != 409 || m["code"] != "registration_unconfirmed" {
		t.Fatalf("linking a registration by hand before the login: %d %v", st, m)
	}
	if r := registrations(); r[named] != "pending" || r[other] != "pending" {
		t.Fatalf("registrations before the login: %v", r)
	}

	if st, m := link(map[string]any{"provider": "tradovate", "login": "tv-trader", "password": "not-the-password"}); st != 422 ||
		m["code"] != "provider_credentials_refused" {
		t.Fatalf("a wrong password: %d %v", st, m)
	}
	if st, m := link(map[string]any{"provider": "tradovate", "apiKey": "k", "apiSecret": "s"}); st != 422 || m["code"] != "invalid_request" {
		t.Fatalf("a key for a login's provider: %d %v", st, m)
	}
	st, m := link(map[string]any{"provider": "tradovate", "login": "tv-trader", "password": tvPassword, "environment": "demo"})
	if st != 201 {
		t.Fatalf("link: %d %v\n%s", st, m, p.out)
	}
	linked := m["accounts"].([]any)
	if len(linked) != 2 {
		t.Fatalf("linked %v, want the login's two accounts", linked)
	}
	if r := registrations(); r[named] != "linked" || r[other] != "pending" {
		t.Fatalf("registrations once the provider confirmed the login: %v", r)
	}
	ids := map[string]string{} // account id -> account number
	for _, a := range linked {
		a := a.(map[string]any)
		if a["clock"] != "observation" || a["broker"] != "tradovate" || !strings.HasPrefix(a["label"].(string), "Tradovate DEMO100") {
			t.Fatalf("linked account %v", a)
		}
		ids[a["accountId"].(string)] = a["accountNumber"].(string)
	}
	acct := m["account"].(map[string]any)
	accountID := acct["accountId"].(string)
	simAccount := strings.TrimPrefix(acct["label"].(string), "Tradovate ")
	q := "?broker=tradovate&account=" + acct["accountNumber"].(string)

	_, m = do("GET", "/api/account/list", nil)
	listed := 0
	for _, a := range m["accounts"].([]any) {
		if a := a.(map[string]any); ids[a["accountId"].(string)] != "" && a["clock"] == "observation" {
			listed++
		}
	}
	if listed != 2 {
		t.Fatalf("list: %v", m)
	}

	// A market order fills at the provider; the frame shows the position.
	es, zn := sim.FrontContract("ES"), sim.FrontContract("ZN")
	order := func(body map[string]any) (int, map[string]any) {
		t.Helper()
		return do("POST", "/api/trading/order"+q, body)
	}
	if st, m := order(map[string]any{"clientOrderId": "m-1", "instrument": es, "side": "buy", "orderType": "market", "quantity": "1"}); st != 200 {
		t.Fatalf("market order: %d %v\n%s", st, m, p.out)
	}
	frame := func() map[string]any {
		_, f := do("GET", "/api/account/snapshot"+q, nil)
		return f
	}
	position := func(qty string) func() bool {
		return func() bool {
			f := frame()
			ps, _ := f["positions"].([]any)
			if qty == "" {
				return len(ps) == 0
			}
			return f["clock"] == "observation" && len(ps) == 1 && ps[0].(map[string]any)["quantity"] == qty
		}
	}
	waitUntil(t, 5*time.Second, position("1"), func() any { return frame() })
	caps := frame()["capabilities"].(map[string]any)
	tv, err := tradovate.New(tradovate.Options{Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := tv.Capabilities(); !slices.Equal(toStrings(caps["tifs"]), want.TimeInForce) || caps["reduceOnly"] != want.ReduceOnly {
		t.Fatalf("capabilities %v, the provider's %+v", caps, want)
	}
	if sse := streamFrame(t, p.base, key, "/api/account/stream"+q); sse["clock"] != "observation" || len(sse["positions"].([]any)) != 1 {
		t.Fatalf("stream frame %v", sse)
	}

	// Prices in 32nds: ZN is quoted in halves of thirty-seconds (its
	// catalog row's priceFraction 32/2), so 109.515625 (109'16.5) is on its
	// grid and rests exactly as written; 109.51 is not and is refused
	// before anything is sent. A day order is the provider's own.
	if st, m := order(map[string]any{"clientOrderId": "z-0", "instrument": zn, "side": "buy", "orderType": "limit", "quantity": "1",
		"limitPrice": "109.51", "timeInForce": "day"}); st != 422 || m["code"] != "invalid_request" || m["params"].(map[string]any)["field"] != "limitPrice" {
		t.Fatalf("a price off the grid: %d %v", st, m)
	}
	st, m = order(map[string]any{"clientOrderId": "z-1", "instrument": zn, "side": "buy", "orderType": "limit", "quantity": "1",
		"limitPrice": "109.515625", "timeInForce": "day"})
	if st != 200 || m["order"].(map[string]any)["state"] != "working" || m["order"].(map[string]any)["limitPrice"] != "109.515625" {
		t.Fatalf("a limit in 32nds: %d %v", st, m)
	}
	oid := m["order"].(map[string]any)["brokerOrderId"].(string)
	if st, m := do("POST", "/api/trading/cancel"+q, map[string]any{"brokerOrderId": oid}); st != 200 || m["order"].(map[string]any)["state"] != "canceled" {
		t.Fatalf("cancel: %d %v", st, m)
	}
	if n := sim.OrdersByClOrdID(simAccount, provider.ClientOrderID(accountID, "z-1")); n != 1 {
		t.Fatalf("the provider took %d orders of z-1", n)
	}
	if n := sim.OrdersByClOrdID(simAccount, provider.ClientOrderID(accountID, "z-0")); n != 0 {
		t.Fatalf("the provider took %d orders of the refused z-0", n)
	}

	// The tokens live 6 s: the session renews them (each renewal sealed and
	// recorded on the account) and trading goes on well past the first
	// token's life.
	waitUntil(t, 30*time.Second, func() bool { return sim.RequestCount("auth/renewaccesstoken") >= 3 }, func() any { return sim.Requests() })
	if st, m := order(map[string]any{"clientOrderId": "m-2", "instrument": es, "side": "buy", "orderType": "market", "quantity": "1"}); st != 200 {
		t.Fatalf("a market order after renewals: %d %v\n%s", st, m, p.out)
	}
	waitUntil(t, 5*time.Second, position("2"), func() any { return frame() })

	// The close flattens, one point above the entry: 2 contracts of ES at 50
	// a point make 100, which the account's balance shows as the provider's
	// cash reads it.
	avg, err := events.ParseDecimal(frame()["positions"].([]any)[0].(map[string]any)["avgPrice"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetPrice(es, avg.Add(events.Int(1)).String()); err != nil {
		t.Fatal(err)
	}
	if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": es, "clientOrderId": "x-1"}); st != 200 {
		t.Fatalf("close: %d %v", st, m)
	}
	waitUntil(t, 5*time.Second, position(""), func() any { return frame() })
	waitUntil(t, 5*time.Second, func() bool {
		b, _ := events.ParseDecimal(frame()["summary"].(map[string]any)["balance"].(string))
		return b.Cmp(events.Int(50100)) == 0
	}, func() any { return frame()["summary"] })
	// The close's fill realized those 100 itself (Tradovate reports no
	// realized figure with a fill: the engine reckons it on the position
	// before the fill, whether the provider told of the position first).
	if r, _ := events.ParseDecimal(frame()["summary"].(map[string]any)["realizedPnl"].(string)); r.Cmp(events.Int(100)) != 0 {
		t.Fatalf("realized %v, want 100", frame()["summary"])
	}

	// The provider takes the order and the answer is lost: settled by the
	// stream or a lookup, never by sending again.
	if err := sim.AddFault(tradovatesim.Fault{Endpoint: "order/placeorder", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	if st, m := order(map[string]any{"clientOrderId": "u-0", "instrument": es, "side": "buy", "orderType": "market", "quantity": "1"}); st != 200 ||
		m["order"].(map[string]any)["clientOrderId"] != "u-0" {
		t.Fatalf("a dropped answer: %d %v", st, m)
	}
	waitUntil(t, 5*time.Second, position("1"), func() any { return frame() })
	if n := sim.OrdersByClOrdID(simAccount, provider.ClientOrderID(accountID, "u-0")); n != 1 {
		t.Fatalf("the provider took %d orders of u-0, want exactly 1", n)
	}

	// Unlink both, stop, and search everything the engine wrote or printed.
	for id := range ids {
		if st, m := b.do("DELETE", "/api/account/providers/"+id, nil); st != 204 {
			t.Fatalf("unlink: %d %v", st, m)
		}
	}
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	noPassword(t, p, answers, dir)
}

// linkedTradovate starts the binary with a simulator holding one demo
// login of one account, signs a trader in and links the login: the sim,
// the process, the trader's browser and key, the account's query, its id,
// its name at the provider, and the data directory.
func linkedTradovate(t *testing.T, o tradovatesim.Options) (*tradovatesim.Sim, *proc, *browser, string, string, string, string, string) {
	t.Helper()
	sim := startTradovate(t, o, tradovatesim.Login{Name: "tv-kill", Kind: "demo", Accounts: []tradovatesim.AccountSpec{{Name: "DEMO2001"}}})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, tradovateEnv(t, sim)...)
	b, key := signedIn(t, p, dir, "futures@example.com")
	accountID, q := linkProvider(t, p, b, map[string]any{"provider": "tradovate", "login": "tv-kill", "password": tvPassword})
	return sim, p, b, key, q, accountID, "DEMO2001", dir
}

// restart kills the binary with SIGKILL and starts it again on the same
// data directory and address.
func restart(t *testing.T, p *proc, dir string) *proc {
	t.Helper()
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	return start(t, build(t), dir, strings.TrimPrefix(p.base, "http://"), p.cmd.Env...)
}

// A login's tokens across restarts: the simulator's tokens live 4 s and
// the session renews them; killed after the first token expired, the
// engine resumes from the freshest it recorded and trades on. Killed again
// and started after the provider expired every token (it refuses their
// renewal), the account says it needs the trader to sign in again (409
// provider_relink_required, nothing sent) instead of failing silently;
// signing in to the login again reaches the same account, which trades.
func TestTradovateTokensAcrossRestarts(t *testing.T) {
	sim, p, b, key, q, accountID, _, dir := linkedTradovate(t, tradovatesim.Options{TokenLifetime: 4 * time.Second})
	es := sim.FrontContract("ES")
	do := caller(t, p, key)
	market := func(id string) (int, map[string]any) {
		return do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": id, "instrument": es, "side": "buy", "orderType": "market", "quantity": "1"})
	}
	if st, m := market("r-1"); st != 200 {
		t.Fatalf("order: %d %v\n%s", st, m, p.out)
	}
	linkedAt := time.Now()
	waitUntil(t, 30*time.Second, func() bool {
		return sim.RequestCount("auth/renewaccesstoken") >= 2 && time.Since(linkedAt) > 4500*time.Millisecond
	},
		func() any { return sim.Requests() })

	p = restart(t, p, dir) // the token the link sealed has expired by now
	if st, m := market("r-2"); st != 200 {
		t.Fatalf("an order after a restart past the first token's life: %d %v\n%s", st, m, p.out)
	}

	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	sim.ExpireTokens()
	p = restart(t, p, dir)
	// A close with no position records nothing: it probes the account.
	var last map[string]any
	waitUntil(t, 30*time.Second, func() bool {
		var st int
		st, last = do("POST", "/api/trading/close"+q, map[string]any{"instrument": sim.FrontContract("ZN"), "clientOrderId": "probe"})
		return st == 409 && last["code"] == "provider_relink_required"
	}, func() any { return fmt.Sprint(last, p.out.String()) })
	linkState := func() any {
		_, m := do("GET", "/api/account/list", nil)
		for _, a := range m["accounts"].([]any) {
			if a := a.(map[string]any); a["accountId"] == accountID {
				return a["linkState"]
			}
		}
		return "not listed"
	}
	if s := linkState(); s != "relink_required" {
		t.Fatalf("the account list says linkState %v of the lost login's account", s)
	}
	orders := sim.RequestCount("order/placeorder")
	if st, m := market("r-3"); st != 409 || m["code"] != "provider_relink_required" || m["params"].(map[string]any)["provider"] != "tradovate" {
		t.Fatalf("an order on a lost login: %d %v", st, m)
	}
	if n := sim.RequestCount("order/placeorder"); n != orders {
		t.Fatalf("an order on a lost login reached the provider")
	}

	st, m := b.do("POST", "/api/account/providers", map[string]any{"provider": "tradovate", "login": "tv-kill", "password": tvPassword})
	if st != 201 || m["account"].(map[string]any)["accountId"] != accountID {
		t.Fatalf("signing in again: %d %v, want account %s", st, m, accountID)
	}
	if s := linkState(); s != nil {
		t.Fatalf("signed in again, the account list says linkState %v", s)
	}
	waitUntil(t, 30*time.Second, func() bool { st, last = market("r-3"); return st == 200 }, func() any { return last })
	waitUntil(t, 5*time.Second, func() bool {
		_, f := do("GET", "/api/account/snapshot"+q, nil)
		ps, _ := f["positions"].([]any)
		return len(ps) == 1 && ps[0].(map[string]any)["quantity"] == "3"
	}, func() any { _, f := do("GET", "/api/account/snapshot"+q, nil); return f })

	// The provider expires every token mid-session (and refuses their
	// renewal): the next order is not sent (503 provider_unavailable, the
	// provider's 401 on the order) and the account says it needs the trader
	// to sign in again; signing in again, it trades.
	sim.ExpireTokens()
	orders = sim.OrdersByClOrdID("DEMO2001", provider.ClientOrderID(accountID, "r-4"))
	waitUntil(t, 30*time.Second, func() bool {
		st, last = market("r-4")
		return st == 409 && last["code"] == "provider_relink_required"
	}, func() any { return last })
	if s := linkState(); s != "relink_required" || sim.OrdersByClOrdID("DEMO2001", provider.ClientOrderID(accountID, "r-4")) != orders {
		t.Fatalf("after the tokens expired mid-session: linkState %v, r-4 at the provider %d times", s, sim.OrdersByClOrdID("DEMO2001", provider.ClientOrderID(accountID, "r-4")))
	}
	if st, m := b.do("POST", "/api/account/providers", map[string]any{"provider": "tradovate", "login": "tv-kill", "password": tvPassword}); st != 201 {
		t.Fatalf("signing in again: %d %v", st, m)
	}
	waitUntil(t, 30*time.Second, func() bool { st, last = market("r-4"); return st == 200 }, func() any { return last })

	// Unlinked, its sealed tokens can never be opened again; the login
	// linked once more opens another account, which reads the provider's
	// account as it stands.
	if st, m := b.do("DELETE", "/api/account/providers/"+accountID, nil); st != 204 {
		t.Fatalf("unlink: %d %v", st, m)
	}
	st, m = b.do("POST", "/api/account/providers", map[string]any{"provider": "tradovate", "login": "tv-kill", "password": tvPassword})
	if st != 201 || m["account"].(map[string]any)["accountId"] == accountID {
		t.Fatalf("linking again after unlinking: %d %v, want an account other than %s", st, m, accountID)
	}
	q = "?broker=tradovate&account=" + m["account"].(map[string]any)["accountNumber"].(string)
	if _, f := do("GET", "/api/account/snapshot"+q, nil); len(f["positions"].([]any)) != 1 {
		t.Fatalf("the account linked again: %v", f)
	}
}

// The binary is killed with SIGKILL twice, and restarted on the same data
// directory each time, while a client places orders on a linked Tradovate
// account (tokens renewed meanwhile), each with its own clientOrderId, and
// retries an id after any error with the same clientOrderId until it gets
// a definite answer. Every id answered is at the provider exactly once
// (the simulator counts orders by clOrdId) and in the account's orders.
func TestTradovateKillLoopExactlyOnce(t *testing.T) {
	sim, p0, _, key, q, accountID, simAccount, dir := linkedTradovate(t, tradovatesim.Options{TokenLifetime: 3 * time.Second})
	var cur atomic.Pointer[proc]
	cur.Store(p0)
	// Every order waits 400 ms at the provider before it is handled, and is
	// handled even when the engine is gone by then.
	if err := sim.AddFault(tradovatesim.Fault{Endpoint: "order/placeorder", Latency: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	es := sim.FrontContract("ES")
	var (
		stop   atomic.Bool
		mu     sync.Mutex
		orders []killOrder
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			o := killOrder{id: fmt.Sprintf("k-%d", i)}
			mu.Lock()
			orders = append(orders, o)
			n := len(orders) - 1
			mu.Unlock()
			body := map[string]any{"clientOrderId": o.id, "instrument": es, "side": "buy", "orderType": "limit", "quantity": "1", "limitPrice": "4000"}
			for {
				o.tries++
				st, raw, err := call(cur.Load().base, key, "POST", "/api/trading/order"+q, body)
				var m map[string]any
				_ = json.Unmarshal(raw, &m)
				if err == nil && (st == 200 || (st >= 400 && st < 500)) {
					o.status = st
					o.code, _ = m["code"].(string)
					if ord, ok := m["order"].(map[string]any); ok {
						o.orderID, _ = ord["brokerOrderId"].(string)
					} else if params, ok := m["params"].(map[string]any); ok {
						o.orderID, _ = params["brokerOrderId"].(string)
					}
					break
				}
				if stop.Load() && err != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			orders[n] = o
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	answered := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range orders {
			if o.placed() {
				n++
			}
		}
		return n
	}
	const kills = 2
	for kill := 0; kill < kills; kill++ {
		before := answered()
		waitUntil(t, 15*time.Second, func() bool { return answered() >= before+3 }, func() any { return cur.Load().out.String() })
		time.Sleep(time.Duration(150+kill*170) * time.Millisecond)
		cur.Store(restart(t, cur.Load(), dir))
	}
	before := answered()
	waitUntil(t, 15*time.Second, func() bool { return answered() >= before+3 }, func() any { return cur.Load().out.String() })
	stop.Store(true)
	<-done

	st, raw, err := call(cur.Load().base, key, "GET", "/api/account/orders"+q+"&state=all&limit=500", nil)
	if err != nil || st != 200 {
		t.Fatalf("orders: %d %s %v", st, raw, err)
	}
	var page struct {
		Orders []struct {
			ClientOrderID string `json:"clientOrderId"`
			BrokerOrderID string `json:"brokerOrderId"`
		} `json:"orders"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	listed, listedID := map[string]int{}, map[string]string{}
	for _, o := range page.Orders {
		listed[o.ClientOrderID]++
		listedID[o.ClientOrderID] = o.BrokerOrderID
	}
	ok, atProvider, retried := 0, 0, 0
	for _, o := range orders {
		n := sim.OrdersByClOrdID(simAccount, provider.ClientOrderID(accountID, o.id))
		atProvider += n
		switch {
		case n > 1:
			t.Errorf("%s: the provider holds %d orders of it", o.id, n)
		case o.placed() && n != 1:
			t.Errorf("%s was answered %d and the provider holds %d of it", o.id, o.status, n)
		case o.placed() && (listed[o.id] != 1 || o.orderID != listedID[o.id]):
			t.Errorf("%s was answered %d naming %q; the account's orders list it %d times as %q", o.id, o.status, o.orderID, listed[o.id], listedID[o.id])
		case !o.placed() && o.status != 0 && n != 0:
			t.Errorf("%s was refused (%d %s) and the provider holds %d of it", o.id, o.status, o.code, n)
		}
		if o.placed() {
			ok++
		}
		if o.tries > 1 {
			retried++
		}
	}
	if ok < (kills+1)*3 {
		t.Fatalf("only %d orders answered across %d kills", ok, kills)
	}
	t.Logf("%d kills: %d ids, %d retried, %d placed, %d orders at the provider, %d token renewals", kills, len(orders), retried, ok, atProvider,
		sim.RequestCount("auth/renewaccesstoken"))
}

// tradovateLiveEnv is tradovateEnv with the live environment too, at the
// same simulator: live logins carry market data as their subscription says.
func tradovateLiveEnv(t *testing.T, sim *tradovatesim.Sim) []string {
	return tradovateEnv(t, sim, "ENGINE_TRADOVATE_ENV=live,demo", "ENGINE_TRADOVATE_REST_URL="+sim.URL(),
		"ENGINE_TRADOVATE_WS_URL="+sim.WSURL(), "ENGINE_TRADOVATE_MD_URL="+sim.MDURL())
}

// A trader's paper account lists futures as tradable once the trader's own
// live Tradovate login is linked and its market data covers them (the
// paper book prices them from it), and only those: alice's login subscribes
// to ES, so ES turns tradable and NQ stays as it was; bob's subscribes to
// nothing and his futures keep the answer they had before he linked.
func TestPaperFuturesTradableFromTheTradersOwnLogin(t *testing.T) {
	sim := startTradovate(t, tradovatesim.Options{},
		tradovatesim.Login{Name: "tv-alice", Kind: "live", MarketData: []string{"ES"}}, tradovatesim.Login{Name: "tv-bob", Kind: "live"})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, tradovateLiveEnv(t, sim)...)
	tradable := func(do func(string, string, any) (int, map[string]any), q string) map[string]any {
		t.Helper()
		st, m := do("GET", "/api/account/instruments"+q, nil)
		if st != 200 {
			t.Fatalf("instruments: %d %v", st, m)
		}
		out := map[string]any{}
		for _, s := range m["symbols"].([]any) {
			s := s.(map[string]any)
			if s["type"] == "future" {
				out[s["symbol"].(string)] = s["tradable"]
				if s["tradable"] == false && !strings.Contains(s["notTradableReason"].(string), "futures") {
					t.Fatalf("%s is not tradable without saying why: %v", s["symbol"], s)
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		email, login string
		want         map[string]any
	}{
		{"tv-alice@example.com", "tv-alice", map[string]any{"ES": true, "NQ": false}},
		{"tv-bob@example.com", "tv-bob", map[string]any{"ES": false, "NQ": false}},
	} {
		b, key := signedIn(t, p, dir, tc.email)
		do := caller(t, p, key)
		st, m := do("POST", "/api/account/demo", map[string]any{})
		if st != 201 {
			t.Fatalf("paper account: %d %v", st, m)
		}
		a := m["account"].(map[string]any)
		q := "?broker=" + a["broker"].(string) + "&account=" + a["accountNumber"].(string)
		if got := tradable(do, q); got["ES"] != false || got["NQ"] != false {
			t.Fatalf("%s's futures before linking a login: %v, want none tradable", tc.login, got)
		}
		linkProvider(t, p, b, map[string]any{"provider": "tradovate", "login": tc.login, "password": tvPassword, "environment": "live"})
		if got := tradable(do, q); got["ES"] != tc.want["ES"] || got["NQ"] != tc.want["NQ"] {
			t.Fatalf("%s's futures once the login is linked: %v, want %v", tc.login, got, tc.want)
		}
	}
}

// A contract of a product the engine's futures catalog does not list (MES,
// 5 a point at the provider) is valued by the provider's own contract spec:
// a close one point above the entry realizes 5, not 1.
func TestTradovateContractOutsideTheCatalogAtItsOwnValuePerPoint(t *testing.T) {
	sim, p, _, key, q, _, _, _ := linkedTradovate(t, tradovatesim.Options{})
	do := caller(t, p, key)
	mes := sim.FrontContract("MES")
	frame := func() map[string]any {
		_, f := do("GET", "/api/account/snapshot"+q, nil)
		return f
	}
	positions := func() []any {
		ps, _ := frame()["positions"].([]any)
		return ps
	}
	if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "mes-1", "instrument": mes, "side": "buy",
		"orderType": "market", "quantity": "1"}); st != 200 {
		t.Fatalf("market order: %d %v\n%s", st, m, p.out)
	}
	waitUntil(t, 30*time.Second, func() bool { return len(positions()) == 1 }, func() any { return frame() })
	avg, err := events.ParseDecimal(positions()[0].(map[string]any)["avgPrice"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetPrice(mes, avg.Add(events.Int(1)).String()); err != nil {
		t.Fatal(err)
	}
	if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": mes, "clientOrderId": "mes-x"}); st != 200 {
		t.Fatalf("close: %d %v", st, m)
	}
	waitUntil(t, 30*time.Second, func() bool { return len(positions()) == 0 }, func() any { return frame() })
	realized := func() events.Decimal {
		r, _ := events.ParseDecimal(frame()["summary"].(map[string]any)["realizedPnl"].(string))
		return r
	}
	waitUntil(t, 30*time.Second, func() bool { return realized().Cmp(events.Int(5)) == 0 }, func() any { return frame()["summary"] })
}

// A provider that tells of a fill's position before the fill (the
// simulator's PositionBeforeFill) leaves the same book: the close of 2 ES
// one point up realizes 100 and leaves the account flat, not short.
func TestTradovatePositionBeforeItsFill(t *testing.T) {
	sim, p, _, key, q, _, _, _ := linkedTradovate(t, tradovatesim.Options{PositionBeforeFill: true})
	do := caller(t, p, key)
	es := sim.FrontContract("ES")
	frame := func() map[string]any {
		_, f := do("GET", "/api/account/snapshot"+q, nil)
		return f
	}
	position := func() string {
		ps, _ := frame()["positions"].([]any)
		if len(ps) != 1 {
			return fmt.Sprint(len(ps), " positions")
		}
		return ps[0].(map[string]any)["quantity"].(string)
	}
	if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "pf-1", "instrument": es, "side": "buy",
		"orderType": "market", "quantity": "2"}); st != 200 {
		t.Fatalf("market order: %d %v\n%s", st, m, p.out)
	}
	waitUntil(t, 30*time.Second, func() bool { return position() == "2" }, func() any { return frame() })
	avg, err := events.ParseDecimal(frame()["positions"].([]any)[0].(map[string]any)["avgPrice"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetPrice(es, avg.Add(events.Int(1)).String()); err != nil {
		t.Fatal(err)
	}
	if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": es, "clientOrderId": "pf-x"}); st != 200 {
		t.Fatalf("close: %d %v", st, m)
	}
	waitUntil(t, 30*time.Second, func() bool { return position() == "0 positions" }, func() any { return frame() })
	waitUntil(t, 30*time.Second, func() bool {
		s := frame()["summary"].(map[string]any)
		r, _ := events.ParseDecimal(s["realizedPnl"].(string))
		b, _ := events.ParseDecimal(s["balance"].(string))
		return r.Cmp(events.Int(100)) == 0 && b.Cmp(events.Int(50100)) == 0
	}, func() any { return frame()["summary"] })
	if position() != "0 positions" {
		t.Fatalf("after the close: %v", frame())
	}
}

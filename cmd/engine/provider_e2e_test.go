package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/engine/mail"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/sim/binance"
)

const (
	simKey    = "e2eKEYzz81VqXlinkedBinanceAPIkey0001"
	simSecret = "e2eSECRETqq42nnNeverInTheLogOrOutput9"
)

// signedIn signs a new person up, verifies and signs in; it answers the
// browser with its session and a Trading API key.
func signedIn(t *testing.T, p *proc, dir, email string) (*browser, string) {
	t.Helper()
	b := &browser{t: t, base: p.base}
	const password = "an e2e password"
	if st, m := b.do("POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	msg, _, err := mail.Latest(filepath.Join(dir, "mail"), email)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := mail.Token(msg.Text)
	if st, m := b.do("POST", "/api/auth/verify", map[string]string{"token": token, "password": password}); st != 200 {
		t.Fatalf("verify: %d %v", st, m)
	}
	if st, m := b.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}); st != 200 {
		t.Fatalf("login: %d %v", st, m)
	}
	st, m := b.do("POST", "/api/keys", map[string]string{"name": "e2e"})
	if st != 201 {
		t.Fatalf("key: %d %v", st, m)
	}
	return b, m["secret"].(string)
}

func jsonOf(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return m
}

// A trader links their own Binance futures account (the simulator) and
// trades it through the engine's HTTP API: the key is checked at the
// provider, the account is listed with clock observation, a market order
// fills and shows in the snapshot and the stream, a limit rests and its
// cancel answers once the exchange took it, a close flattens, an answer
// lost after the exchange accepted is outcome_unknown and then the same
// order (exactly one at the exchange), and nothing the engine wrote or
// printed holds the key or the secret.
func TestProviderAccountThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	sim := startSim(t, binance.Account{APIKey: simKey, Secret: simSecret},
		binance.Account{APIKey: "e2eWithdrawingKey0002", Secret: "e2eWithdrawingSecret0002", CanWithdraw: true})
	bin, dir, addr := build(t), t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, providerEnv(t, sim, "ENGINE_LOG_LEVEL=info")...)
	b, key := signedIn(t, p, dir, "trader@example.com")
	var answers bytes.Buffer // every answer the engine gave, searched for the secret at the end
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
	link := func(apiKey, secret string) (int, map[string]any) {
		st, m := b.do("POST", "/api/account/providers", map[string]any{"provider": "binance-futures", "apiKey": apiKey, "apiSecret": secret})
		j, _ := json.Marshal(m)
		answers.Write(j)
		return st, m
	}

	if st, m := link(simKey, "not-the-secret"); st != 422 || m["code"] != "provider_credentials_refused" {
		t.Fatalf("a wrong secret: %d %v", st, m)
	}
	if st, m := link("e2eWithdrawingKey0002", "e2eWithdrawingSecret0002"); st != 422 || m["code"] != "provider_key_refused" ||
		m["params"].(map[string]any)["reason"] != "can_withdraw" {
		t.Fatalf("a withdrawing key: %d %v", st, m)
	}
	st, m := link(simKey, simSecret)
	if st != 201 {
		t.Fatalf("link: %d %v\n%s", st, m, p.out)
	}
	acct := m["account"].(map[string]any)
	if acct["clock"] != "observation" || acct["broker"] != "binance" {
		t.Fatalf("linked account %v", acct)
	}
	accountID, number := acct["accountId"].(string), acct["accountNumber"].(string)
	q := "?broker=binance&account=" + number

	st, m = do("GET", "/api/account/list", nil)
	found := false
	for _, a := range m["accounts"].([]any) {
		if a := a.(map[string]any); a["accountId"] == accountID && a["clock"] == "observation" {
			found = true
		}
	}
	if st != 200 || !found {
		t.Fatalf("list: %d %v", st, m)
	}

	// A market order fills at the exchange; the frame shows the position.
	st, m = do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "m-1", "instrument": "BTCUSDT", "side": "buy", "orderType": "market", "quantity": "0.01"})
	if st != 200 {
		t.Fatalf("market order: %d %v\n%s", st, m, p.out)
	}
	frame := func() map[string]any {
		_, f := do("GET", "/api/account/snapshot"+q, nil)
		return f
	}
	waitUntil(t, 5*time.Second, func() bool {
		f := frame()
		ps, _ := f["positions"].([]any)
		return f["clock"] == "observation" && len(ps) == 1 && ps[0].(map[string]any)["quantity"] == "0.01"
	}, func() any { return frame() })
	if caps := frame()["capabilities"].(map[string]any); strings.Contains(strings.Join(toStrings(caps["tifs"]), ","), "day") {
		t.Fatalf("capabilities %v", caps)
	}
	sse := streamFrame(t, p.base, key, "/api/account/stream"+q)
	if sse["clock"] != "observation" || len(sse["positions"].([]any)) != 1 {
		t.Fatalf("stream frame %v", sse)
	}

	// A day order is refused; a limit rests, and its cancel answers canceled.
	if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "d-1", "instrument": "BTCUSDT", "side": "buy", "orderType": "limit",
		"quantity": "0.01", "limitPrice": "50000", "timeInForce": "day"}); st != 422 || m["code"] != "time_in_force_unsupported" {
		t.Fatalf("a day order: %d %v", st, m)
	}
	st, m = do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "l-1", "instrument": "BTCUSDT", "side": "buy", "orderType": "limit", "quantity": "0.01", "limitPrice": "50000"})
	if st != 200 || m["order"].(map[string]any)["state"] != "working" {
		t.Fatalf("limit: %d %v", st, m)
	}
	oid := m["order"].(map[string]any)["brokerOrderId"].(string)
	if st, m := do("POST", "/api/trading/cancel"+q, map[string]any{"brokerOrderId": oid}); st != 200 || m["order"].(map[string]any)["state"] != "canceled" {
		t.Fatalf("cancel: %d %v", st, m)
	}
	if n := sim.OrdersByClientID(simKey, provider.ClientOrderID(accountID, "l-1")); n != 1 {
		t.Fatalf("the exchange took %d orders of l-1", n)
	}

	// The close flattens.
	if st, m := do("POST", "/api/trading/close"+q, map[string]any{"instrument": "BTCUSDT", "clientOrderId": "x-1"}); st != 200 {
		t.Fatalf("close: %d %v", st, m)
	}
	waitUntil(t, 5*time.Second, func() bool { return len(frame()["positions"].([]any)) == 0 }, func() any { return frame() })

	// The exchange takes the order and the answer is lost: settled by the
	// stream or a lookup, never by sending again.
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Times: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	// The answer is the order as the settlement found it (accepted or
	// already filled, whichever the lookup or the stream brought first); its
	// fill reaches the account either way.
	if st, m := do("POST", "/api/trading/order"+q, map[string]any{"clientOrderId": "u-0", "instrument": "BTCUSDT", "side": "buy",
		"orderType": "market", "quantity": "0.01"}); st != 200 || m["order"].(map[string]any)["clientOrderId"] != "u-0" {
		t.Fatalf("a dropped answer: %d %v", st, m)
	}
	waitUntil(t, 5*time.Second, func() bool {
		ps, _ := frame()["positions"].([]any)
		return len(ps) == 1 && ps[0].(map[string]any)["quantity"] == "0.01"
	}, func() any { return frame() })
	if n := sim.OrdersByClientID(simKey, provider.ClientOrderID(accountID, "u-0")); n != 1 {
		t.Fatalf("the exchange took %d orders of u-0, want exactly 1", n)
	}
	// The exchange answers after the engine's bound: outcome_unknown with
	// no Retry-After. A retry while the outcome is still open waits for it
	// and answers the order (200); once the account took it, a repeat is
	// 409 idempotency_conflict naming that order, as on paper.
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Times: 1, Latency: 7 * time.Second}); err != nil {
		t.Fatal(err)
	}
	order := map[string]any{"clientOrderId": "u-1", "instrument": "BTCUSDT", "side": "buy", "orderType": "market", "quantity": "0.01"}
	resp := rawCall(t, p.base, key, "/api/trading/order"+q, order)
	if resp.status != 503 || jsonOf(t, resp.body)["code"] != "outcome_unknown" || resp.retryAfter != "" {
		t.Fatalf("a late answer: %d %q %s", resp.status, resp.retryAfter, resp.body)
	}
	var second map[string]any
	var placedID any
	waitUntil(t, 15*time.Second, func() bool {
		var st int
		st, second = do("POST", "/api/trading/order"+q, order)
		switch {
		case st == 200:
			placedID = second["order"].(map[string]any)["brokerOrderId"]
		case st == 409 && second["code"] == "idempotency_conflict":
			placedID = second["params"].(map[string]any)["brokerOrderId"]
		}
		return placedID != nil
	}, func() any { return second })
	if n := sim.OrdersByClientID(simKey, provider.ClientOrderID(accountID, "u-1")); n != 1 {
		t.Fatalf("the exchange took %d orders of u-1, want exactly 1", n)
	}
	if st, again := do("POST", "/api/trading/order"+q, order); st != 409 || again["code"] != "idempotency_conflict" ||
		again["params"].(map[string]any)["brokerOrderId"] != placedID {
		t.Fatalf("a third try: want 409 idempotency_conflict naming %v, got %d %v", placedID, st, again)
	}

	// Unlink, stop, and search everything the engine wrote or printed.
	if st, m := b.do("DELETE", "/api/account/providers/"+accountID, nil); st != 204 {
		t.Fatalf("unlink: %d %v", st, m)
	}
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	for _, s := range []string{simKey, simSecret} {
		if strings.Contains(p.out.String(), s) || bytes.Contains(answers.Bytes(), []byte(s)) {
			t.Fatalf("the engine's output or answers hold a credential")
		}
		_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(path)
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds a credential", path)
			}
			return nil
		})
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func waitUntil(t *testing.T, d time.Duration, ok func() bool, last func() any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", d, last())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// streamFrame reads the first account frame of the SSE stream.
func streamFrame(t *testing.T, base, key, path string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data:") {
			var f map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "data:"))), &f); err == nil && f["accountId"] != nil {
				return f
			}
		}
	}
	t.Fatalf("no frame on the stream")
	return nil
}

type rawAnswer struct {
	status     int
	retryAfter string
	body       []byte
}

func rawCall(t *testing.T, base, key, path string, body any) rawAnswer {
	t.Helper()
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", base+path, bytes.NewReader(j))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return rawAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b.Bytes()}
}

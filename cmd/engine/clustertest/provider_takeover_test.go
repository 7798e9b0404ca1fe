package clustertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/engine/cluster"
	"github.com/svc/engine/engine/mail"
	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/engine/seal"
	"github.com/svc/engine/sim/binance"
)

const (
	takeoverKey    = "clusterKEY0001takeoverBinance"
	takeoverSecret = "clusterSECRET0001takeoverNeverLogged"
)

// A linked Binance account's provider session lives on the node that owns
// the account (issue 43, "Several nodes"). Its owner is killed with SIGKILL
// while an order waits at the exchange (which takes it after the kill) and
// the trader places an order at the exchange directly while no node owns
// the account. The survivor takes the account over, settles the order in
// flight by lookup (a retry with its clientOrderId answers it, 200 or 409
// idempotency_conflict naming it), adopts the order placed elsewhere into
// the account's frame (clock observation) and sends a new order once. The
// killed node comes back and takes the account back; an order through
// either node reaches the exchange once, and no clientOrderId reaches it
// twice.
func TestProviderAccountTakeover(t *testing.T) {
	began := time.Now()
	sim := binance.New(binance.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	if err := sim.AddAccount(binance.Account{APIKey: takeoverKey, Secret: takeoverSecret}); err != nil {
		t.Fatal(err)
	}
	keys, err := seal.NewKeySetting("k1")
	if err != nil {
		t.Fatal(err)
	}
	// Both nodes open the same sealed credential (ENGINE_SEAL_KEYS); only
	// the reconciliation of a start or takeover adopts what the stream did
	// not tell (none periodic within the test).
	d := startDeployment(t, 2, "", 1, map[string]string{
		"ENGINE_BINANCE_REST_URL": sim.URL(), "ENGINE_BINANCE_WS_URL": sim.WSURL(), "ENGINE_BINANCE_SPOT_URL": sim.URL(),
		"ENGINE_PROVIDER_ALLOW_PRIVATE": "1", "ENGINE_SEAL_KEYS": keys, "ENGINE_PROVIDER_RECONCILE_EVERY": "1h",
	})
	d.waitOwned(t, []int{0, 1})

	// A trader signs up and in through n1 and links the account through
	// n1, whichever node owns the id the link names: a node that does not
	// own it checks the key and seals it, and the owner commits the link
	// (only the sealed credential travels) and opens the session.
	s := &session{base: d.engines[0].URL()}
	key := s.signUp(t, d.dirs[0], "takeover@example.com")
	accountID, number := s.link(t, d)
	owner := d.ownerOf(accountID, []int{0, 1})
	other := 1 - owner
	t.Logf("linked %s; n%d owns it (%v in)", accountID, owner+1, time.Since(began).Round(100*time.Millisecond))
	// Another node's read models show the link a moment later (a client
	// that needs it at once sends back the link's X-Engine-Seq).
	for _, i := range []int{owner, other} {
		d.waitListed(t, i, key, accountID)
	}
	q := "?broker=binance&account=" + number
	atExchange := func(coid string) int {
		return sim.OrdersByClientID(takeoverKey, provider.ClientOrderID(accountID, coid))
	}
	limit := func(coid, price string) map[string]any {
		return map[string]any{"clientOrderId": coid, "instrument": "BTCUSDT", "side": "buy", "orderType": "limit",
			"quantity": "0.002", "limitPrice": price} // 0.002 at 55000: above the 100 USDT minimum notional; rests below 60000
	}

	// A resting limit through the owner, once at the exchange.
	if o := d.placeProvider(t, owner, key, q, limit("l-1", "55000")); o["state"] != "working" {
		t.Fatalf("l-1: %v", o)
	}
	if n := atExchange("l-1"); n != 1 {
		t.Fatalf("the exchange took %d orders of l-1, want 1", n)
	}

	// The next order waits 2 s at the exchange, which takes it after the
	// owner is gone (inside its 5 s receive window).
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Times: 1, Latency: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	sent := sim.RequestCount("POST /fapi/v1/order")
	inFlight := make(chan error, 1)
	go func() {
		code, b, err := call(d.engines[owner].URL(), key, "POST", "/api/trading/order"+q, limit("f-1", "54000"))
		if err == nil {
			err = fmt.Errorf("answered %d %s before the kill", code, b)
		}
		inFlight <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for sim.RequestCount("POST /fapi/v1/order") == sent {
		if time.Now().After(deadline) {
			t.Fatal("f-1 never reached the exchange")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.engines[owner].Kill()
	killed := time.Now()
	if err := <-inFlight; err != nil {
		t.Logf("f-1's first try: %v", err)
	}
	// Meanwhile the trader sells at the exchange's own page: no node owns
	// the account (the killed node's lease runs out within 2 s), so no
	// stream tells of it.
	if d.owned(other) == cluster.DefaultPartitions {
		t.Fatalf("n%d owns every partition at the kill: the order placed elsewhere would not come while no node owns the account", other+1)
	}
	if _, err := sim.PlaceOutside(takeoverKey, map[string]string{"symbol": "BTCUSDT", "side": "SELL", "type": "LIMIT",
		"quantity": "0.003", "price": "200000", "timeInForce": "GTC"}); err != nil {
		t.Fatal(err)
	}

	d.waitOwned(t, []int{other})
	t.Logf("n%d took over %v after the kill", other+1, time.Since(killed).Round(100*time.Millisecond))

	// f-1 was settled by lookup, not sent again: a retry of it through the
	// survivor answers the order the exchange holds.
	f1 := d.retryProvider(t, other, key, q, limit("f-1", "54000"))
	if n := atExchange("f-1"); n != 1 {
		t.Fatalf("the exchange took %d orders of f-1, want exactly 1", n)
	}

	// The order placed elsewhere is adopted into the account's frame.
	frame := d.waitFrame(t, other, key, q, 3)
	adopted := false
	for _, o := range frame.Orders {
		if o.Side == "sell" && o.Quantity == "0.003" && o.LimitPrice == "200000" && o.State == "working" {
			adopted = true
		}
	}
	if !adopted {
		t.Fatalf("the order placed elsewhere is not in the frame: %+v", frame)
	}

	// A new order through the survivor, once at the exchange.
	if o := d.placeProvider(t, other, key, q, limit("n-1", "53000")); o["state"] != "working" {
		t.Fatalf("n-1: %v", o)
	}
	if n := atExchange("n-1"); n != 1 {
		t.Fatalf("the exchange took %d orders of n-1, want 1", n)
	}

	// The killed node comes back and takes its partitions back; the
	// survivor, deposed, sends nothing more. Orders through either node
	// reach the exchange once.
	d.engines[owner].Start(t)
	d.waitOwned(t, []int{0, 1})
	if got := d.ownerOf(accountID, []int{0, 1}); got != owner {
		t.Fatalf("n%d owns the account after the restart, want n%d", got+1, owner+1)
	}
	d.placeProvider(t, other, key, q, limit("r-1", "52000"))
	d.placeProvider(t, owner, key, q, limit("r-2", "51000"))
	again := d.retryProvider(t, owner, key, q, limit("f-1", "54000"))
	if again["brokerOrderId"] != f1["brokerOrderId"] {
		t.Fatalf("f-1 after the move back names %v, before it %v", again["brokerOrderId"], f1["brokerOrderId"])
	}
	d.waitFrame(t, owner, key, q, 6)
	for _, coid := range []string{"l-1", "f-1", "n-1", "r-1", "r-2"} {
		if n := atExchange(coid); n != 1 {
			t.Errorf("the exchange took %d orders of %s, want exactly 1", n, coid)
		}
	}
	if open := sim.OpenOrders(takeoverKey, "BTCUSDT"); len(open) != 6 {
		t.Errorf("the exchange holds %d working orders, want 6: %+v", len(open), open)
	}

	// Unlinked through the node that does not own it: the owner commits
	// the unlink, and nothing more reaches the exchange for the account.
	if st, m := s.do(t, d.engines[other].URL(), "DELETE", "/api/account/providers/"+accountID, nil); st != http.StatusNoContent {
		t.Fatalf("unlink through n%d: %d %v", other+1, st, m)
	}
	if st, b, err := call(d.engines[owner].URL(), key, "POST", "/api/trading/order"+q, limit("u-1", "50000")); err != nil || st == 200 {
		t.Fatalf("an order after the unlink: %d %s %v", st, b, err)
	}
	if n := atExchange("u-1"); n != 0 {
		t.Fatalf("the exchange took %d orders of u-1 after the unlink", n)
	}
	t.Logf("done in %v", time.Since(began).Round(100*time.Millisecond))
}

// session is a browser's session with one node: its cookie, and the
// node's address as the Origin of every request.
type session struct {
	base   string
	cookie string
}

// do sends a request to base (the session's node, or another node the
// cookie is shown to).
func (s *session) do(t *testing.T, base, method, path string, body any) (int, map[string]any) {
	t.Helper()
	j, _ := json.Marshal(body)
	req, err := http.NewRequest(method, base+path, bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	if s.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "svc_session", Value: s.cookie})
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "svc_session" {
			s.cookie = c.Value
		}
	}
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// signUp signs a new person up through the session's node (the mail with
// the token lands in dir, that node's data directory), verifies, signs in
// and issues a Trading API key, which it answers.
func (s *session) signUp(t *testing.T, dir, email string) string {
	t.Helper()
	const password = "a cluster password"
	if st, m := s.do(t, s.base, "POST", "/api/auth/signup", map[string]string{"email": email, "password": password}); st != 201 {
		t.Fatalf("signup: %d %v", st, m)
	}
	msg, _, err := mail.Latest(filepath.Join(dir, "mail"), email)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := mail.Token(msg.Text)
	if st, m := s.do(t, s.base, "POST", "/api/auth/verify", map[string]string{"token": token, "password": password}); st != 200 {
		t.Fatalf("verify: %d %v", st, m)
	}
	if st, m := s.do(t, s.base, "POST", "/api/auth/login", map[string]string{"email": email, "password": password}); st != 200 || s.cookie == "" {
		t.Fatalf("login: %d %v", st, m)
	}
	st, m := s.do(t, s.base, "POST", "/api/keys", map[string]string{"name": "takeover"})
	if st != 201 {
		t.Fatalf("key: %d %v", st, m)
	}
	return m["secret"].(string)
}

// link links the simulator's account through n1, retrying a 503 (a lease
// moving) for 20 s; it answers the account's id and number.
func (s *session) link(t *testing.T, d *deployment) (string, string) {
	t.Helper()
	body := map[string]any{"provider": "binance-futures", "apiKey": takeoverKey, "apiSecret": takeoverSecret}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, m := s.do(t, d.engines[0].URL(), "POST", "/api/account/providers", body)
		if st == http.StatusCreated {
			acct := m["account"].(map[string]any)
			if acct["clock"] != "observation" || acct["broker"] != "binance" {
				t.Fatalf("linked account %v", acct)
			}
			return acct["accountId"].(string), acct["accountNumber"].(string)
		}
		if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("link through n1: %d %v", st, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitListed waits up to 20 s until node i lists accountID to key.
func (d *deployment) waitListed(t *testing.T, i int, key, accountID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, b, err := call(d.engines[i].URL(), key, "GET", "/api/account/list", nil)
		if err == nil && code == http.StatusOK && bytes.Contains(b, []byte(accountID)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("n%d does not list %s after 20 s: %d %s %v", i+1, accountID, code, b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownerOf is the index of the node of idx that owns accountID.
func (d *deployment) ownerOf(accountID string, idx []int) int {
	var live []string
	for _, i := range idx {
		live = append(live, fmt.Sprintf("n%d", i+1))
	}
	o := cluster.Rendezvous(cluster.Partition(accountID, cluster.DefaultPartitions), live)
	for k, n := range live {
		if n == o {
			return idx[k]
		}
	}
	return -1
}

// placeProvider places an order through node i, retrying a 503 (a lease
// moving, an outcome still unknown) with the same clientOrderId for 15 s,
// and answers the order of the 200.
func (d *deployment) placeProvider(t *testing.T, i int, key, q string, body map[string]any) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	unknown := false // an earlier try's outcome is unknown (a cut connection, a 503): it may have placed the order
	for {
		code, b, err := call(d.engines[i].URL(), key, "POST", "/api/trading/order"+q, body)
		var m struct {
			Code  string         `json:"code"`
			Order map[string]any `json:"order"`
		}
		if err == nil {
			_ = json.Unmarshal(b, &m)
		}
		switch {
		case err == nil && code == http.StatusOK:
			if m.Order == nil {
				t.Fatalf("%s: %s", body["clientOrderId"], b)
			}
			return m.Order
		case unknown && err == nil && code == http.StatusConflict && m.Code == string(commands.CodeIdempotencyConflict):
			// The earlier try placed it (the spec's client rule: a retry of
			// an unknown outcome with the same clientOrderId answers 409
			// naming it): its state is the frame's.
			t.Logf("%s through n%d: placed by a try whose answer was lost", body["clientOrderId"], i+1)
			return d.frameOrder(t, i, key, q, body["clientOrderId"].(string))
		case (err == nil && code != http.StatusServiceUnavailable) || time.Now().After(deadline):
			t.Fatalf("%s through n%d: %d %s %v", body["clientOrderId"], i+1, code, b, err)
		}
		t.Logf("%s through n%d: %d %s %v; again", body["clientOrderId"], i+1, code, b, err)
		unknown = true
		time.Sleep(50 * time.Millisecond)
	}
}

// frameOrder is the order clientOrderID in node i's frame of the account
// ({clientOrderId, state}), waiting up to 15 s for it to show.
func (d *deployment) frameOrder(t *testing.T, i int, key, q, clientOrderID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var f providerFrame
		code, b, err := call(d.engines[i].URL(), key, "GET", "/api/account/snapshot"+q, nil)
		if err == nil && code == http.StatusOK && json.Unmarshal(b, &f) == nil {
			for _, o := range f.Orders {
				if o.ClientOrderID == clientOrderID {
					return map[string]any{"clientOrderId": o.ClientOrderID, "state": o.State}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not in n%d's frame: %d %s %v", clientOrderID, i+1, code, b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// retryProvider sends an order again through node i until the answer is
// definite (a 503 or a cut connection is retried for 15 s): 200 with the
// order, or 409 idempotency_conflict naming it. It answers {brokerOrderId}
// of either; any other answer fails t.
func (d *deployment) retryProvider(t *testing.T, i int, key, q string, body map[string]any) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for try := 1; ; try++ {
		code, b, err := call(d.engines[i].URL(), key, "POST", "/api/trading/order"+q, body)
		var m struct {
			Code   string         `json:"code"`
			Order  map[string]any `json:"order"`
			Params map[string]any `json:"params"`
		}
		if err == nil {
			_ = json.Unmarshal(b, &m)
		}
		switch {
		case err == nil && code == http.StatusOK && m.Order != nil && m.Order["clientOrderId"] == body["clientOrderId"]:
			t.Logf("%s again through n%d: 200 at try %d", body["clientOrderId"], i+1, try)
			return map[string]any{"brokerOrderId": m.Order["brokerOrderId"]}
		case err == nil && code == http.StatusConflict && m.Code == string(commands.CodeIdempotencyConflict) && m.Params["brokerOrderId"] != nil:
			t.Logf("%s again through n%d: 409 %s at try %d", body["clientOrderId"], i+1, m.Code, try)
			return map[string]any{"brokerOrderId": m.Params["brokerOrderId"]}
		case (err == nil && code != http.StatusServiceUnavailable) || time.Now().After(deadline):
			t.Fatalf("%s again through n%d: %d %s %v", body["clientOrderId"], i+1, code, b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// providerFrame is the part of an account frame the takeover reads.
type providerFrame struct {
	Clock  string `json:"clock"`
	Orders []struct {
		ClientOrderID string `json:"clientOrderId"`
		Side          string `json:"side"`
		Quantity      string `json:"quantity"`
		LimitPrice    string `json:"limitPrice"`
		State         string `json:"state"`
	} `json:"orders"`
}

// waitFrame waits up to 15 s until node i's snapshot of the account is on
// the observation clock with n working orders, and answers it.
func (d *deployment) waitFrame(t *testing.T, i int, key, q string, n int) providerFrame {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var f providerFrame
		code, b, err := call(d.engines[i].URL(), key, "GET", "/api/account/snapshot"+q, nil)
		if err == nil && code == http.StatusOK && json.Unmarshal(b, &f) == nil && f.Clock == "observation" {
			working := 0
			for _, o := range f.Orders {
				if o.State == "working" {
					working++
				}
			}
			if working == n {
				return f
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("n%d's frame: %d %s %v, want %d working orders on the observation clock", i+1, code, b, err, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/engine/provider"
	"github.com/svc/engine/sim/binance"
)

// killOrder is one clientOrderId the kill loop's client sent and the
// definite answer it got: 200, a 4xx refusal, or none yet (0). A retry of
// an id the engine accepted before is answered 409 idempotency_conflict
// naming the order: placed, as a 200 is.
type killOrder struct {
	id      string
	status  int
	code    string
	tries   int
	orderID string // the brokerOrderId the answer names
}

// placed reports whether the answer says the order stands: 200 with it, or
// 409 idempotency_conflict naming it.
func (o killOrder) placed() bool {
	return o.status == 200 || (o.status == 409 && o.code == "idempotency_conflict")
}

// The binary is killed with SIGKILL three times, and restarted on the same
// data directory each time, while a client places orders on a linked
// Binance account, each with its own clientOrderId, and retries an id after
// any error (connection refused during the restart, 503 outcome_unknown,
// 503 with Retry-After) with the same clientOrderId until it gets a
// definite answer. Every id answered 200 is at the exchange exactly once
// and in the account's orders; no id is there twice.
func TestProviderKillLoopExactlyOnce(t *testing.T) {
	t.Parallel() // waits on its binary and simulator more than it computes
	const k, s = "killKEY0001exactlyonce", "killSECRET0001exactlyonce"
	sim, p0, key, q, accountID, dir := linkedSim(t, k, s)
	addr, env := strings.TrimPrefix(p0.base, "http://"), p0.cmd.Env
	var cur atomic.Pointer[proc]
	cur.Store(p0)
	// Every order waits 400 ms at the exchange before it is handled, and is
	// handled even when the engine is gone by then: a kill lands while
	// an order is on its way, the exchange takes it, and the restarted
	// engine must learn it by lookup and never send it again.
	if err := sim.AddFault(binance.Fault{Route: "POST /fapi/v1/order", Latency: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	var (
		stop     atomic.Bool
		mu       sync.Mutex
		orders   []killOrder
		attempts atomic.Int64
		retries  = map[string]int{} // answers that were not definite, by kind
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
			// A limit buy below the market (0.002 at 55000: 110 USDT, above
			// the simulator's 100 minimum notional, on its 0.001 step and
			// 0.10 tick): it rests, and it is the exchange's count that says
			// how many were placed.
			body := map[string]any{"clientOrderId": o.id, "instrument": "BTCUSDT", "side": "buy", "orderType": "limit",
				"quantity": "0.002", "limitPrice": "55000"}
			for {
				attempts.Add(1)
				o.tries++
				st, raw, err := call(cur.Load().base, key, "POST", "/api/trading/order"+q, body)
				var m map[string]any
				_ = json.Unmarshal(raw, &m)
				code, _ := m["code"].(string)
				if err == nil && (st == 200 || (st >= 400 && st < 500)) {
					o.status, o.code = st, code
					if ord, ok := m["order"].(map[string]any); ok {
						o.orderID, _ = ord["brokerOrderId"].(string)
					} else if params, ok := m["params"].(map[string]any); ok {
						o.orderID, _ = params["brokerOrderId"].(string)
					}
					break
				}
				kind := "connection"
				if err == nil {
					kind = fmt.Sprintf("%d %s", st, code)
				}
				mu.Lock()
				retries[kind]++
				mu.Unlock()
				if stop.Load() && err != nil {
					break // the engine is gone for good: this id stays unanswered
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
	const kills = 3
	began := time.Now()
	for kill := 0; kill < kills; kill++ {
		// Let the client get a few answers from this run, then kill it mid-flight.
		before := answered()
		waitUntil(t, 20*time.Second, func() bool { return answered() >= before+3 }, func() any { return cur.Load().out.String() })
		time.Sleep(time.Duration(150+kill*170) * time.Millisecond)
		p := cur.Load()
		_ = p.cmd.Process.Kill() // SIGKILL
		_, _ = p.cmd.Process.Wait()
		cur.Store(start(t, build(t), dir, addr, env...))
	}
	// The last run settles what the kills left open: the client's pending id
	// gets its definite answer.
	before := answered()
	waitUntil(t, 20*time.Second, func() bool { return answered() >= before+3 }, func() any { return cur.Load().out.String() })
	stop.Store(true)
	<-done
	elapsed := time.Since(began)

	// The account's orders, as the engine reads them.
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
	if len(page.Orders) >= 500 {
		t.Fatalf("too many orders for one page")
	}
	listed, listedID := map[string]int{}, map[string]string{}
	for _, o := range page.Orders {
		listed[o.ClientOrderID]++
		listedID[o.ClientOrderID] = o.BrokerOrderID
	}

	var ok, repeated, refused, atExchange, retried int
	for _, o := range orders {
		n := sim.OrdersByClientID(k, provider.ClientOrderID(accountID, o.id))
		atExchange += n
		switch {
		case n > 1:
			t.Errorf("%s: the exchange holds %d orders of it", o.id, n)
		case o.placed() && n != 1:
			t.Errorf("%s was answered %d and the exchange holds %d of it", o.id, o.status, n)
		case o.placed() && listed[o.id] != 1:
			t.Errorf("%s was answered %d and the account's orders list it %d times", o.id, o.status, listed[o.id])
		case o.placed() && o.orderID != listedID[o.id]:
			t.Errorf("%s was answered %d naming order %q; the account's orders list it as %q", o.id, o.status, o.orderID, listedID[o.id])
		case !o.placed() && o.status != 0 && n != 0:
			t.Errorf("%s was refused (%d %s) and the exchange holds %d of it", o.id, o.status, o.code, n)
		}
		if o.tries > 1 {
			retried++
		}
		switch {
		case o.placed():
			ok++
			if o.status == 409 {
				repeated++
			}
		case o.status == 0:
		default:
			refused++
			t.Logf("%s refused: %d %s", o.id, o.status, o.code)
		}
	}
	if ok < kills*3 {
		t.Fatalf("only %d orders answered across %d kills", ok, kills)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d kills in %s: %d ids, %d requests, %d ids retried, %d placed (%d of them answered 409 to a retry; each once at the exchange and in the orders read), %d refused, %d orders at the exchange; retried answers %v",
		kills, elapsed.Round(100*time.Millisecond), len(orders), attempts.Load(), retried, ok, repeated, refused, atExchange, retries)
}

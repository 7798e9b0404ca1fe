package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
)

// copierCall sends one request with the trading key and, for a write, an
// Idempotency-Key; it answers the status and the decoded body.
func copierCall(base, key, idemKey, method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, err
}

// copierOrder is an order as GET /api/account/orders lists it.
type copierOrder struct {
	BrokerOrderID string `json:"brokerOrderId"`
	ClientOrderID string `json:"clientOrderId"`
	Side          string `json:"side"`
	Quantity      string `json:"quantity"`
	State         string `json:"state"`
	LeaderOrderID string `json:"leaderOrderId"`
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// listOrders lists every order of the account, page after page.
func listOrders(t *testing.T, base, key, accountID string) []copierOrder {
	t.Helper()
	var all []copierOrder
	cursor := ""
	for {
		path := "/api/account/orders?limit=500&account=" + accountID
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		_, b, err := call(base, key, "GET", path, nil)
		if err != nil {
			t.Fatal(err)
		}
		var os struct {
			Orders     []copierOrder `json:"orders"`
			NextCursor *string       `json:"nextCursor"`
		}
		if err := json.Unmarshal(b, &os); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		all = append(all, os.Orders...)
		if os.NextCursor == nil || *os.NextCursor == "" {
			return all
		}
		cursor = *os.NextCursor
	}
}

// TestCopierKillLoopMirrorsExactlyOnce drives the binary: a leader and ten
// paper followers (and one switched off) in a copier group; clients place
// resting and market orders on the leader, some refused, and cancel some,
// while the engine is killed with SIGKILL and started again three times.
// In the end every order the leader's book accepted is mirrored exactly
// once on each enabled follower (leaderOrderId on the follower's orders),
// none on the follower switched off, none for a refused order; every
// mirror was placed after its leader order, and the mirror of a canceled
// leader order is canceled, after the leader's cancel.
func TestCopierKillLoopMirrorsExactlyOnce(t *testing.T) {
	bin := build(t)
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr)
	c := readCreds(t, dir)
	if len(c.Accounts) < 12 {
		t.Fatalf("%d demo accounts", len(c.Accounts))
	}
	leader := c.Accounts[0].AccountID
	var followers []map[string]any
	for i, a := range c.Accounts[1:12] {
		f := map[string]any{"accountId": a.AccountID, "sizing": map[string]any{"mode": "multiplier", "value": "2"}}
		if i == 10 {
			f["enabled"] = false
		}
		followers = append(followers, f)
	}
	enabled := c.Accounts[1:11]
	off := c.Accounts[11].AccountID
	st, g, err := copierCall(p.base, c.TradingKey, "grp-1", "POST", "/api/copier/groups",
		map[string]any{"leaderAccountId": leader, "name": "kill loop", "followers": followers})
	if err != nil || st != 201 {
		t.Fatalf("create: %d %v %v", st, g, err)
	}
	groupID, _ := g["groupId"].(string)
	// The same key and body answer the first answer again.
	if st, g2, _ := copierCall(p.base, c.TradingKey, "grp-1", "POST", "/api/copier/groups",
		map[string]any{"leaderAccountId": leader, "name": "kill loop", "followers": followers}); st != 201 || g2["groupId"] != groupID {
		t.Fatalf("a repeat answered %d %v", st, g2)
	}

	var mu sync.Mutex
	placed := map[string]bool{} // coid -> answered 200
	run := func(round int, d time.Duration) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				var mine []string // resting orders of this worker to cancel
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					coid := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					var body map[string]any
					switch k := rng.IntN(10); {
					case k < 5: // rests: far below the market
						body = map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": "buy", "orderType": "limit",
							"limitPrice": "1000.5", "quantity": "0.01", "timeInForce": "gtc"}
					case k < 7:
						body = map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": []string{"buy", "sell"}[i%2],
							"orderType": "market", "quantity": "0.01"}
					case k < 8: // refused: above the instrument's per-order limit
						body = map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP", "side": "buy", "orderType": "market", "quantity": "500"}
					default:
						if len(mine) == 0 {
							continue
						}
						id := mine[0]
						mine = mine[1:]
						if _, _, err := call(p.base, c.TradingKey, "POST", "/api/trading/cancel?account="+leader, map[string]any{"brokerOrderId": id}); err != nil {
							return
						}
						continue
					}
					st, b, err := call(p.base, c.TradingKey, "POST", "/api/trading/order?account="+leader, body)
					if err != nil {
						return // the engine is gone
					}
					mu.Lock()
					placed[coid] = st == 200
					mu.Unlock()
					var ans struct {
						Order copierOrder `json:"order"`
					}
					if st == 200 && json.Unmarshal(b, &ans) == nil && ans.Order.State == "working" {
						mine = append(mine, ans.Order.BrokerOrderID)
					}
					time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
				}
			}()
		}
		time.Sleep(d)
		if round < 3 {
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_, _ = p.cmd.Process.Wait()
		}
		close(stop)
		wg.Wait()
	}
	for round := range 4 {
		run(round, time.Duration(400+200*round)*time.Millisecond)
		if round < 3 {
			p = start(t, bin, dir, addr)
		}
	}

	// Every accepted leader order, mirrored once on every enabled follower.
	leaderOrders := listOrders(t, p.base, c.TradingKey, leader)
	accepted := map[string]copierOrder{}
	for _, o := range leaderOrders {
		accepted[o.BrokerOrderID] = o
	}
	refused := 0
	mu.Lock()
	for coid, ok := range placed {
		if !ok {
			found := false
			for _, o := range leaderOrders {
				found = found || o.ClientOrderID == coid
			}
			if !found {
				refused++
			}
		}
	}
	mu.Unlock()
	if len(accepted) < 20 || refused == 0 {
		t.Fatalf("%d leader orders accepted, %d refused: too few to tell", len(accepted), refused)
	}
	check := func() error {
		for _, f := range enabled {
			byLeader := map[string][]copierOrder{}
			for _, o := range listOrders(t, p.base, c.TradingKey, f.AccountID) {
				if o.LeaderOrderID == "" {
					return fmt.Errorf("%s holds an order that mirrors nothing: %+v", f.AccountID, o)
				}
				byLeader[o.LeaderOrderID] = append(byLeader[o.LeaderOrderID], o)
			}
			for id, ms := range byLeader {
				lo, ok := accepted[id]
				if !ok {
					t.Fatalf("%s mirrors %s, which the leader's book never accepted", f.AccountID, id)
				}
				if len(ms) > 1 {
					t.Fatalf("%s mirrors leader order %s %d times", f.AccountID, id, len(ms))
				}
				m := ms[0]
				if m.CreatedAt.Before(lo.CreatedAt) || m.Quantity != "0.02" {
					t.Fatalf("%s's mirror %+v of %+v", f.AccountID, m, lo)
				}
				if lo.State == "canceled" && m.State == "working" {
					return fmt.Errorf("%s's mirror of canceled %s still works", f.AccountID, id)
				}
				if lo.State == "canceled" && m.State == "canceled" && m.UpdatedAt.Before(lo.UpdatedAt) {
					t.Fatalf("%s's mirror of %s was canceled at %v, before the leader's cancel at %v", f.AccountID, id, m.UpdatedAt, lo.UpdatedAt)
				}
				if lo.State == "working" && m.State != "working" {
					t.Fatalf("%s's mirror of working %s is %s", f.AccountID, id, m.State)
				}
			}
			if len(byLeader) != len(accepted) {
				return fmt.Errorf("%s mirrors %d of the leader's %d accepted orders", f.AccountID, len(byLeader), len(accepted))
			}
		}
		return nil
	}
	enginetest.WaitFor(t, 30*time.Second, check)
	if os := listOrders(t, p.base, c.TradingKey, off); len(os) != 0 {
		t.Fatalf("the follower switched off holds %d orders", len(os))
	}

	// A kill and start more: the catch-up mirrors nothing twice.
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
	p = start(t, bin, dir, addr)
	time.Sleep(500 * time.Millisecond)
	if err := check(); err != nil {
		t.Fatal(err)
	}

	// The outcomes of every accepted leader order are readable by its id,
	// its placement the oldest (the group lists only its latest actions
	// unfiltered). A commit mirrored before the kill whose outcomes were
	// not recorded yet is recorded by the catch-up after the start: wait
	// for it.
	outcomes := func(id string) error {
		st, m, err := copierCall(p.base, c.TradingKey, "", "GET", "/api/copier/groups/"+groupID+"/mirrors?leaderOrderId="+id, nil)
		if err != nil || st != 200 {
			return fmt.Errorf("mirrors: %d %v", st, err)
		}
		acts, _ := m["mirrors"].([]any)
		if len(acts) == 0 {
			return fmt.Errorf("no outcomes of %s: %v", id, m)
		}
		place := acts[len(acts)-1].(map[string]any)
		if place["op"] != "place" || len(place["followers"].([]any)) != len(enabled) {
			t.Fatalf("the placement's outcomes of %s: %v", id, place)
		}
		for _, o := range place["followers"].([]any) {
			if o.(map[string]any)["status"] != "mirrored" {
				t.Fatalf("outcome %v of %s", o, id)
			}
		}
		return nil
	}
	enginetest.WaitFor(t, 15*time.Second, func() error {
		for id := range accepted {
			if err := outcomes(id); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("%d leader orders accepted (%d refused) mirrored on %d followers across 4 kills", len(accepted), refused, len(enabled))
}

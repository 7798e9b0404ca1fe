package clustertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/svc/engine/engine/enginetest"
)

// A copier leader's node is killed with SIGKILL right after the leader's
// orders were accepted, while their mirrors are on their way to followers
// owned by either node. The survivor, taking the leader's partition over,
// finishes them: every accepted leader order is mirrored exactly once on
// each follower (by leaderOrderId), without waiting for the killed node to
// start again. Before, a node caught up only the leaders it owned at its own
// start (none, on a node of several), so the mirrors in flight were lost
// until a restart.
func TestCopierLeaderTakeover(t *testing.T) {
	d := startDeployment(t, 2, "", 6, nil)
	d.waitOwned(t, []int{0, 1})
	leader, owner := d.creds.Accounts[0].AccountID, 0
	if owners := d.byOwner(t, []string{"n1", "n2"}); len(owners[0]) == 0 || owners[0][0] != leader {
		owner = 1
	}
	var followers []string
	var body []map[string]any
	for _, a := range d.creds.Accounts {
		if a.AccountID != leader {
			followers = append(followers, a.AccountID)
			body = append(body, map[string]any{"accountId": a.AccountID, "sizing": map[string]any{"mode": "multiplier", "value": "1"}})
		}
	}
	st, b := d.copierWrite(t, owner, "takeover-group", "/api/copier/groups", map[string]any{"leaderAccountId": leader, "followers": body})
	if st != http.StatusCreated {
		t.Fatalf("create the group: %d %s", st, b)
	}

	// Leader orders one after the other, then the kill at once.
	var accepted []string
	for i := range 12 {
		code, b, _ := d.order(owner, leader, fmt.Sprintf("lead-%d", i), time.Now().Add(10*time.Second))
		var m struct {
			Order struct {
				BrokerOrderID string `json:"brokerOrderId"`
			} `json:"order"`
		}
		if code != http.StatusOK || json.Unmarshal(b, &m) != nil || m.Order.BrokerOrderID == "" {
			t.Fatalf("leader order %d: %d %s", i, code, b)
		}
		accepted = append(accepted, m.Order.BrokerOrderID)
	}
	d.engines[owner].Kill()
	survivor := 1 - owner
	d.waitOwned(t, []int{survivor})

	// Every follower holds exactly one mirror of every accepted leader order.
	mirrors := func(account string) (map[string]int, error) {
		code, b, err := call(d.engines[survivor].URL(), d.creds.TradingKey, "GET", "/api/account/orders?limit=500&account="+account, nil)
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("orders of %s: %d %s %v", account, code, b, err)
		}
		var page struct {
			Orders []struct {
				LeaderOrderID string `json:"leaderOrderId"`
			} `json:"orders"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, o := range page.Orders {
			if o.LeaderOrderID != "" {
				n[o.LeaderOrderID]++
			}
		}
		return n, nil
	}
	enginetest.WaitFor(t, 20*time.Second, func() error {
		for _, f := range followers {
			n, err := mirrors(f)
			if err != nil {
				return err
			}
			for _, id := range accepted {
				if n[id] != 1 {
					return fmt.Errorf("follower %s holds %d mirrors of leader order %s (%d of %d leader orders mirrored)", f, n[id], id, len(n), len(accepted))
				}
			}
			if len(n) != len(accepted) {
				return fmt.Errorf("follower %s mirrors %d leader orders, want %d", f, len(n), len(accepted))
			}
		}
		return nil
	})
}

// copierWrite sends a copier write through node i with its Idempotency-Key,
// retrying a 503 (a lease moving) for 10 s.
func (d *deployment) copierWrite(t *testing.T, i int, key, path string, body any) (int, []byte) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, d.engines[i].URL()+path, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+d.creds.TradingKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				return resp.StatusCode, b
			}
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

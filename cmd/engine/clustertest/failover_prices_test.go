package clustertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/clusterkit"
	"github.com/svc/engine/engine/cluster"
	"github.com/svc/engine/engine/enginetest"
	"github.com/svc/engine/events"
)

// A node that takes over a killed node's accounts acts on the prices it
// holds (issue 48): a quote that crosses their resting limits and breaches
// their loss limits right after the kill fills and locks them within a
// second of the takeover, with no later quote; a dip through their limits
// and a loss limit while no node owned them, gone before the takeover,
// fills them at their limit price (the paper book's touch rule) and locks;
// each once. The survivor's own
// accounts, hit by the same quotes, are the control.
func TestFailoverActsOnThePricesItHolds(t *testing.T) {
	x := clusterkit.StartExchange(t)
	x.Quote("BTC-USD", "65000", "65001")
	d := startDeployment(t, 2, "", 24, x.Env())
	d.waitOwned(t, []int{0, 1})
	by := d.byOwner(t, []string{"n1", "n2"})
	if len(by[0]) < 5 || len(by[1]) < 5 {
		t.Fatalf("the accounts fall %d on n1, %d on n2: want 5 each", len(by[0]), len(by[1]))
	}

	// n2 is killed with a resting buy limit on two of its accounts and a
	// long under a daily loss limit of 100 on a third; n1's the same.
	lim := map[string]bool{}
	for _, a := range []string{by[1][0], by[1][1], by[0][0], by[0][1]} {
		d.limit(t, 0, a, "l1", "64900")
		lim[a] = true
	}
	for _, a := range []string{by[1][2], by[0][2]} {
		d.longUnderLossLimit(t, 0, a)
	}
	d.engines[1].Kill()
	x.Quote("BTC-USD", "63800", "63801") // through every limit; the longs lose 120
	took := d.waitOwned(t, []int{0})
	for _, a := range []string{by[1][0], by[1][1], by[0][0], by[0][1]} {
		d.waitFills(t, 0, a, took, []string{"63801"})
	}
	for _, a := range []string{by[1][2], by[0][2]} {
		d.waitLocked(t, 0, a, took)
	}

	// n2 comes back and takes its accounts back; then n1 is killed and the
	// ask dips through fresh limits of n1's accounts (and a long's loss
	// limit) for a moment while no node owns them, and comes back.
	d.engines[1].Start(t)
	d.waitOwned(t, []int{0, 1})
	for _, a := range []string{by[0][3], by[1][3]} {
		d.limit(t, 1, a, "l2", "63700")
	}
	for _, a := range []string{by[0][4], by[1][4]} {
		d.longUnderLossLimit(t, 1, a) // bought at 63801: the limit breaks at a mark of 62801
	}
	d.engines[0].Kill()
	time.Sleep(200 * time.Millisecond) // the dip comes while n1's leases still run
	x.Quote("BTC-USD", "62700", "62701")
	time.Sleep(300 * time.Millisecond)
	x.Quote("BTC-USD", "63801", "63802")
	took = d.waitOwned(t, []int{1})
	d.waitFills(t, 1, by[0][3], took, []string{"63700"})       // the touch rule: at its limit
	d.waitFills(t, 1, by[1][3], time.Now(), []string{"62701"}) // its owner saw the dip: at the touch
	d.waitLocked(t, 1, by[0][4], took)                         // the breach in the gap locks
	d.waitLocked(t, 1, by[1][4], time.Now())

	// Exactly once: nothing more comes of a later quote, and every account
	// holds the fills it had.
	x.Quote("BTC-USD", "63500", "63501")
	time.Sleep(500 * time.Millisecond) // what a second fill would take to show
	for a := range lim {
		d.waitFills(t, 1, a, time.Now(), []string{"63801"})
	}
	d.waitFills(t, 1, by[0][3], time.Now(), []string{"63700"})
	d.waitFills(t, 1, by[1][3], time.Now(), []string{"62701"})
	for _, a := range []string{by[1][2], by[0][2]} {
		d.waitLocked(t, 1, a, time.Now())
		d.waitFills(t, 1, a, time.Now(), []string{"63800", "65001"}) // the long, and the lock's flatten: once
	}
	d.waitLocked(t, 1, by[0][4], time.Now())
	d.waitFills(t, 1, by[0][4], time.Now(), []string{"63801", "63801"}) // flattened at the bid after the gap
	d.waitLocked(t, 1, by[1][4], time.Now())
	d.waitFills(t, 1, by[1][4], time.Now(), []string{"62700", "63801"}) // flattened at the dip's bid
}

// A single engine's restart: a quote that crosses resting limits while the
// engine is down fills them on the first quote after the start, once.
func TestRestartActsOnTheFirstPriceAfterStart(t *testing.T) {
	x := clusterkit.StartExchange(t)
	x.Quote("BTC-USD", "65000", "65001")
	root := t.TempDir()
	n := clusterkit.StartNATS(t, root+"/nats")
	env := x.Env()
	env["ENGINE_DEMO_ACCOUNTS"], env["ENGINE_RATE_LIMIT"] = "2", "0"
	e := clusterkit.StartEngine(t, clusterkit.EngineOptions{NATSURLs: n.URLs(), Deployment: clusterkit.NewDeployment(), Dir: root + "/e",
		SecretKey: clusterkit.NewSecretKey(), Env: env})
	d := &deployment{nats: n, engines: []*clusterkit.Engine{e}, dirs: []string{root + "/e"}, creds: readCreds(t, root+"/e")}
	a, b := d.creds.Accounts[0].AccountID, d.creds.Accounts[1].AccountID
	d.limit(t, 0, a, "l1", "64900")
	d.longUnderLossLimit(t, 0, b)
	e.Kill()
	x.Quote("BTC-USD", "63800", "63801") // while the engine is down
	e.Start(t)
	d.waitFills(t, 0, a, time.Now(), []string{"63801"})
	d.waitLocked(t, 0, b, time.Now())
	x.Quote("BTC-USD", "63700", "63701")
	time.Sleep(500 * time.Millisecond) // what a second fill would take to show
	d.waitFills(t, 0, a, time.Now(), []string{"63801"})
	d.waitFills(t, 0, b, time.Now(), []string{"63800", "65001"}) // the long, and the lock's flatten: once
}

// waitOwned waits until the nodes of idx own every partition between them,
// each its rendezvous share, and returns when it saw so.
func (d *deployment) waitOwned(t *testing.T, idx []int) time.Time {
	t.Helper()
	var live []string
	for _, i := range idx {
		live = append(live, fmt.Sprintf("n%d", i+1))
	}
	want := map[string]int{}
	for p := range cluster.DefaultPartitions {
		want[cluster.Rendezvous(p, live)]++
	}
	enginetest.WaitFor(t, 30*time.Second, func() error {
		for _, i := range idx {
			n := fmt.Sprintf("n%d", i+1)
			if got := d.owned(i); got != want[n] {
				return fmt.Errorf("%s owns %d partitions, want %d", n, got, want[n])
			}
		}
		return nil
	})
	return time.Now()
}

// owned is node i's engine_cluster_partitions_owned; -1 when unread.
func (d *deployment) owned(i int) int {
	resp, err := client.Get(d.engines[i].URL() + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "engine_cluster_partitions_owned") {
			f := strings.Fields(l)
			n, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				return int(n)
			}
		}
	}
	return -1
}

// byOwner is the demo accounts' ids by the node of live that owns them.
func (d *deployment) byOwner(t *testing.T, live []string) [][]string {
	out := make([][]string, len(live))
	for _, a := range d.creds.Accounts {
		o := cluster.Rendezvous(cluster.Partition(a.AccountID, cluster.DefaultPartitions), live)
		for i, n := range live {
			if n == o {
				out[i] = append(out[i], a.AccountID)
			}
		}
	}
	return out
}

// mustCall is call through node i, retrying a 503 (a lease moving) for 10 s.
func (d *deployment) mustCall(t *testing.T, i int, method, path string, body any) []byte {
	t.Helper()
	var (
		code int
		b    []byte
		err  error
	)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b, err = call(d.engines[i].URL(), d.creds.TradingKey, method, path, body)
		if err == nil && code == 200 {
			return b
		}
		if time.Now().After(deadline) || (err == nil && code != 503) {
			t.Fatalf("%s %s: %d %s %v", method, path, code, b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// limit rests a buy limit of 0.01 BTC-PERP at price on account.
func (d *deployment) limit(t *testing.T, i int, account, coid, price string) {
	t.Helper()
	b := d.mustCall(t, i, "POST", "/api/trading/order?account="+account, map[string]any{"clientOrderId": coid, "instrument": "BTC-PERP",
		"side": "buy", "orderType": "limit", "limitPrice": price, "quantity": "0.01", "timeInForce": "gtc"})
	if !bytes.Contains(b, []byte(`"working"`)) {
		t.Fatalf("%s: the limit at %s does not rest: %s", account, price, b)
	}
}

// longUnderLossLimit buys 0.1 BTC-PERP on account and sets a daily loss limit of 100.
func (d *deployment) longUnderLossLimit(t *testing.T, i int, account string) {
	t.Helper()
	d.mustCall(t, i, "POST", "/api/trading/order?account="+account, map[string]any{"clientOrderId": "long", "instrument": "BTC-PERP",
		"side": "buy", "orderType": "market", "quantity": "0.1"})
	d.mustCall(t, i, "PUT", "/api/risk?broker=paper&account="+account, map[string]any{"dailyLossEnabled": true, "dailyLossValue": 100})
}

// waitFills waits, at most a second from since, until account's fills are
// at prices (sorted), and then no more.
func (d *deployment) waitFills(t *testing.T, i int, account string, since time.Time, prices []string) {
	t.Helper()
	last := ""
	for {
		var page struct {
			Fills []struct {
				Price events.Decimal `json:"price"`
			} `json:"fills"`
		}
		code, b, err := call(d.engines[i].URL(), d.creds.TradingKey, "GET", "/api/account/fills?limit=100&account="+account, nil)
		if err == nil && code == 200 && json.Unmarshal(b, &page) == nil {
			got := make([]string, len(page.Fills))
			for j, f := range page.Fills {
				got[j] = f.Price.String()
			}
			slices.Sort(got)
			if len(got) > len(prices) {
				t.Fatalf("%s: fills at %v, want %v", account, got, prices)
			}
			if strings.Join(got, ",") == strings.Join(prices, ",") {
				t.Logf("%s filled at %v %v after", account, got, time.Since(since).Round(time.Millisecond))
				return
			}
			last = fmt.Sprint(got)
		} else {
			last = fmt.Sprintf("%d %s %v", code, b, err)
		}
		if time.Since(since) > time.Second {
			t.Fatalf("%s: a second on, fills at %s, want %v", account, last, prices)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitLocked waits, at most a second from since, until account's trading
// is locked by its daily loss limit.
func (d *deployment) waitLocked(t *testing.T, i int, account string, since time.Time) {
	t.Helper()
	last := ""
	for {
		var r struct {
			Lock struct {
				TradingLocked bool   `json:"tradingLocked"`
				LockReason    string `json:"lockReason"`
			} `json:"lock"`
		}
		code, b, err := call(d.engines[i].URL(), d.creds.TradingKey, "GET", "/api/risk?broker=paper&account="+account, nil)
		if err == nil && code == 200 && json.Unmarshal(b, &r) == nil && r.Lock.TradingLocked && r.Lock.LockReason == "daily_loss_limit" {
			t.Logf("%s locked %v after", account, time.Since(since).Round(time.Millisecond))
			return
		}
		last = fmt.Sprintf("%d %s %v", code, b, err)
		if time.Since(since) > time.Second {
			t.Fatalf("%s: a second on, not locked: %s", account, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

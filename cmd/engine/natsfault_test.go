package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/engine/enginetest"
)

// natsBuild is the nats-server binary of go.mod's version, built once per
// test run into a per-user directory that go build keeps up to date.
var natsBuild struct {
	once sync.Once
	path string
	err  error
}

func natsServerBin(t *testing.T) string {
	t.Helper()
	natsBuild.once.Do(func() {
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("engine-test-bin-%d", os.Getuid()))
		if natsBuild.err = os.MkdirAll(dir, 0o700); natsBuild.err != nil {
			return
		}
		natsBuild.path = filepath.Join(dir, "nats-server")
		out, err := exec.Command("go", "build", "-o", natsBuild.path, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsBuild.err = fmt.Errorf("build nats-server: %v\n%s", err, out)
		}
	})
	if natsBuild.err != nil {
		t.Fatal(natsBuild.err)
	}
	return natsBuild.path
}

// natsProc is a nats-server subprocess on 127.0.0.1 that a test kills and
// starts again on the same port and store directory.
type natsProc struct {
	bin, dir, port string
	cmd            *exec.Cmd
	out            *lockedBuffer
}

// newNATS starts a JetStream nats-server on a free port of 127.0.0.1 (never
// 4222, where the machine's own server lives), killed at the test's end.
func newNATS(t *testing.T) *natsProc {
	n := &natsProc{bin: natsServerBin(t), dir: t.TempDir()}
	for n.port == "" || n.port == "4222" {
		_, n.port, _ = net.SplitHostPort(freePort(t))
	}
	t.Cleanup(func() {
		if n.cmd != nil {
			_ = n.cmd.Process.Kill()
			_, _ = n.cmd.Process.Wait()
		}
	})
	n.start(t)
	return n
}

func (n *natsProc) url() string { return "nats://127.0.0.1:" + n.port }

// start runs the server and waits until JetStream answers on it.
func (n *natsProc) start(t *testing.T) {
	t.Helper()
	n.out = &lockedBuffer{}
	n.cmd = exec.Command(n.bin, "-js", "-sd", n.dir, "-p", n.port, "-a", "127.0.0.1")
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitFor(t, 15*time.Second, func() error {
		nc, err := nats.Connect(n.url(), nats.Timeout(200*time.Millisecond), nats.NoReconnect())
		if err != nil {
			return fmt.Errorf("%w; nats-server said:\n%s", err, n.out)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err
	})
}

// freeze stops the server with SIGSTOP: its connections stay open and
// nothing on them is answered, so appends wait on it for their acks.
func (n *natsProc) freeze(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// kill ends the server with SIGKILL and waits until it is gone.
func (n *natsProc) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = n.cmd.Process.Wait()
	n.cmd = nil
}

// attempt is one order as a client sent it and what it was answered.
type attempt struct {
	account, coid string
	start, end    time.Time
	status        int
	code          string
	retryAfter    string
	err           error
}

func (a attempt) took() time.Duration { return a.end.Sub(a.start) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (a attempt) String() string {
	return fmt.Sprintf("%s sent at %s: %d %s (Retry-After %q) after %v %v", a.coid, a.start.Format("15:04:05.000"), a.status, a.code, a.retryAfter, a.took(), a.err)
}

// acked reports an answer that says the order is recorded: 200, or 202
// write_recorded (in the log, read models behind).
func (a attempt) acked() bool { return a.status == http.StatusOK || a.status == http.StatusAccepted }

// faultClient waits longer than any answer the engine should give, so a slow
// answer is measured rather than cut off.
var faultClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// placeMarket sends one market order and keeps the answer's status, code and
// Retry-After.
func placeMarket(base, key, account, coid string) attempt {
	a := attempt{account: account, coid: coid, start: time.Now()}
	body := fmt.Sprintf(`{"clientOrderId":%q,"instrument":"BTC-PERP","side":"buy","orderType":"market","quantity":"0.01"}`, coid)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/trading/order?account="+account, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := faultClient.Do(req)
	a.end = time.Now()
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	var e struct {
		Code string `json:"code"`
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &e)
	a.code = e.Code
	return a
}

// readyz is /readyz's status and error.
func readyz(base string) (int, string, error) {
	resp, err := faultClient.Get(base + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var m struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m.Error, nil
}

// A nats-server killed with SIGKILL under a running engine and concurrent
// clients, then started again on the same port and store: while it is down
// every write is refused within a second with 503 log_unavailable and
// Retry-After: 1 (only a write in flight at the kill may answer
// outcome_unknown) and /readyz is 503; after the restart writes resume
// without restarting the engine within 15 s; every acknowledged order is
// there, no refused one is, and every unknown outcome settles exactly once
// when retried with its clientOrderId.
func TestNATSKilledUnderLoadRefusesFastAndRecovers(t *testing.T) {
	bin := build(t)
	ns := newNATS(t)
	name := "nf" + strings.ToLower(ulid.Make().String()[16:])
	t.Cleanup(func() { // before the server's kill
		if ns.cmd != nil {
			removeDeploymentStreams(t, ns.url(), []string{name})
		}
	})
	dir, addr := t.TempDir(), freePort(t)
	p := start(t, bin, dir, addr, "NATS_URL="+ns.url(), "ENGINE_DEPLOYMENT="+name, "ENGINE_DEMO_ACCOUNTS=8")
	c := readCreds(t, dir)

	var (
		mu  sync.Mutex
		all []attempt
	)
	count := func(since time.Time, ok func(attempt) bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range all {
			if !a.start.Before(since) && ok(a) {
				n++
			}
		}
		return n
	}
	const clients = 12
	var waiting atomic.Int32 // clients waiting for an answer
	stopLoad := make(chan struct{})
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 23))
			for i := 0; ; i++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				acct := c.Accounts[rng.IntN(len(c.Accounts))].AccountNumber
				waiting.Add(1)
				a := placeMarket(p.base, c.TradingKey, acct, fmt.Sprintf("nf%d-%d", w, i))
				waiting.Add(-1)
				mu.Lock()
				all = append(all, a)
				mu.Unlock()
				if !a.acked() {
					time.Sleep(10 * time.Millisecond) // a refused client pauses, as Retry-After asks, only shorter
				}
			}
		}()
	}
	stopClients := sync.OnceFunc(func() { close(stopLoad); wg.Wait() })
	defer stopClients()
	t0 := time.Now()
	enginetest.WaitFor(t, 15*time.Second, func() error {
		if n := count(t0, attempt.acked); n < 50 {
			return fmt.Errorf("%d orders acknowledged", n)
		}
		return nil
	})

	// The server freezes first, so that writes are surely in flight when it
	// dies, waiting for acks the kill takes with it.
	ns.freeze(t)
	enginetest.WaitFor(t, 5*time.Second, func() error {
		if n := waiting.Load(); n < clients {
			return fmt.Errorf("%d of %d clients wait on the frozen server", n, clients)
		}
		return nil
	})
	killAt := time.Now()
	t.Cleanup(func() { // the answers around the fault, when the test fails
		if !t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range all {
			if a.end.After(killAt.Add(-100*time.Millisecond)) && (a.status != http.StatusOK || a.took() > 100*time.Millisecond) {
				t.Logf("started %v after the kill on %s: %s", a.start.Sub(killAt), a.account, a)
			}
		}
	})
	ns.kill(t)
	// The engine has seen the connection go when /readyz says so; a write
	// started after that cannot have reached the server.
	var noticedAt time.Time
	enginetest.WaitFor(t, 2*time.Second, func() error {
		status, why, err := readyz(p.base)
		if err != nil || status != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz after the kill: %d %q %v", status, why, err)
		}
		noticedAt = time.Now()
		return nil
	})
	enginetest.WaitFor(t, 15*time.Second, func() error {
		if time.Since(killAt) < 1500*time.Millisecond {
			return fmt.Errorf("NATS down for %v only", time.Since(killAt))
		}
		if n := count(noticedAt, func(a attempt) bool { return a.code == "log_unavailable" }); n < 20 {
			return fmt.Errorf("%d writes refused since the engine noticed", n)
		}
		return nil
	})
	if status, why, err := readyz(p.base); err != nil || status != http.StatusServiceUnavailable || why != "the commit log (NATS) is not connected" {
		t.Fatalf("/readyz while NATS is down: %d %q %v", status, why, err)
	}

	restartAt := time.Now()
	ns.start(t)
	var recoveredAt time.Time
	enginetest.WaitFor(t, 15*time.Second, func() error {
		if n := count(restartAt, func(a attempt) bool { return a.status == http.StatusOK }); n == 0 {
			return fmt.Errorf("no write acknowledged since the restart")
		}
		if status, why, err := readyz(p.base); err != nil || status != http.StatusOK {
			return fmt.Errorf("/readyz after the restart: %d %q %v", status, why, err)
		}
		recoveredAt = time.Now()
		return nil
	})
	if took := recoveredAt.Sub(restartAt); took > 15*time.Second {
		t.Fatalf("writes resumed %v after NATS was back, want within 15 s", took)
	}
	enginetest.WaitFor(t, 10*time.Second, func() error {
		if n := count(recoveredAt, attempt.acked); n < 20 {
			return fmt.Errorf("%d orders acknowledged since the recovery", n)
		}
		return nil
	})
	stopClients()

	// Every answer, by when its request started.
	var acked, refused, unknown, unknownRecorded, down int
	var slowestDown, slowestUnknown time.Duration
	firstAck := recoveredAt // the end of the first write acknowledged after the restart
	for _, a := range all {
		if a.err != nil {
			t.Fatalf("the engine did not answer %s\n%s", a, p.out)
		}
		inFlightAtKill := a.start.Before(noticedAt) && a.end.After(killAt)
		switch {
		case a.acked():
			acked++
		case a.code == "log_unavailable":
			refused++
			if a.status != http.StatusServiceUnavailable || a.retryAfter != "1" {
				t.Errorf("refusal without 503 and Retry-After: 1: %s", a)
			}
		case a.code == "outcome_unknown" && inFlightAtKill:
			unknown++
			slowestUnknown = max(slowestUnknown, a.end.Sub(killAt))
		default:
			t.Errorf("unexpected answer: %s", a)
		}
		if !a.start.Before(noticedAt) && a.start.Before(restartAt) {
			if !a.acked() && a.code != "log_unavailable" {
				t.Errorf("a write while NATS was down answered %s, want 503 log_unavailable", a)
			}
			if a.acked() && a.end.Before(restartAt) {
				t.Errorf("a write while NATS was down was acknowledged: %s", a)
			}
			slowestDown = max(slowestDown, a.took())
			down++
		}
		// Every answer comes within a second of the kill or of its request,
		// whichever is later; only a write the log acknowledged before the
		// kill may wait longer, for the read models (read-your-writes, at
		// most api.SettleTimeout, then 202 write_recorded).
		if a.end.After(killAt) && a.start.Before(restartAt) && !(inFlightAtKill && a.acked()) && a.end.Sub(later(a.start, killAt)) > time.Second {
			t.Errorf("an answer given while NATS was down took over a second: %s", a)
		}
		if a.acked() && a.start.After(restartAt) && a.end.Before(firstAck) {
			firstAck = a.end
		}
		if !inFlightAtKill && a.start.Before(killAt) && !a.acked() {
			t.Errorf("a write before the kill was not acknowledged: %s", a)
		}
	}

	// Every acknowledged order is there once; no refused one is there.
	listed := func() map[string]int {
		n := map[string]int{}
		for _, acct := range c.Accounts {
			code, b, err := call(p.base, c.TradingKey, "GET", "/api/account/orders?state=all&limit=500&account="+acct.AccountNumber, nil)
			if err != nil || code != http.StatusOK {
				t.Fatalf("orders of %s: %d %s %v", acct.AccountNumber, code, b, err)
			}
			var page struct {
				Orders []struct {
					ClientOrderID string `json:"clientOrderId"`
				} `json:"orders"`
			}
			if err := json.Unmarshal(b, &page); err != nil {
				t.Fatal(err)
			}
			if len(page.Orders) >= 500 {
				t.Fatalf("too many orders on %s for one page", acct.AccountNumber)
			}
			for _, o := range page.Orders {
				n[acct.AccountNumber+"/"+o.ClientOrderID]++
			}
		}
		return n
	}
	before := listed()
	for _, a := range all {
		n := before[a.account+"/"+a.coid]
		switch {
		case a.acked() && n != 1:
			t.Errorf("acknowledged order %s exists %d times", a, n)
		case a.code == "log_unavailable" && n != 0:
			t.Errorf("refused order %s exists %d times: something was recorded", a, n)
		case n > 1:
			t.Errorf("order %s exists %d times", a, n)
		case a.code == "outcome_unknown" && n == 1:
			unknownRecorded++
		}
	}

	// Every write not acknowledged settles exactly once when retried with its
	// clientOrderId: placed now if it was not there, 409 idempotency_conflict
	// if it was. A sample of acknowledged ones answers 409 too.
	for i, a := range all {
		if a.acked() && i%25 != 0 {
			continue
		}
		r := placeMarket(p.base, c.TradingKey, a.account, a.coid)
		want, wantCode := http.StatusOK, ""
		if before[a.account+"/"+a.coid] == 1 {
			want, wantCode = http.StatusConflict, "idempotency_conflict"
		}
		if r.status != want || r.code != wantCode {
			t.Errorf("retry of %s answered %s, want %d %s", a, r, want, wantCode)
		}
	}
	after := listed()
	for _, a := range all {
		if n := after[a.account+"/"+a.coid]; n != 1 {
			t.Errorf("after the retries %s exists %d times", a, n)
		}
	}
	t.Logf("%d writes: %d acknowledged, %d refused log_unavailable (the slowest answer of the %d sent while NATS was down took %v), "+
		"%d outcome_unknown (the last %v after the kill; %d of them recorded); /readyz 503 %v after the kill; first write acknowledged %v and /readyz 200 %v after the restart",
		len(all), acked, refused, down, slowestDown, unknown, slowestUnknown, unknownRecorded, noticedAt.Sub(killAt).Round(time.Millisecond),
		firstAck.Sub(restartAt).Round(time.Millisecond), recoveredAt.Sub(restartAt).Round(time.Millisecond))
}

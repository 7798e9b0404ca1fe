package firm_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
)

// benchFirm starts a service for a benchmark with n provisioned accounts.
func benchFirm(b *testing.B, rc *receiver, n int) (*apptest.Env, string, string, []string) {
	b.Helper()
	e := apptest.Start(b, apptest.Options{ManualFeed: true, Configure: func(c *app.Config) {
		if s := os.Getenv("BENCH_SYNC"); s != "" {
			c.Sync = s // always (default) or interval
		}
		if rc != nil {
			c.Firm.WebhookClient = rc.client()
			c.Firm.WebhookTimeout = 2 * time.Second
			c.Firm.WebhookAllowPrivate = true // the receiver is on 127.0.0.1
		}
	}})
	key := e.Creds["partnerKey"].(string)
	var items []map[string]any
	for i := 0; i < n; i++ {
		items = append(items, map[string]any{"referenceId": fmt.Sprintf("bench-%d", i), "email": fmt.Sprintf("b%d@trader.example", i), "startingBalance": "1000000"})
	}
	r := e.Do(apptest.Req{Method: http.MethodPost, Path: "/api/partner/accounts", Body: map[string]any{"accounts": items}, Key: key})
	var out struct {
		Results []struct {
			Account struct {
				AccountNumber string `json:"accountNumber"`
			} `json:"account"`
		} `json:"results"`
	}
	r.JSON(b, &out)
	var numbers []string
	for _, x := range out.Results {
		numbers = append(numbers, x.Account.AccountNumber)
	}
	return e, key, e.Creds["operatorSession"].(string), numbers
}

func post(c *http.Client, url, key string, body []byte) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// BenchmarkBalanceOps drives balance operations through HTTP from 32
// concurrent clients over 64 accounts (ENGINE_SYNC=always: every commit on
// disk before its answer) and reads each receipt on the operator route right
// after its answer: it must be there at once. Reports ops/s.
func BenchmarkBalanceOps(b *testing.B) {
	e, key, cookie, numbers := benchFirm(b, nil, 64)
	venue := e.Creds["venueId"].(string)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var next atomic.Int64
	var failures atomic.Int64
	workers := benchWorkers()
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				ref := fmt.Sprintf("op-%d", i)
				body := fmt.Sprintf(`{"referenceId":%q,"accountNumber":%q,"op":"credit","amount":"1.25"}`, ref, numbers[i%int64(len(numbers))])
				if st, err := post(client, e.URL+"/api/partner/balance-op", key, []byte(body)); err != nil || st != http.StatusOK {
					failures.Add(1)
					continue
				}
				req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/operator/venues/"+venue+"/balance-ops/"+ref, nil)
				req.AddCookie(&http.Cookie{Name: "svc_session", Value: cookie})
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					failures.Add(1)
				}
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d operations failed or their receipt was not readable at once", n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}

// BenchmarkWebhookLatency commits balance operations at a steady 200 per
// second while three endpoints listen: two healthy, one that never answers
// (each attempt times out after 2 s). Reports the p50 and p99 of the time from
// the commit (the event's createdAt) to its arrival at a healthy endpoint.
func BenchmarkWebhookLatency(b *testing.B) {
	rc := newReceiver(b)
	e, key, _, numbers := benchFirm(b, rc, 16)
	f := &firm{Env: e, partnerKey: key}
	for _, p := range []string{"/a", "/b", "/hang"} {
		f.register(rc, p, 200)
	}
	rc.mu.Lock()
	rc.delay["/hang"] = time.Hour
	rc.mu.Unlock()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := 0; i < b.N; i++ {
		<-tick.C
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := fmt.Sprintf(`{"referenceId":"wh-%d","accountNumber":%q,"op":"credit","amount":"1"}`, i, numbers[i%len(numbers)])
			_, _ = post(client, e.URL+"/api/partner/balance-op", key, []byte(body))
		}(i)
	}
	wg.Wait()
	apptest.WaitFor(b, 30*time.Second, func() error {
		if na, nb := rc.count("/a", ""), rc.count("/b", ""); na < b.N || nb < b.N {
			return fmt.Errorf("%d and %d of %d deliveries arrived at /a and /b", na, nb, b.N)
		}
		return nil
	})
	b.StopTimer()
	var lat []time.Duration
	for _, p := range []string{"/a", "/b"} {
		for _, d := range rc.deliveries(p) {
			lat = append(lat, d.Received.Sub(d.Created))
		}
	}
	if len(lat) < 2*b.N {
		b.Fatalf("%d of %d deliveries arrived", len(lat), 2*b.N)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	rc.mu.Lock()
	b.ReportMetric(float64(rc.started["/hang"]), "hang-attempts")
	rc.mu.Unlock()
}

// benchWorkers is BENCH_WORKERS, default 32.
func benchWorkers() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_WORKERS")); err == nil && n > 0 {
		return n
	}
	return 32
}

package app_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/cmd/engine/app"
	"github.com/svc/engine/cmd/engine/app/apptest"
	tenantcmd "github.com/svc/engine/commands/tenant"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/auth"
)

// BenchmarkOrderKeyLookup places market orders through the engine's handler
// (in process, ENGINE_SYNC=interval so the disk does not drown the lookup)
// with 1 and with 10,000 Trading API keys issued, the two runs interleaved
// in rounds; it reports each run's mean and p50 order latency. The issue's
// bar: 10,000 keys add no more than 2% to an order's latency.
//
//	go test -run '^$' -bench BenchmarkOrderKeyLookup -benchtime 4000x ./cmd/engine/app/
func BenchmarkOrderKeyLookup(b *testing.B) {
	envs := map[int]*apptest.Env{}
	for _, n := range []int{1, 10000} {
		e := apptest.Start(b, apptest.Options{Configure: func(c *app.Config) { c.Sync = "interval" }})
		d := e.App.Deps
		for i := 1; i < n; i++ {
			k := auth.NewKey("svc_sk_")
			res, err := d.Engine.Tenant(context.Background(), "demo", d.Engine.Envelope(events.Principal{System: "bench"}, "",
				&tenantcmd.IssueKey{KeyID: ulid.Make().String(), Digest: auth.Digest(k), Kind: "trading", Prefix: k[:11]}))
			if err != nil {
				b.Fatal(err)
			}
			if i == n-1 {
				if err := d.Settle(context.Background(), res); err != nil {
					b.Fatal(err)
				}
			}
		}
		envs[n] = e
	}
	lat := map[int][]time.Duration{}
	order := func(e *apptest.Env, i int) time.Duration {
		body := fmt.Sprintf(`{"clientOrderId":"b-%d","instrument":"BTC-PERP","side":"%s","orderType":"market","quantity":"0.001"}`, i, []string{"buy", "sell"}[i%2])
		r := httptest.NewRequest(http.MethodPost, "/api/trading/order", bytes.NewReader([]byte(body)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+e.Key)
		w := httptest.NewRecorder()
		t0 := time.Now()
		e.App.Handler.ServeHTTP(w, r)
		d := time.Since(t0)
		if w.Code != http.StatusOK {
			b.Fatalf("order: %d %s", w.Code, w.Body)
		}
		return d
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range []int{1, 10000} {
			lat[n] = append(lat[n], order(envs[n], i))
		}
	}
	b.StopTimer()
	for _, n := range []int{1, 10000} {
		ds := lat[n]
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		b.ReportMetric(float64(sum.Microseconds())/float64(len(ds)), fmt.Sprintf("us-mean-%dkeys", n))
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), fmt.Sprintf("us-p50-%dkeys", n))
	}
}

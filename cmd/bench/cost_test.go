package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// BenchmarkHTTPMarketOrderCost is the cost of one market order over the
// engine's HTTP handler, as the whole process pays it: the request's
// handling, the decision, the commit (embedded JetStream, sync interval so
// the disk does not set the pace), the read models' fold and everything the
// engine does in the background for it. alloc-B/order and allocs/order are
// the process's allocation counters over the run divided by the orders;
// workers accounts are driven round robin, one order in flight at a time.
//
//	go test ./cmd/bench -run '^$' -bench HTTPMarketOrderCost -benchtime 5000x
func BenchmarkHTTPMarketOrderCost(b *testing.B) {
	ctx := context.Background()
	const accounts = 8
	s, err := startService(ctx, opts{tmp: b.TempDir()}, "interval", accounts, false, "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := s.App.Handler
	place := func(i int) {
		a := s.Accounts[i%accounts]
		body := fmt.Sprintf(`{"clientOrderId":"c%d","instrument":"BTC-PERP","side":%q,"orderType":"market","quantity":"0.01"}`, i, side(i/accounts))
		r := httptest.NewRequest("POST", "/api/trading/order?broker=paper&account="+a.AccountNumber, bytes.NewReader([]byte(body)))
		r.Header.Set("Authorization", "Bearer "+s.Key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("order %d: %d %s", i, w.Code, w.Body)
		}
	}
	for i := range 200 { // warm: every account, the caches, the pools
		place(1_000_000 + i)
	}
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	// COST_PROFILE=DIR writes the process's allocation profile before and
	// after the measured orders: go tool pprof -base DIR/before DIR/after.
	dir := os.Getenv("COST_PROFILE")
	writeAllocs := func(name string) {
		if dir == "" {
			return
		}
		f, err := os.Create(dir + "/" + name)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	writeAllocs("before")
	cpu := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		place(i)
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // the fold and the background work of the last orders
	runtime.ReadMemStats(&m1)
	writeAllocs("after")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "alloc-B/order")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/order")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/order")
}

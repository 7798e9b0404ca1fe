package market

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/gorilla/mux"

	"github.com/svc/engine/engine/market"
	"github.com/svc/engine/engine/market/bars"
	"github.com/svc/engine/events"
	"github.com/svc/engine/gateway/api"
	"github.com/svc/engine/gateway/auth"
	"github.com/svc/engine/gateway/httpx"
	"github.com/svc/engine/projections/memory"
)

const benchOrigin = "https://bench.example.test"

type benchFeed struct{ *market.Hub }

func (benchFeed) Name() string { return "bench" }

func benchCatalog(n int) *market.Catalog {
	var list []market.Instrument
	for i := 0; i < n; i++ {
		list = append(list, market.Instrument{Symbol: fmt.Sprintf("S%d-PERP", i), Name: "bench", Exchange: "SIM", Type: "perpetual", AssetClass: "crypto",
			TickSize: events.MustDecimal("0.01"), Multiplier: events.Int(1), MaxQuantity: events.Int(100), Simulated: true})
	}
	return market.NewCatalog(list)
}

// BenchmarkHistorySpread5000 answers history of 5,000 one-minute bars of a
// four-leg spread, through the handler, JSON included.
func BenchmarkHistorySpread5000(b *testing.B) {
	svc := bars.NewService(bars.DefaultRetention, nil)
	start := int64(1_700_000_000 / 60 * 60)
	for leg := 0; leg < 4; leg++ {
		sym := fmt.Sprintf("S%d-PERP", leg)
		for i := int64(0); i < 5000; i++ {
			o := apd.New(100000+i*7+int64(leg)*13, -2)
			h := apd.New(100000+i*7+int64(leg)*13+25, -2)
			l := apd.New(100000+i*7+int64(leg)*13-25, -2)
			c := apd.New(100000+i*7+int64(leg)*13+5, -2)
			bar := market.Bar{Time: start + i*60}
			bar.Open.Set(o)
			bar.High.Set(h)
			bar.Low.Set(l)
			bar.Close.Set(c)
			bar.Volume.SetInt64(3)
			svc.Store.Put(sym, market.Minute, bar)
		}
	}
	h := &Handlers{m: &Market{Catalog: benchCatalog(4), Bars: svc, Now: time.Now}}
	path := "/api/market/history?tf=1m&countBack=5000&instrument=" + url.QueryEscape("(S0-PERP - S1-PERP) * 2 + S2-PERP / S3-PERP")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		if err := h.History(w, httptest.NewRequest("GET", path, nil)); err != nil {
			b.Fatal(err)
		}
		if i == 0 && bytes.Count(w.Body.Bytes(), []byte(`"time"`)) != 5000 {
			b.Fatalf("bars: %d", bytes.Count(w.Body.Bytes(), []byte(`"time"`)))
		}
	}
}

// BenchmarkFanout1000x24 opens 1,000 multiplexed SSE connections of 24 bar
// subscriptions each over real HTTP, ticks every instrument in rounds (every
// 250 ms, the simulated feed's pace, and every 100 ms), and reports the
// delivery latency from the tick to the client reading the event. Clients run
// in the same process, on the same cores.
func BenchmarkFanout1000x24(b *testing.B) {
	for _, every := range []time.Duration{250 * time.Millisecond, 100 * time.Millisecond} {
		b.Run("tick="+every.String(), func(b *testing.B) { fanout(b, every) })
	}
}

func fanout(b *testing.B, every time.Duration) {
	const conns, symbols, rounds = 1000, 6, 20
	tfs := []string{"1m", "5m", "15m", "1h"}
	cat := benchCatalog(symbols)
	feed := benchFeed{market.NewHub()}
	svc := bars.NewService(bars.DefaultRetention, nil)
	svc.Attach(feed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go svc.Live.Run(ctx)

	d := &api.Deps{Auth: auth.New(auth.Config{AllowedOrigins: []string{benchOrigin}}, memory.New())}
	r := mux.NewRouter()
	h := New(d, &Market{Catalog: cat, Bars: svc, Feed: feed, Done: ctx.Done()})
	r.Handle("/api/market/streams", Admit(d)(httpx.Serve(httpx.Trading, h.Streams))).Methods(http.MethodGet)
	srv := httptest.NewServer(r)
	defer srv.Close()

	var subs []string
	for s := 0; s < symbols; s++ {
		for _, tf := range tfs {
			subs = append(subs, fmt.Sprintf("S%d-PERP~%s", s, tf))
		}
	}
	path := srv.URL + "/api/market/streams?subs=" + strings.Join(subs, ",")
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: 0, DisableCompression: true}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

	base := time.Unix(1_700_000_000, 0)
	tick := func(round int) {
		for s := 0; s < symbols; s++ {
			feed.Publish(market.Quote{Instrument: fmt.Sprintf("S%d-PERP", s), Bid: events.Int(int64(1000 + round)), Ask: events.Int(int64(1000 + round)),
				Last: events.Int(int64(1000 + round)), Size: events.Int(1), At: base.Add(time.Duration(round) * time.Second)})
		}
	}
	tick(0) // every key has a bar before anyone subscribes

	for n := 0; n < b.N; n++ {
		var sent [rounds + 1]atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		var ready, finished sync.WaitGroup
		ready.Add(conns)
		finished.Add(conns)
		cctx, ccancel := context.WithCancel(ctx)
		for c := 0; c < conns; c++ {
			go func() {
				defer finished.Done()
				req, _ := http.NewRequestWithContext(cctx, "GET", path, nil)
				req.Header.Set("Origin", benchOrigin)
				resp, err := client.Do(req)
				if err != nil {
					ready.Done()
					return
				}
				defer resp.Body.Close()
				sc := bufio.NewReaderSize(resp.Body, 64<<10)
				mine := make([]time.Duration, 0, rounds*len(subs))
				seen, readyDone := 0, false
				lastRound := 0
				for {
					line, err := sc.ReadSlice('\n')
					if err != nil {
						break
					}
					i := bytes.Index(line, []byte(`"close":"`))
					if i < 0 {
						continue
					}
					v := line[i+9:]
					v = v[:bytes.IndexByte(v, '"')]
					p, _ := strconv.Atoi(string(v))
					round := p - 1000
					if round > 0 {
						if t0 := sent[round].Load(); t0 > 0 {
							mine = append(mine, time.Duration(time.Now().UnixNano()-t0))
						}
					}
					seen++
					if !readyDone && seen == len(subs) { // the initial bars arrived
						readyDone = true
						ready.Done()
					}
					if round == rounds {
						lastRound++
						if lastRound == len(subs) {
							break
						}
					}
				}
				if !readyDone {
					ready.Done()
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		ready.Wait()
		b.ResetTimer()
		for round := 1; round <= rounds; round++ {
			sent[round].Store(time.Now().UnixNano())
			tick(round)
			time.Sleep(every)
		}
		done := make(chan struct{})
		go func() { finished.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Log("some connections did not see the last round")
		}
		ccancel()
		b.StopTimer()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		if len(lat) == 0 {
			b.Fatal("no deliveries")
		}
		pct := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(len(lat)), "deliveries")
		b.ReportMetric(float64(conns*len(subs)), "subscriptions")
	}
}

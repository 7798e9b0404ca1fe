package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkHTTPMarketOrderCost is the cost of one market order over the
// engine's HTTP handler, as the whole process pays it: the request's
// handling, the decision, the commit (embedded JetStream, sync interval so
// the disk does not set the pace), the read models' fold and everything the
// engine does in the background for it. alloc-B/order and allocs/order are
// the process's allocation counters over the run divided by the orders;
// cpu-us/order is the process's CPU time (user and system) over the run
// divided by the orders. The accounts are driven round robin, one order in
// flight at a time.
//
// The handler is called directly: the harness builds each request and its
// response writer without net/http's server (no connection, no 4 KB reader
// per request), reusing them, so what is counted is the engine's handling
// of the request and not the harness's. A real server adds its own request
// parsing (about 0.6 KB an order over a kept-alive connection).
//
// Sub-benchmarks: none, no stream open; sse, 2 subscribers of
// /api/account/stream per account over real connections (the engine
// renders and writes their frames; the harness drains the sockets); raw,
// the floor the log sets: no engine, only the append every order makes
// (BenchmarkRawAppendCost's, measured in the same run).
//
// With -memprofilerate 512 (or lower) it logs where the bytes go, by stage
// (costStages); COST_PROFILE=DIR writes the process's allocation profile
// before and after the measured orders, for go tool pprof -base DIR/before
// DIR/after.
//
//	go test ./cmd/bench -run '^$' -bench HTTPMarketOrderCost -benchtime 3000x -memprofilerate 512
func BenchmarkHTTPMarketOrderCost(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchOrderCost(b, 0) })
	b.Run("sse", func(b *testing.B) { benchOrderCost(b, 2) })
	b.Run("raw", benchRawAppendCost)
}

// benchRawAppendCost is the cost of the one append a market order makes,
// and nothing else: an embedded log opened as the engine opens its own
// (same server options, same stream, sync interval as above), a message of
// one encoded market-order commit published through nats.go with the three
// headers every commit carries (its id, the stream's name, the subject's
// expected last sequence), one at a time round robin over 8 subjects, the
// ack waited for. Its message, header map and ids are made before the
// timer, so what is counted is the client library and the server: the
// floor under the engine's figures, which the engine's own code cannot go
// below without leaving JetStream.
func benchRawAppendCost(b *testing.B) {
	ctx := context.Background()
	raw, err := openRaw(ctx, opts{tmp: b.TempDir()}, "interval")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	payload, err := sampleCommit()
	if err != nil {
		b.Fatal(err)
	}
	const subjects = 8
	subs := make([]string, subjects)
	for k := range subs {
		subs[k] = "evt.cost." + strconv.Itoa(k)
	}
	id, stream, expected := make([]string, 1), []string{"EVT"}, make([]string, 1)
	m := &nats.Msg{Data: payload, Header: nats.Header{
		jetstream.MsgIDHeader: id, jetstream.ExpectedStreamHeader: stream, jetstream.ExpectedLastSubjSeqHeader: expected}}
	nc := raw.log.Conn()
	last := make([]uint64, subjects)
	warm, ids := 200, make([]string, 200+b.N)
	for i := range ids {
		ids[i] = "cost-" + strconv.Itoa(i)
	}
	send := func(i int) {
		k := i % subjects
		m.Subject, id[0], expected[0] = subs[k], ids[i], strconv.FormatUint(last[k], 10)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := nc.RequestMsgWithContext(ctx, m)
		cancel()
		if err != nil {
			b.Fatalf("append %d: %v", i, err)
		}
		seq := ackSeq(resp.Data)
		if seq == 0 {
			b.Fatalf("append %d: %s", i, resp.Data)
		}
		last[k] = seq
	}
	for i := range warm {
		send(i)
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		send(warm + i)
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // what the server does after the ack (its flush)
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "alloc-B/order")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/order")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/order")
}

// benchOrderCost measures orders with subs stream subscribers per account.
func benchOrderCost(b *testing.B, subs int) {
	ctx := context.Background()
	const accounts = 8
	// The request log as cmd/engine writes it at its default level: a JSON
	// line per request, to a file.
	logFile, err := os.Create(filepath.Join(b.TempDir(), "engine.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	logTo(logFile, slog.LevelInfo)
	defer logTo(io.Discard, slog.LevelWarn)
	s, err := startService(ctx, opts{tmp: b.TempDir()}, "interval", accounts, subs > 0, "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var streamed atomic.Int64 // bytes the subscribers read
	if subs > 0 {
		stop, err := openStreams(s, subs, &streamed)
		if err != nil {
			b.Fatal(err)
		}
		defer stop()
	}
	place := orderPlacer(b, s, accounts)
	for i := range 200 { // warm: every account, the caches, the pools
		place(1_000_000 + i)
	}
	time.Sleep(200 * time.Millisecond)
	// COST_PROFILE=DIR writes the process's allocation profile before and
	// after the measured orders: go tool pprof -base DIR/before DIR/after.
	dir := os.Getenv("COST_PROFILE")
	if dir != "" && subs > 0 {
		dir += "/sse"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
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
	stages0 := stageAllocs()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	read0 := streamed.Load()
	cpu := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		place(i)
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // the fold, the frames and the background work of the last orders
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&m1)
	if subs > 0 {
		if n := s.App.Hub.Subscribers(); n != int64(subs*accounts) {
			b.Fatalf("%d subscribers at the end, want %d", n, subs*accounts)
		}
		b.Logf("the subscribers read %d bytes an order", (streamed.Load()-read0)/int64(b.N))
	}
	if runtime.MemProfileRate <= 4096 && b.N >= 100 {
		logStages(b, stages0, stageAllocs(), b.N)
	}
	writeAllocs("after")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "alloc-B/order")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/order")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/order")
}

// ackSeq is the sequence of a stored message's ack ({"stream":"EVT","seq":N}),
// read without decoding JSON as the engine reads it; 0 for anything else.
func ackSeq(b []byte) uint64 {
	i := bytes.Index(b, []byte(`"seq":`))
	if i < 0 || bytes.Contains(b, []byte(`"error"`)) {
		return 0
	}
	var n uint64
	for _, c := range b[i+len(`"seq":`):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// orderPlacer places market order i on account i%accounts through the
// service's handler, with a request and a response writer the harness
// reuses (see BenchmarkHTTPMarketOrderCost).
func orderPlacer(b *testing.B, s *service, accounts int) func(i int) {
	h := s.App.Handler
	urls, uris := make([]*url.URL, accounts), make([]string, accounts)
	for k := range urls {
		uris[k] = "/api/trading/order?broker=paper&account=" + s.Accounts[k].AccountNumber
		u, err := url.Parse(uris[k])
		if err != nil {
			b.Fatal(err)
		}
		urls[k] = u
	}
	hdr := http.Header{"Authorization": {"Bearer " + s.Key}, "Content-Type": {"application/json"}}
	var (
		req  http.Request
		body reqBody
		buf  []byte
		w    = &costWriter{h: http.Header{}}
	)
	return func(i int) {
		k := i % accounts
		buf = append(buf[:0], `{"clientOrderId":"c`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, `","instrument":"BTC-PERP","side":"`...)
		buf = append(buf, side(i/accounts)...)
		buf = append(buf, `","orderType":"market","quantity":"0.01"}`...)
		body.Reset(buf)
		req = http.Request{Method: http.MethodPost, URL: urls[k], Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: hdr, Body: &body, ContentLength: int64(len(buf)), Host: "engine.test", RemoteAddr: "127.0.0.1:1",
			RequestURI: uris[k]}
		w.reset()
		h.ServeHTTP(w, &req)
		if w.code != http.StatusOK {
			b.Fatalf("order %d: %d %s", i, w.code, w.body.Bytes())
		}
	}
}

// reqBody is a request body the harness refills.
type reqBody struct{ bytes.Reader }

func (*reqBody) Close() error { return nil }

// costWriter is a response writer the harness reuses: what the handler
// writes is kept until the next request.
type costWriter struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (w *costWriter) reset() {
	clear(w.h)
	w.code = 0
	w.body.Reset()
}

func (w *costWriter) Header() http.Header { return w.h }

func (w *costWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *costWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(b)
}

// SetWriteDeadline takes the write deadline every request sets
// (gateway.BoundWrites), as net/http's own writer does on its connection.
// Without it the response controller formatted an error not supported an
// order: about 60 bytes and 2 objects that no request to a server makes.
func (w *costWriter) SetWriteDeadline(time.Time) error { return nil }

// openStreams opens subs streams of /api/account/stream for each of the
// service's accounts over real connections to its server, and drains them
// into read (bytes) until stop.
func openStreams(s *service, subs int, read *atomic.Int64) (stop func(), err error) {
	host := strings.TrimPrefix(s.URL, "http://")
	var conns []net.Conn
	var wg sync.WaitGroup
	stop = func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}
	for _, a := range s.Accounts {
		for range subs {
			c, err := net.DialTimeout("tcp", host, 10*time.Second)
			if err != nil {
				stop()
				return nil, err
			}
			conns = append(conns, c)
			req := "GET /api/account/stream?account=" + a.AccountNumber + " HTTP/1.1\r\nHost: " + host +
				"\r\nAuthorization: Bearer " + s.Key + "\r\nAccept: text/event-stream\r\n\r\n"
			if _, err := io.WriteString(c, req); err != nil {
				stop()
				return nil, err
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("stream of %s: %d", a.AccountNumber, resp.StatusCode)
			}
			if err != nil {
				stop()
				return nil, err
			}
			wg.Go(func() {
				buf := make([]byte, 32<<10) // the chunked body as it is on the wire
				for {
					n, err := br.Read(buf)
					read.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.App.Hub.Subscribers() < int64(len(conns)) {
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the hub counts %d subscribers, want %d", s.App.Hub.Subscribers(), len(conns))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return stop, nil
}

// costStages attributes an allocation to the stage of the innermost frame
// of its stack that names one (in this order where a frame names several).
var costStages = []struct {
	name  string
	funcs []string // substrings of a frame's function name
}{
	{"frame write", []string{"gateway/stream.(*Sub).", "gateway/httpx.(*Conn)."}},
	{"frame render", []string{"gateway/stream."}},
	{"decode", []string{"gateway/httpx.Decode"}},
	{"answer", []string{"gateway/trading.(*Handlers).answerOrder", "gateway/httpx.WriteJSON"}},
	{"encode", []string{"events.Registry.Encode", "events.Registry.encode"}},
	{"commit", []string{"engine/eventlog.", "nats-io/"}},
	{"fold", []string{"projections.(*Projector).", "events.(*Pipeline)."}},
	{"decide", []string{"engine/mailbox.", "engine/account.", "engine/risk.", "engine.(*Engine).", "domain/", "commands/"}},
	{"request", []string{"engine/gateway", "gorilla/mux", "net/http."}},
	{"harness", []string{"cmd/bench."}},
}

// stageAllocs is the process's allocations so far (sampled at
// runtime.MemProfileRate, scaled as pprof scales them) by stage; the last
// entry is what no stage names.
func stageAllocs() stageSample {
	runtime.GC()
	runtime.GC() // the profile is complete as of the last but one GC
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	out := stageSample{make([]float64, len(costStages)+1), make([]float64, len(costStages)+1)}
	rate := float64(runtime.MemProfileRate)
	names := map[uintptr]string{}
	for _, r := range recs {
		if r.AllocObjects == 0 {
			continue
		}
		scale := 1.0
		if rate > 1 {
			avg := float64(r.AllocBytes) / float64(r.AllocObjects)
			scale = 1 / (1 - math.Exp(-avg/rate))
		}
		st := stageOf(r.Stack(), names)
		if st < 0 {
			continue
		}
		out.bytes[st] += float64(r.AllocBytes) * scale
		out.objects[st] += float64(r.AllocObjects) * scale
	}
	return out
}

// stageSample is the process's allocations by stage (costStages), the last
// entry what no stage names.
type stageSample struct{ bytes, objects []float64 }

func stageOf(stack []uintptr, names map[uintptr]string) int {
	for _, pc := range stack { // innermost first
		name, ok := names[pc]
		if !ok {
			if f := runtime.FuncForPC(pc - 1); f != nil {
				name = f.Name()
			}
			names[pc] = name
		}
		if strings.Contains(name, "cmd/bench.stage") {
			return -1 // the measurement's own (stageAllocs, stageOf)
		}
		for i, st := range costStages {
			for _, s := range st.funcs {
				if strings.Contains(name, s) {
					return i
				}
			}
		}
	}
	return len(costStages)
}

// logStages logs the allocations per order between two stageAllocs, by stage.
func logStages(b *testing.B, from, to stageSample, orders int) {
	b.Helper()
	b0, o0, b1, o1 := from.bytes, from.objects, to.bytes, to.objects
	type row struct {
		name          string
		bytes, object float64
	}
	var rows []row
	for i := range b0 {
		name := "other"
		if i < len(costStages) {
			name = costStages[i].name
		}
		rows = append(rows, row{name, (b1[i] - b0[i]) / float64(orders), (o1[i] - o0[i]) / float64(orders)})
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.bytes - a.bytes) })
	var sb strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&sb, "; %s %.0f B %.1f", r.name, r.bytes, r.object)
	}
	b.Logf("per order by stage, bytes and objects (memprofilerate %d)%s", runtime.MemProfileRate, sb.String())
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/svc/engine/gateway/api"
)

// httpPath measures POST /api/trading/order market orders from one keep-alive
// client per worker, each on its own account, through the real handler. The
// clients run in a child process (http-load) over the same measured window,
// so the sample's CPU is the engine's own (with its embedded nats-server)
// and the load generator's is reported apart (Gen): in one process the
// generator's HTTP client counted as about a sixth of the engine's CPU.
func (s *service) httpPath(ctx context.Context, o opts) sample {
	return s.target().httpPath(ctx, o)
}

// target is an engine the HTTP load drives: its address, a trading key, its
// accounts and the CPU its process has used so far.
type target struct {
	url      string
	key      string
	accounts []credAccount
	cpu      func() time.Duration
}

// target is s as the HTTP load drives it: in this process.
func (s *service) target() target {
	return target{url: s.URL, key: s.Key, accounts: s.Accounts, cpu: cpuTime}
}

// httpPath is httpPath of t's first o.workers accounts.
func (t target) httpPath(ctx context.Context, o opts) sample {
	accounts := make([]string, o.workers)
	for w := range accounts {
		accounts[w] = t.accounts[w].AccountNumber
	}
	// The child starts and connects within the warm-up.
	from := time.Now().Add(max(o.warm, 300*time.Millisecond))
	return t.httpChild(ctx, accounts, 0, from, from.Add(o.dur))
}

// httpChild runs the http-load child over [from, end): one keep-alive client
// per account, each sending its next order when the last is answered (rate 0)
// or on a schedule of rate orders a second in all. The sample's CPU is the
// engine's process's over the window per order; the child's own is its Gen.
func (s *service) httpChild(ctx context.Context, accounts []string, rate float64, from, end time.Time) sample {
	return s.target().httpChild(ctx, accounts, rate, from, end)
}

func (t target) httpChild(ctx context.Context, accounts []string, rate float64, from, end time.Time) sample {
	n := strconv.FormatInt(window.Add(1), 10)
	failed := func(err error) sample {
		return sample{Window: end.Sub(from), Errors: 1, FirstErr: "http-load: " + err.Error()}
	}
	exe, err := os.Executable()
	if err != nil {
		return failed(err)
	}
	cmd := exec.CommandContext(ctx, exe, "http-load", "-url", t.url, "-accounts", strings.Join(accounts, ","),
		"-window", n, "-from", strconv.FormatInt(from.UnixNano(), 10), "-end", strconv.FormatInt(end.UnixNano(), 10),
		"-rate", strconv.FormatFloat(rate, 'f', -1, 64))
	cmd.Env = append(os.Environ(), "BENCH_HTTP_KEY="+t.key) // not on the command line, which ps shows
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		return failed(err)
	}
	time.Sleep(time.Until(from))
	cpu0 := t.cpu()
	time.Sleep(time.Until(end))
	cpu1 := t.cpu()
	if err := cmd.Wait(); err != nil {
		return failed(err)
	}
	var res sample
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return failed(fmt.Errorf("its answer %.200q: %w", out.Bytes(), err))
	}
	if res.N > 0 {
		res.CPU = (cpu1 - cpu0) / time.Duration(res.N)
	}
	return res
}

// httpLoad is the child process of httpChild: it drives market orders over
// HTTP, one keep-alive client per account, measures the window it is given
// and prints its sample as JSON, its own CPU per order as Gen.
func httpLoad(args []string) error {
	fs := flag.NewFlagSet("http-load", flag.ContinueOnError)
	url := fs.String("url", "", "the service (http://127.0.0.1:port)")
	accounts := fs.String("accounts", "", "comma-separated account numbers, one client each")
	win := fs.String("window", "0", "window number, part of every clientOrderId")
	from := fs.Int64("from", 0, "start of the measured window (unix ns)")
	end := fs.Int64("end", 0, "end of the measured window (unix ns)")
	rate := fs.Float64("rate", 0, "orders a second in all, on a schedule (0: each client sends when answered)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*url, "http://127.0.0.1:") {
		return fmt.Errorf("http-load: %s is not on 127.0.0.1", *url)
	}
	accts := strings.Split(*accounts, ",")
	if *accounts == "" || *end <= *from {
		return fmt.Errorf("http-load: accounts and a window are required")
	}
	s := &service{URL: *url, Key: os.Getenv("BENCH_HTTP_KEY")}
	conns := make([]keepAlive, len(accts))
	for w := range conns {
		conns[w] = keepAlive{addr: strings.TrimPrefix(*url, "http://"), key: s.Key}
		defer conns[w].close()
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, *end).Add(30*time.Second))
	defer cancel()
	op := func(ctx context.Context, w, i int) error {
		status, b, err := conns[w].post(ctx, "/api/trading/order?account="+accts[w], orderBody("http-"+*win+"-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), i))
		if err != nil {
			return err
		}
		return orderFilled(status, b)
	}
	var res sample
	if *rate > 0 {
		time.Sleep(time.Until(time.Unix(0, *from)))
		res = paced(ctx, len(accts), *rate, time.Duration(*end-*from), op)
	} else {
		res = driveAt(ctx, len(accts), time.Unix(0, *from), time.Unix(0, *end), op)
	}
	res.Gen, res.CPU = res.CPU, 0
	return json.NewEncoder(os.Stdout).Encode(res)
}

// keepAlive is one HTTP/1.1 keep-alive connection of the load generator: it
// writes a request in one write and reads the answer with net/http's own
// parser, without http.Client's transport (a reader and a writer goroutine
// per connection, two hand-offs between them per request). The generator
// shares the machine's two cores with the engine, so what it spends is
// taken from the engine's rate: as a transport it cost 40 us an order
// (docs/performance.md, "The load generator"). It redials after an error.
type keepAlive struct {
	addr string // host:port
	key  string
	c    net.Conn
	br   *bufio.Reader
	req  []byte
}

// post sends body as JSON to path and answers the status and the body.
func (k *keepAlive) post(ctx context.Context, path, body string) (int, []byte, error) {
	status, _, b, err := k.postSeq(ctx, path, body)
	return status, b, err
}

// postSeq is post answering also the log sequence the write was committed
// at, from the answer's X-Engine-Seq (0 when it has none).
func (k *keepAlive) postSeq(ctx context.Context, path, body string) (int, uint64, []byte, error) {
	if k.c == nil {
		c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", k.addr)
		if err != nil {
			return 0, 0, nil, err
		}
		k.c, k.br = c, bufio.NewReaderSize(c, 4096)
	}
	r := append(k.req[:0], "POST "...)
	r = append(r, path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, k.addr...)
	r = append(r, "\r\nAuthorization: Bearer "...)
	r = append(r, k.key...)
	r = append(r, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	r = append(r, "\r\n\r\n"...)
	r = append(r, body...)
	k.req = r
	if d, ok := ctx.Deadline(); ok {
		_ = k.c.SetDeadline(d)
	}
	status, seq, b, reuse, err := k.exchange(r)
	if err != nil || !reuse {
		k.close()
	}
	return status, seq, b, err
}

// exchange writes req and reads its answer: the status, the X-Engine-Seq,
// the body, and whether the connection stays open for the next.
func (k *keepAlive) exchange(req []byte) (int, uint64, []byte, bool, error) {
	if _, err := k.c.Write(req); err != nil {
		return 0, 0, nil, false, err
	}
	resp, err := http.ReadResponse(k.br, nil)
	if err != nil {
		return 0, 0, nil, false, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var seq uint64
	if v := resp.Header.Get(api.SeqHeader); v != "" {
		seq, _ = strconv.ParseUint(v, 10, 64)
	}
	return resp.StatusCode, seq, b, !resp.Close, err
}

func (k *keepAlive) close() {
	if k.c != nil {
		k.c.Close()
		k.c, k.br = nil, nil
	}
}
